"""Offline clients for tests and notebooks: :class:`MockTransport`.

In the spirit of httpx's ``MockTransport``: a function of yours answers every call a client
makes, so code written against :class:`~nbinfer.Client` / :class:`~nbinfer.AsyncClient` runs
without a server (a docs example, a unit test of your own pre/post-processing, a notebook on a
train)::

    import nbinfer
    from nbinfer.testing import MockTransport, Response

    def handler(request):
        if request.path == "/v2/health/ready":
            return Response(200)
        return Response(404, json={"error": f"no route {request.path}"})

    client = nbinfer.Client("http://mock", transport=MockTransport(handler))
    client.is_server_ready()  # True, and no socket was opened

The handler gets a :class:`Request` and returns a :class:`Response` (HTTP) or the reply
message (gRPC: a protobuf message of :data:`nbinfer.protocol.grpc.RPCS`, or a dict of its
fields). Status codes and gRPC replies go through the client's real codecs, so a 404 becomes a
``ModelNotFoundError`` exactly as from a server. A handler that raises an
:class:`~nbinfer.errors.NbinferError` has it raised to the caller; ``OSError`` becomes a
``ConnectError``, the builtin ``TimeoutError`` a :class:`~nbinfer.RequestTimeoutError`, anything
else a ``TransportError`` (``from`` your exception). For an :class:`~nbinfer.AsyncClient` the
handler may be ``async``.

Imports config, errors, protocol and transports (never the client, the server or IPython).
"""

from __future__ import annotations

import builtins
import inspect
import json as jsonlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nbinfer.config import ClientConfig
from nbinfer.errors import ConnectError, NbinferError, RequestTimeoutError, TransportError
from nbinfer.transports import GrpcCall, HttpReply
from nbinfer.transports.base import AsyncEngine, SyncEngine, WireProtocol

__all__ = ["Handler", "MockTransport", "Request", "Response"]


@dataclass(frozen=True, slots=True)
class Request:
    """One call as a :class:`MockTransport` handler sees it.

    Attributes:
        method: ``"GET"`` / ``"POST"``; ``"GRPC"`` for a gRPC call.
        path: The HTTP path (``"/v2/models/m/infer"``) or the gRPC method name (``"ModelInfer"``).
        headers: Request headers / gRPC metadata, names in lower case (the client's configured
            headers and auth included).
        body: The HTTP request body (``b""`` for GET and gRPC).
        message: gRPC: the request message (a protobuf message); ``None`` over HTTP.
    """

    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    message: Any = None

    @property
    def rpc(self) -> str:
        """The gRPC method name ("" over HTTP)."""
        return self.path if self.method == "GRPC" else ""

    def json(self) -> Any:
        """The body parsed as JSON (the JSON part only, for a binary-extension request)."""
        length = self.headers.get("inference-header-content-length")
        body = self.body if length is None else self.body[: int(length)]
        return jsonlib.loads(body or b"null")


class Response:
    """An HTTP answer from a handler: ``Response(200, json={...})`` or raw ``content``.

    Args:
        status: The HTTP status (errors take the server's path: 404 -> ``ModelNotFoundError``).
        json: A JSON body (sets ``content-type: application/json``).
        content: Raw body bytes (when not ``json``).
        headers: Response headers.
    """

    __slots__ = ("content", "headers", "status")

    def __init__(
        self,
        status: int = 200,
        *,
        json: Any = None,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.content = content
        if json is not None:
            self.content = jsonlib.dumps(json).encode()
            self.headers.setdefault("content-type", "application/json")

    def __repr__(self) -> str:
        return f"Response({self.status}, {len(self.content)} bytes)"


#: What a handler may be: a function of a :class:`Request` (``async`` too, for AsyncClient).
Handler = Callable[[Request], Any]


class MockTransport:
    """A transport that answers every call with ``handler(request)``, offline.

    Pass it as ``transport=`` to :class:`~nbinfer.Client` or :class:`~nbinfer.AsyncClient`;
    the URL still picks the protocol (``http://...`` or ``grpc://...``) but is never dialled.

    Args:
        handler: ``handler(request) -> Response`` (HTTP) or ``-> reply message | dict``
            (gRPC); it may raise (see the module docstring for how errors map). Streams
            (``ModelStreamInfer``) call it once per request message; it returns one reply or a
            list of replies.

    Example::

        def handler(request):
            return Response(200, json={"name": "mock", "version": "1", "extensions": []})

        with nbinfer.Client("http://mock", transport=MockTransport(handler)) as client:
            client.get_server_metadata().name  # "mock"
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def engine(self, protocol: WireProtocol, url: str, config: ClientConfig) -> SyncEngine:
        """The blocking engine of a :class:`~nbinfer.Client` speaking ``protocol``."""
        if protocol == "http":
            return _SyncHttp(self.handler, config)
        return _SyncGrpc(self.handler, config)

    def async_engine(self, protocol: WireProtocol, url: str, config: ClientConfig) -> AsyncEngine:
        """The asyncio engine of an :class:`~nbinfer.AsyncClient` speaking ``protocol``."""
        if protocol == "http":
            return _AsyncHttp(self.handler, config)
        return _AsyncGrpc(self.handler, config)


# ---------------------------------------------------------------------------------------------
# The engines (structural implementations of nbinfer.transports.base)


def _fail(exc: Exception, where: str) -> NbinferError:
    """The nbinfer error a handler's exception becomes (raised ``from`` it by the caller)."""
    if isinstance(exc, NbinferError):
        return exc
    if isinstance(exc, builtins.TimeoutError):
        return RequestTimeoutError(f"{where}: the mock handler timed out: {exc}")
    if isinstance(exc, OSError):
        return ConnectError(f"{where}: the mock handler could not connect: {exc}")
    return TransportError(f"{where}: the mock handler raised {exc!r}")


class _Engine:
    def __init__(self, handler: Handler, config: ClientConfig) -> None:
        self._handler = handler
        headers = {"user-agent": config.user_agent}
        if config.auth is not None:
            headers.update(config.auth.headers())
        headers.update(config.headers)
        self._headers = {k.lower(): v for k, v in headers.items()}
        self._closed = False

    def _request(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, message: Any
    ) -> Request:
        if self._closed:
            raise TransportError("the client is closed")
        merged = {**self._headers, **{k.lower(): v for k, v in headers.items()}}
        return Request(method, path, merged, body, message)

    def _grpc_request(self, rpc: str, message: Any, metadata: Iterable[tuple[str, str]]) -> Request:
        if type(message) is bytes:  # the client's fast path sends pre-serialized requests
            from nbinfer.protocol.grpc import RPCS

            message = RPCS[rpc].request.FromString(message)
        return self._request("GRPC", rpc, dict(metadata), b"", message)

    def _call(self, request: Request) -> Any:
        try:
            return self._handler(request)
        except Exception as exc:
            raise _fail(exc, request.path) from exc

    async def _acall(self, request: Request) -> Any:
        try:
            answer = self._handler(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            raise _fail(exc, request.path) from exc
        return answer

    def _sync(self, answer: Any) -> Any:
        if inspect.isawaitable(answer):
            if hasattr(answer, "close"):
                answer.close()  # an un-awaited coroutine would warn
            raise TransportError("an async handler needs an AsyncClient; use a plain function")
        return answer


def _http_reply(answer: Any) -> HttpReply:
    if not isinstance(answer, Response):
        raise TransportError(
            f"a MockTransport HTTP handler must return a Response, not {type(answer).__name__}"
        )
    return HttpReply(answer.status, dict(answer.headers), answer.content)


def _grpc_reply(rpc: str, answer: Any) -> Any:
    if isinstance(answer, Mapping):
        from google.protobuf import json_format

        from nbinfer.protocol.grpc import RPCS

        return json_format.ParseDict(dict(answer), RPCS[rpc].response())
    return answer


def _stream_replies(answer: Any) -> list[Any]:
    replies = answer if isinstance(answer, (list, tuple)) else [answer]
    return [_grpc_reply("ModelStreamInfer", r) for r in replies]


class _SyncHttp(_Engine):
    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        request = self._request(method, "/" + path.lstrip("/"), headers, body or b"", None)
        return _http_reply(self._sync(self._call(request)))

    def close(self) -> None:
        self._closed = True


class _AsyncHttp(_Engine):
    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        request = self._request(method, "/" + path.lstrip("/"), headers, body or b"", None)
        return _http_reply(await self._acall(request))

    async def aclose(self) -> None:
        self._closed = True


class _Stream:
    """A mock ``ModelStreamInfer`` call: iterates the replies, cancellable."""

    def __init__(self, replies: Iterator[Any]) -> None:
        self._replies = replies
        self._cancelled = False

    def __iter__(self) -> Iterator[Any]:
        for reply in self._replies:
            if self._cancelled:
                return
            yield reply

    def cancel(self) -> bool:
        self._cancelled = True
        return True


class _SyncGrpc(_Engine):
    def call(self, call: GrpcCall) -> Any:
        request = self._grpc_request(call.rpc, call.message, call.metadata)
        return _grpc_reply(call.rpc, self._sync(self._call(request)))

    def stream(
        self,
        requests: Iterator[Any],
        *,
        timeout: float | None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        def replies() -> Iterator[Any]:
            for message in requests:
                request = self._grpc_request("ModelStreamInfer", message, metadata)
                yield from _stream_replies(self._sync(self._call(request)))

        return _Stream(replies())

    def close(self) -> None:
        self._closed = True


class _AsyncStream:
    """A mock asyncio ``ModelStreamInfer`` call: an async iterator of replies, cancellable."""

    def __init__(self, replies: AsyncIterator[Any]) -> None:
        self._replies = replies

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._replies

    def cancel(self) -> bool:
        return True


class _AsyncGrpc(_Engine):
    async def call(self, call: GrpcCall) -> Any:
        request = self._grpc_request(call.rpc, call.message, call.metadata)
        return _grpc_reply(call.rpc, await self._acall(request))

    def stream(
        self,
        requests: Any,
        *,
        timeout: float | None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        async def replies() -> AsyncIterator[Any]:
            async for message in _aiter(requests):
                request = self._grpc_request("ModelStreamInfer", message, metadata)
                for reply in _stream_replies(await self._acall(request)):
                    yield reply

        return _AsyncStream(replies())

    async def aclose(self) -> None:
        self._closed = True


async def _aiter(items: Any) -> AsyncIterator[Any]:
    if hasattr(items, "__aiter__"):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item
