"""tritonclient's faces where they once differed: error hints, aio streams after an error, http.aio
connection options. Against the embedded server (and real tritonclient where installed)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

import nbinfer.compat.tritonclient.grpc as grpcclient
import nbinfer.compat.tritonclient.grpc.aio as grpcaio
import nbinfer.compat.tritonclient.http as httpclient
import nbinfer.compat.tritonclient.http.aio as httpaio
from nbinfer.compat.tritonclient.utils import InferenceServerException
from nbinfer.errors import ConnectError
from nbinfer.server.launcher import LocalServer
from tests.ports import free_port

# -- the hints nbinfer's errors carry ------------------------------------------------------


def test_exception_keeps_tritonclients_shape_and_says_what_to_try() -> None:
    client = httpclient.InferenceServerClient(f"127.0.0.1:{free_port()}", connection_timeout=2)
    with pytest.raises(InferenceServerException) as info:
        client.get_server_metadata()
    client.close()
    error = info.value
    assert isinstance(error.error, ConnectError)
    assert error.message() == error.error.message  # tritonclient's message(): the text alone
    assert error.status() is None and error.debug_details() is None
    text = str(error)  # what a traceback or print(e) shows
    assert text.startswith(error.message())
    assert "Check the URL and port (HTTP and gRPC listen on different ports)" in text
    assert error.hints and all(h in error.error.hints for h in error.hints)  # the error card
    assert "session" not in text  # the nbinfer Session's hints are not for tritonclient code


def test_a_server_error_keeps_status_and_message_as_tritonclient(server: LocalServer) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_address)
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("missing_model")
    client.close()
    assert info.value.status() == "StatusCode.NOT_FOUND"
    assert str(info.value).startswith(f"[StatusCode.NOT_FOUND] {info.value.message()}")


# -- grpc.aio stream_infer: an error reply is one item, the stream goes on -------------------


def _inputs(module: Any, base: int) -> list[Any]:
    inputs = [module.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(np.full((1, 16), base, np.int32))
    inputs[1].set_data_from_numpy(np.ones((1, 16), np.int32))
    return inputs


async def _stream(module: Any, url: str) -> list[tuple[str | None, int | None, bool]]:
    async def requests() -> AsyncIterator[dict[str, Any]]:
        yield {"model_name": "simple", "inputs": _inputs(module, 10), "request_id": "a"}
        yield {"model_name": "no_such_model", "inputs": _inputs(module, 0), "request_id": "x"}
        yield {"model_name": "simple", "inputs": _inputs(module, 20), "request_id": "b"}
        yield {"model_name": "simple", "inputs": _inputs(module, 30), "request_id": "c"}

    replies: list[tuple[str | None, int | None, bool]] = []
    async with module.InferenceServerClient(url=url) as client:
        async for result, error in client.stream_infer(inputs_iterator=requests()):
            if error is not None:
                replies.append((None, None, "no_such_model" in str(error)))
            else:
                replies.append(
                    (result.get_response().id, int(result.as_numpy("OUTPUT0")[0][0]), False)
                )
            if len(replies) == 4:
                break
    return replies


def test_grpc_aio_stream_goes_on_after_an_error_reply(server: LocalServer) -> None:
    ours = asyncio.run(_stream(grpcaio, server.grpc_address))
    assert ours == [("a", 11, False), (None, None, True), ("b", 21, False), ("c", 31, False)]
    real = pytest.importorskip("tritonclient.grpc.aio")
    assert asyncio.run(_stream(real, server.grpc_address)) == ours


# -- http.aio: conn_limit and ssl_context are honoured, as tritonclient.http.aio does ----------


class _Live(BaseHTTPRequestHandler):
    """``/v2/health/live`` that holds each answer until a second request is in flight (or a
    second has passed), counting the connections open at once."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    open_now = 0
    most = 0
    two = threading.Event()

    def setup(self) -> None:
        super().setup()
        with self.lock:
            type(self).open_now += 1
            type(self).most = max(self.most, self.open_now)
            if self.open_now >= 2:
                self.two.set()

    def finish(self) -> None:
        with self.lock:
            type(self).open_now -= 1
        super().finish()

    def do_GET(self) -> None:
        self.two.wait(1.0)  # answers come either way: no assertion depends on this wait
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _serve(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> Any:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_http_aio_conn_limit_bounds_the_connections_open_at_once() -> None:
    async def four_at_once(url: str, limit: int) -> list[bool]:
        async with httpaio.InferenceServerClient(url, conn_limit=limit) as client:
            return list(await asyncio.gather(*(client.is_server_live() for _ in range(4))))

    _Live.most = 0
    with _serve(_Live) as url:
        assert asyncio.run(four_at_once(url, 1)) == [True] * 4
    assert _Live.most == 1  # one connection, the calls one after another on it
    with pytest.raises(InferenceServerException, match="conn_limit= takes a whole number >= 0"):
        httpaio.InferenceServerClient("127.0.0.1:1", conn_limit=-1)


def test_http_aio_ssl_context_is_the_one_used(cert: tuple[str, str]) -> None:
    async def live(url: str, context: ssl.SSLContext) -> bool:
        async with httpaio.InferenceServerClient(url, ssl=True, ssl_context=context) as client:
            return bool(await client.is_server_live())

    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*cert)
    with _serve(_Live, server) as url:
        trusting = ssl.create_default_context(cafile=cert[0])  # trusts the throwaway cert
        assert asyncio.run(live(url, trusting))
        with pytest.raises(InferenceServerException, match=r"(?i)certificate"):
            asyncio.run(live(url, ssl.create_default_context()))  # the system roots: refused
