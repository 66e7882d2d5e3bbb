"""Shared fixtures of the server tests: real ``python -m nbinfer.server`` processes on 127.0.0.1.

Each test module that needs a server starts ONE through the module-scoped ``server`` fixture
(demo models + a test-only model repository written to a temp dir).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbinfer.protocol.dtypes import DATATYPES as _ALL_DATATYPES
from nbinfer.server.launcher import LocalServer

#: Every v2 datatype gets an identity model ``identity_<datatype lower case>``.
DATATYPES = tuple(_ALL_DATATYPES)

_IDENTITY = """
from nbinfer.server.model import Model


class Identity(Model):
    name = "{name}"
    inputs = [("INPUT0", "{dt}", [-1, -1])]
    outputs = [("OUTPUT0", "{dt}", [-1, -1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {{"OUTPUT0": inputs["INPUT0"]}}
"""

_ADD_SUB = """
from nbinfer.server.model import Model


class AddSub(Model):
    name = "add_sub_{tag}"
    inputs = [("INPUT0", "FP32", [-1, 16]), ("INPUT1", "FP32", [-1, 16])]
    outputs = [("OUTPUT0", "FP32", [-1, 16]), ("OUTPUT1", "FP32", [-1, 16])]
    run_in_thread = False

    def predict(self, inputs, context):
        a, b = inputs["INPUT0"], inputs["INPUT1"]
        return {{"OUTPUT0": a + b, "OUTPUT1": a - b}}
"""

_VERSIONED = """
import numpy as np
from nbinfer.server.model import Model


class Versioned(Model):
    name = "versioned"
    inputs = [("X", "INT32", [-1])]
    outputs = [("Y", "INT32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {{"Y": inputs["X"] * {factor}}}
"""

_FAILING = """
from nbinfer.server.model import Model


class Failing(Model):
    name = "failing"
    inputs = [("X", "FP32", [-1])]
    outputs = [("Y", "FP32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        raise RuntimeError("boom: the model failed on purpose")
"""


_EXPLAINED = """
from nbinfer.server.model import Model


class Explained(Model):
    name = "explained"
    inputs = [("X", "FP32", [-1, 2])]
    outputs = [("Y", "FP32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {"Y": inputs["X"].sum(axis=1)}

    def explain(self, inputs, context):
        return {"contributions": inputs["X"] / inputs["X"].sum(axis=1, keepdims=True)}
"""


def identity_name(datatype: str) -> str:
    return f"identity_{datatype.lower()}"


def model_source(kind: str, **kw: object) -> str:
    """Source text of a test model (``identity``, ``add_sub``, ``versioned``, ``failing``)."""
    template = {
        "identity": _IDENTITY,
        "add_sub": _ADD_SUB,
        "versioned": _VERSIONED,
        "failing": _FAILING,
        "explained": _EXPLAINED,
    }[kind]
    return textwrap.dedent(template.format(**kw)) if kw else textwrap.dedent(template)


def write_model(
    repo: Path, name: str, version: str, source: str, config: str | None = None
) -> None:
    vdir = repo / name / version
    vdir.mkdir(parents=True, exist_ok=True)
    (vdir / "model.py").write_text(source)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)


def write_test_repository(repo: Path) -> Path:
    """The test-only model repository: identity per datatype, add_sub, versioned, failing."""
    repo.mkdir(parents=True, exist_ok=True)
    for dt in DATATYPES:
        write_model(
            repo, identity_name(dt), "1", model_source("identity", name=identity_name(dt), dt=dt)
        )
    write_model(repo, "add_sub_t", "1", model_source("add_sub", tag="t"))
    write_model(repo, "versioned", "1", model_source("versioned", factor=1))
    write_model(
        repo,
        "versioned",
        "2",
        model_source("versioned", factor=2),
        config='name: "versioned"\nversion_policy: { all { } }\n',
    )
    write_model(repo, "failing", "1", model_source("failing"))
    write_model(repo, "explained", "1", model_source("explained"))
    return repo


def start_server(**kwargs: object) -> LocalServer:
    # the protocol under test is the no-token kind (`nbinfer serve`), spoken by httpx / grpc /
    # raw sockets that never see LocalServer's token: opt out unless a test asks for a token
    kwargs.setdefault("auth_token", None)
    server = LocalServer(**kwargs)  # type: ignore[arg-type]
    server.start()
    print(f"\n[nbinfer server ready in {server.startup_seconds:.2f} s: {server.http_url}]")
    return server


@pytest.fixture(name="model_source", scope="session")
def _model_source_fixture() -> object:
    """The :func:`model_source` helper, for tests that write or upload models."""
    return model_source


@pytest.fixture(scope="module")
def model_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_repository(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def server(model_repository: Path) -> Iterator[LocalServer]:
    """One server per test module: demo models + the test repository (code uploads allowed)."""
    srv = start_server(
        model_repository=model_repository, demo=True, device="cpu", allow_code_upload=True
    )
    try:
        yield srv
    finally:
        srv.stop()
        print(f"\n--- server log tail ---\n{srv.logs(tail=15)}")


@pytest.fixture(scope="module")
def http_url(server: LocalServer) -> str:
    return server.http_url


@pytest.fixture(scope="module")
def http_host(server: LocalServer) -> str:
    """``host:port`` as tritonclient.http wants it."""
    return server.http_url.removeprefix("http://")


@pytest.fixture(scope="module")
def grpc_url(server: LocalServer) -> str:
    return server.grpc_url


@pytest.fixture(scope="module")
def grpc_address(server: LocalServer) -> str:
    return server.grpc_address
