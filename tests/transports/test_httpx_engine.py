"""The httpx engines, driven directly with HttpCall objects (issue 10, item 4).

A real embedded server on 127.0.0.1 for the traffic; ``httpx.MockTransport`` only where the
test is about what the user's own httpx client does with a request (auth flows, headers,
hooks), which is the point of bringing one.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import importlib.util
from typing import Any

import httpx
import orjson
import pytest

from nbinfer.config import BearerAuth, ClientConfig, Timeouts
from nbinfer.errors import ConnectError, InvalidInputError, RequestTimeoutError, TransportError
from nbinfer.server.launcher import LocalServer
from nbinfer.transports import HttpCall, HttpReply
from nbinfer.transports.httpx_engine import (
    AsyncHttpxEngine,
    HttpxEngine,
    HttpxTransport,
    transport_for,
)
from tests.client.conftest import closed_port, silent_port  # noqa: F401 - fixtures
from tests.transports.test_resources import _Leaks, _sockets

_IRIS = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def _infer_call(model: str = "iris") -> HttpCall:
    body = orjson.dumps(_IRIS)
    return HttpCall("POST", f"v2/models/{model}/infer", body, {"content-type": "application/json"})


def _send(engine: HttpxEngine, call: HttpCall) -> HttpReply:
    return engine.request(call.method, call.path, call.body, call.headers, timeout=call.timeout)


async def _asend(engine: AsyncHttpxEngine, call: HttpCall) -> HttpReply:
    return await engine.request(
        call.method, call.path, call.body, call.headers, timeout=call.timeout
    )


class _Recorder:
    """A MockTransport handler that keeps the requests and answers 200 ``{}``."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        return httpx.Response(200, json={"seen": request.url.path}, headers={"X-Reply": "a"})


# -- sync, against the embedded server --------------------------------------------------------


def test_own_client_gets_health_metadata_and_infers(server: LocalServer) -> None:
    engine = HttpxEngine(server.http_url, ClientConfig())
    try:
        ready = _send(engine, HttpCall("GET", "v2/health/ready", check=False))
        assert ready.status == 200
        meta = _send(engine, HttpCall("GET", "v2/models/iris"))
        assert orjson.loads(meta.body)["name"] == "iris"
        reply = _send(engine, _infer_call())
        assert reply.status == 200
        assert reply.headers["content-type"].startswith("application/json")
        assert orjson.loads(reply.body)["outputs"]
    finally:
        engine.close()


def test_an_unknown_model_is_a_404_reply_for_the_binding_to_map(server: LocalServer) -> None:
    engine = HttpxEngine(server.http_url, ClientConfig())
    try:
        reply = _send(engine, _infer_call("no_such_model"))
        assert reply.status == 404
        assert b"no_such_model" in reply.body
    finally:
        engine.close()


def test_a_user_transport_carries_the_requests(server: LocalServer) -> None:
    seen: list[str] = []

    class Counting(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path)
            return super().handle_request(request)

    with httpx.Client(transport=Counting()) as user:
        engine = HttpxEngine(server.http_url, ClientConfig(), user)
        assert _send(engine, _infer_call()).status == 200
        engine.close()
        assert not user.is_closed, "nbinfer closed a client it does not own"
        assert user.get(server.http_url + "/v2/health/live").status_code == 200
    assert seen == ["/v2/models/iris/infer", "/v2/health/live"]


def test_refused_connection_is_connect_error_from_httpx(closed_port: int) -> None:  # noqa: F811
    engine = HttpxEngine(f"http://127.0.0.1:{closed_port}", ClientConfig())
    try:
        with pytest.raises(ConnectError) as info:
            _send(engine, HttpCall("GET", "v2/health/live"))
        assert isinstance(info.value.__cause__, httpx.ConnectError)
    finally:
        engine.close()


def test_a_silent_server_is_timeout_error(silent_port: int) -> None:  # noqa: F811
    engine = HttpxEngine(f"http://127.0.0.1:{silent_port}", ClientConfig())
    try:
        with pytest.raises(RequestTimeoutError) as info:
            _send(engine, HttpCall("GET", "v2/health/live", timeout=0.3))
        assert isinstance(info.value.__cause__, httpx.TimeoutException)
    finally:
        engine.close()


def test_closed_engine_and_a_client_closed_by_its_owner_raise_transport_error() -> None:
    engine = HttpxEngine("http://127.0.0.1:9", ClientConfig())
    engine.close()
    engine.close()  # idempotent
    with pytest.raises(TransportError, match="closed"):
        _send(engine, HttpCall("GET", "v2"))
    user = httpx.Client(transport=httpx.MockTransport(_Recorder()))
    engine = HttpxEngine("http://127.0.0.1:9", ClientConfig(), user)
    user.close()
    with pytest.raises(TransportError, match="closed") as info:
        _send(engine, HttpCall("GET", "v2"))
    assert isinstance(info.value.__cause__, RuntimeError)


# -- sync, what a user's client keeps and what nbinfer adds -----------------------------------


def test_user_client_keeps_its_auth_headers_and_hooks_and_gets_nbinfer_options() -> None:
    recorder, hooked = _Recorder(), []
    user = httpx.Client(
        transport=httpx.MockTransport(recorder),
        auth=httpx.BasicAuth("ada", "pw"),
        headers={"x-team": "ml", "user-agent": "kserve-sdk"},
        event_hooks={"request": [lambda r: hooked.append(r.url.path)]},
    )
    config = ClientConfig(
        headers={"x-config": "1"}, compression="gzip", timeouts=Timeouts(connect=2, total=7)
    )
    engine = HttpxEngine("http://models.test:8000/prefix", config, user)
    reply = _send(engine, HttpCall("POST", "v2/x", b"abc" * 100, {"x-call": "2"}, timeout=3))
    assert reply == HttpReply(200, reply.headers, b'{"seen":"/prefix/v2/x"}')
    assert reply.headers["x-reply"] == "a"
    (request,) = recorder.requests
    assert request.url == "http://models.test:8000/prefix/v2/x"
    assert request.headers["authorization"] == httpx.BasicAuth("ada", "pw")._auth_header
    assert request.headers["user-agent"] == "kserve-sdk"
    assert (request.headers["x-team"], request.headers["x-config"]) == ("ml", "1")
    assert request.headers["x-call"] == "2"
    assert request.headers["content-encoding"] == "gzip"
    assert gzip.decompress(request.content) == b"abc" * 100
    timeouts = request.extensions["timeout"]
    assert (timeouts["connect"], timeouts["read"], timeouts["write"]) == (2, 3, 3)
    assert hooked == ["/prefix/v2/x"]
    engine.close()
    assert not user.is_closed
    user.close()


def test_nbinfer_auth_is_sent_through_a_user_client() -> None:
    recorder = _Recorder()
    with httpx.Client(transport=httpx.MockTransport(recorder)) as user:
        engine = HttpxEngine("http://h:1", ClientConfig(auth=BearerAuth("tok")), user)
        _send(engine, HttpCall("GET", "v2"))
    assert recorder.requests[0].headers["authorization"] == "Bearer tok"
    assert recorder.requests[0].extensions["timeout"]["read"] == ClientConfig().timeouts.total


def test_the_wrong_face_of_client_is_refused_with_the_right_one_named() -> None:
    async_user = httpx.AsyncClient(transport=httpx.MockTransport(_Recorder()))
    with pytest.raises(InvalidInputError, match=r"needs an httpx\.Client.*nbinfer\.AsyncClient"):
        HttpxEngine("http://h:1", ClientConfig(), async_user)  # type: ignore[arg-type]
    with httpx.Client() as sync_user, pytest.raises(InvalidInputError, match=r"httpx\.AsyncClient"):
        AsyncHttpxEngine("http://h:1", ClientConfig(), sync_user)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="HTTP engine"):
        HttpxTransport().engine("grpc", "grpc://h:1", ClientConfig())


@pytest.mark.skipif(importlib.util.find_spec("h2") is not None, reason="h2 is installed")
def test_http2_without_h2_names_the_extra() -> None:
    with pytest.raises(TransportError, match=r"httpx\[http2\]"):
        HttpxEngine("http://h:1", ClientConfig(http2=True))


# -- asyncio ------------------------------------------------------------------------------------


def test_three_event_loops_leave_no_unclosed_transport(server: LocalServer) -> None:
    async def use(engine: AsyncHttpxEngine) -> None:
        live = await _asend(engine, HttpCall("GET", "v2/health/live", check=False))
        assert live.status == 200
        assert (await _asend(engine, _infer_call())).status == 200

    gc.collect()
    before = _sockets(server.http_url)
    with _Leaks() as leaks:
        engine = AsyncHttpxEngine(server.http_url, ClientConfig())
        for _ in range(3):
            asyncio.run(use(engine))
            assert _sockets(server.http_url) == before, "a finished loop kept its connections open"
        asyncio.run(engine.aclose())
        with pytest.raises(TransportError, match="closed"):
            asyncio.run(_asend(engine, HttpCall("GET", "v2")))
        del engine
    assert leaks.found == []
    assert _sockets(server.http_url) == before


def test_aclose_closes_the_running_loops_client(server: LocalServer) -> None:
    async def main() -> int:
        engine = AsyncHttpxEngine(server.http_url, ClientConfig())
        assert (await _asend(engine, _infer_call())).status == 200
        opened = _sockets(server.http_url)
        await engine.aclose()
        await engine.aclose()  # idempotent
        return opened

    gc.collect()
    before = _sockets(server.http_url)
    with _Leaks() as leaks:
        assert asyncio.run(main()) > before
    assert leaks.found == []
    assert _sockets(server.http_url) == before


def test_async_user_client_is_used_as_given_and_left_open(server: LocalServer) -> None:
    paths: list[str] = []

    async def hook(request: httpx.Request) -> None:
        paths.append(request.url.path)

    async def main() -> None:
        async with httpx.AsyncClient(
            event_hooks={"request": [hook]}, headers={"x-team": "ml"}
        ) as user:
            engine = AsyncHttpxEngine(server.http_url, ClientConfig(), user)
            assert (await _asend(engine, _infer_call())).status == 200
            await engine.aclose()
            assert not user.is_closed
            assert (await user.get(server.http_url + "/v2/health/ready")).status_code == 200

    with _Leaks() as leaks:
        asyncio.run(main())
    assert leaks.found == []
    assert paths == ["/v2/models/iris/infer", "/v2/health/ready"]


def test_async_errors_map_onto_nbinfer_errors(closed_port: int) -> None:  # noqa: F811
    async def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    async def main() -> None:
        refused = AsyncHttpxEngine(f"http://127.0.0.1:{closed_port}", ClientConfig())
        try:
            with pytest.raises(ConnectError) as info:
                await _asend(refused, HttpCall("GET", "v2"))
            assert isinstance(info.value.__cause__, httpx.ConnectError)
        finally:
            await refused.aclose()
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as user:
            slow = AsyncHttpxEngine("http://h:1", ClientConfig(), user)
            with pytest.raises(RequestTimeoutError) as timed:
                await _asend(slow, HttpCall("GET", "v2"))
            assert isinstance(timed.value.__cause__, httpx.ReadTimeout)

    with _Leaks() as leaks:
        asyncio.run(main())
    assert leaks.found == []


def test_transport_builds_each_face_from_the_matching_client() -> None:
    recorder = _Recorder()
    user: Any = httpx.AsyncClient(transport=httpx.MockTransport(recorder))
    engine = HttpxTransport(user).async_engine("http", "http://h:1", ClientConfig())
    assert isinstance(engine, AsyncHttpxEngine)
    reply = asyncio.run(_asend(engine, HttpCall("GET", "v2")))
    assert reply.status == 200 and recorder.requests[0].url.path == "/v2"
    own = HttpxTransport().engine("http", "http://h:1", ClientConfig())
    assert isinstance(own, HttpxEngine)
    own.close()


def test_engine_options_resolve_to_a_transport_or_the_default() -> None:
    def pick(engine: str | None, client: Any = None, **kw: Any) -> HttpxTransport | None:
        return transport_for(engine, client, wire=kw.pop("wire", "http"), default="pycurl", **kw)

    assert pick(None) is None and pick("pycurl") is None
    assert isinstance(pick("httpx"), HttpxTransport)
    with httpx.Client() as user:
        chosen = pick(None, user)
        assert chosen is not None and chosen.client is user
        with pytest.raises(InvalidInputError, match="needs http_engine='httpx'"):
            pick("pycurl", user)
    with pytest.raises(InvalidInputError, match=r"'pycurl' .* or 'httpx', not 'aiohttp'"):
        pick("aiohttp")
    with pytest.raises(InvalidInputError, match="speaks 'grpc'"):
        pick("httpx", wire="grpc")
    with pytest.raises(InvalidInputError, match="not both"):
        pick("httpx", transport=object())


def test_a_user_async_client_reused_in_a_new_loop_says_why_it_cannot(server: LocalServer) -> None:
    user = httpx.AsyncClient()
    engine = AsyncHttpxEngine(server.http_url, ClientConfig(), user)
    call = HttpCall("GET", "v2/health/live")
    with _Leaks():  # the first loop's connection is httpx's to lose, not nbinfer's
        assert asyncio.run(_asend(engine, call)).status == 200
        with pytest.raises(TransportError, match="belongs to the event loop it first ran in"):
            asyncio.run(_asend(engine, call))
        asyncio.run(user.aclose())
        del user, engine
