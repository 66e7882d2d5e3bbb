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
* ``integration``: starts a server, a kernel or a subprocess, or may (it uses a fixture of this
  suite, or its module's source names one of :data:`STARTS`).
* ``unit``: everything else (pure functions, in-process objects, temporary files), but not the
  ``scale`` tests (minutes of large data: integration).

Under pytest-xdist (``scripts/check`` runs ``-n``), :func:`pytest_xdist_make_scheduler` sends
whole groups of tests to one worker, so a module's or a session's servers start once: a module is
a group, and so are the tests in :data:`GROUPS` (one set of real peers; one binder kernel and one
run of the notebooks for tests/test_notebooks.py and the docs site), except in the modules of
:data:`SPLIT`, whose tests share nothing and are each a group of their own; the longest groups
(:data:`LONGEST`) start first. Tests marked ``serial`` (latency bounds under load) run after the
parallel run, alone (``scripts/check``).

SIGINT raises ``KeyboardInterrupt`` in every process of the run, as in a kernel
(:func:`pytest_configure`), and a module that changes its handler gives Python's back before the
next module runs (:func:`pytest_runtest_teardown`). And one guard: no test starts with an asyncio
loop left running in the main thread by an earlier one (Playwright's sync API runs one while a
browser is open; see tests/browser/conftest.py).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import signal
import subprocess
from collections.abc import Generator
from typing import Any

import pytest
from hypothesis import settings

#: Property tests draw the same examples every run (a CI failure reproduces as it is; fuzzing for
#: new ones is the time-bounded run of tests/reliability/test_fuzz.py). NBINFER_HYPOTHESIS=random
#: draws fresh examples in every run instead.
settings.register_profile("derandomized", derandomize=True)
settings.register_profile("random", derandomize=False)
settings.load_profile(
    "random" if os.environ.get("NBINFER_HYPOTHESIS") == "random" else "derandomized"
)

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
    "tests/test_snippets.py",
    "tests/test_cloudpickle_range.py",
    "tests/test_pycurl_range.py",
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
        "worker_id",
        "testrun_uid",
    }
)
#: Words in a test module's source that start a server, a kernel or a subprocess.
STARTS = (
    "LocalServer",
    "subprocess",
    "Popen",
    "serving(",
    "start_server",
    "sys.executable",
    "nbclient",
    "KernelManager",
)
_MODULE_STARTS: dict[str, bool] = {}


def _module_starts(item: pytest.Item) -> bool:
    """Whether the test's module (any test of it, or a helper) may start something."""
    module = getattr(item, "module", None)
    if module is None:
        return True
    if module.__name__ not in _MODULE_STARTS:
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            source = "subprocess"  # unknown: not a unit test
        _MODULE_STARTS[module.__name__] = any(word in source for word in STARTS)
    return _MODULE_STARTS[module.__name__]


def _kind(item: pytest.Item) -> str:
    """``e2e``, ``integration`` or ``unit`` for ``item`` (see the module docstring)."""
    path = item.nodeid.split("::", 1)[0]
    if path.startswith(E2E_PATHS):
        return "e2e"
    if item.get_closest_marker("scale") is not None:
        return "integration"  # minutes of large data: never among the fast ones
    info = getattr(item, "_fixtureinfo", None)
    fixtures = {
        name
        for name, defs in (info.name2fixturedefs.items() if info is not None else ())
        # ``@pytest.mark.parametrize`` arguments are fixtures too, pytest's own: not ours
        if defs and defs[-1].func.__name__ != "get_direct_param_fixture_func"
    }
    if fixtures - CHEAP_FIXTURES or _module_starts(item):
        return "integration"
    return "unit"


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT back to Python when the run inherited it ignored.

    The stop-button tests interrupt this process (``_thread.interrupt_main``, which does nothing
    while SIGINT is ignored) or a child they start (which inherits the disposition), as the
    kernel's stop button does; a kernel always handles SIGINT. A non-interactive shell starts a
    background job (``bash .ci/run &``, a CI runner's step) with SIGINT ignored, and the run passed
    that on to every worker and child: those tests then failed or passed depending on which
    earlier test of the same worker happened to install a handler. With Python's handler here
    (pytest-xdist's workers run this too), every process the run starts gets SIGINT's default
    back at exec, which Python turns into ``KeyboardInterrupt``.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test ``unit``, ``integration`` or ``e2e`` (``pytest -m unit``: the fast ones);
    with ``NBINFER_SERIAL=later`` leave out the ``serial`` tests, with ``only`` all others."""
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in ("unit", "integration", "e2e")):
            item.add_marker(_kind(item))
    serial = os.environ.get("NBINFER_SERIAL")
    if serial not in (None, "", "later", "only"):
        raise pytest.UsageError(f"NBINFER_SERIAL must be 'later' or 'only', not {serial!r}")
    if serial:
        _check_serial_modules_are_found(items)
        keep = [
            i for i in items if (i.get_closest_marker("serial") is not None) == (serial == "only")
        ]
        kept = {id(i) for i in keep}
        dropped = [i for i in items if id(i) not in kept]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


def _check_serial_modules_are_found(items: list[pytest.Item]) -> None:
    """scripts/check's serial run collects only the modules whose source says ``mark.serial``:
    a serial test marked any other way (a hook, a shared mark) would silently never run."""
    first = {}  # module path -> its first serial test
    for item in items:
        if item.get_closest_marker("serial") is not None:
            first.setdefault(item.path, item.nodeid)
    for path, nodeid in first.items():
        if "mark.serial" not in path.read_text(encoding="utf-8"):
            raise pytest.UsageError(
                f"{nodeid} is marked serial, but its module never says 'mark.serial': "
                "scripts/check's serial run finds serial tests by that text"
            )


#: Tests sharing session-scoped servers or kernels, kept on one xdist worker: a node id prefix ->
#: its group.
GROUPS = {
    "tests/peers/": "tests/peers/",
    "tests/test_notebooks.py": "notebooks",
    "tests/test_docs_site.py::test_site_builds": "notebooks",
    # The browser modules in one group: one JupyterLab (~8 s of CPU to start) and one Chromium
    # (tests/browser/conftest.py) serve them all, about three minutes on one worker.
    "tests/browser/": "browser",
}
#: Modules whose tests each start what they need and share no server, kernel or process-wide
#: state: every test is a group of its own, so a module of minutes spreads over the workers (the
#: documented pages run one scratch shell each).
SPLIT = ("tests/test_snippets.py",)
#: The longest groups (measured with ``--durations=0``), handed out first in this order so that
#: none starts last. A group matches the first entry it starts with.
LONGEST = (
    "browser",
    "notebooks",
    "tests/test_snippets.py::test_page_runs_as_written[docs/profiling.md]",
    "tests/peers/",
    "tests/beyond/test_spark_udf.py",
    "tests/reliability/test_fuzz.py",
    "tests/test_profiling.py",
    "tests/reliability/test_soak.py",
    "tests/interop/test_dataframe_scale.py",
    "tests/test_snippets.py::test_page_runs_as_written[docs/session.md]",
)


def _rank(group: str) -> int:
    """A group's place in :data:`LONGEST` (the first entry it starts with); the rest come after."""
    return next((i for i, start in enumerate(LONGEST) if group.startswith(start)), len(LONGEST))


def xdist_group_of(nodeid: str) -> str:
    """The group of a test: :data:`GROUPS`, itself in :data:`SPLIT`, else its module (a module's
    servers start once)."""
    for prefix, group in GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    if nodeid.startswith(SPLIT):
        return nodeid
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups to a worker (:func:`xdist_group_of`), the longest first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            first = min(self.workqueue, key=_rank)
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """Error on a module's last test when the module left another SIGINT handler behind.

    The stop-button tests (tests/test_interrupt.py, the profiling ones) need Python's own handler,
    as a kernel has; a library that installs its own and keeps it (pyspark's SparkContext does)
    would make them pass or fail by which worker ran what before. Checked once the module's
    fixtures are torn down; the handler is put back so the next module starts clean.
    """
    yield
    if nextitem is not None and getattr(nextitem, "module", None) is getattr(item, "module", None):
        return
    handler = signal.getsignal(signal.SIGINT)
    if handler is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        raise AssertionError(
            f"{item.location[0]} left SIGINT handled by {handler!r}, not Python's "
            "default_int_handler: restore it in the fixture or test that changed it"
        )


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for localhost / 127.0.0.1: (cert file, key file), PEM."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available")
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(crt), str(key)
