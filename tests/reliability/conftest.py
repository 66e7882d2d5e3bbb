"""Fixtures of the reliability suites: one real server per module with demo and fault models.

Models (besides the demo ``add_sub``, ``echo``, ``iris``...):

* ``identity_<dt>``  INPUT0 -> OUTPUT0 for FP32, FP16, BF16, FP64, INT8, UINT8, INT64, UINT64,
  BOOL, BYTES (shape ``[-1]``)
* ``raising``        raises in ``predict``
* ``hanging``        sleeps ``X[0]`` seconds in a thread, ignoring cancellation (a stuck model)

With ``NBINFER_RELIABILITY_FIGURES=DIR`` the session writes every reliability test's outcome and
time to ``DIR/outcomes.json`` (the figures of docs/reliability.md; see reliability_report.py).
"""

from __future__ import annotations

import os
import textwrap
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import reliability_report

from nbinfer.client import Client
from nbinfer.server.launcher import LocalServer

IDENTITY_TYPES = (
    "FP32",
    "FP16",
    "BF16",
    "FP64",
    "INT8",
    "UINT8",
    "INT64",
    "UINT64",
    "BOOL",
    "BYTES",
)

_IDENTITY = """
from nbinfer.server.model import Model


class Identity(Model):
    name = "identity_{lower}"
    inputs = [("INPUT0", "{dt}", [-1])]
    outputs = [("OUTPUT0", "{dt}", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {{"OUTPUT0": inputs["INPUT0"]}}
"""

_RAISING = """
from nbinfer.server.model import Model


class Raising(Model):
    name = "raising"
    inputs = [("X", "FP32", [-1])]
    outputs = [("Y", "FP32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        raise ZeroDivisionError("raising model fails on purpose")
"""

_HANGING = """
import time

from nbinfer.server.model import Model


class Hanging(Model):
    name = "hanging"
    inputs = [("X", "FP32", [-1])]
    outputs = [("Y", "FP32", [-1])]

    def predict(self, inputs, context):
        time.sleep(float(inputs["X"][0]))  # never looks at context.cancelled: a stuck model
        return {"Y": inputs["X"]}
"""


def write_repository(repo: Path) -> Path:
    """The reliability models as a Triton-layout repository under ``repo``."""
    sources = {
        f"identity_{dt.lower()}": _IDENTITY.format(dt=dt, lower=dt.lower()) for dt in IDENTITY_TYPES
    }
    sources["raising"] = _RAISING
    sources["hanging"] = _HANGING
    for name, source in sources.items():
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        (repo / name / "1" / "model.py").write_text(textwrap.dedent(source))
    return repo


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("reliability-repo"))


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[LocalServer]:
    # raw sockets and httpx attack it: the no-token kind (nbinfer serve), as before
    srv = LocalServer(model_repository=repository, demo=True, device="cpu", auth_token=None)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def assert_healthy(server: LocalServer) -> Iterator[Callable[[], None]]:
    """A check that the server is ready and infers correctly over HTTP and gRPC."""
    clients = [Client(server.http_url), Client(server.grpc_url)]
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.ones((1, 16), np.float32)

    def check() -> None:
        with urllib.request.urlopen(f"{server.http_url}/v2/health/ready", timeout=10) as answer:
            assert answer.status == 200
        for client in clients:
            out = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})
            np.testing.assert_array_equal(out["OUTPUT0"], a + b)
            np.testing.assert_array_equal(out["OUTPUT1"], a - b)

    try:
        yield check
    finally:
        for client in clients:
            client.close()


_OUTCOMES: dict[str, list[object]] = {}
_SECONDS = [0.0]  # setup, call and teardown of every reliability test


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep each reliability test's outcome (a failed or skipped setup counts) and call time."""
    _SECONDS[0] += report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        nodeid = report.nodeid.rsplit("reliability/", 1)[-1]
        if not nodeid.startswith("test_reliability_page.py"):  # checks the page, not the server
            _OUTCOMES[nodeid] = [outcome, report.duration]


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _OUTCOMES and os.environ.get(reliability_report.FIGURES_ENV):
        reliability_report.record("outcomes", "machine", reliability_report.machine())
        reliability_report.record("outcomes", "seconds", _SECONDS[0])
        reliability_report.record("outcomes", "tests", _OUTCOMES)
