"""The seam between bindings and engines: call and reply objects, and the :data:`Op` shape.

A *binding* (:class:`~nbinfer.protocol.http_binding.HttpBinding`,
:class:`~nbinfer.protocol.grpc_binding.GrpcBinding`) knows a protocol's routes and messages but
does no I/O: each API call is a generator (an :data:`Op`) that yields :class:`HttpCall` /
:class:`GrpcCall` objects and receives the engine's reply (:class:`HttpReply` /
:class:`GrpcReply` or a bare message), or yields a :class:`Pause` to wait between calls. An
*engine* (:mod:`nbinfer.transports`) performs one call. Plain data only: no I/O, no third-party
imports.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "Call",
    "CallOptions",
    "GrpcCall",
    "GrpcReply",
    "Headers",
    "HttpCall",
    "HttpReply",
    "Op",
    "Pause",
    "read_headers",
]

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


#: Response headers, or what reads them when first asked for (the sync gRPC engine's
#: metadata is only turned into a dict when a caller looks at it).
Headers = dict[str, str] | Callable[[], dict[str, str]]


class GrpcReply:
    """A ``ModelInfer`` reply and the response metadata that came with it.

    Engines return it for ``ModelInfer`` only (the one call whose result shows headers); the
    binding also takes a bare message, as :class:`nbinfer.testing.MockTransport` answers.
    ``headers`` may be a function that reads them (the sync gRPC engine's metadata): most
    callers never look, and reading gRPC metadata into a dict costs about as much CPU as the
    rest of the reply's handling, so whoever takes the reply calls it only when asked
    (:func:`read_headers`).
    """

    __slots__ = ("headers", "message")

    def __init__(self, message: Any, headers: Headers) -> None:
        self.message = message
        self.headers = headers


def read_headers(headers: Headers) -> dict[str, str]:
    """The headers themselves, read now if ``headers`` is what reads them."""
    return headers if isinstance(headers, dict) else headers()


@dataclass(frozen=True, slots=True)
class Pause:
    """A wait an :data:`Op` asks its driver for between two calls.

    The sync client sleeps (``time.sleep``), the async one awaits ``asyncio.sleep``; the op
    receives ``None`` after it.
    """

    seconds: float


Call = HttpCall | GrpcCall

#: An API call written once for both faces: yields calls, receives replies, returns the result.
Op = Generator[Any, Any, T]
