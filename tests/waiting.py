"""Waiting in tests for something another process or thread brings about (Linux: ``/proc``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


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


def wait_for_text(path: Path, seconds: float = 20.0, what: str = "") -> str:
    """The text of ``path`` once it exists and is not empty (another process writes it).

    Raises:
        AssertionError: not within ``seconds``.
    """
    wait_until(lambda: path.exists() and path.read_text(), seconds, what or f"text in {path}")
    return path.read_text()


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after ``pid (comm)``: state, ppid, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def exited(pid: int) -> bool:
    """Whether process ``pid`` has ended: gone, or a zombie its parent has not reaped yet whose
    threads have all exited (its descriptors, and so its locks and sockets, are released).

    A killed process's main thread turns zombie first; its other threads may still be exiting
    (a loaded machine shows it for milliseconds), and they hold the descriptors until the last
    one is gone: a lock taken at once could still be refused.
    """
    try:
        state = _stat(pid)[0]
        return state in ("Z", "X") and os.listdir(f"/proc/{pid}/task") == [str(pid)]
    except (FileNotFoundError, ProcessLookupError):
        return True


def parent_of(pid: int) -> int:
    """The parent PID of live process ``pid``."""
    return int(_stat(pid)[1])
