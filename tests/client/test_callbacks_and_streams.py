"""Callbacks that raise reach the caller; the sync stream honours (or refuses) infer's options."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from nbinfer.client import Client
from nbinfer.errors import InvalidInputError, NbinferError, RequestTimeoutError
from nbinfer.server.launcher import LocalServer
from nbinfer.server.model import InferContext, Model


class HeaderEcho(Model):
    """Answers with the ``x-probe`` header (gRPC metadata) it was called with."""

    name = "header_echo"
    inputs = (("x", "FP32", [-1]),)
    outputs = (("probe", "BYTES", [1]),)

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        return {"probe": np.array([context.headers.get("x-probe", "").encode()], dtype=object)}


class Sleeper(Model):
    name = "sleeper"
    inputs = (("x", "FP32", [-1]),)
    outputs = (("y", "FP32", [-1]),)

    def predict(self, inputs: dict[str, Any]) -> Any:  # type: ignore[override]
        time.sleep(3.0)
        return {"y": inputs["x"]}


X = {"x": np.ones(2, np.float32)}


@pytest.fixture(scope="module")
def served() -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, control=True).start()
    try:
        srv.add_model(HeaderEcho())
        srv.add_model(Sleeper())
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def grpc(served: LocalServer) -> str:
    return served.grpc_url


class Replies:
    """A stream / async_infer callback that records what it gets."""

    def __init__(self, n: int = 1, *, raise_on_result: bool = False) -> None:
        self.got: list[tuple[Any, Any]] = []
        self.n = n
        self.done = threading.Event()
        self.raise_on_result = raise_on_result

    def __call__(self, result: Any, error: Any) -> None:
        self.got.append((result, error))
        if len(self.got) >= self.n:
            self.done.set()
        if self.raise_on_result and result is not None:
            raise ValueError(f"callback bug on {result.id}")


# -- callbacks that raise -------------------------------------------------------------------


def test_async_infer_future_carries_the_callback_exception(grpc: str) -> None:
    callback = Replies(raise_on_result=True)
    with Client(grpc) as client:
        future = client.async_infer("header_echo", X, callback=callback, request_id="a")
        with pytest.raises(ValueError, match="callback bug on a"):
            future.result(timeout=20)
    assert callback.got[0][1] is None  # it got the result first


def test_async_infer_callback_exception_is_shown_in_ipython(
    grpc: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        with Client(grpc) as client:
            future = client.async_infer("header_echo", X, callback=Replies(raise_on_result=True))
            with pytest.raises(ValueError):
                future.result(timeout=20)
    finally:
        InteractiveShell.clear_instance()
    assert shell is not None
    assert "ValueError" in capsys.readouterr().out  # showtraceback wrote it where the cell is


def test_stream_callback_exception_comes_back_as_its_error_argument(grpc: str) -> None:
    callback = Replies(n=2, raise_on_result=True)
    with Client(grpc) as client:
        client.start_stream(callback)
        client.stream_infer("header_echo", X, request_id="s1")
        assert callback.done.wait(20), callback.got
        client.stop_stream()
    (first, none), (nothing, error) = callback.got
    assert first.id == "s1" and none is None and nothing is None
    assert isinstance(error, NbinferError) and isinstance(error.__cause__, ValueError)


# -- the sync stream honours its options, or refuses them -------------------------------------


def test_start_stream_headers_reach_the_model(grpc: str) -> None:
    callback = Replies()
    with Client(grpc) as client:
        client.start_stream(callback, headers={"X-Probe": "from-the-stream"})
        client.stream_infer("header_echo", X, request_id="h")
        assert callback.done.wait(20)
        client.stop_stream()
    result, error = callback.got[0]
    assert error is None and result["probe"][0] == b"from-the-stream"


def test_start_stream_timeout_fires(grpc: str) -> None:
    callback = Replies()
    with Client(grpc) as client:
        client.start_stream(callback, timeout=0.5)
        t0 = time.monotonic()
        client.stream_infer("sleeper", X)
        assert callback.done.wait(10)
        elapsed = time.monotonic() - t0
        client.stop_stream()
    assert isinstance(callback.got[0][1], RequestTimeoutError)
    assert elapsed < 2.5  # the deadline, not the model's three seconds


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"headers": {"x-probe": "lost"}}, "pass headers to start_stream"),
        ({"timeout": 1.0}, "pass timeout to start_stream"),
        ({"binary": True}, "HTTP option"),
        ({"retry": True}, "never retried"),
        ({"colour": "red"}, "unknown option"),
    ],
)
def test_stream_infer_refuses_options_a_stream_request_cannot_carry(
    grpc: str, option: dict[str, Any], message: str
) -> None:
    with Client(grpc) as client:
        client.start_stream(Replies())
        with pytest.raises(InvalidInputError, match=message):
            client.stream_infer("header_echo", X, **option)
        client.stop_stream()


def test_sync_stream_infer_takes_requests_like_the_async_face(grpc: str) -> None:
    with Client(grpc) as client:
        requests = [client.build_request("header_echo", X, request_id=str(i)) for i in range(3)]
        results = list(client.stream_infer(requests, headers={"x-probe": "iter"}))
    assert [r.id for r in results] == ["0", "1", "2"]
    assert all(r["probe"][0] == b"iter" for r in results)


def test_sync_stream_infer_of_requests_raises_its_deadline(grpc: str) -> None:
    with Client(grpc) as client:
        requests = [client.build_request("sleeper", X)]
        with pytest.raises(RequestTimeoutError):
            list(client.stream_infer(requests, timeout=0.5))
