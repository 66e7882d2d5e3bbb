"""v2 REST over HTTP: the route binding (no I/O) and two engines (pycurl sync, aiohttp async).

The engines were chosen by measurement (``benchmarks/client.py``): libcurl through pycurl is the
fastest sync engine here (one handle per thread, keep-alive reuse, the GIL released during
transfers) and aiohttp the fastest asyncio one. Both expose the same small seam,
``request(method, path, body, headers) -> HttpReply``, and raise only :mod:`nbinfer.errors`.

Wire encoding and decoding (bodies, the lazy response reader) are :mod:`nbinfer.protocol.rest`'s;
the binding here only maps API calls onto routes. Imports the protocol layer, errors and config;
never the client, session or server (pycurl and aiohttp only inside the engines).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
import ssl
import threading
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson

from nbinfer.config import ClientConfig
from nbinfer.errors import (
    ConnectError,
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    ServerError,
    TimeoutError,
    TransportError,
    error_for_status,
)
from nbinfer.protocol import rest, v1
from nbinfer.protocol.dtypes import datatype_of
from nbinfer.protocol.types import (
    InferInput,
    InferRequest,
    ModelMetadata,
    RepositoryModel,
    RequestedOutput,
)
from nbinfer.protocol.types import ServerMetadata as ServerMetadataT
from nbinfer.transports import CallOptions, HttpCall, HttpReply, Op
from nbinfer.transports.loops import PerLoop

__all__ = ["AiohttpEngine", "CurlEngine", "HttpBinding", "base_url"]

logger = logging.getLogger("nbinfer")

_JSON = "application/json"
_OCTET = "application/octet-stream"
_HEADER_LENGTH = "inference-header-content-length"


def base_url(url: str) -> str:
    """Normalise a client URL into ``scheme://host:port/prefix/`` (a bare host:port -> http)."""
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/") + "/"


def _default_headers(config: ClientConfig) -> dict[str, str]:
    headers = {"user-agent": config.user_agent}
    if config.auth is not None:
        headers.update(config.auth.headers())
    headers.update({k.lower(): v for k, v in config.headers.items()})
    return headers


def _compress(body: bytes | None, headers: dict[str, str], config: ClientConfig) -> bytes | None:
    if body and config.compression == "gzip":
        headers["content-encoding"] = "gzip"
        return gzip.compress(body, compresslevel=1)
    return body


# ---------------------------------------------------------------------------------------------
# pycurl (sync)


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
        self._pycurl = _curl()
        self._base = base_url(url)
        self._config = config
        self._local = threading.local()
        self._handles: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        self._headers = _default_headers(config)
        self._header_lines = [f"{k}: {v}" for k, v in self._headers.items()] + ["Expect:"]
        self._header_cache: dict[int, tuple[Mapping[str, str], list[str]]] = {}
        #: Bumped by abort_in_flight(); a transfer that began under an older value aborts.
        self._epoch = [0]

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
        with self._lock:
            self._handles.add(c)
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
            TimeoutError: The connect or total timeout passed.
            TransportError: Any other transfer failure, or the engine is closed.
        """
        if self._closed:
            raise TransportError("the client is closed")
        pc = self._pycurl
        state: _HandleState | None = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = _HandleState(self._new_handle(), pc, self._epoch)
        state.started[0] = self._epoch[0]
        c = state.curl
        if self._config.compression is not None or any(k in self._headers for k in headers):
            merged = {**self._headers, **headers}
            body = _compress(body, merged, self._config)
            header_list = [f"{k}: {v}" for k, v in merged.items()] + ["Expect:"]
        else:
            header_list = self._header_list(headers)
        url = self._base + path
        if url != state.url:
            c.setopt(pc.URL, url)
            state.url = url
        if method == "GET":
            c.setopt(pc.HTTPGET, 1)
        elif method == "POST":
            c.setopt(pc.POSTFIELDS, body if body is not None else b"")
        else:
            raise TransportError(f"unsupported HTTP method {method!r}")
        if header_list is not state.header_list:
            c.setopt(pc.HTTPHEADER, header_list)
            state.header_list = header_list
        total = timeout if timeout is not None else self._config.timeouts.total
        timeout_ms = 0 if total is None else max(1, int(total * 1000))
        if timeout_ms != state.timeout_ms:
            c.setopt(pc.TIMEOUT_MS, timeout_ms)
            state.timeout_ms = timeout_ms
        chunks, header_lines = state.chunks, state.header_lines
        try:
            c.perform()
            status = int(c.getinfo(pc.RESPONSE_CODE))
            return HttpReply(status, _parse_headers(header_lines), b"".join(chunks))
        except pc.error as exc:
            raise _curl_error(exc, url, pc) from exc
        finally:
            chunks.clear()
            header_lines.clear()
            # Drop the (possibly large) request body reference held by the handle.
            if method == "POST" and body:
                c.setopt(pc.POSTFIELDS, b"")

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
        """Close every handle (idempotent). Do not close while calls are in flight."""
        with self._lock:
            self._closed = True
            handles = list(self._handles)
            self._handles = weakref.WeakSet()
        for c in handles:
            c.close()


class _HandleState:
    """One thread's curl handle, its reply sinks and the options last set on it."""

    __slots__ = ("chunks", "curl", "header_lines", "header_list", "started", "timeout_ms", "url")

    def __init__(self, curl: Any, pc: Any, epoch: list[int]) -> None:
        self.curl = curl
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


def _curl_error(exc: Any, url: str, pc: Any) -> TransportError:
    code = exc.args[0] if exc.args else -1
    msg = exc.args[1] if len(exc.args) > 1 else str(exc)
    if code == pc.E_OPERATION_TIMEDOUT:
        return TimeoutError(f"request to {url} timed out: {msg}", url=url)
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
        return ConnectError(f"cannot connect to {url}: {msg}", url=url)
    return TransportError(f"HTTP request to {url} failed: {msg}", url=url)


# ---------------------------------------------------------------------------------------------
# aiohttp (asyncio)


def _ssl_context(config: ClientConfig) -> ssl.SSLContext | bool:
    tls = config.tls
    if tls is None:
        return True
    if not tls.verify:
        return False
    ctx = ssl.create_default_context(cafile=tls.ca_file)
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    return ctx


class AiohttpEngine:
    """Asyncio HTTP engine over aiohttp: one ``ClientSession`` per event loop, made on first use.

    Each loop's session is closed in that loop when the loop shuts down (``asyncio.run``
    returning) or when the engine is closed (see :class:`~nbinfer.transports.loops.PerLoop`), so
    one client serves successive and concurrent loops without leaving connections open.

    Args:
        url: The server base URL.
        config: Timeouts, TLS, auth, compression.
    """

    def __init__(self, url: str, config: ClientConfig) -> None:
        self._base = base_url(url)
        self._config = config
        self._sessions: PerLoop[Any] = PerLoop(_close_session)
        self._headers = _default_headers(config)
        self._closed = False

    @property
    def url(self) -> str:
        """The base URL requests are sent under."""
        return self._base

    def _new_session(self) -> Any:
        import aiohttp

        cfg = self._config
        connector = aiohttp.TCPConnector(
            limit=0,
            ssl=_ssl_context(cfg),
            keepalive_timeout=cfg.keepalive_seconds or 15.0,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(
                total=cfg.timeouts.total, sock_connect=cfg.timeouts.connect
            ),
            auto_decompress=True,
        )
        return self._sessions.add(session)

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        """Perform one request; same contract as :meth:`CurlEngine.request`."""
        import aiohttp

        if self._closed:
            raise TransportError("the client is closed")
        session = self._sessions.get()
        if session is None or session.closed:
            session = self._new_session()
        url = self._base + path
        if self._config.compression is not None:
            all_headers = dict(headers)
            body = _compress(body, all_headers, self._config)
            if self._config.compression == "gzip":
                all_headers["accept-encoding"] = "gzip"
            headers = all_headers
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs["timeout"] = aiohttp.ClientTimeout(
                total=timeout, sock_connect=self._config.timeouts.connect
            )
        try:
            async with session.request(method, url, data=body, headers=headers, **kwargs) as resp:
                data = await resp.read()
                return HttpReply(resp.status, {k.lower(): v for k, v in resp.headers.items()}, data)
        except aiohttp.ClientConnectorError as exc:
            raise ConnectError(f"cannot connect to {url}: {exc}", url=url) from exc
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise TimeoutError(f"request to {url} timed out", url=url) from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"HTTP request to {url} failed: {exc}", url=url) from exc

    async def aclose(self) -> None:
        """Close the sessions (idempotent): this loop's now, other running loops' in their loop."""
        self._closed = True
        await self._sessions.aclose()


async def _close_session(session: Any) -> None:
    await session.close()


#: Request templates kept per binding (one per model / input signature).
_TEMPLATES = 256


# ---------------------------------------------------------------------------------------------
# The v2 REST binding (no I/O)


def _model_path(name: str, version: str = "") -> str:
    if not name:
        raise InvalidInputError("a model name is required")
    path = "v2/models/" + quote(name, safe="")
    if version:
        path += "/versions/" + quote(str(version), safe="")
    return path


def _json_body(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def _error_message(reply: HttpReply) -> str:
    try:
        return rest.decode_error(reply.body)
    except Exception:
        text = reply.body[:2000].decode("utf-8", "replace").strip()
        return text or f"HTTP {reply.status}"


def check_reply(reply: HttpReply, request_id: str | None = None, **context: Any) -> HttpReply:
    """Raise the :mod:`nbinfer.errors` class for an error status (carrying the server message)."""
    if reply.status < 300:
        return reply
    raise error_for_status(reply.status, _error_message(reply), request_id=request_id, **context)


def _loads(reply: HttpReply) -> Any:
    if not reply.body:
        return {}
    try:
        return orjson.loads(reply.body)
    except orjson.JSONDecodeError as exc:
        raise TransportError(
            f"the server answered with invalid JSON (HTTP {reply.status}): {reply.body[:200]!r}"
        ) from exc


def _infer_reply(
    reply: HttpReply, request_id: str | None, model: str
) -> tuple[rest.ResponseReader, dict[str, str]]:
    """Check an ``infer`` reply and read it lazily; returns the reader and the reply headers."""
    check_reply(reply, request_id, model=model)
    raw_length = reply.headers.get(_HEADER_LENGTH)
    try:
        header_length = None if raw_length is None else int(raw_length)
    except ValueError as exc:
        raise InvalidInputError(
            f"the server sent an invalid {rest.HEADER_LENGTH} header: {raw_length!r:.40}"
        ) from exc
    return rest.ResponseReader(reply.body, header_length), reply.headers


class HttpBinding:
    """The v2 REST routes and bodies, as ops (generators of :class:`HttpCall`).

    Args:
        binary: Force binary tensor data on (``True``) or off (``False``); ``None`` uses it when
            the server lists the ``binary_tensor_data`` extension.
    """

    protocol = "http"

    def __init__(self, *, binary: bool | None = None) -> None:
        self.binary = binary
        self._extensions: list[str] | None = None
        self._templates: dict[Any, tuple[str, bytes, dict[str, str]]] = {}

    def fast_infer_call(
        self,
        key: tuple[Any, ...],
        arrays: list[Any],
        request_id: str,
        timeout: float | None,
        retry: bool,
        binary: bool | None = None,
    ) -> HttpCall | None:
        """The binary ``infer`` call for plain arrays, its JSON header cached per signature.

        Args:
            key: ``(model_name, model_version, output_names, *(name, dtype, shape))``; the
                arrays are native-endian numeric and C-contiguous, in the key's order.
            arrays: The input data.
            request_id: The request id ("" for none).
            timeout: Seconds allowed (None: the client's default).
            retry: Whether the call may be retried.
            binary: As for :meth:`infer`.

        Returns:
            The call, or None when the request needs the general path (JSON tensors, a request
            id, or the server's extensions are not known yet).
        """
        choice = binary if binary is not None else self.binary
        if choice is None:
            if self._extensions is None:
                return None
            choice = "binary_tensor_data" in self._extensions
        if not choice or request_id:
            return None
        template = self._templates.get(key)
        if template is None:
            try:
                request = InferRequest(
                    [
                        InferInput(name, datatype_of(dtype), list(shape), np.empty(shape, dtype))
                        for name, dtype, shape in key[3:]
                    ],
                    [RequestedOutput(name) for name in key[2]],
                    model_name=key[0],
                    model_version=key[1],
                )
                parts, header_length = rest.encode_request_parts(
                    request, binary=True, binary_outputs=True
                )
                path = _model_path(key[0], key[1]) + "/infer"
            except NbinferError:
                return None
            headers = {_HEADER_LENGTH: str(header_length), "content-type": _OCTET}
            template = (path, bytes(parts[0]), headers)
            if len(self._templates) >= _TEMPLATES:
                self._templates.clear()
            self._templates[key] = template
        path, head, headers = template
        body = b"".join([head, *arrays])
        return HttpCall("POST", path, body, headers, timeout, retry)

    @staticmethod
    def fast_infer_reply(
        model_name: str, reply: HttpReply
    ) -> tuple[rest.ResponseReader, dict[str, str]]:
        """Check and decode (lazily) the reply to a :meth:`fast_infer_call`."""
        return _infer_reply(reply, None, model_name)

    def _call(
        self, method: str, path: str, opts: CallOptions, body: Any = None, **kw: Any
    ) -> HttpCall:
        headers = dict(opts.headers)
        raw: bytes | None = None
        if body is not None:
            raw = body if isinstance(body, bytes) else _json_body(body)
            headers.setdefault("content-type", _JSON)
        return HttpCall(method, path, raw, headers, opts.timeout, request_id=opts.request_id, **kw)

    def _get_json(self, path: str, opts: CallOptions, **context: Any) -> Op[Any]:
        reply = yield self._call("GET", path, opts)
        return _loads(check_reply(reply, opts.request_id, **context))

    def _post_json(
        self, path: str, body: Any, opts: CallOptions, *, idempotent: bool = True, **context: Any
    ) -> Op[Any]:
        reply = yield self._call(
            "POST", path, opts, body if body is not None else {}, idempotent=idempotent
        )
        return _loads(check_reply(reply, opts.request_id, **context))

    def _health(self, path: str, opts: CallOptions) -> Op[bool]:
        reply = yield self._call("GET", path, opts, check=False)
        if reply.status == 404 and path.startswith("v2/models/"):
            raise error_for_status(404, _error_message(reply), request_id=opts.request_id)
        return bool(reply.status == 200)

    # -- health and metadata -------------------------------------------------------------

    def server_live(self, opts: CallOptions) -> Op[bool]:
        """``GET v2/health/live``."""
        return self._health("v2/health/live", opts)

    def server_ready(self, opts: CallOptions) -> Op[bool]:
        """``GET v2/health/ready``."""
        return self._health("v2/health/ready", opts)

    def model_ready(self, name: str, version: str, opts: CallOptions) -> Op[bool]:
        """``GET v2/models/{m}[/versions/{v}]/ready`` (unknown model -> ModelNotFoundError)."""
        return self._health(_model_path(name, version) + "/ready", opts)

    def server_metadata(self, opts: CallOptions) -> Op[ServerMetadataT]:
        """``GET v2``."""
        data = yield from self._get_json("v2", opts)
        meta = rest.server_metadata_from_json(data)
        self._extensions = list(meta.extensions)
        return meta

    def model_metadata(self, name: str, version: str, opts: CallOptions) -> Op[ModelMetadata]:
        """``GET v2/models/{m}[/versions/{v}]``."""
        data = yield from self._get_json(_model_path(name, version), opts, model=name)
        return rest.model_metadata_from_json(data)

    def model_config(self, name: str, version: str, opts: CallOptions) -> Op[dict[str, Any]]:
        """``GET v2/models/{m}[/versions/{v}]/config``."""
        data = yield from self._get_json(_model_path(name, version) + "/config", opts, model=name)
        return dict(data)

    # -- inference -----------------------------------------------------------------------

    def _use_binary(self, binary: bool | None, opts: CallOptions) -> Op[bool]:
        choice = binary if binary is not None else self.binary
        if choice is not None:
            return choice
        if self._extensions is None:
            try:
                yield from self.server_metadata(CallOptions(dict(opts.headers), opts.timeout))
            except ServerError as exc:
                logger.debug("server metadata unavailable, assuming binary tensors: %s", exc)
                self._extensions = ["binary_tensor_data"]
        return "binary_tensor_data" in (self._extensions or ())

    def infer(
        self,
        request: InferRequest,
        opts: CallOptions,
        *,
        binary: bool | None = None,
        retry: bool = False,
    ) -> Op[tuple[rest.ResponseReader, dict[str, str]]]:
        """``POST v2/models/{m}[/versions/{v}]/infer``; returns the response and reply headers."""
        use_binary = yield from self._use_binary(binary, opts)
        body, header_length = rest.encode_request(
            request, binary=use_binary, binary_outputs=use_binary
        )
        headers = dict(opts.headers)
        if header_length is not None:
            headers["inference-header-content-length"] = str(header_length)
            headers["content-type"] = _OCTET
        else:
            headers["content-type"] = _JSON
        call = HttpCall(
            "POST",
            _model_path(request.model_name, request.model_version) + "/infer",
            body,
            headers,
            opts.timeout,
            idempotent=retry,
            request_id=request.id or None,
        )
        reply = yield call
        return _infer_reply(reply, request.id or None, request.model_name)

    # -- model repository ----------------------------------------------------------------

    def repository_index(self, ready_only: bool, opts: CallOptions) -> Op[list[RepositoryModel]]:
        """``POST v2/repository/index``."""
        data = yield from self._post_json("v2/repository/index", {"ready": ready_only}, opts)
        return rest.repository_index_from_json(data)

    def load_model(
        self,
        name: str,
        config: str | None,
        files: Mapping[str, bytes] | None,
        opts: CallOptions,
    ) -> Op[None]:
        """``POST v2/repository/models/{m}/load`` with an optional config and file overrides."""
        params: dict[str, Any] = {}
        if config is not None:
            params["config"] = config
        for path, content in (files or {}).items():
            key = path if path.startswith("file:") else "file:" + path
            params[key] = base64.b64encode(content).decode("ascii")
        body = {"parameters": params} if params else {}
        path = "v2/repository/models/" + quote(name, safe="") + "/load"
        yield from self._post_json(path, body, opts, idempotent=False, model=name)
        return None

    def unload_model(self, name: str, unload_dependents: bool, opts: CallOptions) -> Op[None]:
        """``POST v2/repository/models/{m}/unload``."""
        body = {"parameters": {"unload_dependents": unload_dependents}}
        path = "v2/repository/models/" + quote(name, safe="") + "/unload"
        yield from self._post_json(path, body, opts, idempotent=False, model=name)
        return None

    def statistics(self, name: str, version: str, opts: CallOptions) -> Op[dict[str, Any]]:
        """``GET v2/models[/{m}[/versions/{v}]]/stats``."""
        path = (_model_path(name, version) if name else "v2/models") + "/stats"
        data = yield from self._get_json(path, opts, model=name)
        return dict(data)

    # -- trace / log settings ------------------------------------------------------------

    def trace_settings(
        self, name: str, settings: Mapping[str, Any] | None, opts: CallOptions
    ) -> Op[dict[str, Any]]:
        """``GET|POST v2[/models/{m}]/trace/setting``."""
        path = (_model_path(name) if name else "v2") + "/trace/setting"
        if settings is None:
            data = yield from self._get_json(path, opts)
        else:
            data = yield from self._post_json(path, dict(settings), opts, idempotent=False)
        return dict(data)

    def log_settings(
        self, settings: Mapping[str, Any] | None, opts: CallOptions
    ) -> Op[dict[str, Any]]:
        """``GET|POST v2/logging``."""
        if settings is None:
            data = yield from self._get_json("v2/logging", opts)
        else:
            data = yield from self._post_json("v2/logging", dict(settings), opts, idempotent=False)
        return dict(data)

    # -- shared memory -------------------------------------------------------------------

    def shm_status(self, kind: str, name: str, opts: CallOptions) -> Op[list[dict[str, Any]]]:
        """``GET v2/{system,cuda}sharedmemory[/region/{r}]/status``."""
        path = f"v2/{kind}sharedmemory" + (f"/region/{quote(name, safe='')}" if name else "")
        data = yield from self._get_json(path + "/status", opts)
        if isinstance(data, dict):
            data = [data] if data else []
        return [dict(row) for row in data]

    def shm_register(
        self, kind: str, name: str, body: Mapping[str, Any], opts: CallOptions
    ) -> Op[None]:
        """``POST v2/{system,cuda}sharedmemory/region/{r}/register``."""
        path = f"v2/{kind}sharedmemory/region/{quote(name, safe='')}/register"
        if "raw_handle" in body and isinstance(body["raw_handle"], (bytes, bytearray)):
            body = {**body, "raw_handle": {"b64": base64.b64encode(body["raw_handle"]).decode()}}
        yield from self._post_json(path, dict(body), opts, idempotent=False)
        return None

    def shm_unregister(self, kind: str, name: str, opts: CallOptions) -> Op[None]:
        """``POST v2/{system,cuda}sharedmemory[/region/{r}]/unregister``."""
        path = f"v2/{kind}sharedmemory" + (f"/region/{quote(name, safe='')}" if name else "")
        yield from self._post_json(path + "/unregister", {}, opts, idempotent=False)
        return None

    # -- KServe v1 -------------------------------------------------------------------------

    def model_list(self, opts: CallOptions) -> Op[list[str]]:
        """KServe's model list: ``GET v2/models``, else ``GET v1/models`` (names only).

        Raises:
            ModelNotFoundError: Neither route exists (not a KServe server).
        """
        reply = yield self._call("GET", "v2/models", opts)
        if reply.status == 404:
            reply = yield self._call("GET", "v1/models", opts)
        data = _loads(check_reply(reply, opts.request_id))
        listed = data.get("models", []) if isinstance(data, dict) else []
        return [str(m.get("name", "")) if isinstance(m, dict) else str(m) for m in listed]

    def v1_call(self, name: str, verb: str, instances: Any, opts: CallOptions) -> Op[Any]:
        """``POST v1/models/{m}:predict`` / ``:explain``; returns the ``predictions``."""
        if not name:
            raise InvalidInputError("a model name is required")
        path = "v1/models/" + quote(name, safe="") + ":" + verb
        call = self._call("POST", path, opts, v1.encode_v1_request(instances), idempotent=False)
        reply = yield call
        if reply.status == 404:
            raise ModelNotFoundError(_error_message(reply), status=404, model=name)
        check_reply(reply, opts.request_id, model=name)
        if verb == "explain":
            return v1.decode_v1_explanation(reply.body)
        return v1.decode_v1_response(reply.body)
