"""Triton's generate extension on both client faces: the plan (I/O-free) and its drivers.

:func:`plan_generate` is the op behind ``generate`` / ``generate_stream`` of
:mod:`nbinfer.client.api`: over HTTP it names the route and body; over gRPC it maps the fields
onto the model's inputs (from its metadata, as the server's generate route does) and builds the
one ``ModelStreamInfer`` request. The faces drive the plan: :func:`sync_events` /
:func:`async_events` yield one response object per response, read incrementally (SSE parsed
as the body arrives; the decoupled gRPC stream); closing the iterator closes the connection or
cancels the call, which the server sees as a cancellation.

Imports the core, protocol and errors; engines are used through their streaming methods only.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import orjson

from nbinfer.errors import InvalidInputError, NbinferError, UnsupportedError
from nbinfer.protocol.calls import HttpCall, HttpReply, Op
from nbinfer.protocol.generate import (
    SseParser,
    error_of,
    generate_body,
    generate_path,
    parse_generate_request,
    response_json,
)
from nbinfer.protocol.http_binding import check_reply
from nbinfer.protocol.jsonvalues import loads
from nbinfer.protocol.types import InferRequest, InferResponse

if TYPE_CHECKING:
    from nbinfer.client.core import _Core
    from nbinfer.protocol.grpc_binding import GrpcBinding

__all__: list[str] = []

#: Request parameter asking for Triton's empty final response (the end of a request's stream).
_EMPTY_FINAL = "triton_enable_empty_final_response"
_FINAL = "triton_final_response"


@dataclass(slots=True)
class GeneratePlan:
    """What one generate call sends: the HTTP route and body, or the gRPC stream request."""

    model: str
    stream: bool
    timeout: float | None
    headers: dict[str, str] = field(default_factory=dict)
    path: str = ""
    body: bytes = b""
    #: gRPC: the ``ModelInferRequest`` sent on ``ModelStreamInfer``.
    message: Any = None
    binding: GrpcBinding | None = None
    target: str = ""


def plan_generate(
    core: _Core,
    model: str,
    inputs: Mapping[str, Any] | None,
    version: str | None,
    parameters: Mapping[str, Any] | None,
    timeout: float | None,
    headers: Mapping[str, str] | None,
    fields: Mapping[str, Any],
    *,
    stream: bool,
) -> Op[GeneratePlan]:
    """The plan of ``generate`` / ``generate_stream`` (fetches model metadata over gRPC)."""
    if not isinstance(model, str) or not model:
        raise InvalidInputError(f"generate needs a model name, got {model!r}")
    body = generate_body(inputs, parameters, fields)
    opts = core._opts(headers, timeout)
    if timeout is None:
        timeout = core.config.timeouts.stream if stream else core.config.timeouts.total
    if core.protocol == "grpc":
        binding = core._require_grpc("generate")
        meta = core._metadata.get((model, version or ""))
        if meta is None:
            meta = yield from core._model_metadata_op(model, version or "", opts)
        tensors, params = parse_generate_request(body, meta.inputs, model=model)
        params[_EMPTY_FINAL] = True
        request = InferRequest(
            tensors, parameters=params, model_name=model, model_version=version or ""
        )
        return GeneratePlan(
            model,
            stream,
            timeout,
            dict(opts.headers),
            message=binding.stream_request(request),
            binding=binding,
            target=core.url,
        )
    send_headers = {"content-type": "application/json", **opts.headers}
    if stream:
        send_headers["accept"] = "text/event-stream"
    path = generate_path(model, version, stream=stream)
    return GeneratePlan(model, stream, timeout, send_headers, path=path, body=orjson.dumps(body))


def http_generate_op(plan: GeneratePlan) -> Op[dict[str, Any]]:
    """``generate`` over HTTP: one POST, one response object."""
    call = HttpCall("POST", plan.path, plan.body, plan.headers, plan.timeout, idempotent=False)
    reply: HttpReply = yield call
    check_reply(reply, model=plan.model)
    obj = loads(reply.body, what="generate response")
    error = error_of(obj, 0)
    if error is not None:
        raise error
    return cast(dict[str, Any], obj)


class _Events:
    """Turns an SSE body into response objects, raising the error event's typed error."""

    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        self.status = status
        self.headers = headers
        self.count = 0
        self._parser = SseParser()
        self._failed: list[bytes] | None = [] if status != 200 else None
        #: The error event met by ``feed``: raised by ``check`` once the responses before it
        #: are handed out.
        self.error: NbinferError | None = None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        if self._failed is not None:  # an error answer: read it whole (it is small)
            self._failed.append(chunk)
            return []
        out: list[dict[str, Any]] = []
        for event in self._parser.feed(chunk):
            obj = event.json()
            self.error = error_of(obj, self.count)
            if self.error is not None:
                break
            self.count += 1
            out.append(obj)
        return out

    def check(self) -> None:
        """Raise the error event ``feed`` met, if any."""
        if self.error is not None:
            raise self.error

    def end(self) -> None:
        """The body ended: raise the error of an error answer."""
        if self._failed is None:
            return
        body = b"".join(self._failed)
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            parser = SseParser()
            for event in parser.feed(body + b"\n\n"):
                error = error_of(event.json(), 0)
                if error is not None:
                    raise error
        check_reply(HttpReply(self.status, dict(self.headers), body))
        raise InvalidInputError(f"unexpected HTTP status {self.status} from generate_stream")


def _counted(exc: NbinferError, count: int) -> NbinferError:
    if exc.chunks_received is None:
        exc.chunks_received = count
    return exc


#: ``struct`` codes of the fixed-width datatypes a small output is read with directly.
_CODES = {
    "BOOL": "?",
    "UINT8": "B",
    "UINT16": "H",
    "UINT32": "I",
    "UINT64": "Q",
    "INT8": "b",
    "INT16": "h",
    "INT32": "i",
    "INT64": "q",
    "FP16": "e",
    "FP32": "f",
    "FP64": "d",
}
#: Up to this many elements an output of a stream reply is read with ``struct`` (a token is
#: one element): numpy's set-up per output costs more than the whole reply's bytes.
_FEW = 16
#: What :func:`_small_value` answers for an output it leaves to the general decoder.
_SLOW: Any = object()


def _small_value(datatype: str, shape: Any, buf: bytes) -> Any:
    """A small raw output as a generate response carries it, or ``_SLOW`` (not small / odd)."""
    count = 1
    for dim in shape:
        if dim < 0:
            return _SLOW
        count *= dim
    if count > _FEW:
        return _SLOW
    if datatype == "BYTES":
        items: list[Any] = []
        at, end = 0, len(buf)
        while at < end and len(items) < count:
            if end - at < 4:
                return _SLOW
            size = int.from_bytes(buf[at : at + 4], "little")
            at += 4
            if end - at < size:
                return _SLOW
            try:
                items.append(buf[at : at + size].decode())
            except UnicodeDecodeError:
                return _SLOW  # the general path names the element
            at += size
        if at != end or len(items) != count:
            return _SLOW
    else:
        code = _CODES.get(datatype)
        if code is None:
            return _SLOW
        try:
            items = list(struct.unpack(f"<{count}{code}", buf))
        except struct.error:
            return _SLOW
    return items[0] if count == 1 else items


def _reply_object(reply: Any) -> dict[str, Any] | None:
    """The response object of a plain stream reply (small raw outputs, no parameters) or None.

    The token stream's common reply, read straight from the message: the same object
    :func:`~nbinfer.protocol.generate.response_json` makes of the decoded response.
    """
    if reply.error_message:
        return None
    msg = reply.infer_response
    raw = msg.raw_output_contents
    outputs = msg.outputs
    if len(raw) != len(outputs):
        return None
    obj: dict[str, Any] = {"model_name": msg.model_name, "model_version": msg.model_version}
    for tensor, buf in zip(outputs, raw, strict=True):
        if tensor.parameters or tensor.HasField("contents"):
            return None
        value = _small_value(tensor.datatype, tensor.shape, buf)
        if value is _SLOW:
            return None
        obj[tensor.name] = value
    return obj


def _is_final(reply: Any) -> bool:
    """Whether a reply carries ``triton_final_response`` (true)."""
    param = reply.infer_response.parameters.get(_FINAL)
    kind = param.WhichOneof("parameter_choice") if param is not None else None
    return kind is not None and bool(getattr(param, kind))


def _grpc_objects(binding: GrpcBinding, reply: Any) -> tuple[dict[str, Any] | None, bool]:
    """One stream reply as ``(response object or None for the empty final one, final)``."""
    obj = _reply_object(reply)
    if obj is not None:
        final = _is_final(reply)
        if final and len(obj) == 2:  # no outputs: the empty final response
            return None, True
        return obj, final
    response: InferResponse = binding.stream_reply(reply)
    final = bool(response.parameters.get(_FINAL, False))
    if not response.outputs and final:
        return None, True
    return response_json(response), final


def sync_events(engine: Any, plan: GeneratePlan) -> Iterator[dict[str, Any]]:
    """The response objects of a plan on a sync engine (closing the iterator cancels)."""
    if plan.message is not None:
        yield from _sync_grpc(engine, plan)
        return
    opener = getattr(engine, "stream_request", None)
    if opener is None:
        raise UnsupportedError(
            f"generate_stream needs an HTTP engine that streams ({type(engine).__name__} does "
            "not): use the default engine or protocol='grpc'"
        )
    stream = opener("POST", plan.path, plan.body, plan.headers, timeout=plan.timeout)
    events: _Events | None = None
    try:
        for chunk in stream.chunks():
            if events is None:
                events = _Events(stream.status, stream.headers)
            yield from events.feed(chunk)
            events.check()
        if events is None:
            events = _Events(stream.status, stream.headers)
        events.end()
    except NbinferError as exc:
        _counted(exc, events.count if events is not None else 0)
        raise
    finally:
        stream.close()


def _sync_grpc(engine: Any, plan: GeneratePlan) -> Iterator[dict[str, Any]]:
    import grpc

    from nbinfer.transports.grpc import map_rpc_error

    binding = cast("GrpcBinding", plan.binding)
    metadata = tuple((k.lower(), v) for k, v in plan.headers.items())
    one = getattr(engine, "stream_one", None)
    if one is not None:  # read on this thread (no hop per reply)
        call = one(plan.message, timeout=plan.timeout, metadata=metadata)
    else:
        call = engine.stream(iter([plan.message]), timeout=plan.timeout, metadata=metadata)
    count = 0
    try:
        for reply in call:
            obj, final = _grpc_objects(binding, reply)
            if obj is not None:
                count += 1
                yield obj
            if final:
                return
    except grpc.RpcError as exc:
        raise _counted(map_rpc_error(exc, plan.target), count) from exc
    except NbinferError as exc:
        _counted(exc, count)
        raise
    finally:
        call.cancel()


async def async_events(engine: Any, plan: GeneratePlan) -> AsyncGenerator[dict[str, Any], None]:
    """The response objects of a plan on an asyncio engine (``aclose`` cancels)."""
    if plan.message is not None:
        async for obj in _async_grpc(engine, plan):
            yield obj
        return
    opener = getattr(engine, "stream_request", None)
    if opener is None:
        raise UnsupportedError(
            f"generate_stream needs an HTTP engine that streams ({type(engine).__name__} does "
            "not): use the default engine or protocol='grpc'"
        )
    stream = await opener("POST", plan.path, plan.body, plan.headers, timeout=plan.timeout)
    events = _Events(stream.status, stream.headers)
    try:
        async for chunk in stream.chunks():
            for obj in events.feed(chunk):
                yield obj
            events.check()
        events.end()
    except NbinferError as exc:
        _counted(exc, events.count)
        raise
    finally:
        await stream.aclose()


async def _async_grpc(engine: Any, plan: GeneratePlan) -> AsyncIterator[dict[str, Any]]:
    from nbinfer.transports.grpc import aiter_replies

    binding = cast("GrpcBinding", plan.binding)
    metadata = tuple((k.lower(), v) for k, v in plan.headers.items())

    async def messages() -> AsyncIterator[Any]:
        yield plan.message

    one = getattr(engine, "stream_one", None)
    if one is not None:  # a unary-stream call: no task feeding the request iterator
        call = one(plan.message, timeout=plan.timeout, metadata=metadata)
    else:
        call = engine.stream(messages(), timeout=plan.timeout, metadata=metadata)
    count = 0
    try:
        async for reply in aiter_replies(call):
            obj, final = _grpc_objects(binding, reply)
            if obj is not None:
                count += 1
                yield obj
            if final:
                return
    except NbinferError as exc:
        _counted(exc, count)
        raise
    finally:
        call.cancel()


def collect_one(objects: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """``generate`` over gRPC: the one response (a model sending several is refused)."""
    if len(objects) != 1:
        raise InvalidInputError(
            f"generate expects model {model!r} to produce exactly 1 response, it produced "
            f"{len(objects)}; use generate_stream for a model that streams responses",
            model=model,
        )
    return objects[0]
