"""The sync HTTP engine of TLS, HTTP/2, compression, proxies and streams: libcurl through pycurl.

I/O only. Chosen by measurement (``benchmarks/engines.py``): the fastest complete sync engine
here (one handle per thread, keep-alive reuse, the GIL released during transfers); cleartext
HTTP/1.1 goes through :mod:`~nbinfer.transports.socket_engine`, faster still. It performs the
:class:`~nbinfer.protocol.calls.HttpCall` objects that
:class:`~nbinfer.protocol.http_binding.HttpBinding` yields through one small seam,
``request(method, path, body, headers) -> HttpReply``, and raises only :mod:`nbinfer.errors`.
Imports config, errors and the call objects; pycurl only when an engine is made.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from nbinfer.config import ClientConfig
from nbinfer.errors import RequestTimeoutError, TransportError, connect_error
from nbinfer.protocol.calls import HttpReply
from nbinfer.transports.http_common import FORKS, base_url, compress, default_headers

__all__ = ["CurlEngine"]

#: Handles a forked child found from before the fork: their connections are the parent's, and
#: closing one here would end them for the parent too (a TLS close), so they are never closed.
_PARENTS_HANDLES: list[Any] = []
#: The live engines, whose handles a forked child puts aside at once (before any collection
#: could close one).
_ENGINES: weakref.WeakSet[CurlEngine] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Put every live engine's handles aside, never closed; renew its lock.

    Runs in the child right after the fork, while it has one thread: a lock another thread
    held at the fork stays held, so none is taken here.
    """
    for engine in list(_ENGINES):
        engine._lock = threading.Lock()
        _PARENTS_HANDLES.extend(state.curl for state in engine._states)
        engine._states = weakref.WeakSet()
        engine._busy = set()  # the parent's transfers, not this process's


if hasattr(os, "register_at_fork"):  # after http_common's hook, which bumps FORKS
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _curl() -> Any:
    try:
        import pycurl
    except ImportError as exc:  # pragma: no cover - pycurl is a dependency
        raise TransportError(
            "the sync HTTP client needs pycurl: pip install pycurl (or use protocol='grpc')"
        ) from exc
    return pycurl


class CurlEngine:
    """Sync HTTP engine over libcurl: one keep-alive handle per thread, thread-safe.

    Args:
        url: The server base URL (``http://host:port`` or ``https://...``).
        config: Timeouts, TLS, auth, compression, HTTP/2.
    """

    def __init__(self, url: str, config: ClientConfig) -> None:
        if config.tls is not None:
            config.tls.files_only("the sync HTTP client (libcurl)")
        self._pycurl = _curl()
        self._base = base_url(url)
        self._config = config
        self._local = threading.local()
        #: Each thread's handle, held weakly through its state: a thread that ends drops its
        #: state, whose weak reference dies before the handle's own finalizer closes the handle
        #: (pycurl >= 7.49 closes it there with the GIL released, still reachable through a weak
        #: reference to the handle itself: ``close()`` then raced that close and crashed).
        self._states: weakref.WeakSet[_HandleState] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        #: Handles a thread is using now (options, ``perform()``): ``close()`` leaves them to
        #: their threads.
        self._busy: set[Any] = set()
        self._headers = default_headers(config)
        self._header_lines = [f"{k}: {v}" for k, v in self._headers.items()] + ["Expect:"]
        self._header_cache: dict[int, tuple[Mapping[str, str], list[str]]] = {}
        #: Bumped by abort_in_flight(); a transfer that began under an older value aborts.
        self._epoch = [0]
        _ENGINES.add(self)

    def abort_in_flight(self) -> None:
        """Abort the transfers in flight on every thread (after a KeyboardInterrupt).

        Each fails with a :class:`~nbinfer.errors.TransportError` at libcurl's next progress
        call (at once while data moves, within about a second while waiting); the handles stay
        usable and later requests are not affected.
        """
        self._epoch[0] += 1

    @property
    def url(self) -> str:
        """The base URL requests are sent under."""
        return self._base

    def _new_handle(self) -> Any:
        pc = self._pycurl
        c = pc.Curl()
        cfg = self._config
        c.setopt(pc.NOSIGNAL, 1)
        c.setopt(pc.TCP_NODELAY, 1)
        c.setopt(pc.BUFFERSIZE, 512 * 1024)
        if cfg.timeouts.connect is not None:
            c.setopt(pc.CONNECTTIMEOUT_MS, max(1, int(cfg.timeouts.connect * 1000)))
        if cfg.keepalive_seconds:
            c.setopt(pc.TCP_KEEPALIVE, 1)
            c.setopt(pc.TCP_KEEPIDLE, max(1, int(cfg.keepalive_seconds)))
            c.setopt(pc.TCP_KEEPINTVL, max(1, int(cfg.keepalive_seconds)))
        if cfg.http2:
            # TLS: negotiate h2 by ALPN (falls back to 1.1); cleartext: h2c by prior knowledge
            # (the Upgrade dance drops POST bodies on common servers).
            tls_url = self._base.startswith("https://")
            version = (
                pc.CURL_HTTP_VERSION_2TLS if tls_url else pc.CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
            )
            c.setopt(pc.HTTP_VERSION, version)
        else:
            c.setopt(pc.HTTP_VERSION, pc.CURL_HTTP_VERSION_1_1)
        if cfg.compression == "gzip":
            c.setopt(pc.ACCEPT_ENCODING, "gzip")
        tls = cfg.tls
        if tls is not None:
            if not tls.verify:
                c.setopt(pc.SSL_VERIFYPEER, 0)
                c.setopt(pc.SSL_VERIFYHOST, 0)
            if tls.ca_file:
                c.setopt(pc.CAINFO, tls.ca_file)
            if tls.cert_file:
                c.setopt(pc.SSLCERT, tls.cert_file)
            if tls.key_file:
                c.setopt(pc.SSLKEY, tls.key_file)
        # A Python progress callback (see _HandleState) is where the main thread runs a pending
        # SIGINT handler mid-transfer (libcurl's poll wakes on EINTR): the kernel's stop button
        # raises KeyboardInterrupt at once and aborts the transfer. It also aborts transfers
        # started before abort_in_flight() (within about a second: libcurl's idle call rate).
        c.setopt(pc.NOPROGRESS, 0)
        return c

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
            ConnectError: The server could not be reached (refused, DNS, TLS handshake).
            RequestTimeoutError: The connect or total timeout passed.
            TransportError: Any other transfer failure, or the engine is closed.
        """
        if method != "GET" and method != "POST":
            raise TransportError(f"unsupported HTTP method {method!r}")
        pc = self._pycurl
        if self._config.compression is not None or any(k in self._headers for k in headers):
            merged = {**self._headers, **headers}
            body = compress(body, merged, self._config)
            header_list = [f"{k}: {v}" for k, v in merged.items()] + ["Expect:"]
        else:
            header_list = self._header_list(headers)
        url = self._base + path
        state: _HandleState | None = getattr(self._local, "state", None)
        with self._lock:  # busy from here: close() leaves the handle to this thread
            if self._closed:
                raise TransportError("the client is closed")
            if state is not None and state.forks != FORKS[0]:  # a forked child: its own handle
                state = self._local.state = None  # the parent's, put aside at the fork
            if state is None:
                state = self._local.state = _HandleState(self._new_handle(), pc, self._epoch)
                self._states.add(state)
            state.started[0] = self._epoch[0]  # a close() after this aborts the transfer
            c = state.curl
            self._busy.add(c)
        try:
            if url != state.url:
                c.setopt(pc.URL, url)
                state.url = url
            if method == "GET":
                c.setopt(pc.HTTPGET, 1)
            else:
                c.setopt(pc.POSTFIELDS, body if body is not None else b"")
            if header_list is not state.header_list:
                c.setopt(pc.HTTPHEADER, header_list)
                state.header_list = header_list
            total = timeout if timeout is not None else self._config.timeouts.total
            timeout_ms = 0 if total is None else max(1, int(total * 1000))
            if timeout_ms != state.timeout_ms:
                c.setopt(pc.TIMEOUT_MS, timeout_ms)
                state.timeout_ms = timeout_ms
            c.perform()
            status = int(c.getinfo(pc.RESPONSE_CODE))
            return HttpReply(status, _parse_headers(state.header_lines), b"".join(state.chunks))
        except pc.error as exc:
            if self._closed:  # close() aborted it from another thread
                raise _closed_error(url) from exc
            raise _curl_error(exc, url, pc) from exc
        finally:
            state.chunks.clear()
            state.header_lines.clear()
            # Drop the (possibly large) request body reference held by the handle.
            if method == "POST" and body:
                c.setopt(pc.POSTFIELDS, b"")
            self._done(c)

    def _done(self, c: Any) -> None:
        """A transfer on ``c`` ended: a handle the engine's ``close()`` skipped is closed here."""
        with self._lock:
            self._busy.discard(c)
            closed = self._closed
        if closed:
            self._local.state = None
            c.close()

    def stream_request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> CurlStream:
        """Start a request whose body is read as it arrives (a server-sent event stream).

        Its own connection (closing the stream closes it, which the server sees as the
        client leaving). ``timeout`` bounds the whole stream (``None``: no limit).

        Raises:
            ConnectError: The server could not be reached.
            RequestTimeoutError: The connect timeout or ``timeout`` passed.
            TransportError: Any other transfer failure, or the engine is closed.
        """
        if self._closed:
            raise TransportError("the client is closed")
        pc = self._pycurl
        c = self._new_handle()
        c.setopt(pc.FORBID_REUSE, 1)
        c.setopt(pc.FRESH_CONNECT, 1)
        merged = {**self._headers, **headers}
        body = compress(body, merged, self._config)
        c.setopt(pc.HTTPHEADER, [f"{k}: {v}" for k, v in merged.items()] + ["Expect:"])
        c.setopt(pc.URL, self._base + path)
        if method == "POST":
            c.setopt(pc.POSTFIELDS, body if body is not None else b"")
        else:
            c.setopt(pc.HTTPGET, 1)
        c.setopt(pc.TIMEOUT_MS, 0 if timeout is None else max(1, int(timeout * 1000)))
        return CurlStream(c, pc, self._base + path, self._epoch, lambda: self._closed)

    def _header_list(self, headers: Mapping[str, str]) -> list[str]:
        """The curl header lines for per-call ``headers`` (cached for reused header dicts)."""
        if not headers:
            return self._header_lines
        cached = self._header_cache.get(id(headers))
        if cached is not None and cached[0] is headers:
            return cached[1]
        lines = self._header_lines + [f"{k}: {v}" for k, v in headers.items()]
        if len(self._header_cache) >= 256:
            self._header_cache.clear()
        # keeps ``headers`` alive, so its id stays its own while cached
        self._header_cache[id(headers)] = (headers, lines)
        return lines

    def close(self) -> None:
        """Close every handle (idempotent); calls and streams in flight elsewhere are cancelled.

        Each such call raises a :class:`~nbinfer.errors.TransportError` ("the client was
        closed") on its own thread, which then closes its handle.
        """
        with self._lock:
            self._closed = True
            idle = [s.curl for s in self._states if s.curl not in self._busy]
            self._states = weakref.WeakSet()
            self._epoch[0] += 1  # transfers and streams in flight: their progress calls abort
        for c in idle:
            c.close()


class CurlStream:
    """A response read as it arrives: ``status`` / ``headers`` once known, then ``chunks()``.

    Driven by a ``CurlMulti`` in the caller's thread, waking at least every 0.1 s, so a
    KeyboardInterrupt (the notebook's stop button) is raised promptly; the generator's
    ``finally`` closes the connection. Close it when done (``close`` is idempotent).
    """

    _WAIT = 0.1

    def __init__(
        self, curl: Any, pc: Any, url: str, epoch: list[int], closed: Callable[[], bool]
    ) -> None:
        self._curl = curl
        self._pc = pc
        self.url = url
        self._engine_closed = closed
        self._pending: list[bytes] = []
        self._header_lines: list[bytes] = []
        curl.setopt(pc.WRITEFUNCTION, self._pending.append)
        curl.setopt(pc.HEADERFUNCTION, self._header_lines.append)
        started = epoch[0]
        curl.setopt(pc.XFERINFOFUNCTION, lambda *_: epoch[0] != started)
        self._multi = pc.CurlMulti()
        self._multi.add_handle(curl)
        self._done = False
        self._closed = False
        self.status = 0
        self.headers: dict[str, str] = {}

    def _step(self) -> None:
        """Advance: return once body bytes arrived, the head completed, or the transfer ended."""
        pc, multi = self._pc, self._multi
        while True:
            while True:
                ret, running = multi.perform()
                if ret != pc.E_CALL_MULTI_PERFORM:
                    break
            if not running:  # the transfer ended: how?
                self._done = True
                _, _, failed = multi.info_read()
                if failed:
                    _handle, code, message = failed[0]
                    if self._engine_closed():  # close() aborted it from another thread
                        raise _closed_error(self.url)
                    raise _curl_error(pc.error(code, message), self.url, pc)
            if not self.status and (self._headers_done() or self._done):
                self.status = int(self._curl.getinfo(pc.RESPONSE_CODE))
                self.headers = _parse_headers(self._header_lines)
                return
            if self._pending or self._done:
                return
            multi.select(self._WAIT)

    def _headers_done(self) -> bool:
        lines = self._header_lines
        return bool(lines) and lines[-1] in (b"\r\n", b"\n")

    def start(self) -> None:
        """Wait for the response head (``status`` and ``headers``)."""
        while not self.status and not self._done:
            self._step()

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they arrive (the stream is closed when this ends or is closed)."""
        try:
            self.start()
            while True:
                if self._pending:
                    got = b"".join(self._pending)
                    self._pending.clear()
                    yield got
                    continue
                if self._done:
                    return
                self._step()
        finally:
            self.close()

    def close(self) -> None:
        """Close the connection (idempotent): the server sees the client leave."""
        if self._closed:
            return
        self._closed = True
        self._multi.remove_handle(self._curl)
        self._curl.close()
        self._multi.close()


class _HandleState:
    """One thread's curl handle, its reply sinks and the options last set on it."""

    __slots__ = (
        "__weakref__",
        "chunks",
        "curl",
        "forks",
        "header_lines",
        "header_list",
        "started",
        "timeout_ms",
        "url",
    )

    def __init__(self, curl: Any, pc: Any, epoch: list[int]) -> None:
        self.curl = curl
        #: ``FORKS`` when it was made (a forked child leaves its parent's handles alone).
        self.forks = FORKS[0]
        self.chunks: list[bytes] = []
        self.header_lines: list[bytes] = []
        curl.setopt(pc.WRITEFUNCTION, self.chunks.append)
        curl.setopt(pc.HEADERFUNCTION, self.header_lines.append)
        #: The engine's epoch when this handle's current transfer began.
        self.started = started = [epoch[0]]

        def progress(*_: int) -> bool:  # the lists only: no cycle through the handle
            return started[0] != epoch[0]

        curl.setopt(pc.XFERINFOFUNCTION, progress)
        self.url = ""
        self.header_list: list[str] | None = None
        self.timeout_ms = -1


def _parse_headers(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw in lines:
        if raw.startswith(b"HTTP/"):
            headers = {}  # a new response (after 100-continue or a redirect)
            continue
        name, sep, value = raw.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return headers


def _closed_error(url: str) -> TransportError:
    """A transfer the engine's ``close()`` aborted from another thread."""
    return TransportError(f"request to {url} cancelled: the client was closed", url=url)


def _curl_error(exc: Any, url: str, pc: Any) -> TransportError:
    code = exc.args[0] if exc.args else -1
    msg = exc.args[1] if len(exc.args) > 1 else str(exc)
    if code == pc.E_OPERATION_TIMEDOUT:
        return RequestTimeoutError(f"request to {url} timed out: {msg}", url=url)
    if code == pc.E_ABORTED_BY_CALLBACK:
        return TransportError(f"request to {url} was aborted (interrupted): {msg}", url=url)
    if code in (
        pc.E_COULDNT_CONNECT,
        pc.E_COULDNT_RESOLVE_HOST,
        pc.E_COULDNT_RESOLVE_PROXY,
        pc.E_SSL_CONNECT_ERROR,
        getattr(pc, "E_PEER_FAILED_VERIFICATION", 60),
        getattr(pc, "E_SSL_CACERT", 60),
    ):
        return connect_error(url, msg)
    return TransportError(f"HTTP request to {url} failed: {msg}", url=url)


# ---------------------------------------------------------------------------------------------
# aiohttp (asyncio)
