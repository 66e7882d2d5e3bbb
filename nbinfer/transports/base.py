"""The typed seams between the client and its I/O.

What an engine must offer, and what ``Client(transport=...)`` / ``AsyncClient(transport=...)``
take.

An *engine* performs calls for one protocol and one face: :class:`SyncHttpEngine` (sockets, pycurl),
:class:`AsyncHttpEngine` (aiohttp), :class:`SyncGrpcEngine` (grpcio), :class:`AsyncGrpcEngine`
(grpc.aio). They are structural (``typing.Protocol``): the engines of
:mod:`nbinfer.transports.curl_engine`, :mod:`nbinfer.transports.aiohttp_engine` and
:mod:`nbinfer.transports.grpc` satisfy them without inheriting,
and so does the offline :class:`nbinfer.testing.MockTransport`. A :class:`Transport` builds the
engine a client needs; :class:`DefaultTransport` builds the real ones.

Imports config, errors and the call types of :mod:`nbinfer.protocol.calls` only; the engine modules
(and with them pycurl, aiohttp, grpc) are imported lazily by :class:`DefaultTransport`. Never
imports the client, the server or IPython.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from nbinfer.config import ClientConfig
from nbinfer.protocol.calls import GrpcCall, HttpReply

__all__ = [
    "AsyncEngine",
    "AsyncGrpcEngine",
    "AsyncHttpEngine",
    "DefaultTransport",
    "SyncEngine",
    "SyncGrpcEngine",
    "SyncHttpEngine",
    "Transport",
]

#: The protocol a client speaks (its URL scheme decides).
WireProtocol = Literal["http", "grpc"]


class SyncHttpEngine(Protocol):
    """A blocking HTTP engine: one request in, one :class:`~nbinfer.transports.HttpReply` out.

    ``request`` raises :mod:`nbinfer.errors` classes only (``ConnectError``,
    ``RequestTimeoutError``, ``TransportError``); statuses are the binding's business, not the
    engine's.

    An engine may also offer ``stream_request`` (same arguments): a response whose ``status``
    and ``headers`` are known and whose body is read as it arrives through ``chunks()``, and
    whose ``close()`` (``aclose()`` on asyncio engines) closes its connection. The generate
    extension's ``generate_stream`` needs it; the curl, aiohttp and httpx engines have it.
    """

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        """Perform one request; ``path`` is relative to the engine's base URL."""
        ...

    def close(self) -> None:
        """Release the connections (idempotent)."""
        ...


class AsyncHttpEngine(Protocol):
    """An asyncio HTTP engine; the same contract as :class:`SyncHttpEngine`, awaited."""

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        """Perform one request; ``path`` is relative to the engine's base URL."""
        ...

    async def aclose(self) -> None:
        """Release the connections (idempotent)."""
        ...


class SyncGrpcEngine(Protocol):
    """A blocking gRPC engine: unary calls and the ``ModelStreamInfer`` stream.

    ``call`` returns the response message or raises :mod:`nbinfer.errors` classes; ``stream``
    returns an iterator of reply messages with a ``cancel()`` method.
    """

    def call(self, call: GrpcCall) -> Any:
        """Perform one unary call; returns the response message."""
        ...

    def stream(
        self,
        requests: Iterator[Any],
        *,
        timeout: float | None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        """Open a ``ModelStreamInfer`` stream over ``requests`` (request messages)."""
        ...

    def close(self) -> None:
        """Release the channel (idempotent)."""
        ...


class AsyncGrpcEngine(Protocol):
    """An asyncio gRPC engine; ``stream`` returns an async iterator of replies (cancellable)."""

    async def call(self, call: GrpcCall) -> Any:
        """Perform one unary call; returns the response message."""
        ...

    def stream(
        self,
        requests: Any,
        *,
        timeout: float | None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        """Open a ``ModelStreamInfer`` stream over ``requests`` (request messages)."""
        ...

    async def aclose(self) -> None:
        """Release the channel (idempotent)."""
        ...


SyncEngine = SyncHttpEngine | SyncGrpcEngine
AsyncEngine = AsyncHttpEngine | AsyncGrpcEngine


@runtime_checkable
class Transport(Protocol):
    """What ``Client(transport=...)`` / ``AsyncClient(transport=...)`` take: an engine factory.

    The client asks once, at construction, for the engine of its protocol and face; it never
    looks inside. Plug one in to run offline (:class:`nbinfer.testing.MockTransport`) or to
    route calls through your own I/O.
    """

    def engine(self, protocol: WireProtocol, url: str, config: ClientConfig) -> SyncEngine:
        """The blocking engine for ``protocol`` (``"http"``: a SyncHttpEngine, else gRPC)."""
        ...

    def async_engine(self, protocol: WireProtocol, url: str, config: ClientConfig) -> AsyncEngine:
        """The asyncio engine for ``protocol``."""
        ...


class DefaultTransport:
    """The engines chosen by measurement: sockets or pycurl, aiohttp, grpcio and grpc.aio.

    Args:
        sockets: Sync HTTP over cleartext HTTP/1.1 without compression or a proxy goes through
            :class:`~nbinfer.transports.socket_engine.SocketEngine` (measured the fastest);
            ``False`` sends everything through libcurl (``http_engine="pycurl"``).
    """

    def __init__(self, *, sockets: bool = True) -> None:
        self.sockets = sockets

    def engine(self, protocol: WireProtocol, url: str, config: ClientConfig) -> SyncEngine:
        """A socket or :class:`~nbinfer.transports.curl_engine.CurlEngine`, or a gRPC engine."""
        if protocol == "http":
            from nbinfer.transports.socket_engine import SocketEngine, socket_engine_fits

            if self.sockets and socket_engine_fits(url, config):
                fast: SyncHttpEngine = SocketEngine(url, config)
                return fast
            from nbinfer.transports.curl_engine import CurlEngine

            http: SyncHttpEngine = CurlEngine(url, config)
            return http
        from nbinfer.transports.grpc import GrpcEngine

        grpc: SyncGrpcEngine = GrpcEngine(url, config)
        return grpc

    def async_engine(self, protocol: WireProtocol, url: str, config: ClientConfig) -> AsyncEngine:
        """An :class:`~nbinfer.transports.aiohttp_engine.AiohttpEngine` or a grpc.aio engine."""
        if protocol == "http":
            from nbinfer.transports.aiohttp_engine import AiohttpEngine

            http: AsyncHttpEngine = AiohttpEngine(url, config)
            return http
        from nbinfer.transports.grpc import AsyncGrpcEngine as AioEngine

        grpc: AsyncGrpcEngine = AioEngine(url, config)
        return grpc
