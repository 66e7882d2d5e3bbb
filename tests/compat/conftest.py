"""One embedded server for the compatibility tests, with the models tritonclient's examples use.

``simple`` adds and subtracts two INT32 ``[-1, 16]`` tensors (as Triton's example model does);
``simple_string`` does the same on numbers carried as BYTES strings; ``doubler`` batches
(``max_batch_size`` 8) one FP32 input declared ``[-1]`` and doubles it (KServe v1 instances).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbinfer.server.launcher import LocalServer

_SIMPLE = """
from nbinfer.server.model import Model


class Simple(Model):
    name = "simple"
    inputs = [("INPUT0", "INT32", [-1, 16]), ("INPUT1", "INT32", [-1, 16])]
    outputs = [("OUTPUT0", "INT32", [-1, 16]), ("OUTPUT1", "INT32", [-1, 16])]
    run_in_thread = False

    def predict(self, inputs, context):
        a, b = inputs["INPUT0"], inputs["INPUT1"]
        return {"OUTPUT0": a + b, "OUTPUT1": a - b}
"""

_SIMPLE_STRING = """
import numpy as np
from nbinfer.server.model import Model


class SimpleString(Model):
    name = "simple_string"
    inputs = [("INPUT0", "BYTES", [-1, 16]), ("INPUT1", "BYTES", [-1, 16])]
    outputs = [("OUTPUT0", "BYTES", [-1, 16]), ("OUTPUT1", "BYTES", [-1, 16])]
    run_in_thread = False

    def predict(self, inputs, context):
        a = inputs["INPUT0"].astype(np.int64)
        b = inputs["INPUT1"].astype(np.int64)
        def text(x):
            return np.array([str(v).encode() for v in x.ravel()], dtype=object).reshape(x.shape)

        return {"OUTPUT0": text(a + b), "OUTPUT1": text(a - b)}
"""


_DOUBLER = """
from nbinfer.server.model import Model


class Doubler(Model):
    name = "doubler"
    max_batch_size = 8
    inputs = [("x", "FP32", [-1])]
    outputs = [("y", "FP32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {"y": inputs["x"] * 2}
"""


def _write(repo: Path, name: str, source: str) -> None:
    version = repo / name / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(textwrap.dedent(source))


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """The embedded server with ``simple``, ``simple_string`` and the demo models."""
    repo = tmp_path_factory.mktemp("compat-repo")
    _write(repo, "simple", _SIMPLE)
    _write(repo, "simple_string", _SIMPLE_STRING)
    _write(repo, "doubler", _DOUBLER)
    # the real tritonclient / KServe packages talk to it too: the no-token kind (nbinfer serve)
    srv = LocalServer(model_repository=repo, demo=True, device="cpu", auth_token=None)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def addresses(server: LocalServer) -> dict[str, str]:
    """The server's ``host:port`` by protocol (``"http"``, ``"grpc"``), as tritonclient's
    clients and programs take it."""
    return {"http": server.http_url.split("://", 1)[-1], "grpc": server.grpc_address}
