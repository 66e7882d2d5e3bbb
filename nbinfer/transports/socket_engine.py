"""The sync HTTP engine for cleartext HTTP/1.1: a keep-alive socket per thread, llhttp's parser.

Chosen by measurement (``benchmarks/engines.py``): against the embedded server, one small
``add_sub`` request costs this engine about 27 us of client CPU, libcurl through pycurl about
60 us (its multi-state machine, poll calls and progress callbacks) and the standard library's
``http.client`` about 110 us. So plain ``http://`` URLs use it; TLS, HTTP/2, compression, a
proxy from the environment and streamed responses (``stream_request``, for generate streams)
stay with :class:`~nbinfer.transports.curl_engine.CurlEngine`, which this engine holds for them.

What it does: writes the request head itself (a request line and header lines) and parses the
response with ``httptools`` (the llhttp parser, which the server already uses): status, headers,
``Content-Length`` or chunked bodies, keep-alive. Like libcurl it checks an idle connection
before reusing it, and resends once on a new connection when a reused one turns out dead before
any byte of the answer arrived. Blocking calls wait in the kernel, where a SIGINT reaches them
at once (the notebook's stop button raises ``KeyboardInterrupt`` and the connection is closed,
which the server sees); :meth:`SocketEngine.abort_in_flight` and :meth:`SocketEngine.close` shut
the connections of other threads down under their calls. Raises only :mod:`nbinfer.errors`.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from nbinfer.config import ClientConfig
from nbinfer.errors import InvalidInputError, RequestTimeoutError, TransportError, connect_error
from nbinfer.protocol.calls import HttpReply
from nbinfer.transports.http_common import FORKS, base_url, default_headers

__all__ = ["SocketEngine", "socket_engine_fits"]

#: Bodies up to this size are sent in one write with the head (a copy, but one syscall).
_JOIN_BELOW = 64 * 1024
#: Bytes read per ``recv_into``.
_READ = 256 * 1024
#: A kept-alive socket answered on within this many seconds is used without a liveness poll.
_FRESH_S = 1.0
#: Environment variables through which libcurl (the other engine) would use a proxy.
_PROXY_VARIABLES = ("http_proxy", "all_proxy", "ALL_PROXY", "HTTP_PROXY")


def socket_engine_fits(url: str, config: ClientConfig) -> bool:
    """Whether :class:`SocketEngine` serves ``url`` with ``config`` exactly as libcurl would.

    Cleartext HTTP/1.1 without compression and without a proxy in the environment.
    """
    return (
        base_url(url).startswith("http://")
        and not config.http2
        and config.compression is None
        and not any(os.environ.get(name) for name in _PROXY_VARIABLES)
    )


class _Answer:
    """What httptools reports about one response (its callbacks)."""

    __slots__ = ("body", "complete", "head_done", "headers")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Ready for the next answer on the connection."""
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.head_done = False
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1").strip()

    def on_headers_complete(self) -> None:
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _Connection:
    """One thread's keep-alive connection: its socket, read buffer and response parser."""

    __slots__ = (
        "__weakref__",
        "answer",
        "buffer",
        "busy",
        "forks",
        "idle_since",
        "limit",
        "parser",
        "poll",
        "sock",
        "started",
        "used",
        "view",
    )

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.forks = -1  # FORKS when it connected (a forked child connects anew)
        self.idle_since = 0.0  # monotonic time of the last answer
        self.poll: Any = None
        self.parser: Any = None
        self.answer = _Answer()
        self.limit: float | None = None  # the kernel's send / receive timeouts now set
        self.used = 0  # requests answered on the current socket
        self.busy = False
        self.started = 0  # the engine's epoch when the current request began
        self.buffer = bytearray(_READ)
        self.view = memoryview(self.buffer)

    def __del__(self) -> None:  # a thread that ended: its connection goes with it
        self.drop()

    def drop(self) -> None:
        """Close the socket (the next request connects anew)."""
        sock, self.sock, self.poll, self.parser, self.used = self.sock, None, None, None, 0
        if sock is not None:
            sock.close()

    def stale(self, now: float) -> bool:
        """Whether the kept-alive socket must not be used.

        It is a forked child's copy, or one the server closed (readable while idle: its FIN, or
        junk). A socket answered on in the last second is not polled: servers keep idle connections
        open for seconds (uvicorn 5 s, Triton longer), and a close racing the request is
        caught anyway (sent again on a new connection).
        """
        if self.forks != FORKS[0]:
            return True
        return now - self.idle_since >= _FRESH_S and bool(self.poll.poll(0))

    def time_limit(self, seconds: float | None) -> None:
        """Bound each send and receive by ``seconds`` (``None``: no bound) in the kernel.

        The socket stays blocking: a wait is one syscall (no poll before it), a SIGINT ends it
        with ``EINTR`` and a passed limit with ``EAGAIN`` (``BlockingIOError``).
        """
        if seconds == self.limit:
            return
        sock = self.sock
        assert sock is not None
        micros = 0 if seconds is None else max(1, int(seconds * 1e6))
        value = struct.pack("ll", micros // 1_000_000, micros % 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
        self.limit = seconds


class _Dead(Exception):
    """A reused connection died before any byte of the answer arrived (safe to resend)."""


class SocketEngine:
    """Sync HTTP/1.1 engine over plain sockets: one keep-alive connection per thread.

    Thread-safe. Only for cleartext URLs (see :func:`socket_engine_fits`); streamed responses
    go through the :class:`~nbinfer.transports.curl_engine.CurlEngine` it holds.

    Args:
        url: The server base URL (``http://host:port[/prefix]``).
        config: Timeouts, auth and headers, keepalive.
    """

    def __init__(self, url: str, config: ClientConfig) -> None:
        import httptools

        self._parser = httptools.HttpResponseParser
        self._parse_error = httptools.HttpParserError
        self._base = base_url(url)
        parts = urlsplit(self._base)
        if parts.hostname is None:
            raise TransportError(f"no host in {url!r}", url=url)
        self._address = (parts.hostname, parts.port or 80)
        self._prefix = parts.path  # ends with "/"
        self._config = config
        self._host_line = f"host: {parts.netloc}\r\n"
        self._defaults = default_headers(config)
        self._heads: dict[tuple[str, str, int], tuple[Mapping[str, str], bytes]] = {}
        self._local = threading.local()
        self._connections: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        #: Bumped by abort_in_flight() / close(); a request that began under an older value
        #: and finds its connection shut down reports itself aborted.
        self._epoch = 0
        self._curl: Any = None

    @property
    def url(self) -> str:
        """The base URL requests are sent under."""
        return self._base

    # -- requests --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        """Perform one request; ``path`` is relative to the base URL.

        Raises:
            ConnectError: The server could not be reached.
            RequestTimeoutError: The connect or total timeout passed.
            TransportError: Any other failure (a malformed answer, the connection lost), the
                call was aborted, or the engine is closed.
        """
        if method != "GET" and method != "POST":
            raise TransportError(f"unsupported HTTP method {method!r}")
        data = self._head(method, path, headers, body)
        conn: _Connection | None = getattr(self._local, "conn", None)
        with self._lock:
            if self._closed:
                raise TransportError("the client is closed")
            if conn is None:
                conn = self._local.conn = _Connection()
                self._connections.add(conn)
            conn.busy = True
            conn.started = self._epoch
        total = timeout if timeout is not None else self._config.timeouts.total
        now = time.monotonic()
        deadline = None if total is None else now + total
        try:
            try:
                return self._exchange(conn, data, body, total, deadline, now)
            except _Dead:  # a kept-alive connection the server had closed: once more, anew
                conn.drop()
                return self._exchange(conn, data, body, _remaining(deadline), deadline, now)
        except _Dead as exc:  # the new connection too
            conn.drop()
            raise self._failure(conn, path, exc.__cause__ or exc) from exc.__cause__
        except (OSError, self._parse_error) as exc:
            conn.drop()
            raise self._failure(conn, path, exc) from exc
        except BaseException:  # an interrupt mid-call: the server sees the connection go
            conn.drop()
            raise
        finally:
            conn.busy = False
            if self._closed:
                conn.drop()

    def _head(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        """The request head (cached per route and per reused header dict).

        A per-call header replaces a default one of the same name (``authorization``, say).
        """
        key = (method, path, id(headers))
        cached = self._heads.get(key)
        if cached is None or cached[0] is not headers:
            merged = {**self._defaults, **{k.lower(): v for k, v in headers.items()}}
            lines = [f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._host_line}"]
            for name, value in merged.items():
                line = f"{name}: {value}"
                if "\r" in line or "\n" in line or not line.isascii():
                    raise InvalidInputError(
                        f"header {name!r}: names and values must be ASCII on one line"
                    )
                lines.append(line + "\r\n")
            if len(self._heads) >= 256:
                self._heads.clear()
            # keeps ``headers`` alive, so its id stays its own while cached
            cached = self._heads[key] = (headers, "".join(lines).encode("ascii"))
        if method == "GET":
            return cached[1] + b"\r\n"
        return cached[1] + b"content-length: %d\r\n\r\n" % (len(body) if body else 0)

    def _exchange(
        self,
        conn: _Connection,
        head: bytes,
        body: bytes | None,
        limit: float | None,
        deadline: float | None,
        now: float,
    ) -> HttpReply:
        """Send the request on ``conn`` (connecting when needed) and read the answer.

        ``limit``: the seconds the call has (each send and receive is bounded by it; a long
        answer's later reads by what is left before ``deadline``).
        """
        reused = conn.sock is not None and conn.used > 0
        if conn.sock is not None and conn.stale(now):
            conn.drop()  # closed by the server, or the parent process's (this fd copy only)
            reused = False
        if conn.sock is None:
            self._connect(conn, deadline)
            limit = _remaining(deadline)  # what connecting left
        sock = conn.sock
        assert sock is not None
        conn.time_limit(limit)
        try:
            if body and len(body) > _JOIN_BELOW:
                sock.sendall(head)
                sock.sendall(body)
                if deadline is not None:  # the answer gets what sending left
                    conn.time_limit(_remaining(deadline))
            else:
                sock.sendall(head + body if body else head)
        except (BrokenPipeError, ConnectionResetError):
            # the server may have answered early (a body over its limit) and closed: read it
            return self._read(conn, sock, deadline, reused)
        return self._read(conn, sock, deadline, reused)

    def _read(
        self, conn: _Connection, sock: socket.socket, deadline: float | None, reused: bool
    ) -> HttpReply:
        """Read and parse one answer from ``sock`` (interim 1xx answers skipped).

        Raises:
            _Dead: ``reused`` and the connection ended before any byte (resend on a new one).
        """
        answer = conn.answer
        answer.reset()
        parser = conn.parser
        view = conn.view
        got = 0
        while not answer.complete:
            if got and deadline is not None:  # a long answer: each read gets what is left
                conn.time_limit(_remaining(deadline))
            try:
                n = sock.recv_into(conn.buffer)
            except ConnectionResetError as exc:
                if not got and reused and self._resendable(conn):
                    raise _Dead from exc
                raise
            if not n:
                if answer.head_done and _until_close(answer.headers):
                    break  # a body delimited by the end of the connection
                if not got and reused and self._resendable(conn):
                    raise _Dead from ConnectionResetError("the server closed the connection")
                raise ConnectionResetError("the server closed the connection before answering")
            got += n
            parser.feed_data(view[:n])
            if answer.complete and 100 <= parser.get_status_code() < 200:
                answer.reset()  # an interim answer: the final one follows
        status = parser.get_status_code()
        if answer.complete and _keeps_alive(parser.get_http_version(), answer.headers):
            conn.used += 1
            conn.idle_since = time.monotonic()
        else:
            conn.drop()
        parts = answer.body
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        return HttpReply(status, answer.headers, data)

    def _resendable(self, conn: _Connection) -> bool:
        """Neither aborted nor closed since ``conn``'s request began."""
        return conn.started == self._epoch and not self._closed

    def _connect(self, conn: _Connection, deadline: float | None) -> None:
        cfg = self._config
        limit = cfg.timeouts.connect
        remaining = _remaining(deadline)
        if remaining is not None and (limit is None or remaining < limit):
            limit = remaining
        try:
            sock = socket.create_connection(self._address, timeout=limit)
        except TimeoutError:
            raise
        except OSError as exc:
            raise connect_error(self._base, exc.strerror or exc) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if cfg.keepalive_seconds:
            interval = max(1, int(cfg.keepalive_seconds))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if hasattr(socket, "TCP_KEEPIDLE"):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, interval)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
        sock.settimeout(None)  # blocking: the kernel's timeouts bound each wait (time_limit)
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        conn.sock, conn.poll, conn.used, conn.limit = sock, poll, 0, None
        conn.forks = FORKS[0]
        conn.parser = self._parser(conn.answer)
        with self._lock:
            closed = self._closed
        if closed:  # close() ran while this connected: leave nothing open behind it
            conn.drop()
            raise TransportError("the client is closed")

    def _failure(self, conn: _Connection, path: str, exc: BaseException) -> TransportError:
        """The error for a request that failed with ``exc`` (in the words of the curl engine)."""
        url = self._base + path
        if self._closed:
            return TransportError(f"request to {url} cancelled: the client was closed", url=url)
        if conn.started != self._epoch:
            return TransportError(f"request to {url} was aborted (interrupted)", url=url)
        if isinstance(exc, (TimeoutError, BlockingIOError)):  # EAGAIN: a kernel timeout passed
            return RequestTimeoutError(f"request to {url} timed out", url=url)
        if isinstance(exc, self._parse_error):
            return TransportError(f"HTTP request to {url} failed: malformed answer: {exc}", url=url)
        return TransportError(f"HTTP request to {url} failed: {exc}", url=url)

    # -- streams: the curl engine's --------------------------------------------------------

    def _curl_engine(self) -> Any:
        if self._curl is None:
            from nbinfer.transports.curl_engine import CurlEngine

            with self._lock:
                if self._closed:
                    raise TransportError("the client is closed")
                if self._curl is None:
                    self._curl = CurlEngine(self._base, self._config)
        return self._curl

    def stream_request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> Any:
        """A response read as it arrives (see :meth:`CurlEngine.stream_request`)."""
        return self._curl_engine().stream_request(method, path, body, headers, timeout=timeout)

    # -- lifecycle -------------------------------------------------------------------------

    def _shut(self, busy_only: bool) -> list[_Connection]:
        """Shut down the sockets of calls in flight (their recv returns); the idle ones."""
        idle = []
        for conn in list(self._connections):
            sock = conn.sock
            if sock is None:
                continue
            if conn.busy:
                with contextlib.suppress(OSError):  # not connected (yet / any more)
                    sock.shutdown(socket.SHUT_RDWR)
            elif not busy_only:
                idle.append(conn)
        return idle

    def abort_in_flight(self) -> None:
        """Abort the requests in flight on every thread (after a KeyboardInterrupt).

        Each fails at once with a :class:`~nbinfer.errors.TransportError` (its connection is
        shut down, which the server sees); later requests connect anew.
        """
        with self._lock:
            self._epoch += 1
            self._shut(busy_only=True)
        if self._curl is not None:
            self._curl.abort_in_flight()

    def close(self) -> None:
        """Close every connection (idempotent); calls in flight elsewhere are cancelled."""
        with self._lock:
            self._closed = True
            self._epoch += 1
            idle = self._shut(busy_only=False)
            curl = self._curl
        for conn in idle:
            conn.drop()
        if curl is not None:
            curl.close()


def _remaining(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (raising once it passed)."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the call's deadline passed")
    return left


def _until_close(headers: Mapping[str, str]) -> bool:
    """An answer whose body ends when the connection does (no length, not chunked)."""
    return "content-length" not in headers and "transfer-encoding" not in headers


def _keeps_alive(version: str, headers: Mapping[str, str]) -> bool:
    """Whether the connection stays open after this answer (RFC 9112, 9.3)."""
    connection = headers.get("connection", "").lower()
    if version == "1.1":
        return "close" not in connection
    return "keep-alive" in connection
