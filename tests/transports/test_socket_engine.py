"""The socket engine (cleartext HTTP/1.1) on what servers really do to a kept-alive connection.

A scripted loopback server (a thread, real sockets) answers each connection's requests as a
test tells it: keep the connection, close it, chunk the body, answer late or early. The
embedded server (``url``) checks the engine against nbinfer's own HTTP server.
"""

from __future__ import annotations

import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pycurl
import pytest

from nbinfer import Client
from nbinfer.config import BearerAuth, ClientConfig
from nbinfer.errors import (
    ConnectError,
    InvalidInputError,
    PayloadTooLargeError,
    RequestTimeoutError,
    TransportError,
)
from nbinfer.server.launcher import LocalServer
from nbinfer.transports.curl_engine import CurlEngine
from nbinfer.transports.socket_engine import SocketEngine
from tests.rawhttp import read_message
from tests.waiting import wait_until

#: An answer: the bytes sent back for one request (``None``: close without answering).
Script = Callable[[int, int, bytes], bytes | None]

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


class Scripted:
    """A loopback HTTP/1.1 server answering ``script(connection, request, head)``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[tuple[int, bytes]] = []
        #: (connection, request) pairs after whose answer the connection is closed
        self.close_after: set[tuple[int, int]] = set()
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(
                target=self._connection, args=(conn, self.connections), daemon=True
            ).start()

    def _connection(self, conn: socket.socket, number: int) -> None:
        with conn:
            pending = b""
            served = 0
            while (message := read_message(conn, pending)) is not None:
                head, _, pending = message
                served += 1
                self.requests.append((number, head))
                answer = self.script(number, served, head)
                if answer is None:
                    return
                conn.sendall(answer)
                if (number, served) in self.close_after:
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], Scripted]]:
    made: list[Scripted] = []

    def make(script: Script) -> Scripted:
        made.append(Scripted(script))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _engine(url: str, **config: object) -> SocketEngine:
    return SocketEngine(url, ClientConfig(**config))  # type: ignore[arg-type]


def test_default_client_takes_sockets_for_cleartext_and_libcurl_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def engine(url: str, **options: object) -> type:
        with Client(url, shared_memory=False, **options) as client:  # type: ignore[arg-type]
            return type(client._engine)

    assert engine("http://127.0.0.1:1") is SocketEngine
    assert engine("http://127.0.0.1:1", http_engine="pycurl") is CurlEngine
    assert engine("https://127.0.0.1:1") is CurlEngine
    assert engine("http://127.0.0.1:1", http2=True) is CurlEngine
    assert engine("http://127.0.0.1:1", compression="gzip") is CurlEngine
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:3128")
    assert engine("http://127.0.0.1:1") is CurlEngine  # libcurl applies the proxy


@pytest.mark.parametrize("http_engine", [None, "pycurl"])
def test_both_engines_answer_the_same(server: LocalServer, http_engine: str | None) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    with Client(server.http_url, shared_memory=False, http_engine=http_engine) as client:
        for _ in range(3):  # kept alive
            result = client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
            np.testing.assert_array_equal(result["OUTPUT0"], 2 * a)
        assert client.get_server_metadata().name == "nbinfer"


def test_a_connection_the_server_closed_while_idle_is_replaced(
    scripted: Callable[[Script], Scripted],
) -> None:
    server = scripted(lambda conn, n, head: OK)
    server.close_after |= {(1, 1), (2, 1)}  # answers, then ends the kept-alive connection
    engine = _engine(server.url)
    try:
        assert engine.request("POST", "v2/models/m/infer", b"{}", {}).body == b"ok"
        # at once: used without a poll, found dead, sent again on a new connection
        assert engine.request("POST", "v2/models/m/infer", b"{}", {}).body == b"ok"
        assert [conn for conn, _ in server.requests] == [1, 2]
        kept = engine._local.conn
        wait_until(lambda: kept.stale(time.monotonic()), 5.0, "a poll seeing the server's FIN")
        assert engine.request("POST", "v2/models/m/infer", b"{}", {}).body == b"ok"
        # polled before use this time, so nothing was sent on the dead connection
        assert [conn for conn, _ in server.requests] == [1, 2, 3]
    finally:
        engine.close()


def test_a_reused_connection_that_dies_before_answering_is_retried_once_anew(
    scripted: Callable[[Script], Scripted],
) -> None:
    # connection 1 answers its first request, then closes on the second without a word (a
    # server's keep-alive timeout racing the request): sent again on connection 2
    server = scripted(lambda conn, n, head: None if (conn, n) == (1, 2) else OK)
    engine = _engine(server.url)
    try:
        assert engine.request("POST", "v2/models/m/infer", b"{}", {}).body == b"ok"
        assert engine.request("POST", "v2/models/m/infer", b"{}", {}).body == b"ok"
        assert [conn for conn, _ in server.requests] == [1, 1, 2]
        # a new connection that dies is not retried
        server.script = lambda conn, n, head: None
        engine._local.conn.drop()
        with pytest.raises(TransportError, match="closed the connection before answering"):
            engine.request("POST", "v2/models/m/infer", b"{}", {})
        assert len(server.requests) == 4
    finally:
        engine.close()


def test_chunked_and_connection_close_answers(scripted: Callable[[Script], Scripted]) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nX-Thing:  v \r\n\r\n"
        b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
    )
    closing = b"HTTP/1.1 503 Busy\r\nconnection: close\r\ncontent-length: 4\r\n\r\nbusy"
    until_eof = b"HTTP/1.0 200 OK\r\n\r\nto the end"
    answers = iter([chunked, closing, until_eof, OK])

    def script(conn: int, n: int, head: bytes) -> bytes:
        return next(answers)

    server = scripted(script)
    server.close_after |= {(1, 2), (2, 1)}  # as the answers say
    engine = _engine(server.url)
    try:
        reply = engine.request("GET", "a", None, {})
        assert (reply.status, reply.body, reply.headers["x-thing"]) == (200, b"abcdefg", "v")
        reply = engine.request("GET", "b", None, {})
        assert (reply.status, reply.body) == (503, b"busy")
        assert engine._local.conn.sock is None  # closed, as the server said
        reply = engine.request("GET", "c", None, {})
        assert (reply.status, reply.body) == (200, b"to the end")
        assert engine.request("GET", "d", None, {}).body == b"ok"
        assert server.connections == 3
    finally:
        engine.close()


def test_a_per_call_header_replaces_the_default_one(scripted: Callable[[Script], Scripted]) -> None:
    server = scripted(lambda conn, n, head: OK)
    engine = _engine(server.url, headers={"X-Team": "a"}, auth=BearerAuth("token-1"))
    try:
        engine.request("GET", "v2", None, {"Authorization": "Bearer token-2", "x-team": "b"})
        [(_, head)] = server.requests
        lines = head.lower().split(b"\r\n")
        assert lines[0] == b"get /v2 http/1.1"
        assert [x for x in lines if x.startswith(b"authorization")] == [
            b"authorization: bearer token-2"
        ]
        assert [x for x in lines if x.startswith(b"x-team")] == [b"x-team: b"]
        assert b"host: 127.0.0.1:%d" % server.port in lines
        for bad in ({"x-a": "1\r\nx-injected: 2"}, {"x-a": "caf\u00e9"}):
            with pytest.raises(InvalidInputError, match="header 'x-a'"):
                engine.request("GET", "v2", None, bad)
        assert len(server.requests) == 1  # nothing sent
    finally:
        engine.close()


def test_timeouts_and_refused_connections_are_typed(
    scripted: Callable[[Script], Scripted],
) -> None:
    def slow(conn: int, n: int, head: bytes) -> bytes:
        time.sleep(1.0)
        return OK

    server = scripted(slow)
    engine = _engine(server.url)
    try:
        begun = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="timed out"):
            engine.request("GET", "v2", None, {}, timeout=0.2)
        assert time.monotonic() - begun < 0.9
        assert engine.request("GET", "v2", None, {}, timeout=5).body == b"ok"  # usable again
    finally:
        engine.close()
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: refused
        refused = _engine(f"http://127.0.0.1:{port}")
        with pytest.raises(ConnectError, match="cannot connect"):
            refused.request("GET", "v2", None, {})
        refused.close()


@pytest.mark.parametrize("http_engine", [None, "pycurl"])
@pytest.mark.parametrize("how", ["abort", "close"])
def test_a_call_in_flight_on_another_thread_ends_at_once(
    scripted: Callable[[Script], Scripted], http_engine: str | None, how: str
) -> None:
    answered = threading.Event()

    def late(conn: int, n: int, head: bytes) -> bytes:
        answered.wait(10)
        return OK

    server = scripted(late)
    client = Client(server.url, shared_memory=False, http_engine=http_engine)
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(client.get_server_metadata())
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    while not server.requests:
        time.sleep(0.01)
    begun = time.monotonic()
    if how == "abort":
        client._abort_in_flight()
    else:
        client.close()
    worker.join(5)
    took = time.monotonic() - begun
    answered.set()
    assert not worker.is_alive()
    [error] = outcome
    assert isinstance(error, TransportError), error
    assert ("aborted" if how == "abort" else "closed") in str(error)
    # the socket engine's call ends at once; libcurl's at its next progress call, which comes
    # about once a second while it waits
    assert took < (3.0 if http_engine == "pycurl" else 0.5), took
    if how == "abort":  # the client goes on
        server.script = lambda conn, n, head: (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}"
        )
        assert client.is_server_live()
        client.close()


def test_connections_of_ended_threads_close_quietly(server: LocalServer) -> None:
    """A thread's connection goes with the thread (no unclosed socket: warnings are errors)."""
    with Client(server.http_url, shared_memory=False) as client:
        threads = [threading.Thread(target=client.is_server_live) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gc.collect()
        assert client.is_server_live()


@pytest.mark.parametrize("http_engine", [None, "pycurl"])
def test_a_body_over_the_servers_limit_is_refused_by_name_on_both_engines(
    http_engine: str | None,
) -> None:
    """The server refuses the body unread (413) and closes while the client still sends: the
    answer is read all the same, and the next call works."""
    limit = 1 << 20
    big = np.zeros((1, 16 * limit // 4), np.float32)  # 16 MiB per input: far over the limit
    with (
        LocalServer(demo=True, max_request_bytes=limit, auth_token=None) as server,
        Client(server.http_url, shared_memory=False, http_engine=http_engine) as client,
    ):
        for _ in range(2):
            with pytest.raises(PayloadTooLargeError, match=str(limit)):
                client.infer("add_sub", {"INPUT0": big, "INPUT1": big})
        small = np.ones((1, 16), np.float32)
        assert client.infer("add_sub", {"INPUT0": small, "INPUT1": small})["OUTPUT0"].sum() == 32


def test_an_answer_sent_before_the_body_was_read_is_returned() -> None:
    """A server that answers from the head alone and closes (the body unread, as servers refuse
    a body over their limit): the send fails under the client, the answer is read all the same."""
    refusal = b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo big!"
    listener = socket.create_server(("127.0.0.1", 0))
    got_head = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            got_head.set()
            conn.sendall(refusal)
            conn.shutdown(socket.SHUT_WR)
            time.sleep(0.2)  # the client's bytes pile up unread; closing then resets

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    engine = _engine(f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        reply = engine.request("POST", "v2/models/m/infer", b"\0" * (64 << 20), {})
        assert (reply.status, reply.body) == (413, b"too big!")
        assert got_head.is_set()
    finally:
        engine.close()
        listener.close()
        thread.join(5)


def _connection(client: Client) -> object:
    """The object behind the calling thread's kept-alive connection, on either engine."""
    local = client._engine._local  # type: ignore[attr-defined]
    return local.conn.sock if isinstance(client._engine, SocketEngine) else local.state.curl


@pytest.mark.parametrize("http_engine", [None, "pycurl"], ids=["sockets", "pycurl"])
def test_a_forked_child_connects_anew(server: LocalServer, http_engine: str | None) -> None:
    """A child forked from a process with a kept-alive connection (multiprocessing's fork, a
    Spark / Dask worker) must not talk over the parent's socket: both go on answering right.
    On libcurl the child leaves the parent's handle unclosed (a TLS close would end the
    parent's session) and makes its own."""
    with Client(server.http_url, shared_memory=False, http_engine=http_engine) as client:
        a = np.arange(16, dtype=np.float32).reshape(1, 16)
        client.infer("add_sub", {"INPUT0": a, "INPUT1": a})  # the parent's connection, kept
        parent_socket = _connection(client)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its answers must be its own
            code = 1
            try:
                for i in range(50):
                    b = np.full((1, 16), i, np.float32)
                    out = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})["OUTPUT0"]
                    assert (out == a + i).all()
                fresh = _connection(client) is not parent_socket
                client.close()  # closes the child's own handles, never the parent's
                if http_engine == "pycurl":  # a closed pycurl handle raises on getinfo()
                    parent_socket.getinfo(pycurl.RESPONSE_CODE)  # type: ignore[attr-defined]
                code = 0 if fresh else 2
            finally:
                os.write(write, bytes([code]))
                os._exit(0)
        os.close(write)
        for i in range(50):  # the parent meanwhile, on its own connection
            b = np.full((1, 16), -i, np.float32)
            out = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})["OUTPUT0"]
            assert (out == a - i).all()
        os.waitpid(pid, 0)
        assert os.read(read, 1) == b"\0"
        os.close(read)
        assert _connection(client) is parent_socket  # kept alive throughout
        b = np.full((1, 16), 7, np.float32)  # and still answering after the child closed
        assert (client.infer("add_sub", {"INPUT0": a, "INPUT1": b})["OUTPUT0"] == a + 7).all()
