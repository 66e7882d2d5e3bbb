"""The v2 REST codec, both directions: JSON messages and the binary tensor data extension.

One module serves the client (``encode_request`` / ``decode_response``) and the server
(``decode_request`` / ``encode_response``), so the wire format is written and tested once.

A message is either pure JSON (``header_length`` None) or a JSON header of ``header_length`` bytes
(the ``Inference-Header-Content-Length`` HTTP header) followed by raw tensors back to back, each
announced by ``parameters.binary_data_size`` in the header, in tensor order. A header length of 0
means the whole request body is the raw data of a one-input model.

Binary tensors decode as zero-copy, read-only views over the body; encoding copies each tensor at
most once (into the joined body; :func:`encode_request_parts` / :func:`encode_response_parts`
return the pieces for scatter-gather writes, with no copy at all for contiguous arrays).

JSON ``data`` may be flat or nested on input and is always flat on output. BYTES travel as UTF-8
strings in JSON (non-UTF-8 bytes need binary data), BOOL as ``true``/``false``, FP16 and BF16 as
numbers. Values are never changed silently: BOOL data must be ``true``/``false``, numeric data
numbers that fit the datatype (else an error naming the tensor and the element). NaN and
infinities travel as the ``NaN``, ``Infinity`` and ``-Infinity`` tokens, as tritonclient writes
and reads them and Triton and KServe's server accept them; ``null`` is refused in requests and read
as NaN in responses (KServe writes it for any non-finite float).

Example:
    >>> req = InferRequest(inputs=[InferInput("x", "FP32", [2], np.ones(2, np.float32))])
    >>> body, header_length = encode_request(req)
    >>> decode_request(body, header_length).inputs[0].data
    array([1., 1.], dtype=float32)
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol.dtypes import DATATYPES, bfloat16, numpy_dtype
from nbinfer.protocol.tensors import (
    check_shape,
    decode_bytes_tensor,
    decode_encoded_elements,
    element_count,
    tensor_from_bytes,
    tensor_to_bytes,
    to_bfloat16,
)
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    Parameters,
    RepositoryModel,
    RequestedOutput,
    ServerMetadata,
    TensorSpec,
)

__all__ = [
    "HEADER_LENGTH",
    "decode_error",
    "decode_request",
    "decode_response",
    "dumps",
    "encode_error",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_parts",
    "json_to_tensor",
    "loads",
    "model_metadata_from_json",
    "model_metadata_to_json",
    "repository_index_from_json",
    "repository_index_to_json",
    "server_metadata_from_json",
    "server_metadata_to_json",
    "tensor_to_json",
]

#: The HTTP header that carries the JSON header length of a binary message.
HEADER_LENGTH = "Inference-Header-Content-Length"

_OPTS = orjson.OPT_SERIALIZE_NUMPY
#: Tensor parameters that describe the transport, not the tensor (stripped when decoding).
_BINARY_SIZE = "binary_data_size"
_BINARY_DATA = "binary_data"
_CLASSIFICATION = "classification"
_BINARY_OUTPUT = "binary_data_output"

Buffer = bytes | bytearray | memoryview


# ------------------------------------------------------------------------------------------ JSON


def dumps(obj: Any) -> bytes:
    """Serialize to JSON bytes with orjson (numpy arrays and scalars allowed)."""
    return orjson.dumps(obj, option=_OPTS)


def loads(data: Buffer | str, *, what: str = "JSON body") -> Any:
    """Parse JSON bytes; also reads the ``NaN``, ``Infinity`` and ``-Infinity`` tokens.

    Raises:
        InvalidInputError: the data is not valid JSON (the message says where).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if b"NaN" not in raw and b"Infinity" not in raw:
            raise InvalidInputError(f"malformed {what}: {exc}") from exc
        error: Exception = exc
    try:  # the NaN / Infinity / -Infinity tokens tritonclient sends (rare: the slow parser)
        return json.loads(raw, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        error = exc
    raise InvalidInputError(f"malformed {what}: {error}") from error


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} does not fit a 64-bit float")
    return value


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


# ------------------------------------------------------------------------------ tensor <-> JSON


def _label(name: str) -> str:
    return f"tensor '{name}'"


def tensor_to_json(arr: np.ndarray[Any, Any], datatype: str, *, name: str = "") -> Any:
    """The JSON ``data`` of a tensor, flat, ready for :func:`dumps` (a numpy array or a list).

    Raises:
        InvalidInputError: a BYTES element is not valid UTF-8 (JSON can only carry text).
    """
    if datatype == "BYTES":
        flat = arr.ravel().tolist()
        try:
            return list(map(bytes.decode, flat))  # all bytes and valid UTF-8: the common case
        except (TypeError, UnicodeDecodeError):
            pass
        out: list[str] = []
        for i, item in enumerate(flat):
            if isinstance(item, str):
                out.append(item)
                continue
            try:
                out.append(bytes(item).decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise InvalidInputError(
                    f"{_label(name)} (BYTES) element {i} is not valid UTF-8 ({item[:32]!r}) and "
                    "cannot be sent as JSON; use binary tensor data instead",
                    tensor=name,
                ) from exc
        return out
    a = np.asarray(arr)
    if a.dtype == bfloat16:
        a = a.astype(np.float32)
    elif not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return np.ascontiguousarray(a).reshape(-1)


def _flatten_strings(data: list[Any], name: str) -> list[Any]:
    if not any(isinstance(x, list) for x in data):
        return data
    try:
        nested = np.array(data, dtype=object)
    except ValueError as exc:
        raise InvalidInputError(f"{_label(name)} has ragged nested data: {exc}") from exc
    flat: list[Any] = nested.ravel().tolist()
    return flat


def json_to_tensor(
    data: Any,
    datatype: str,
    shape: Sequence[int],
    *,
    name: str,
    kind: str = "tensor",
    nulls_as_nan: bool = False,
) -> np.ndarray[Any, Any]:
    """Decode the JSON ``data`` of a tensor (flat or nested) into an array of ``shape``.

    Strict, as Triton is: BOOL takes only ``true`` / ``false``; numeric datatypes take only
    numbers (no booleans, strings or ``null``), integer datatypes only whole numbers; a value
    that does not fit the datatype (``1e39`` for FP32, ``300`` for INT8) is an error, never
    infinity or a wrapped integer. ``NaN`` / ``Infinity`` / ``-Infinity`` (parsed by
    :func:`loads`) are floats like any other.

    Args:
        data: The parsed JSON ``data``.
        datatype: The tensor's v2 datatype.
        shape: The tensor's shape.
        name: The tensor's name (for messages).
        kind: What the tensor is, for messages (``"input"``, ``"output"``).
        nulls_as_nan: Read ``null`` in float data as NaN (what KServe writes for every
            non-finite float in a response); off for requests.

    Raises:
        InvalidInputError: wrong element count for ``shape``, ragged data or values that are not
            of ``datatype`` or do not fit it (the message names the tensor and the element).
    """
    dims = [int(d) for d in shape]
    element_count(dims, name=name)  # validates the shape
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        flat = _flatten_strings(data, name)
        try:
            items = list(map(str.encode, flat))
        except TypeError:
            bad = next(x for x in flat if not isinstance(x, str))
            raise InvalidInputError(
                f"{_label(name)} (BYTES) JSON data must be strings, got {type(bad).__name__} "
                f"{bad!r:.40}",
                tensor=name,
            ) from None
        except UnicodeEncodeError as exc:
            raise InvalidInputError(f"{_label(name)} (BYTES): {exc}", tensor=name) from exc
        check_shape(len(items), dims, name=name)
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(dims)
    types = set(map(type, data))
    if list in types:
        data, types = _flatten_numbers(data, name)
    check_shape(len(data), dims, name=name)
    target = numpy_dtype(datatype)
    if not data:
        return np.empty(dims, dtype=target)
    label = f"{kind} '{name}' ({datatype})"
    if datatype == "BOOL":
        if types != {bool}:
            raise _wrong_json_type(data, types - {bool}, label, "true or false", name, datatype)
        return np.array(data, dtype=np.bool_).reshape(dims)
    allowed = _NULLABLE if nulls_as_nan and target.kind in "fV" else _NUMBERS
    if not types <= allowed:
        raise _wrong_json_type(data, types - allowed, label, "numbers", name, datatype)
    if target.kind in "iu":
        return _json_integers(data, float in types, datatype, label, name).reshape(dims)
    return _json_floats(data, type(None) in types, datatype, label, name).reshape(dims)


_NUMBERS = frozenset({int, float})
_NULLABLE = _NUMBERS | {type(None)}
_NULL_HINT = (
    "; JSON has no NaN or infinity: send NaN, Infinity or -Infinity (as tritonclient does) or "
    "use binary tensor data"
)


def _flatten_numbers(data: list[Any], name: str) -> tuple[list[Any], set[type]]:
    try:
        nested = np.array(data, dtype=object)
    except ValueError as exc:
        raise InvalidInputError(f"{_label(name)} has ragged nested data: {exc}") from exc
    flat: list[Any] = nested.ravel().tolist()
    types = set(map(type, flat))
    if list in types:  # e.g. [[1, 2], [3]] with numpy making an array of lists
        raise InvalidInputError(f"{_label(name)} has ragged nested data", tensor=name)
    return flat, types


def _json_repr(value: Any) -> str:
    text = json.dumps(value, default=repr)  # not orjson: integers past 64 bits are common here
    return text if len(text) <= 40 else text[:37] + "..."


def _wrong_json_type(
    data: list[Any], bad: set[type], label: str, expected: str, name: str, datatype: str
) -> InvalidInputError:
    i, value = next((i, x) for i, x in enumerate(data) if type(x) in bad)
    hint = _NULL_HINT if value is None and expected == "numbers" else ""
    return InvalidInputError(
        f"{label} element {i} is {_json_repr(value)}: wrong type, {datatype} JSON data must be "
        f"{expected}{hint}",
        tensor=name,
        datatype=datatype,
    )


def _out_of_range(label: str, i: int, value: Any, name: str, datatype: str) -> InvalidInputError:
    return InvalidInputError(
        f"{label} element {i} is {_json_repr(value)}: out of range, does not fit {datatype}",
        tensor=name,
        datatype=datatype,
    )


def _json_floats(
    data: list[Any], has_nulls: bool, datatype: str, label: str, name: str
) -> np.ndarray[Any, Any]:
    """Floats of ``datatype``; a finite value that overflows it is an error (never infinity)."""
    wide = np.float32 if datatype == "BF16" else numpy_dtype(datatype)
    try:
        with np.errstate(over="ignore"):  # overflow is found below, element by element
            if has_nulls:  # only allowed when decoding a response (a peer's NaN)
                arr = np.array(data, dtype=np.float64).astype(wide)
            else:
                arr = np.fromiter(data, dtype=wide, count=len(data))
    except OverflowError as exc:  # an integer too big for any float
        i = next(i for i, x in enumerate(data) if type(x) is int and abs(x) > 2**1023)
        raise _out_of_range(label, i, data[i], name, datatype) from exc
    if datatype == "BF16":
        with np.errstate(over="ignore"):
            arr = to_bfloat16(arr)
    finite = np.isfinite(arr.astype(np.float32) if datatype == "BF16" else arr)
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            value = data[i]
            if value is not None and math.isfinite(value):
                raise _out_of_range(label, i, value, name, datatype)
    return arr


def _json_integers(
    data: list[Any], has_floats: bool, datatype: str, label: str, name: str
) -> np.ndarray[Any, Any]:
    """Integers of ``datatype``: floats must be whole numbers, values must fit ``datatype``."""
    target = numpy_dtype(datatype)
    if has_floats:
        for i, x in enumerate(data):
            if type(x) is float and not x.is_integer():
                raise InvalidInputError(
                    f"{label} element {i} is {_json_repr(x)}: wrong type, {datatype} JSON data "
                    "must be whole numbers",
                    tensor=name,
                    datatype=datatype,
                )
        data = [int(x) for x in data]
    info = np.iinfo(target)
    arr = None
    for wide in (np.int64, np.uint64):
        try:
            arr = np.array(data, dtype=wide)
            break
        except OverflowError:
            continue
    if arr is None:  # fits no 64-bit integer type
        i = next(i for i, x in enumerate(data) if not info.min <= x <= info.max)
        raise _out_of_range(label, i, data[i], name, datatype)
    wide_info = np.iinfo(arr.dtype)
    lo, hi = max(info.min, wide_info.min), min(info.max, wide_info.max)
    bad = (arr < lo) | (arr > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _out_of_range(label, i, data[i], name, datatype)
    return arr.astype(target, copy=False)


# ---------------------------------------------------------------------------------- parameters


def _parameters(obj: Mapping[str, Any], where: str) -> Parameters:
    params = obj.get("parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidInputError(
            f"{where}: 'parameters' must be an object, got {type(params).__name__}"
        )
    return params


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
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
    shape: list[int] = _field(obj, "shape", list, where)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise InvalidInputError(
            f"{where}: invalid shape {shape} (dimensions must be integers >= 0)"
        )
    return shape


def _datatype(obj: Mapping[str, Any], where: str) -> str:
    datatype: str = _field(obj, "datatype", str, where)
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
    params.pop(_BINARY_SIZE, None)
    tensor: dict[str, Any] = {"name": name, "datatype": datatype, "shape": [int(d) for d in shape]}
    if data is not None:
        check_shape(data, shape, name=name)
        if body is not None:
            params[_BINARY_SIZE] = body.add(data, datatype)
        else:
            tensor["data"] = _with_tokens(tensor_to_json(data, datatype, name=name))
    if params:
        tensor["parameters"] = params
    return tensor


def _requested_output_json(out: RequestedOutput, binary_outputs: bool | None) -> dict[str, Any]:
    params: dict[str, Any] = dict(out.parameters)
    binary = out.binary_data if out.binary_data is not None else binary_outputs
    if binary is not None:
        params[_BINARY_DATA] = bool(binary)
    if out.class_count:
        params[_CLASSIFICATION] = int(out.class_count)
    tensor: dict[str, Any] = {"name": out.name}
    if params:
        tensor["parameters"] = params
    return tensor


class _Tokens(str):
    """A placeholder for float data with NaN / infinities; ``_finish`` puts ``json`` in its place.

    orjson writes ``null`` for NaN and infinities; the v2 peers that carry them (Triton,
    tritonclient, KServe's server) use the ``NaN`` / ``Infinity`` / ``-Infinity`` tokens.
    """

    json: bytes


def _with_tokens(data: Any) -> Any:
    """``data`` itself, or a :class:`_Tokens` when it is float data with non-finite values."""
    if not isinstance(data, np.ndarray) or data.dtype.kind != "f":
        return data
    finite = np.isfinite(data)
    if finite.all():
        return data
    items = dumps(np.where(finite, data, 0))[1:-1].split(b",")  # flat numbers: no comma inside
    for i in np.flatnonzero(~finite).tolist():
        value = float(data[i])
        items[i] = b"NaN" if value != value else (b"Infinity" if value > 0 else b"-Infinity")
    tokens = _Tokens(f"nbinfer-non-finite-{uuid.uuid4().hex}")
    tokens.json = b"[" + b",".join(items) + b"]"
    return tokens


def _finish(header: dict[str, Any], body: _Body) -> tuple[list[bytes | memoryview], int | None]:
    head = dumps(header)
    for key in ("inputs", "outputs"):
        for tensor in header.get(key) or ():
            data = tensor.get("data")
            if isinstance(data, _Tokens):
                head = head.replace(f'"{data}"'.encode(), data.json, 1)
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
    name = _field(obj, "name", str, where)
    where = f"{kind} '{name}'"
    datatype = _datatype(obj, where)
    shape = _shape(obj, where)
    params = dict(_parameters(obj, where))
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
    elif "shared_memory_region" not in params:
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
    raw_inputs = _field(header, "inputs", list, "request")
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
        name = _field(obj, "name", str, where)
        params = dict(_parameters(obj, f"requested output '{name}'"))
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
        parameters=dict(_parameters(header, "request")),
    )


def decode_response(body: Buffer, header_length: int | None) -> InferResponse:
    """Decode an inference response body (client side).

    Binary outputs are read-only views of ``body``.

    Raises:
        InvalidInputError: malformed JSON, missing fields, sizes that do not add up.
    """
    header, binary = _split(body, header_length, "response")
    if not isinstance(header, dict):
        raise InvalidInputError(f"response JSON must be an object, got {type(header).__name__}")
    if "outputs" not in header and "error" in header:
        raise InvalidInputError(f"response is an error: {header['error']}")
    reader = _BinaryReader(binary, "response")
    outputs = []
    for i, obj in enumerate(_field(header, "outputs", list, "response")):
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
        parameters=dict(_parameters(header, "response")),
    )


# ------------------------------------------------------------------------------- metadata JSON


def server_metadata_to_json(meta: ServerMetadata) -> dict[str, Any]:
    """``GET /v2`` answer."""
    return {"name": meta.name, "version": meta.version, "extensions": list(meta.extensions)}


def server_metadata_from_json(obj: Any) -> ServerMetadata:
    """Parse a ``GET /v2`` answer (missing version / extensions tolerated).

    Raises:
        InvalidInputError: not an object or no ``name``.
    """
    if not isinstance(obj, dict):
        raise InvalidInputError(f"server metadata must be an object, got {type(obj).__name__}")
    return ServerMetadata(
        name=str(_field(obj, "name", str, "server metadata")),
        version=str(obj.get("version", "")),
        extensions=[str(e) for e in obj.get("extensions") or []],
    )


def _spec_to_json(spec: TensorSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": spec.name,
        "datatype": spec.datatype,
        "shape": [int(d) for d in spec.shape],
    }
    if spec.parameters:
        out["parameters"] = dict(spec.parameters)
    return out


def _spec_from_json(obj: Any, where: str) -> TensorSpec:
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{where} must be an object, got {type(obj).__name__}")
    name = _field(obj, "name", str, where)
    shape = _field(obj, "shape", list, f"{where} '{name}'")
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise InvalidInputError(f"{where} '{name}': invalid shape {shape}")
    return TensorSpec(
        name=name,
        datatype=str(_field(obj, "datatype", str, f"{where} '{name}'")),
        shape=list(shape),
        parameters=dict(_parameters(obj, where)),
    )


def model_metadata_to_json(meta: ModelMetadata) -> dict[str, Any]:
    """``GET /v2/models/{m}`` answer."""
    out: dict[str, Any] = {
        "name": meta.name,
        "versions": list(meta.versions),
        "platform": meta.platform,
        "inputs": [_spec_to_json(s) for s in meta.inputs],
        "outputs": [_spec_to_json(s) for s in meta.outputs],
    }
    if meta.parameters:
        out["parameters"] = dict(meta.parameters)
    return out


def model_metadata_from_json(obj: Any) -> ModelMetadata:
    """Parse a ``GET /v2/models/{m}`` answer.

    Raises:
        InvalidInputError: not an object, no ``name`` or malformed tensor specs.
    """
    if not isinstance(obj, dict):
        raise InvalidInputError(f"model metadata must be an object, got {type(obj).__name__}")
    name = _field(obj, "name", str, "model metadata")
    return ModelMetadata(
        name=name,
        versions=[str(v) for v in obj.get("versions") or []],
        platform=str(obj.get("platform", "")),
        inputs=[_spec_from_json(s, "model input") for s in obj.get("inputs") or []],
        outputs=[_spec_from_json(s, "model output") for s in obj.get("outputs") or []],
        parameters=dict(_parameters(obj, "model metadata")),
    )


def repository_index_to_json(models: Iterable[RepositoryModel]) -> list[dict[str, Any]]:
    """``POST /v2/repository/index`` answer (empty version / state / reason left out)."""
    out = []
    for m in models:
        row: dict[str, Any] = {"name": m.name}
        if m.version:
            row["version"] = m.version
        if m.state:
            row["state"] = m.state
        if m.reason:
            row["reason"] = m.reason
        out.append(row)
    return out


def repository_index_from_json(obj: Any) -> list[RepositoryModel]:
    """Parse a ``POST /v2/repository/index`` answer.

    Raises:
        InvalidInputError: not a list of objects with a ``name``.
    """
    if not isinstance(obj, list):
        raise InvalidInputError(f"repository index must be a list, got {type(obj).__name__}")
    rows = []
    for i, row in enumerate(obj):
        if not isinstance(row, dict):
            raise InvalidInputError(f"repository index row {i} must be an object")
        rows.append(
            RepositoryModel(
                name=str(_field(row, "name", str, f"repository index row {i}")),
                version=str(row.get("version", "")),
                state=str(row.get("state", "")),
                reason=str(row.get("reason", "")),
            )
        )
    return rows
