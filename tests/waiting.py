"""Waiting in tests for something another process or thread brings about."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], seconds: float, what: str = "") -> float:
    """Poll ``predicate`` until it is true; the seconds that took.

    Raises:
        AssertionError: not within ``seconds`` (naming ``what`` when given).
    """
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start >= seconds:
            raise AssertionError(f"{what or 'the condition'}: not within {seconds} s")
        time.sleep(0.02)
    return time.monotonic() - start
