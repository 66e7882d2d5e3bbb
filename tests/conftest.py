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

Every test gets one of three markers (registered in pyproject.toml), so ``pytest -m unit`` runs
the fast ones; :func:`_kind` decides from the test's path, its fixtures and its own source:

* ``e2e``: a whole user flow with real outside pieces: the browser tests, the real peers
  (tritonserver, KServe, MLServer), the notebooks, the docs site, the documented snippets.
* ``integration``: starts a server, a kernel or a subprocess (through a fixture of this suite or
  in its own body).
* ``unit``: everything else (pure functions, in-process objects, temporary files).

Under pytest-xdist (``scripts/check`` runs ``-n``), :func:`pytest_xdist_make_scheduler` sends
whole groups of tests to one worker, so a module's or a session's servers start once: a module is
a group, and so is each folder or pair of files in :data:`GROUPS` (one JupyterLab for the browser
tests, one set of real peers, one binder kernel for the notebooks and the docs site); the longest
groups start first.

And one guard: no test starts with an asyncio loop left running in the main thread by an earlier
one (Playwright's sync API runs one while a browser is open; see tests/browser/conftest.py).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Generator
from typing import Any

import pytest

#: The binder kernel and the notebooks executed on it once (test_notebooks, test_docs_site).
pytest_plugins = ["notebook_runs"]

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


#: Paths (relative to the repository root) whose tests are end to end.
E2E_PATHS = (
    "tests/browser/",
    "tests/peers/",
    "tests/test_notebooks.py",
    "tests/test_docs_site.py",
    "tests/test_snippets.py",
    "tests/test_cloudpickle_range.py",
)
#: pytest's own fixtures and the cheap ones: using only these keeps a test a unit test.
CHEAP_FIXTURES = frozenset(
    {
        "request",
        "pytestconfig",
        "tmp_path",
        "tmp_path_factory",
        "tmpdir",
        "tmpdir_factory",
        "monkeypatch",
        "capsys",
        "capsysbinary",
        "capfd",
        "capfdbinary",
        "caplog",
        "recwarn",
        "record_property",
        "record_testsuite_property",
        "doctest_namespace",
        "cache",
        "_session_faker",
        "worker_id",
        "testrun_uid",
    }
)
#: Words in a test's own source that start a server, a kernel or a subprocess.
STARTS = ("LocalServer", "subprocess", "Popen", "serving(", "start_server", "sys.executable")


def _kind(item: pytest.Item) -> str:
    """``e2e``, ``integration`` or ``unit`` for ``item`` (see the module docstring)."""
    path = item.nodeid.split("::", 1)[0]
    if path.startswith(E2E_PATHS):
        return "e2e"
    info = getattr(item, "_fixtureinfo", None)
    params = set(getattr(getattr(item, "callspec", None), "params", {}))
    names = set(info.names_closure if info is not None else ()) - params
    if names - CHEAP_FIXTURES:
        return "integration"
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return "integration" if any(word in source for word in STARTS) else "unit"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test ``unit``, ``integration`` or ``e2e`` (``pytest -m unit``: the fast ones)."""
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in ("unit", "integration", "e2e")):
            item.add_marker(_kind(item))


#: Tests sharing session-scoped servers, kept on one xdist worker: a path prefix -> its group.
GROUPS = {
    "tests/browser/": "tests/browser/",
    "tests/peers/": "tests/peers/",
    "tests/test_notebooks.py": "notebooks",
    "tests/test_docs_site.py": "notebooks",
}
#: The groups that take longest (measured), handed out first so none starts last.
LONGEST = ("notebooks", "tests/browser/", "tests/peers/")


def xdist_group_of(nodeid: str) -> str:
    """The group of a test: :data:`GROUPS`, else its module (a module's servers start once)."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in GROUPS.items():
        if path.startswith(prefix):
            return group
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups to a worker (:func:`xdist_group_of`), the longest first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            first = min(
                self.workqueue,
                key=lambda g: LONGEST.index(g) if g in LONGEST else len(LONGEST),
            )
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail fast, naming the cause, when an earlier test left an event loop running here."""
    if asyncio._get_running_loop() is not None and "tests/browser/" not in item.nodeid:
        pytest.fail(
            "an asyncio loop is running in the main thread before this test: an earlier test "
            "(or fixture: a Playwright sync browser outliving its module?) left it running",
            pytrace=False,
        )
