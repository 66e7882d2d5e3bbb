"""``InferResult.headers``: what a model's hook set as response headers reaches the client.

Over HTTP they are the reply's headers; over gRPC the initial and trailing metadata. Both faces
(sync, asyncio), both request paths (the fast path for plain arrays, the general path that
per-call headers take). One embedded server with one model that echoes a request header back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client
from nbinfer.server.launcher import LocalServer
from tests.server.conftest import write_model

_HEADER_MODEL = """
from nbinfer.server.model import Model


class HeaderEcho(Model):
    name = "header_echo"
    inputs = [("X", "FP32", [-1])]
    outputs = [("Y", "FP32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        context.response_headers["x-served-for"] = context.headers.get("x-user", "nobody")
        context.response_headers["X-Model-Tag"] = "Echo-1"
        return {"Y": inputs["X"]}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    repo: Path = tmp_path_factory.mktemp("repo")
    write_model(repo, "header_echo", "1", _HEADER_MODEL)
    srv = LocalServer(model_repository=repo, device="cpu").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=["http", "grpc"])
def url(request: pytest.FixtureRequest, server: LocalServer) -> str:
    if request.param == "http":
        return server.http_url
    return server.grpc_url


X = {"X": np.arange(3, dtype=np.float32)}


def _check(headers: dict[str, str], user: str) -> None:
    assert headers["x-served-for"] == user
    assert headers["x-model-tag"] == "Echo-1"  # keys lower-cased, values as set
    assert all(key == key.lower() for key in headers)


def test_sync_client_sees_the_hooks_response_headers(url: str) -> None:
    with Client(url) as client:
        fast = client.infer("header_echo", X)  # plain arrays: the fast path
        general = client.infer("header_echo", X, headers={"x-user": "ada"})
    assert fast.as_numpy("Y").tolist() == [0.0, 1.0, 2.0]
    _check(fast.headers, "nobody")
    _check(general.headers, "ada")


def test_async_client_sees_the_hooks_response_headers(url: str) -> None:
    async def main() -> tuple[dict[str, str], dict[str, str]]:
        async with AsyncClient(url) as client:
            fast = await client.infer("header_echo", X)
            general = await client.infer("header_echo", X, headers={"x-user": "grace"})
        return fast.headers, general.headers

    fast, general = asyncio.run(main())
    _check(fast, "nobody")
    _check(general, "grace")


def test_each_result_keeps_its_own_headers(url: str) -> None:
    with Client(url) as client:
        results = [
            client.infer("header_echo", X, headers={"x-user": user}) for user in ("a", "b", "c")
        ]
    assert [r.headers["x-served-for"] for r in results] == ["a", "b", "c"]


def test_headers_read_once_and_kept_when_the_result_is_pickled(url: str) -> None:
    """gRPC metadata is read into ``headers`` on first access (not on every call): the same
    dict every time, readable after the client closed, and carried by a pickled result."""
    import pickle

    with Client(url) as client:
        unread = client.infer("header_echo", X, headers={"x-user": "lin"})
        read = client.infer("header_echo", X, headers={"x-user": "kay"})
        assert read.headers is read.headers  # read once, then kept
    copy = pickle.loads(pickle.dumps(unread))  # never read before it was pickled
    _check(copy.headers, "lin")
    assert copy.as_numpy("Y").tolist() == [0.0, 1.0, 2.0]
    _check(read.headers, "kay")
