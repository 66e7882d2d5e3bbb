"""Suite-wide hooks: the optional-dependency passes of ``.ci/run``.

The README's test command runs without torch (it is an optional extra), so every test that needs
torch skips there. ``.ci/run`` then installs torch and runs those tests again, so both paths stay
green:

* ``NBINFER_SKIP_LOG=FILE``: each test (or module) skipped because torch is missing is appended
  to FILE as a node id; ``.ci/run`` runs exactly those afterwards.
* ``NBINFER_REQUIRE=torch``: a test that skips because torch is missing fails instead (the
  second pass must really run them).
* ``@pytest.mark.torch``: a test whose behaviour differs with and without torch (not only a
  skip); it runs in both passes (``-m torch`` in the second).

And one guard: no test starts with an asyncio loop left running in the main thread by an earlier
one (Playwright's sync API runs one while a browser is open; see tests/browser/conftest.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Generator
from typing import Any

import pytest

_MISSING = ("could not import 'torch'", "No module named 'torch'")


def _skipped_for_torch(report: Any) -> bool:
    return bool(report.skipped) and any(m in str(report.longrepr) for m in _MISSING)


def _log_skip(nodeid: str) -> None:
    path = os.environ.get("NBINFER_SKIP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(nodeid + "\n")


def _record(report: Any, nodeid: str) -> None:
    """Log a skip for a missing torch, or turn it into a failure where torch is required."""
    if not _skipped_for_torch(report):
        return
    if os.environ.get("NBINFER_REQUIRE") == "torch":
        report.outcome = "failed"
        report.longrepr = f"torch is required in this pass but the test skipped: {report.longrepr}"
    else:
        _log_skip(nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    """A module skipped at import for a missing torch (``importorskip`` at module level)."""
    outcome = yield
    _record(outcome.get_result(), collector.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    _record(outcome.get_result(), item.nodeid)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail fast, naming the cause, when an earlier test left an event loop running here."""
    if asyncio._get_running_loop() is not None and "tests/browser/" not in item.nodeid:
        pytest.fail(
            "an asyncio loop is running in the main thread before this test: an earlier test "
            "(or fixture: a Playwright sync browser outliving its module?) left it running",
            pytrace=False,
        )
