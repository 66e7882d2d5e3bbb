"""Transports: the I/O under :mod:`nbinfer.client`.

A *binding* (:class:`~nbinfer.transports.http.HttpBinding`,
:class:`~nbinfer.transports.grpc.GrpcBinding`) knows a protocol's routes and messages but does no
I/O: each API call is a generator (an :data:`Op`) that yields :class:`HttpCall` / :class:`GrpcCall`
objects and receives the engine's reply. An *engine* performs one call: pycurl / aiohttp for
HTTP, grpcio / grpc.aio for gRPC; the asyncio engines own one session / channel per event loop
(:mod:`nbinfer.transports.loops`). The client drives an op with a sync or an async engine, so the
protocol logic exists once for both faces. Engines translate engine errors into
:mod:`nbinfer.errors` classes with ``raise ... from exc``. This package is I/O only: wire
formats live in :mod:`nbinfer.protocol`; nothing here imports the client, session or server.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

__all__ = ["Call", "CallOptions", "GrpcCall", "HttpCall", "HttpReply", "Op"]

T = TypeVar("T")


class HttpReply(NamedTuple):
    """What an HTTP engine returns: status, lower-cased headers, body."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(slots=True)
class CallOptions:
    """Per-call options every API call accepts."""

    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    request_id: str | None = None


@dataclass(slots=True)
class HttpCall:
    """One HTTP request for an engine to perform.

    Attributes:
        check: The reply's status is checked by the binding (``False`` for health calls, whose
            non-200 answers mean "no"); only checked calls are retried on 503.
        idempotent: Safe to retry on connection errors and 503.
    """

    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    idempotent: bool = True
    check: bool = True
    request_id: str | None = None


@dataclass(slots=True)
class GrpcCall:
    """One unary gRPC call for an engine to perform (``rpc``: the method name, ``ModelInfer``)."""

    rpc: str
    message: Any
    metadata: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None
    idempotent: bool = True
    request_id: str | None = None


Call = HttpCall | GrpcCall

#: An API call written once for both faces: yields calls, receives replies, returns the result.
Op = Generator[Any, Any, T]
