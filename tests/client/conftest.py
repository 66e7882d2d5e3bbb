"""Fixtures of the client tests: one real embedded server (demo models) on 127.0.0.1 per module,
tiny scripted HTTP servers, and closed / silent ports for transport-error tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nbinfer.server.launcher import LocalServer
from tests.ports import free_port


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    # the client tests unload and reload demo (in-memory) models over the network
    srv = LocalServer(demo=True, allow_model_replace=True).start()
    try:
        yield srv
    finally:
        srv.stop()


def _grpc_url(server: LocalServer) -> str:
    return server.grpc_url


@pytest.fixture
def grpc_url(server: LocalServer) -> str:
    """The server's gRPC endpoint as a ``grpc://`` URL."""
    return _grpc_url(server)


@pytest.fixture(params=["http", "grpc"])
def url(request: pytest.FixtureRequest, server: LocalServer) -> str:
    return server.http_url if request.param == "http" else _grpc_url(server)


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    return free_port()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        s.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = s.accept()
                accepted.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(s.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        s.close()


Script = Callable[[BaseHTTPRequestHandler], tuple[int, bytes]]


class ScriptedServer:
    """A real HTTP/1.1 server whose answers come from a Python function; records requests."""

    def __init__(self, script: Script) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                outer.bodies.append(self.rfile.read(length) if length else b"")
                outer.requests.append(
                    (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
                )
                status, body = script(self)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def make(script: Script) -> ScriptedServer:
        srv = ScriptedServer(script)
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.close()
