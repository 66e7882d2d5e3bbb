"""v2 REST over httpx: the engines for people who bring their own ``httpx`` client.

KServe's Python SDK (``InferenceRESTClient`` + ``RESTConfig``) is built on httpx, so its users
configure transports, auth flows, proxies, event hooks and TLS as httpx objects. These engines
let them keep those: :class:`HttpxEngine` (sync, over ``httpx.Client``) and
:class:`AsyncHttpxEngine` (asyncio, over ``httpx.AsyncClient``) satisfy the same seam as
:class:`~nbinfer.transports.curl_engine.CurlEngine` /
:class:`~nbinfer.transports.aiohttp_engine.AiohttpEngine` (``request(method, path, body,
headers) -> HttpReply``, only :mod:`nbinfer.errors` raised), and :class:`HttpxTransport` builds
them for ``Client(http_engine="httpx", httpx_client=...)``.

Ownership: a client the user passes in is used as given (its transport, auth, headers, proxies,
``verify``, event hooks) and never closed here: its owner closes it. A client an engine creates
itself is configured from :class:`~nbinfer.config.ClientConfig` and closed by ``close()`` /
``aclose()`` (the asyncio engine keeps one per event loop, see
:class:`~nbinfer.transports.loops.PerLoop`). Either way nbinfer's timeouts, config headers and
auth, compression and per-call headers apply to each request; retries and request ids are the
client's, as for every engine. pycurl and aiohttp stay the defaults: they are faster here
(``docs/client.md``).

httpx is imported lazily, inside the engines (an optional extra: ``pip install nbinfer[httpx]``).
Imports config, errors and :mod:`nbinfer.transports` only; never the client, session or server.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from nbinfer.config import ClientConfig
from nbinfer.errors import (
    InvalidInputError,
    RequestTimeoutError,
    TransportError,
    connect_error,
)
from nbinfer.transports import HttpReply
from nbinfer.transports.base import AsyncEngine, SyncEngine
from nbinfer.transports.http_common import base_url, compress, default_headers, ssl_context
from nbinfer.transports.loops import PerLoop

if TYPE_CHECKING:
    import httpx

__all__ = ["AsyncHttpxEngine", "HttpxEngine", "HttpxTransport", "transport_for"]


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise TransportError(
            "http_engine='httpx' needs httpx: pip install 'nbinfer[httpx]' (or pip install httpx)"
        ) from exc
    return httpx


def _timeout(httpx: Any, config: ClientConfig, timeout: float | None) -> httpx.Timeout:
    """The timeouts of a call for httpx: ``connect`` as is, the call's total for each phase."""
    total = timeout if timeout is not None else config.timeouts.total
    return httpx.Timeout(total, connect=config.timeouts.connect)  # type: ignore[no-any-return]


def _client_options(httpx: Any, url: str, config: ClientConfig) -> dict[str, Any]:
    """The keyword arguments of an httpx client that nbinfer creates and owns."""
    if config.http2 and importlib.util.find_spec("h2") is None:  # httpx's HTTP/2 needs it
        raise TransportError(
            "http2=True with the httpx engine needs h2: pip install 'httpx[http2]'"
        )
    keepalive = config.keepalive_seconds or 15.0
    return {
        "headers": default_headers(config),
        "timeout": _timeout(httpx, config, None),
        "verify": ssl_context(config),
        # TLS: h2 by ALPN; cleartext h2 only by prior knowledge (as the curl engine does)
        "http2": config.http2,
        "http1": not (config.http2 and not url.startswith("https://")),
        "limits": httpx.Limits(
            max_connections=None, max_keepalive_connections=None, keepalive_expiry=keepalive
        ),
    }


class _Requests:
    """What both engines share: request building, reply reading and error mapping."""

    def __init__(self, url: str, config: ClientConfig, *, owned: bool) -> None:
        self._httpx = _httpx()
        self._base = base_url(url)
        self._config = config
        self._closed = False
        # An owned client carries nbinfer's headers itself; a user's client keeps its own
        # user-agent, and gets nbinfer's config headers / auth with each request.
        self._headers: dict[str, str] = {}
        if not owned:
            self._headers = {k: v for k, v in default_headers(config).items() if k != "user-agent"}

    @property
    def url(self) -> str:
        """The base URL requests are sent under."""
        return self._base

    def _prepare(
        self, path: str, body: bytes | None, headers: Mapping[str, str], timeout: float | None
    ) -> tuple[str, bytes | None, dict[str, str], httpx.Timeout]:
        """The URL, body, headers and timeouts of one request."""
        if self._closed:
            raise TransportError("the client is closed")
        merged = {**self._headers, **headers}
        body = compress(body, merged, self._config)
        return self._base + path, body, merged, _timeout(self._httpx, self._config, timeout)

    def _error(self, exc: Exception, url: str) -> TransportError:
        """The :mod:`nbinfer.errors` class for an httpx failure."""
        hx = self._httpx
        if isinstance(exc, hx.TimeoutException):
            return RequestTimeoutError(f"request to {url} timed out: {exc!r}", url=url)
        if isinstance(exc, (hx.ConnectError, hx.ProxyError)):
            return connect_error(url, exc)
        if isinstance(exc, RuntimeError):  # httpx: the client is closed, or its loop is
            hint = (
                " (an httpx.AsyncClient belongs to the event loop it first ran in: make it in "
                "the loop that uses it, or let nbinfer own one per loop with http_engine='httpx')"
                if "loop" in str(exc)
                else ""
            )
            return TransportError(f"the httpx client cannot send to {url}: {exc}{hint}", url=url)
        return TransportError(f"HTTP request to {url} failed: {exc!r}", url=url)


def _reply(response: httpx.Response) -> HttpReply:
    # httpx lower-cases names and joins repeated headers with ", "; content is decoded (gzip).
    return HttpReply(response.status_code, dict(response.headers.items()), response.content)


class HttpxEngine(_Requests):
    """Sync HTTP engine over an ``httpx.Client`` (thread-safe, like httpx's client).

    Args:
        url: The server base URL (``http://host:port`` or ``https://...``).
        config: Timeouts, TLS, auth, headers, compression, HTTP/2.
        client: The user's ``httpx.Client``, used as given and never closed here; ``None``
            creates one from ``config`` (closed by :meth:`close`).

    Raises:
        InvalidInputError: ``client`` is not an ``httpx.Client``.
    """

    def __init__(self, url: str, config: ClientConfig, client: httpx.Client | None = None) -> None:
        super().__init__(url, config, owned=client is None)
        hx = self._httpx
        if client is not None and not isinstance(client, hx.Client):
            raise InvalidInputError(
                "httpx_client: a blocking nbinfer.Client needs an httpx.Client, not "
                f"{type(client).__name__} (an httpx.AsyncClient goes to nbinfer.AsyncClient)"
            )
        self._owned = client is None
        self._client: httpx.Client = client or _new_client(hx.Client, self._base, config)

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
            ConnectError: The server could not be reached (refused, DNS, TLS handshake, proxy).
            RequestTimeoutError: A connect, read, write or pool timeout passed.
            TransportError: Any other transfer failure, or the engine is closed.
        """
        url, body, merged, limits = self._prepare(path, body, headers, timeout)
        try:
            response = self._client.request(
                method, url, content=body, headers=merged, timeout=limits
            )
        except (self._httpx.HTTPError, self._httpx.StreamError, RuntimeError) as exc:
            raise self._error(exc, url) from exc
        return _reply(response)

    def stream_request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpxStream:
        """Start a request whose body is read as it arrives (its head is read here).

        Raises:
            ConnectError / RequestTimeoutError / TransportError: as :meth:`request`.
        """
        url, body, merged, limits = self._prepare(path, body, headers, timeout)
        client = self._client
        try:
            request = client.build_request(
                method, url, content=body, headers=merged, timeout=limits
            )
            response = client.send(request, stream=True)
        except (self._httpx.HTTPError, self._httpx.StreamError, RuntimeError) as exc:
            raise self._error(exc, url) from exc
        return HttpxStream(response, url, self)

    def close(self) -> None:
        """Close the client nbinfer created (idempotent); a user's client stays open."""
        self._closed = True
        if self._owned:
            self._client.close()


class AsyncHttpxEngine(_Requests):
    """Asyncio HTTP engine over ``httpx.AsyncClient``.

    A client nbinfer creates lives in one event loop: one is made per loop on first use and
    closed in that loop when the loop shuts down or the engine is closed, so successive
    ``asyncio.run`` calls leave no connection open. A user's client is used as given, in
    whichever loop calls (it belongs to its owner, as do the loops it can serve).

    Args:
        url: The server base URL.
        config: Timeouts, TLS, auth, headers, compression, HTTP/2.
        client: The user's ``httpx.AsyncClient`` (never closed here); ``None``: nbinfer's own.

    Raises:
        InvalidInputError: ``client`` is not an ``httpx.AsyncClient``.
    """

    def __init__(
        self, url: str, config: ClientConfig, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(url, config, owned=client is None)
        if client is not None and not isinstance(client, self._httpx.AsyncClient):
            raise InvalidInputError(
                "httpx_client: nbinfer.AsyncClient needs an httpx.AsyncClient, not "
                f"{type(client).__name__} (an httpx.Client goes to nbinfer.Client)"
            )
        self._user_client: httpx.AsyncClient | None = client
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(_aclose)

    def _client(self) -> httpx.AsyncClient:
        if self._user_client is not None:
            return self._user_client
        client = self._clients.get()
        if client is None or client.is_closed:
            client = self._clients.add(
                _new_client(self._httpx.AsyncClient, self._base, self._config)
            )
        return client

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        """Perform one request; same contract as :meth:`HttpxEngine.request`."""
        url, body, merged, limits = self._prepare(path, body, headers, timeout)
        try:
            response = await self._client().request(
                method, url, content=body, headers=merged, timeout=limits
            )
        except (self._httpx.HTTPError, self._httpx.StreamError, RuntimeError) as exc:
            raise self._error(exc, url) from exc
        return _reply(response)

    async def stream_request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> AsyncHttpxStream:
        """Start a request whose body is read as it arrives (its head is read here)."""
        url, body, merged, limits = self._prepare(path, body, headers, timeout)
        client = self._client()
        try:
            request = client.build_request(
                method, url, content=body, headers=merged, timeout=limits
            )
            response = await client.send(request, stream=True)
        except (self._httpx.HTTPError, self._httpx.StreamError, RuntimeError) as exc:
            raise self._error(exc, url) from exc
        return AsyncHttpxStream(response, url, self)

    async def aclose(self) -> None:
        """Close nbinfer's clients (idempotent; other running loops' in their loop)."""
        self._closed = True
        await self._clients.aclose()


class HttpxStream:
    """A streamed httpx response: ``status``, ``headers``, ``chunks()``; ``close`` (idempotent)."""

    def __init__(self, response: httpx.Response, url: str, engine: _Requests) -> None:
        self._response = response
        self._url = url
        self._engine = engine
        self.status = response.status_code
        self.headers = dict(response.headers.items())

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they arrive (the response is closed when this ends)."""
        hx = self._engine._httpx
        try:
            yield from self._response.iter_bytes()
        except (hx.HTTPError, hx.StreamError) as exc:
            raise self._engine._error(exc, self._url) from exc
        finally:
            self.close()

    def close(self) -> None:
        """Close the response: unread, its connection is closed (the server sees it)."""
        self._response.close()


class AsyncHttpxStream:
    """A streamed ``httpx.AsyncClient`` response; the asyncio twin of :class:`HttpxStream`."""

    def __init__(self, response: httpx.Response, url: str, engine: _Requests) -> None:
        self._response = response
        self._url = url
        self._engine = engine
        self.status = response.status_code
        self.headers = dict(response.headers.items())

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (the response is closed when this ends)."""
        hx = self._engine._httpx
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except (hx.HTTPError, hx.StreamError) as exc:
            raise self._engine._error(exc, self._url) from exc
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the response (its connection too, when unread)."""
        await self._response.aclose()


def _new_client(factory: Any, url: str, config: ClientConfig) -> Any:
    return factory(**_client_options(_httpx(), url, config))


async def _aclose(client: httpx.AsyncClient) -> None:
    await client.aclose()


class HttpxTransport:
    """Builds the httpx engines: what ``Client(http_engine="httpx", httpx_client=...)`` uses.

    Args:
        client: An ``httpx.Client`` (for ``nbinfer.Client``) or ``httpx.AsyncClient`` (for
            ``nbinfer.AsyncClient``), used as given and not closed by nbinfer; ``None``: nbinfer
            creates and closes its own.

    Raises:
        InvalidInputError: From the engine methods: a gRPC client, or the other face's client.
    """

    def __init__(self, client: httpx.Client | httpx.AsyncClient | None = None) -> None:
        self.client = client

    @staticmethod
    def _check(protocol: str) -> None:
        if protocol != "http":
            raise InvalidInputError(
                f"http_engine='httpx' is an HTTP engine; this client speaks {protocol!r}"
            )

    def engine(
        self, protocol: Literal["http", "grpc"], url: str, config: ClientConfig
    ) -> SyncEngine:
        """An :class:`HttpxEngine` over the user's ``httpx.Client`` (or nbinfer's own)."""
        self._check(protocol)
        return HttpxEngine(url, config, self.client)  # type: ignore[arg-type]

    def async_engine(
        self, protocol: Literal["http", "grpc"], url: str, config: ClientConfig
    ) -> AsyncEngine:
        """An :class:`AsyncHttpxEngine` over the user's ``httpx.AsyncClient`` (or its own)."""
        self._check(protocol)
        return AsyncHttpxEngine(url, config, self.client)  # type: ignore[arg-type]


def transport_for(
    http_engine: str | None,
    httpx_client: Any,
    *,
    wire: str,
    default: str,
    transport: Any = None,
) -> HttpxTransport | None:
    """The transport behind a client's ``http_engine=`` / ``httpx_client=`` options.

    Args:
        http_engine: ``"httpx"``, the face's default engine's name, or ``None`` (the default;
            ``"httpx"`` when ``httpx_client`` is given).
        httpx_client: The user's httpx client, or ``None``.
        wire: The protocol the client speaks (``"http"`` / ``"grpc"``).
        default: The face's default HTTP engine (``"pycurl"`` / ``"aiohttp"``).
        transport: The client's ``transport=`` argument (it cannot be combined with httpx).

    Returns:
        An :class:`HttpxTransport`, or ``None`` for the default engines.

    Raises:
        InvalidInputError: An unknown engine, an ``httpx_client`` for another engine, httpx for
            a gRPC client, or httpx together with ``transport=``.
    """
    engine = http_engine or ("httpx" if httpx_client is not None else default)
    if engine not in (default, "httpx"):
        raise InvalidInputError(
            f"http_engine must be {default!r} (the default) or 'httpx', not {http_engine!r}"
        )
    if engine != "httpx":
        if httpx_client is not None:
            raise InvalidInputError(f"httpx_client needs http_engine='httpx', not {engine!r}")
        return None
    if transport is not None:
        raise InvalidInputError("give transport= or http_engine='httpx' / httpx_client=, not both")
    if wire != "http":
        raise InvalidInputError(
            f"http_engine='httpx' is an HTTP engine; this client speaks {wire!r} (use an http URL)"
        )
    return HttpxTransport(httpx_client)
