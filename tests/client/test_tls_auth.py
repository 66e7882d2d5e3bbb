"""TLS and credentials: real HTTPS and gRPC-over-TLS servers on 127.0.0.1 with a throwaway cert."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest

from nbinfer.client import AsyncClient, Client
from nbinfer.config import TLSConfig
from nbinfer.errors import ConnectError, InvalidInputError, TransportError, UnauthenticatedError
from nbinfer.protocol.grpc import SERVICE_NAME, pb


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        ok = self.headers.get("authorization") in (None, "Bearer good")
        body = b"{}" if ok else b'{"error": "bad token"}'
        self.send_response(200 if ok else 401)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def https_url(cert: tuple[str, str]) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _grpc_server(creds: Any | None) -> tuple[Any, int, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []

    def live(request: Any, context: Any) -> Any:
        metadata = dict(context.invocation_metadata())
        seen.append(metadata)
        if metadata.get("authorization") == "Bearer bad":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
        return pb.ServerLiveResponse(live=True)

    handler = grpc.method_handlers_generic_handler(
        SERVICE_NAME,
        {
            "ServerLive": grpc.unary_unary_rpc_method_handler(
                live,
                request_deserializer=pb.ServerLiveRequest.FromString,
                response_serializer=pb.ServerLiveResponse.SerializeToString,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    if creds is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    return server, port, seen


def test_https_verifies_the_server_with_the_given_ca(https_url: str, cert: tuple[str, str]) -> None:
    with Client(https_url, ssl=TLSConfig(ca_file=cert[0]), auth="good") as client:
        assert client.is_server_live()
    with Client(https_url, ssl=TLSConfig(verify=False)) as client:
        assert client.is_server_live()
    with Client(https_url, retries=0) as client, pytest.raises(ConnectError):
        client.is_server_live()  # self-signed: not trusted by default


def test_https_async_client(https_url: str, cert: tuple[str, str]) -> None:
    async def main() -> bool:
        async with AsyncClient(https_url, ssl=TLSConfig(ca_file=cert[0])) as client:
            return await client.is_server_live()

    assert asyncio.run(main())


def test_wrong_token_raises_unauthenticated_over_http(https_url: str) -> None:
    with (
        Client(https_url, ssl=TLSConfig(verify=False), auth="bad") as client,
        pytest.raises(UnauthenticatedError, match="bad token"),
    ):
        client.get_server_metadata()


def test_grpc_over_tls_with_call_credentials(cert: tuple[str, str]) -> None:
    crt, key = Path(cert[0]).read_bytes(), Path(cert[1]).read_bytes()
    server, port, seen = _grpc_server(grpc.ssl_server_credentials([(key, crt)]))
    try:
        tls = TLSConfig(ca_file=cert[0], server_hostname="localhost")
        with Client(f"grpcs://127.0.0.1:{port}", ssl=tls, auth="good") as client:
            assert client.is_server_live()
        assert seen[-1]["authorization"] == "Bearer good"

        async def main() -> bool:
            async with AsyncClient(f"grpcs://127.0.0.1:{port}", ssl=tls, auth="good") as client:
                return await client.is_server_live()

        assert asyncio.run(main())
        with (
            Client(f"grpcs://127.0.0.1:{port}", ssl=tls, auth="bad") as client,
            pytest.raises(UnauthenticatedError, match="bad token"),
        ):
            client.is_server_live()
    finally:
        server.stop(None)


def test_grpc_plaintext_sends_credentials_as_metadata() -> None:
    server, port, seen = _grpc_server(None)
    try:
        with Client(f"grpc://127.0.0.1:{port}", auth=("u", "p"), headers={"x-team": "a"}) as c:
            assert c.is_server_live(headers={"x-call": "1"})
    finally:
        server.stop(None)
    assert seen[-1]["authorization"] == "Basic dTpw"
    assert seen[-1]["x-team"] == "a"
    assert seen[-1]["x-call"] == "1"


# -- ssl= always means TLS: a plaintext URL is upgraded, never kept --------------------------


class _CountingHandler(_Handler):
    """A plaintext HTTP server's handler that counts the requests it could read."""

    served: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.served.append(self.path)
        super().do_GET()


@pytest.fixture
def plain_http() -> Iterator[tuple[str, list[str]]]:
    served: list[str] = []
    handler = type("Counting", (_CountingHandler,), {"served": served})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", served
    httpd.shutdown()
    httpd.server_close()


_SYNC_ENGINES = [{}, {"http_engine": "httpx"}]
_ASYNC_ENGINES = [{}, {"http_engine": "httpx"}]


@pytest.mark.parametrize("engine", _SYNC_ENGINES, ids=["pycurl", "httpx"])
def test_tls_config_with_an_http_url_connects_with_tls(
    https_url: str, cert: tuple[str, str], engine: dict[str, Any]
) -> None:
    http_url = https_url.replace("https://", "http://")
    with Client(http_url, ssl=TLSConfig(ca_file=cert[0]), **engine) as client:
        assert client.url == https_url
        assert client.is_server_live()  # the server speaks only TLS, verified with the CA
    with Client(http_url, ssl=True, retries=0, **engine) as client:
        assert client.url == https_url
        with pytest.raises(ConnectError):  # TLS with the default roots: self-signed, refused
            client.is_server_live()


@pytest.mark.parametrize("engine", _ASYNC_ENGINES, ids=["aiohttp", "httpx"])
def test_tls_config_with_an_http_url_connects_with_tls_async(
    https_url: str, cert: tuple[str, str], engine: dict[str, Any]
) -> None:
    http_url = https_url.replace("https://", "http://")

    async def main() -> tuple[str, bool]:
        async with AsyncClient(http_url, ssl=TLSConfig(ca_file=cert[0]), **engine) as client:
            return client.url, await client.is_server_live()

    assert asyncio.run(main()) == (https_url, True)


@pytest.mark.parametrize("engine", _SYNC_ENGINES, ids=["pycurl", "httpx"])
def test_tls_settings_never_fall_back_to_plaintext_http(
    plain_http: tuple[str, list[str]], cert: tuple[str, str], engine: dict[str, Any]
) -> None:
    url, served = plain_http
    with Client(url, **engine) as client:
        assert client.is_server_live()  # the server works, in plaintext
    assert served == ["/v2/health/live"]
    for ssl_option in (TLSConfig(ca_file=cert[0]), True):
        with (
            Client(url, ssl=ssl_option, retries=0, **engine) as client,
            pytest.raises(TransportError),
        ):
            client.is_server_live()
    assert served == ["/v2/health/live"]  # no request reached it in clear text

    async def main() -> None:
        async with AsyncClient(url, ssl=TLSConfig(ca_file=cert[0]), retries=0, **engine) as c:
            await c.is_server_live()

    with pytest.raises(TransportError):
        asyncio.run(main())
    assert served == ["/v2/health/live"]


def test_tls_config_with_a_grpc_url_connects_with_tls(cert: tuple[str, str]) -> None:
    crt, key = Path(cert[0]).read_bytes(), Path(cert[1]).read_bytes()
    server, port, seen = _grpc_server(grpc.ssl_server_credentials([(key, crt)]))
    try:
        tls = TLSConfig(ca_file=cert[0], server_hostname="localhost")
        with Client(f"grpc://127.0.0.1:{port}", ssl=tls, auth="good") as client:
            assert client.url == f"grpcs://127.0.0.1:{port}"
            assert client.is_server_live()
        assert seen[-1]["authorization"] == "Bearer good"

        async def main() -> bool:
            async with AsyncClient(f"grpc://127.0.0.1:{port}", ssl=tls) as client:
                return await client.is_server_live()

        assert asyncio.run(main())
        assert len(seen) == 2
    finally:
        server.stop(None)


def test_tls_settings_never_fall_back_to_plaintext_grpc(cert: tuple[str, str]) -> None:
    server, port, seen = _grpc_server(None)
    try:
        with Client(f"grpc://127.0.0.1:{port}") as client:
            assert client.is_server_live()  # the server works, in plaintext
        assert len(seen) == 1
        tls = TLSConfig(ca_file=cert[0], server_hostname="localhost")
        with (
            Client(f"grpc://127.0.0.1:{port}", ssl=tls, retries=0, timeout=5) as client,
            pytest.raises(TransportError),
        ):
            client.is_server_live()

        async def main() -> bool:
            async with AsyncClient(f"grpc://127.0.0.1:{port}", ssl=tls, retries=0, timeout=5) as c:
                return await c.is_server_live()

        with pytest.raises(TransportError):
            asyncio.run(main())
        assert len(seen) == 1  # no call reached it in clear text
    finally:
        server.stop(None)


def test_session_with_a_tls_config_uses_tls(https_url: str, cert: tuple[str, str]) -> None:
    from nbinfer import Session

    http_url = https_url.replace("https://", "http://")
    session = Session(http_url, ssl=TLSConfig(ca_file=cert[0]))
    try:
        assert session.url == https_url and session.client.url == https_url
        assert session.client.is_server_live()
    finally:
        session.close()
    with pytest.raises(InvalidInputError, match=r"local server .* plaintext"):
        Session(ssl=TLSConfig(ca_file=cert[0]))


def test_ssl_options_that_cannot_apply_are_refused(https_url: str) -> None:
    import httpx

    with pytest.raises(InvalidInputError, match="ssl must be True, False, None or a TLSConfig"):
        Client(https_url, ssl="yes")
    with (
        httpx.Client() as user,
        pytest.raises(InvalidInputError, match="cannot apply to your httpx_client"),
    ):
        Client(https_url, ssl=TLSConfig(ca_file="ca.pem"), httpx_client=user)


def test_kserve_grpc_client_use_ssl_with_a_grpc_url_connects_with_tls(
    cert: tuple[str, str],
) -> None:
    from nbinfer.compat.kserve import InferenceGRPCClient

    crt, key = Path(cert[0]).read_bytes(), Path(cert[1]).read_bytes()
    server, port, seen = _grpc_server(grpc.ssl_server_credentials([(key, crt)]))
    try:

        async def main() -> bool:
            async with InferenceGRPCClient(
                f"grpc://127.0.0.1:{port}", use_ssl=True, root_certificates=cert[0]
            ) as client:
                return await client.is_server_live()

        assert asyncio.run(main())  # was a plaintext channel: the TLS server refused it
        assert len(seen) == 1
    finally:
        server.stop(None)


def test_an_ssl_context_is_used_by_the_asyncio_client_and_refused_where_files_are_needed(
    cert: tuple[str, str], https_url: str
) -> None:
    context = ssl.create_default_context(cafile=cert[0])

    async def live() -> bool:
        async with AsyncClient(https_url, ssl=TLSConfig(context=context)) as client:
            return await client.is_server_live()

    assert asyncio.run(live())
    for protocol in ("http", "grpc"):
        with pytest.raises(InvalidInputError, match=r"context=.*ca_file="):
            Client(https_url, protocol=protocol, ssl=TLSConfig(context=context)).is_server_live()


# -- a failed TLS connection says what to change --------------------------------------------

UNTRUSTED = "is not trusted here"
PLAINTEXT = "does not speak TLS on this port"
OTHER_HOST = "does not name the host in the URL"


def _hints_of(call: Any) -> str:
    """The hints of the ConnectError ``call()`` raises, as one string."""
    with pytest.raises(ConnectError) as info:
        call()
    return " ".join(info.value.hints)


@pytest.mark.parametrize("engine", _SYNC_ENGINES, ids=["pycurl", "httpx"])
def test_tls_failures_over_http_say_what_to_change(
    https_url: str, plain_http: tuple[str, list[str]], cert: tuple[str, str], engine: Any
) -> None:
    """A self-signed server without its CA: the hint names ``ca_file`` (not "is the server
    running?"); TLS to a plaintext server: the hint says it does not speak TLS. Sync and async
    faces (the async one on aiohttp, or on httpx)."""
    untrusted = Client(https_url, retries=0, **engine)
    hints = _hints_of(untrusted.is_server_live)
    assert UNTRUSTED in hints and "ca_file=" in hints and "Is the server running" not in hints
    plain = plain_http[0].replace("http://", "https://")
    mismatched = Client(plain, ssl=TLSConfig(ca_file=cert[0]), retries=0, **engine)
    assert PLAINTEXT in _hints_of(mismatched.is_server_live)
    untrusted.close()
    mismatched.close()

    async def live(url: str, **options: Any) -> None:
        async with AsyncClient(url, retries=0, **options, **engine) as client:
            await client.is_server_live()

    assert UNTRUSTED in _hints_of(lambda: asyncio.run(live(https_url)))
    tls = TLSConfig(ca_file=cert[0])
    assert PLAINTEXT in _hints_of(lambda: asyncio.run(live(plain, ssl=tls)))


def test_tls_failures_over_grpc_say_what_to_change(cert: tuple[str, str]) -> None:
    """gRPC: an untrusted certificate, one issued for another name, and a plaintext port."""
    crt, key = Path(cert[0]).read_bytes(), Path(cert[1]).read_bytes()
    secure, port, _ = _grpc_server(grpc.ssl_server_credentials([(key, crt)]))
    plain, plain_port, _ = _grpc_server(None)
    try:
        url = f"grpcs://127.0.0.1:{port}"
        cases = {
            UNTRUSTED: Client(url, retries=0, timeout=5),
            OTHER_HOST: Client(
                url, ssl=TLSConfig(ca_file=cert[0], server_hostname="other.example"), retries=0
            ),
            PLAINTEXT: Client(
                f"grpcs://127.0.0.1:{plain_port}",
                ssl=TLSConfig(ca_file=cert[0], server_hostname="localhost"),
                retries=0,
                timeout=5,
            ),
        }
        for expected, client in cases.items():
            with client:
                assert expected in _hints_of(client.is_server_live), expected
    finally:
        secure.stop(None)
        plain.stop(None)


def test_a_refused_connection_keeps_the_is_it_running_hints() -> None:
    """No TLS in the story: the hints stay those of an unreachable server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        for url in (f"http://127.0.0.1:{port}", f"grpc://127.0.0.1:{port}"):
            with Client(url, retries=0, timeout=5) as client:
                hints = _hints_of(client.is_server_live)
            assert "Is the server running?" in hints and "TLS" not in hints, url
