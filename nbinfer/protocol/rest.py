"""The v2 REST codec, both directions: JSON messages and the binary tensor data extension.

One module serves the client (``encode_request`` / ``decode_response``) and the server
(``decode_request`` / ``encode_response``), so the wire format is written and tested once.

A message is either pure JSON (``header_length`` None) or a JSON header of ``header_length`` bytes
(the ``Inference-Header-Content-Length`` HTTP header) followed by raw tensors back to back, each
announced by ``parameters.binary_data_size`` in the header, in tensor order. A header length of 0
means the whole request body is the raw data of a one-input model.

Binary tensors decode as zero-copy, read-only views over the body (the client's
:class:`ResponseReader` makes them only when asked for); encoding copies each tensor at most once
(:func:`encode_request_parts` / :func:`encode_response_parts` return the pieces for
scatter-gather writes, with no copy at all for contiguous arrays). JSON ``data`` (strict types,
NaN / Infinity tokens) is read and written by :mod:`nbinfer.protocol.jsonvalues`.

Pure: numpy, orjson and the protocol's own modules; no HTTP engine, no I/O, no protobuf.

Example:
    >>> req = InferRequest(inputs=[InferInput("x", "FP32", [2], np.ones(2, np.float32))])
    >>> body, header_length = encode_request(req)
    >>> decode_request(body, header_length).inputs[0].data
    array([1., 1.], dtype=float32)

Layer: protocol (pure); imports numpy, orjson, errors and other protocol modules; no I/O, no
HTTP engine, no pandas.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol.dtypes import DATATYPES, numpy_dtype
from nbinfer.protocol.jsonvalues import (
    dumps_with_tokens,
    json_to_tensor,
    loads,
    tensor_to_json,
    with_tokens,
)
from nbinfer.protocol.reader import PLAIN_DTYPES, PlainOutput
from nbinfer.protocol.reader import ResponseReader as _LazyReader
from nbinfer.protocol.tensors import (
    bytes_element,
    check_shape,
    decode_bytes_tensor,
    decode_encoded_elements,
    tensor_from_bytes,
    tensor_to_bytes,
)
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    Parameters,
    RequestedOutput,
)

__all__ = [
    "HEADER_LENGTH",
    "ResponseReader",
    "decode_error",
    "decode_request",
    "decode_response",
    "encode_error",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_parts",
    "json_field",
    "json_parameters",
]

#: The HTTP header that carries the JSON header length of a binary message.
HEADER_LENGTH = "Inference-Header-Content-Length"
#: Marks a 400 readiness answer (Triton's status for an unknown model or version) as "not
#: found" for nbinfer's client, which then raises ModelNotFoundError with the server's message.
MODEL_NOT_FOUND_HEADER = "nbinfer-model-not-found"

#: Tensor parameters that describe the transport, not the tensor (stripped when decoding).
_BINARY_SIZE = "binary_data_size"
_BINARY_DATA = "binary_data"
_CLASSIFICATION = "classification"
_BINARY_OUTPUT = "binary_data_output"

Buffer = bytes | bytearray | memoryview


def _label(name: str) -> str:
    return f"tensor '{name}'"


# ---------------------------------------------------------------------------------------- errors


def encode_error(message: str) -> bytes:
    """The body of an error answer: ``{"error": message}``."""
    return orjson.dumps({"error": message})


def decode_error(body: Buffer) -> str:
    """The message of an error body (``{"error": ...}``); falls back to the body's text."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, Mapping) and "error" in obj:
        return str(obj["error"])
    if isinstance(obj, Mapping) and "detail" in obj:  # FastAPI-based servers (KServe, MLServer)
        return str(obj["detail"])
    text = bytes(body[:2000]).decode("utf-8", errors="replace").strip()
    return text or "empty error body"


# ---------------------------------------------------------------------------------- parameters


def json_parameters(obj: Mapping[str, Any], where: str) -> Parameters:
    """The ``parameters`` object of a JSON document (``{}`` when absent), checked."""
    params = obj.get("parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidInputError(
            f"{where}: 'parameters' must be an object, got {type(params).__name__}"
        )
    return params


def json_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """Field ``key`` of a JSON document, of type ``kind``; ``where`` names the document.

    Raises:
        InvalidInputError: The field is missing or of another type.
    """
    if key not in obj:
        raise InvalidInputError(f"{where}: missing field '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InvalidInputError(
            f"{where}: field '{key}' must be {names}, got {type(value).__name__}"
        )
    return value


def _shape(obj: Mapping[str, Any], where: str) -> list[int]:
    shape: list[int] = json_field(obj, "shape", list, where)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise InvalidInputError(
            f"{where}: invalid shape {shape} (dimensions must be integers >= 0)"
        )
    return shape


def _datatype(obj: Mapping[str, Any], where: str) -> str:
    datatype: str = json_field(obj, "datatype", str, where)
    if datatype not in DATATYPES:
        raise DataTypeError(
            f"{where}: unknown datatype {datatype!r}; known: {', '.join(DATATYPES)}"
        )
    return datatype


# -------------------------------------------------------------------------------------- encoding


class _Body:
    """Accumulates the binary section of a message."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def add(self, arr: np.ndarray[Any, Any], datatype: str) -> int:
        raw = tensor_to_bytes(arr, datatype)
        nbytes = raw.nbytes if isinstance(raw, memoryview) else len(raw)
        self.parts.append(raw)
        self.size += nbytes
        return nbytes

    def add_elements(self, arr: np.ndarray[Any, Any]) -> str:
        """BYTES elements back to back, unprefixed (OVMS's encoded images); their sizes."""
        items = [bytes_element(x) for x in np.asarray(arr, dtype=object).reshape(-1)]
        self.parts.extend(items)
        self.size += sum(map(len, items))
        return ",".join(str(len(x)) for x in items)


def _tensor_json(
    name: str,
    datatype: str,
    shape: Sequence[int],
    data: np.ndarray[Any, Any] | None,
    parameters: Parameters,
    body: _Body | None,
) -> dict[str, Any]:
    """The JSON of one tensor; with ``body`` its data goes to the binary section."""
    params = dict(parameters)
    sizes = params.pop(_BINARY_SIZE, None)
    tensor: dict[str, Any] = {"name": name, "datatype": datatype, "shape": [int(d) for d in shape]}
    if data is not None:
        check_shape(data, shape, name=name)
        if body is not None and datatype == "BYTES" and isinstance(sizes, str):
            params[_BINARY_SIZE] = body.add_elements(data)  # element sizes given: OVMS's form
        elif body is not None:
            params[_BINARY_SIZE] = body.add(data, datatype)
        else:
            tensor["data"] = with_tokens(tensor_to_json(data, datatype, name=name))
    if params:
        tensor["parameters"] = params
    return tensor


def _requested_output_json(out: RequestedOutput, binary_outputs: bool | None) -> dict[str, Any]:
    params: dict[str, Any] = dict(out.parameters)
    binary = out.binary_data if out.binary_data is not None else binary_outputs
    if binary is not None and "shared_memory_region" not in params:  # Triton refuses both
        params[_BINARY_DATA] = bool(binary)
    if out.class_count:
        params[_CLASSIFICATION] = int(out.class_count)
    tensor: dict[str, Any] = {"name": out.name}
    if params:
        tensor["parameters"] = params
    return tensor


def _finish(header: dict[str, Any], body: _Body) -> tuple[list[bytes | memoryview], int | None]:
    head = dumps_with_tokens(header)
    if not body.parts:
        return [head], None
    return [head, *body.parts], len(head)


def encode_request_parts(
    req: InferRequest, *, binary: bool = True, binary_outputs: bool | None = None
) -> tuple[list[bytes | memoryview], int | None]:
    """Like :func:`encode_request`, but the body as a list of buffers (no copy of tensor data)."""
    body = _Body()
    header: dict[str, Any] = {}
    if req.id:
        header["id"] = req.id
    params: dict[str, Any] = dict(req.parameters)
    if not req.outputs and binary_outputs:
        params[_BINARY_OUTPUT] = True
    if params:
        header["parameters"] = params
    header["inputs"] = [
        _tensor_json(i.name, i.datatype, i.shape, i.data, i.parameters, body if binary else None)
        for i in req.inputs
    ]
    if req.outputs:
        header["outputs"] = [_requested_output_json(o, binary_outputs) for o in req.outputs]
    return _finish(header, body)


def encode_request(
    req: InferRequest, *, binary: bool = True, binary_outputs: bool | None = None
) -> tuple[bytes, int | None]:
    """Encode an inference request body.

    Args:
        req: The request (``model_name`` / ``model_version`` go in the URL, not the body).
        binary: Put input tensors in the binary section (``binary_data_size``) instead of JSON.
        binary_outputs: Ask for binary outputs: sets each requested output's ``binary_data``
            (unless it sets its own) or, with no requested outputs, ``binary_data_output``.

    Returns:
        The body and the ``Inference-Header-Content-Length`` value (None for pure JSON).

    Raises:
        InvalidInputError: a tensor's data does not match its shape, or BYTES data that is not
            UTF-8 is sent as JSON.
    """
    parts, header_length = encode_request_parts(req, binary=binary, binary_outputs=binary_outputs)
    return b"".join(parts), header_length  # one part: the same bytes object, no copy


def _wants_binary(name: str, binary_outputs: Collection[str] | bool) -> bool:
    if isinstance(binary_outputs, bool):
        return binary_outputs
    return name in binary_outputs


def encode_response_parts(
    resp: InferResponse, *, binary_outputs: Collection[str] | bool = False
) -> tuple[list[bytes | memoryview], int | None]:
    """Like :func:`encode_response`, but the body as a list of buffers (no copy of tensor data)."""
    body = _Body()
    header: dict[str, Any] = {"model_name": resp.model_name, "model_version": resp.model_version}
    if resp.id:
        header["id"] = resp.id
    if resp.parameters:
        header["parameters"] = dict(resp.parameters)
    header["outputs"] = [
        _tensor_json(
            o.name,
            o.datatype,
            o.shape,
            o.data,
            o.parameters,
            body if _wants_binary(o.name, binary_outputs) else None,
        )
        for o in resp.outputs
    ]
    return _finish(header, body)


def encode_response(
    resp: InferResponse, *, binary_outputs: Collection[str] | bool = False
) -> tuple[bytes, int | None]:
    """Encode an inference response body.

    Args:
        resp: The response.
        binary_outputs: Output names to send as binary data (``True``: all of them).

    Returns:
        The body and the ``Inference-Header-Content-Length`` value (None for pure JSON).

    Raises:
        InvalidInputError: an output's data does not match its shape, or BYTES data that is not
            UTF-8 is sent as JSON.
    """
    parts, header_length = encode_response_parts(resp, binary_outputs=binary_outputs)
    return b"".join(parts), header_length  # one part: the same bytes object, no copy


# -------------------------------------------------------------------------------------- decoding


def _split(body: Buffer, header_length: int | None, what: str) -> tuple[Any, memoryview]:
    """Parse the JSON header; return it and the binary section as a memoryview."""
    view = memoryview(body).cast("B") if not isinstance(body, bytes) else memoryview(body)
    if header_length is None:
        return loads(view, what=f"{what} JSON"), view[len(view) :]
    if isinstance(header_length, bool) or not isinstance(header_length, int) or header_length < 0:
        raise InvalidInputError(f"invalid {HEADER_LENGTH} {header_length!r}")
    if header_length > len(view):
        raise InvalidInputError(
            f"{HEADER_LENGTH} is {header_length} but the {what} body has only {len(view)} bytes"
        )
    return loads(view[:header_length], what=f"{what} JSON header"), view[header_length:]


class _BinaryReader:
    """Hands out consecutive slices of the binary section, checking sizes."""

    __slots__ = ("offset", "view", "what")

    def __init__(self, view: memoryview, what: str) -> None:
        self.view = view
        self.offset = 0
        self.what = what

    def take(self, size: Any, name: str) -> memoryview:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidInputError(f"{_label(name)}: invalid {_BINARY_SIZE} {size!r}", tensor=name)
        end = self.offset + size
        if end > len(self.view):
            raise InvalidInputError(
                f"{_label(name)}: {_BINARY_SIZE} is {size} but only {len(self.view) - self.offset} "
                f"bytes of binary data remain in the {self.what} (truncated body?)",
                tensor=name,
                expected=size,
                actual=len(self.view) - self.offset,
            )
        chunk = self.view[self.offset : end]
        self.offset = end
        return chunk

    @property
    def remaining(self) -> int:
        return len(self.view) - self.offset

    def finish(self) -> None:
        extra = len(self.view) - self.offset
        if extra:
            raise InvalidInputError(
                f"{extra} bytes of binary data in the {self.what} are not claimed by any tensor's "
                f"{_BINARY_SIZE}",
                expected=self.offset,
                actual=len(self.view),
            )


def _encoded_elements(
    reader: _BinaryReader, size: Any, shape: list[int], name: str
) -> np.ndarray[Any, Any]:
    """A BYTES tensor's binary data, in Triton's or one of OVMS's forms.

    Triton's 4-byte prefixed elements, OVMS's element sizes (``binary_data_size: "645,94"``),
    or a single unprefixed element.
    """
    if isinstance(size, str | list):
        items = size.split(",") if isinstance(size, str) else size
        try:
            sizes = [int(v) for v in items]
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"{_label(name)}: {_BINARY_SIZE} must be an integer or comma-separated element "
                f"sizes, got {size!r}",
                tensor=name,
            ) from exc
        chunk = reader.take(sum(sizes), name)
        if len(sizes) == 1:
            return decode_encoded_elements(chunk, shape, name=name)
        return decode_encoded_elements(chunk, shape, sizes=sizes, name=name)
    return decode_encoded_elements(reader.take(size, name), shape, name=name)


def _decode_tensor(
    obj: Any, index: int, kind: str, reader: _BinaryReader
) -> tuple[str, str, list[int], np.ndarray[Any, Any] | None, Parameters]:
    where = f"{kind} {index}"
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{where} must be an object, got {type(obj).__name__}")
    name = json_field(obj, "name", str, where)
    where = f"{kind} '{name}'"
    datatype = _datatype(obj, where)
    shape = _shape(obj, where)
    params = dict(json_parameters(obj, where))
    size = params.pop(_BINARY_SIZE, None)
    data: np.ndarray[Any, Any] | None = None
    if size is not None:
        if "data" in obj:
            raise InvalidInputError(f"{where} has both JSON 'data' and {_BINARY_SIZE}", tensor=name)
        if datatype == "BYTES":
            data = _encoded_elements(reader, size, shape, name)
        else:
            data = tensor_from_bytes(reader.take(size, name), datatype, shape, name=name)
    elif "data" in obj:
        data = json_to_tensor(
            obj["data"], datatype, shape, name=name, kind=kind, nulls_as_nan=kind == "output"
        )
    elif "shared_memory_region" not in params and reader.remaining:
        # OVMS's curl form: the JSON header, then the tensor's data, with no binary_data_size
        chunk = reader.take(reader.remaining, name)
        if datatype == "BYTES":
            data = decode_encoded_elements(chunk, shape, name=name)
        else:
            data = tensor_from_bytes(chunk, datatype, shape, name=name)
    elif "shared_memory_region" not in params and kind != "output":
        # an output without data was written to shared memory (Triton does not echo the region)
        raise InvalidInputError(
            f"{where} has no data: expected 'data', parameters.{_BINARY_SIZE} or "
            "parameters.shared_memory_region",
            tensor=name,
        )
    return name, datatype, shape, data, params


def _infer_raw_shape(
    body: memoryview, datatype: str, shape: Sequence[int], name: str
) -> tuple[list[int], np.ndarray[Any, Any] | None]:
    """Resolve one -1 dimension of a raw single-input body from its size."""
    dims = [int(d) for d in shape]
    unknown = [i for i, d in enumerate(dims) if d < 0]
    if not unknown:
        return dims, None
    if len(unknown) > 1:
        raise InvalidInputError(
            f"{_label(name)} has shape {dims} with several variable dimensions: a raw binary body "
            f"(header length 0) cannot tell them apart; send a JSON header",
            tensor=name,
        )
    known = 1
    for d in dims:
        if d >= 0:
            known *= d
    decoded = None
    if datatype == "BYTES":
        decoded = decode_bytes_tensor(body, name=name)
        total = int(decoded.size)
    else:
        itemsize = numpy_dtype(datatype).itemsize
        if len(body) % itemsize:
            raise InvalidInputError(
                f"{_label(name)} ({datatype}): raw body of {len(body)} bytes is not a multiple of "
                f"{itemsize}",
                tensor=name,
            )
        total = len(body) // itemsize
    if known == 0 or total % known:
        raise InvalidInputError(
            f"{_label(name)}: {total} elements do not fit shape {dims}", tensor=name
        )
    dims[unknown[0]] = total // known
    return dims, decoded


def decode_request(
    body: Buffer,
    header_length: int | None,
    *,
    input_names: Sequence[str] | None = None,
    raw_input_spec: tuple[str, str, Sequence[int]] | None = None,
) -> InferRequest:
    """Decode an inference request body (server side).

    Args:
        body: The HTTP body.
        header_length: The ``Inference-Header-Content-Length`` value (None: pure JSON; 0: the
            body is the raw data of the model's only input).
        input_names: The model's input names (only used to explain a raw body error).
        raw_input_spec: ``(name, datatype, shape)`` of the model's only input, for raw bodies;
            one -1 dimension is inferred from the body size.

    Returns:
        The request; binary tensors are read-only views of ``body``. ``model_name`` is empty
        (it comes from the URL).

    Raises:
        InvalidInputError: malformed JSON, missing fields, element counts that do not match the
            shape, binary sizes that do not add up, a truncated body.
    """
    if header_length == 0:
        if raw_input_spec is None:
            names = list(input_names or [])
            raise InvalidInputError(
                f"a raw binary request body ({HEADER_LENGTH}: 0) is only accepted by a model "
                f"with exactly one input; this model has {len(names)}: {names}"
            )
        name, datatype, shape = raw_input_spec
        view = memoryview(body).cast("B") if not isinstance(body, bytes) else memoryview(body)
        dims, decoded = _infer_raw_shape(view, datatype, shape, name)
        if decoded is not None:
            raw = decoded.reshape(dims)
        else:
            raw = tensor_from_bytes(view, datatype, dims, name=name)
        return InferRequest(inputs=[InferInput(name, datatype, dims, raw)])
    header, binary = _split(body, header_length, "request")
    if not isinstance(header, dict):
        raise InvalidInputError(f"request JSON must be an object, got {type(header).__name__}")
    reader = _BinaryReader(binary, "request")
    raw_inputs = json_field(header, "inputs", list, "request")
    inputs = []
    for i, obj in enumerate(raw_inputs):
        name, datatype, shape, data, params = _decode_tensor(obj, i, "input", reader)
        inputs.append(InferInput(name, datatype, shape, data, params))
    reader.finish()
    outputs = []
    for i, obj in enumerate(header.get("outputs") or []):
        where = f"requested output {i}"
        if not isinstance(obj, dict):
            raise InvalidInputError(f"{where} must be an object, got {type(obj).__name__}")
        name = json_field(obj, "name", str, where)
        params = dict(json_parameters(obj, f"requested output '{name}'"))
        binary_data = params.pop(_BINARY_DATA, None)
        class_count = params.pop(_CLASSIFICATION, 0)
        if isinstance(class_count, bool) or not isinstance(class_count, int) or class_count < 0:
            raise InvalidInputError(
                f"requested output '{name}': {_CLASSIFICATION} must be an integer >= 0, "
                f"got {class_count!r}"
            )
        outputs.append(
            RequestedOutput(
                name,
                binary_data=None if binary_data is None else bool(binary_data),
                class_count=class_count,
                parameters=params,
            )
        )
    request_id = header.get("id", "")
    return InferRequest(
        inputs=inputs,
        outputs=outputs,
        id=request_id if isinstance(request_id, str) else str(request_id),
        parameters=dict(json_parameters(header, "request")),
    )


def _response_header(body: Buffer, header_length: int | None) -> tuple[dict[str, Any], memoryview]:
    header, binary = _split(body, header_length, "response")
    if not isinstance(header, dict):
        raise InvalidInputError(f"response JSON must be an object, got {type(header).__name__}")
    if "outputs" not in header and "error" in header:
        raise InvalidInputError(f"response is an error: {header['error']}")
    return header, binary


def _response_from_header(header: dict[str, Any], binary: memoryview) -> InferResponse:
    reader = _BinaryReader(binary, "response")
    outputs = []
    for i, obj in enumerate(json_field(header, "outputs", list, "response")):
        name, datatype, shape, data, params = _decode_tensor(obj, i, "output", reader)
        outputs.append(InferOutput(name, datatype, shape, data, params))
    reader.finish()
    response_id = header.get("id", "")
    version = header.get("model_version", "")
    return InferResponse(
        model_name=str(header.get("model_name", "")),
        outputs=outputs,
        model_version=version if isinstance(version, str) else str(version),
        id=response_id if isinstance(response_id, str) else str(response_id),
        parameters=dict(json_parameters(header, "response")),
    )


def decode_response(body: Buffer, header_length: int | None) -> InferResponse:
    """Decode an inference response body (client side).

    Binary outputs are read-only views of ``body``.

    Raises:
        InvalidInputError: malformed JSON, missing fields, sizes that do not add up.
    """
    return _response_from_header(*_response_header(body, header_length))


class ResponseReader(_LazyReader):
    """An inference response body whose outputs are decoded on first access.

    The JSON header is parsed once and checked as :func:`decode_response` checks it; when every
    output is fixed-width binary data whose size matches its shape and the sizes add up to the
    body, arrays are zero-copy read-only views of the body made when first asked for. Any other
    body (JSON data, BYTES / BOOL, shared memory, sizes that do not add up) is decoded at once
    from the parsed header, with :func:`decode_response`'s errors.

    Raises:
        InvalidInputError: malformed JSON, missing fields, sizes that do not add up.
    """

    __slots__ = ("_header",)

    def __init__(self, body: bytes, header_length: int | None) -> None:
        if header_length is not None and type(body) is bytes:  # immutable: read-only views
            # answers of one model and shape repeat their JSON header byte for byte
            head = body[:header_length]
            known = _LAYOUTS.get(head)
            if known is not None and known[2] == len(body):
                self._header = known[0]
                super().__init__(plain=[(*o, body, start, n) for o, start, n in known[1]])
                return
        header, binary = _response_header(body, header_length)
        self._header = header
        plain = None
        if header_length is not None and type(body) is bytes:
            plain = _plain_layout(header, body, header_length)
        if plain is None:
            super().__init__(_response_from_header(header, binary))
            return
        super().__init__(plain=plain)
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        places = [(o[:4], o[5], o[6]) for o in plain]
        _LAYOUTS[body[:header_length]] = (header, places, len(body))

    def _head(self, key: str) -> str:
        return str(self._header.get(key, ""))

    def _parameters(self) -> Parameters:
        params = self._header.get("parameters")
        return dict(params) if isinstance(params, dict) else {}

    def _output_parameters(self, index: int) -> Parameters:
        params = dict(self._header["outputs"][index]["parameters"])
        params.pop(_BINARY_SIZE, None)
        return params


#: Plain layouts by the JSON header they were read from: the parsed header (never changed
#: after parsing; readers copy what they hand out), each output's name / datatype / dtype /
#: shape with its offset and element count, and the body's length.
_LAYOUTS: dict[bytes, tuple[dict[str, Any], list[tuple[Any, int, int]], int]] = {}
_MAX_LAYOUTS = 256


def _plain_layout(header: dict[str, Any], body: bytes, start: int) -> list[PlainOutput] | None:
    """Each output's slice of ``body`` when all are plain and fill it exactly, else None."""
    outputs = header.get("outputs")
    if type(outputs) is not list:
        return None
    plain: list[PlainOutput] = []
    offset = start
    for obj in outputs:
        if type(obj) is not dict or "data" in obj:
            return None
        name, datatype, shape, params = (
            obj.get("name"),
            obj.get("datatype"),
            obj.get("shape"),
            obj.get("parameters"),
        )
        dtype = PLAIN_DTYPES.get(datatype) if type(datatype) is str else None
        if dtype is None or type(name) is not str or type(shape) is not list:
            return None
        if type(params) is not dict or not all(type(d) is int and d >= 0 for d in shape):
            return None
        count = math.prod(shape)
        size = params.get(_BINARY_SIZE)
        if type(size) is not int or size != count * dtype.itemsize:
            return None
        plain.append((name, str(datatype), dtype, tuple(shape), body, offset, count))
        offset += size
    return plain if offset == len(body) else None
