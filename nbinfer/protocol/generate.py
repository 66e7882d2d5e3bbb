"""Triton's generate extension: JSON fields <-> tensors, and Server-Sent Events framing.

``POST v2/models/M[/versions/V]/generate`` takes one JSON object and answers one;
``.../generate_stream`` answers ``text/event-stream``, one ``data:`` event per response, and an
``{"error": "..."}`` object when the model fails mid-stream. A top-level field named like one of
the model's inputs is that input; every other top-level field, and the members of the optional
``"parameters"`` object, are request parameters. A response is ``model_name``,
``model_version`` and each output by name as a JSON value: an output of one element is a scalar,
any other a flat array (as Triton sends them); BYTES are strings.

Every datatype with a JSON form maps: BOOL (``true`` / ``false`` only), the integers (whole
numbers that fit, never wrapped), FP32 / FP64 and, beyond Triton (which refuses them in JSON),
FP16 and BF16 from numbers; BYTES from strings (UTF-8). A field's shape is its JSON shape (a
scalar is ``[1]``), with leading 1s added up to the input's declared rank.

:class:`SseParser` reads an event stream incrementally (feed it bytes as they arrive, get the
complete events): lines split across chunks, CRLF / CR / LF endings, comments, multi-line
``data`` and ``event`` / ``id`` / ``retry`` fields, as the HTML standard defines them. It holds
only the unfinished line and event, never the stream.

Pure: numpy, orjson and :mod:`nbinfer.protocol` only; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import orjson

from nbinfer.errors import InferenceError, InvalidInputError, ServerError, error_for_status
from nbinfer.protocol.jsonvalues import json_to_tensor, tensor_to_json
from nbinfer.protocol.types import InferInput, InferResponse, ParamValue, TensorSpec

__all__ = [
    "GENERATE_EXTENSION",
    "SSE_CONTENT_TYPE",
    "SseEvent",
    "SseParser",
    "error_event",
    "error_of",
    "generate_body",
    "generate_path",
    "json_value",
    "parse_generate_request",
    "response_json",
    "sse_event",
]

#: The name servers list in their metadata ``extensions``.
GENERATE_EXTENSION: Final = "generate"
#: The content type of ``generate_stream`` answers.
SSE_CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"

_PARAMETERS = "parameters"


def generate_body(
    inputs: Mapping[str, Any] | None,
    parameters: Mapping[str, Any] | None,
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """The generate request object: ``inputs`` and ``fields`` at the top level, ``parameters``.

    Raises:
        InvalidInputError: a name given twice, or ``parameters`` passed as a field.
    """
    body: dict[str, Any] = dict(inputs or {})
    for name, value in fields.items():
        if name == _PARAMETERS:
            raise InvalidInputError("pass request parameters as parameters=, not as a field")
        if name in body:
            raise InvalidInputError(f"generate field {name!r} is given twice")
        body[name] = value
    if _PARAMETERS in body:
        raise InvalidInputError("an input may not be named 'parameters' in a generate request")
    if parameters:
        body[_PARAMETERS] = dict(parameters)
    return body


def _parameter(name: str, value: Any) -> ParamValue:
    if isinstance(value, bool | int | float | str):
        return value
    raise InvalidInputError(
        f"generate parameter {name!r} must be a string, number or boolean, got "
        f"{type(value).__name__} {orjson.dumps(value).decode(errors='replace')[:40]}",
        parameter=name,
    )


def _shape(value: Any, rank: int, name: str) -> list[int]:
    """The JSON shape of ``value`` (scalar: ``[1]``), with leading 1s up to ``rank``."""
    dims: list[int] = []
    probe = value
    while isinstance(probe, list):
        dims.append(len(probe))
        probe = probe[0] if probe else None
    if not dims:
        dims = [1]
    if len(dims) > max(rank, 1):
        raise InvalidInputError(
            f"generate field {name!r} has {len(dims)} dimensions; the input has {rank}",
            tensor=name,
        )
    return [1] * (rank - len(dims)) + dims


def parse_generate_request(
    body: Mapping[str, Any], inputs: Sequence[TensorSpec], *, model: str
) -> tuple[list[InferInput], dict[str, ParamValue]]:
    """The input tensors and request parameters of a generate request object.

    Args:
        body: The parsed request object.
        inputs: The model's declared inputs (name, datatype, shape).
        model: The model's name (for messages).

    Raises:
        InvalidInputError: the body is not an object, a field does not fit its input's
            datatype, ``parameters`` is not an object or a parameter is not a string, number or
            boolean. (Missing inputs are the model's check, as for ``infer``.)
    """
    if not isinstance(body, Mapping):
        raise InvalidInputError(
            f"a generate request for model {model!r} is a JSON object, got {type(body).__name__}"
        )
    specs = {spec.name: spec for spec in inputs}
    tensors: list[InferInput] = []
    params: dict[str, ParamValue] = {}
    for name, value in body.items():
        spec = specs.get(name)
        if spec is not None:
            shape = _shape(value, len(spec.shape), name)
            data = json_to_tensor(value, spec.datatype, shape, name=name, kind="input")
            tensors.append(InferInput(name, spec.datatype, shape, data))
        elif name == _PARAMETERS:
            if not isinstance(value, Mapping):
                raise InvalidInputError(
                    f"'parameters' of a generate request is a JSON object, got "
                    f"{type(value).__name__}"
                )
            params.update({k: _parameter(k, v) for k, v in value.items()})
        else:
            params[name] = _parameter(name, value)
    return tensors, params


def json_value(arr: np.ndarray[Any, Any], datatype: str, *, name: str = "") -> Any:
    """One output as a generate response carries it: a scalar for one element, else a flat list.

    Raises:
        InvalidInputError: a BYTES element is not valid UTF-8.
    """
    flat = tensor_to_json(arr, datatype, name=name)
    items: list[Any] = flat if isinstance(flat, list) else flat.tolist()
    return items[0] if len(items) == 1 else items


def response_json(response: InferResponse) -> dict[str, Any]:
    """The generate response object of one inference response."""
    out: dict[str, Any] = {
        "model_name": response.model_name,
        "model_version": response.model_version,
    }
    for output in response.outputs:
        if output.data is not None:
            out[output.name] = json_value(output.data, output.datatype, name=output.name)
    return out


def sse_event(obj: Any) -> bytes:
    """One Server-Sent Event carrying ``obj`` as JSON (``data: {...}`` and a blank line)."""
    return b"data: " + orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n\n"


def error_event(message: str, status: int | None = None) -> bytes:
    """The error event of a stream: Triton's ``{"error": message}`` (nbinfer adds ``status``)."""
    obj: dict[str, Any] = {"error": message}
    if status is not None:
        obj["status"] = status
    return sse_event(obj)


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched Server-Sent Event."""

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        """The event's data parsed as JSON.

        Raises:
            InvalidInputError: the data is not JSON.
        """
        try:
            return orjson.loads(self.data)
        except orjson.JSONDecodeError as exc:
            raise InvalidInputError(
                f"a server-sent event's data is not JSON: {self.data[:80]!r}"
            ) from exc


class SseParser:
    """An incremental ``text/event-stream`` reader: ``feed`` bytes, get the complete events.

    Example::

        parser = SseParser()
        for chunk in body_chunks:
            for event in parser.feed(chunk):
                print(event.json())
        parser.close()  # the events of an unterminated last block are dropped, as the spec says
    """

    __slots__ = ("_cr", "_data", "_event", "_id", "_line", "_retry", "_started")

    def __init__(self) -> None:
        self._line = b""  # the unfinished line
        self._cr = False  # the previous chunk ended with CR (a following LF is the same EOL)
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._retry: int | None = None
        self._started = False  # the leading BOM is checked

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by ``chunk`` (bytes as received; any split)."""
        if not chunk:
            return []
        if not self._started:
            self._started = True
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        text = self._line + chunk
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = text.split(b"\n")
        self._line = lines.pop()
        events: list[SseEvent] = []
        for raw in lines:
            event = self._line_done(raw)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> None:
        """End of stream: an unfinished event is discarded (the HTML standard's rule)."""
        self._line = b""
        self._data = []

    def _line_done(self, raw: bytes) -> SseEvent | None:
        if not raw:
            return self._dispatch()
        if raw.startswith(b"data: "):  # the common line, read without the general parse
            self._data.append(raw[6:].decode("utf-8", errors="replace"))
            return None
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, self._data = self._data, []
        event, self._event = self._event, ""
        if not data:
            return None
        return SseEvent("\n".join(data), event or "message", self._id, self._retry)


def generate_path(model: str, version: str | None, *, stream: bool) -> str:
    """The route of a generate call, relative to the server's base URL."""
    from urllib.parse import quote

    path = f"v2/models/{quote(model, safe='')}"
    if version:
        path += f"/versions/{quote(version, safe='')}"
    return path + ("/generate_stream" if stream else "/generate")


def error_of(obj: Any, chunks_received: int) -> ServerError | None:
    """The error a generate response object carries (``{"error": ...}``), else None.

    An error event is an inference error (Triton sends it once inference began) unless it
    names its ``status`` (as nbinfer's server does); the error's ``chunks_received`` says how
    many responses came before it.
    """
    if not isinstance(obj, dict) or "error" not in obj:
        return None
    status = obj.get("status")
    message = str(obj["error"])
    error = (
        error_for_status(status, message)
        if isinstance(status, int) and 400 <= status <= 599
        else InferenceError(message)
    )
    error.chunks_received = chunks_received
    return error
