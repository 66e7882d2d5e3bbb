"""Triton's generate extension on the REST frontend: ``.../generate`` and ``.../generate_stream``.

Both routes take one JSON object whose top-level fields are the model's inputs by name (every
other field, and the ``parameters`` object, are request parameters; see
:mod:`nbinfer.protocol.generate`) and run it through :meth:`DataPlane.infer_stream`, so decoupled
models (0..N responses) and ordinary ones (one) are served alike, with the limits, statistics and
auth of every route (the REST app screens and authenticates before routing).

* ``generate`` answers the one response as a JSON object; a model giving any other number of
  responses is a 400 (use ``generate_stream``), as Triton answers it.
* ``generate_stream`` answers ``text/event-stream``: one ``data:`` event per response, sent as
  the model produces it. A request refused before inference begins is a JSON error with its
  status; a model that fails on its first response answers that error's status with one error
  event; one failing later ends the stream with ``{"error": ..., "status": ...}`` (Triton's
  error object; ``status`` is nbinfer's addition). A client that disconnects cancels the
  generation: the request task is cancelled (see :mod:`nbinfer.server.connections`), the model
  sees ``context.cancelled`` / ``is_cancelled()``, the statistics count a cancellation.

Imports the dataplane (types only), protocol and errors; the REST app registers the routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

from nbinfer.errors import InferenceError, InvalidInputError, NbinferError, ServerError, status_of
from nbinfer.protocol.generate import (
    SSE_CONTENT_TYPE,
    error_event,
    parse_generate_request,
    response_json,
    sse_event,
)
from nbinfer.protocol.jsonvalues import dumps, loads
from nbinfer.protocol.types import InferRequest, InferResponse

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane

__all__ = ["EventStream", "generate", "generate_stream"]

logger = logging.getLogger("nbinfer")

_JSON = b"application/json"
_SSE = SSE_CONTENT_TYPE.encode()
_ERROR = b'data: {"error"'
_NO_CACHE = [(b"cache-control", b"no-cache")]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_Reply = tuple[int, bytes, Any, list[tuple[bytes, bytes]]]


class _App(Protocol):
    """What the handlers use of the REST app."""

    dp: DataPlane

    def _caller(self) -> str: ...


def _status(exc: NbinferError) -> int:
    return exc.status if isinstance(exc, ServerError) else status_of(exc)


def _open(
    app: _App, model: str, version: str, body: bytes, headers: Mapping[bytes, bytes]
) -> AsyncIterator[InferResponse]:
    """The responses of a generate request (validated up to the model's own checks)."""
    obj = loads(body, what="generate request")
    metadata = app.dp.model_metadata(model, version)
    tensors, params = parse_generate_request(obj, metadata.inputs, model=model)
    request = InferRequest(tensors, parameters=params, model_name=model, model_version=version)
    seen = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()}
    return app.dp.infer_stream(request, headers=seen, caller=app._caller)


async def generate(
    app: _App, model: str, version: str, body: bytes, headers: dict[bytes, bytes]
) -> _Reply:
    """``POST .../generate``: the one response as a JSON object."""
    responses = [r async for r in _open(app, model, version, body, headers)]
    if len(responses) != 1:
        raise InvalidInputError(
            f"generate expects model {model!r} to produce exactly 1 response, it produced "
            f"{len(responses)}; use generate_stream for a model that streams responses",
            model=model,
        )
    return 200, _JSON, dumps(response_json(responses[0])), []


async def generate_stream(
    app: _App, model: str, version: str, body: bytes, headers: dict[bytes, bytes]
) -> _Reply:
    """``POST .../generate_stream``: Server-Sent Events, one per response."""
    stream = _open(app, model, version, body, headers)
    try:
        first = await anext(stream)
    except StopAsyncIteration:
        return 200, _SSE, b"", _NO_CACHE
    except InferenceError as exc:  # inference began: the error event carries its status
        status = _status(exc)
        return status, _SSE, error_event(exc.message, status), _NO_CACHE
    return 200, _SSE, EventStream(stream, first), _NO_CACHE


class EventStream:
    """A reply body sent as Server-Sent Events while the model produces its responses."""

    def __init__(self, responses: AsyncIterator[InferResponse], first: InferResponse) -> None:
        self._responses = responses
        self._first = first

    async def send_to(self, send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """Send the response head, then one event per response, then the end of the body."""
        await send({"type": "http.response.start", "status": status, "headers": headers})
        responses = self._responses
        chunk = self._event(self._first)
        try:
            while True:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if chunk.startswith(_ERROR):  # an output JSON cannot carry ends the stream
                    chunk = b""
                    aclose = getattr(responses, "aclose", None)
                    if aclose is not None:
                        await aclose()
                    break
                try:
                    response = await anext(responses)
                except StopAsyncIteration:
                    chunk = b""
                    break
                except NbinferError as exc:
                    chunk = error_event(exc.message, _status(exc))
                    break
                except Exception as exc:  # a bug of ours: still a well-formed stream end
                    logger.exception("generate_stream failed")
                    chunk = error_event(f"internal server error: {type(exc).__name__}: {exc}", 500)
                    break
                chunk = self._event(response)
        except asyncio.CancelledError:
            # the client left while we were sending: the model's stream learns it was cancelled
            athrow = getattr(responses, "athrow", None)
            if athrow is not None:
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, RuntimeError):
                    await athrow(asyncio.CancelledError())
            raise
        await send({"type": "http.response.body", "body": chunk, "more_body": False})

    @staticmethod
    def _event(response: InferResponse) -> bytes:
        try:
            return sse_event(response_json(response))
        except NbinferError as exc:  # e.g. a BYTES output that is not UTF-8
            return error_event(exc.message, _status(exc))
