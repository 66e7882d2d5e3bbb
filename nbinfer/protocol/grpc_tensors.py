"""Tensors inside v2 gRPC messages: parameters, typed contents and raw contents, both ways.

The part of the gRPC codec that works field by field on the messages
:mod:`nbinfer.protocol.grpc` hands it (``ModelInferRequest.InferInputTensor``,
``InferTensorContents``, parameter maps): it reads and writes their fields and never imports the
generated stubs, so :mod:`nbinfer.protocol.grpc` stays their only user. Raw tensors decode as
zero-copy read-only views; typed contents are written and read without a per-element loop where
the wire form allows (packed floats and bools). :func:`split_field` takes the raw contents out
of a serialized message by walking its top-level records, so large tensors are never copied
into a message.

Imports numpy and the protocol's own tensor / dtype modules only: no protobuf runtime, no I/O.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, Final, TypeVar

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.reader import PLAIN_DTYPES
from nbinfer.protocol.tensors import (
    bytes_element,
    decode_encoded_elements,
    tensor_from_bytes,
    tensor_to_bytes,
)
from nbinfer.protocol.types import InferInput, InferOutput, Parameters, ParamValue

__all__ = [
    "count_field",
    "decode_tensors",
    "encode_tensors",
    "params_from_proto",
    "params_to_proto",
    "split_field",
    "varint",
    "VIEW_MIN_BYTES",
]

logger = logging.getLogger("nbinfer")

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_UINT64_MAX: Final = 2**64 - 1

_ParamMap = MutableMapping[str, Any]  # map<string, InferParameter>

#: Below this size a copy (``tobytes``) costs less than making a view (see encode_tensors).
VIEW_MIN_BYTES: Final = 64 * 1024


def _set_param(target: Any, key: str, value: Any) -> None:
    if isinstance(value, bool | np.bool_):
        target.bool_param = bool(value)
    elif isinstance(value, int | np.integer):
        number = int(value)
        if _INT64_MIN <= number <= _INT64_MAX:
            target.int64_param = number
        elif 0 <= number <= _UINT64_MAX:
            target.uint64_param = number
        else:
            raise InvalidInputError(
                f"parameter {key!r}: integer {number} does not fit in int64 or uint64",
                parameter=key,
            )
    elif isinstance(value, float | np.floating):
        target.double_param = float(value)
    elif isinstance(value, str):
        target.string_param = value
    else:
        raise InvalidInputError(
            f"parameter {key!r}: {type(value).__name__} is not a v2 parameter type "
            "(bool, int, float or str)",
            parameter=key,
        )


def params_to_proto(params: Mapping[str, ParamValue], target: _ParamMap) -> None:
    """Write a parameters dict into a protobuf ``map<string, InferParameter>``.

    ``bool`` -> ``bool_param``, ``int`` -> ``int64_param`` (``uint64_param`` above int64),
    ``float`` -> ``double_param``, ``str`` -> ``string_param``.

    Raises:
        InvalidInputError: a value has no v2 parameter type or is out of range.
    """
    for key, value in params.items():
        _set_param(target[key], key, value)


def params_from_proto(source: Mapping[str, Any]) -> Parameters:
    """Read a protobuf ``map<string, InferParameter>`` into a parameters dict (unset skipped)."""
    if not source:
        return {}
    out: Parameters = {}
    for key, param in source.items():
        kind = param.WhichOneof("parameter_choice")
        if kind is not None:
            out[key] = getattr(param, kind)
    return out


# ---------------------------------------------------------------------------------------------
# Tensor contents

#: v2 datatype -> the InferTensorContents list that carries it in typed form.
_CONTENTS_FIELD: Final[dict[str, str]] = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}

#: Typed lists whose packed wire form is the little-endian array itself (bool: one 0/1 byte).
_PACKED_FIXED: Final[dict[str, np.dtype[Any]]] = {
    "BOOL": np.dtype("u1"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}


def _field_number(contents: Any, field: str) -> int:
    """The field number of ``field`` in the contents message (read from its descriptor)."""
    number: int = contents.DESCRIPTOR.fields_by_name[field].number
    return number


#: The varints of 0..127 (one byte each).
_ONE_BYTE: Final = [bytes((i,)) for i in range(0x80)]


def varint(value: int) -> bytes:
    """The protobuf base-128 varint of ``value`` (for hand-assembled records)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidInputError("truncated varint in tensor contents")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _packed_payloads(buf: bytes, field_number: int) -> list[bytes]:
    """The length-delimited payloads of ``field_number`` in a serialized InferTensorContents.

    Every field of InferTensorContents is repeated and (proto3) packed or bytes, so each record
    is length-delimited (wire type 2), which is all this reader needs.
    """
    pieces = []
    pos = 0
    while pos < len(buf):
        tag, pos = _read_varint(buf, pos)
        if tag & 7 != 2:
            raise InvalidInputError(f"unexpected wire type {tag & 7} in tensor contents")
        length, pos = _read_varint(buf, pos)
        if tag >> 3 == field_number:
            pieces.append(buf[pos : pos + length])
        pos += length
    return pieces


#: Bytes past the tag of a record of each fixed-size wire type (1: 64-bit, 5: 32-bit).
_FIXED_WIRE_SIZE: Final = {1: 8, 5: 4}


def count_field(buf: bytes, field_number: int, stop_at: int) -> int:
    """How many top-level records of ``field_number`` a serialized message holds.

    Counting stops at ``stop_at`` (the cost is bounded by the records read, not the message),
    and at the first malformed record (the protobuf parser then reports it).
    """
    end = len(buf)
    pos = count = 0
    try:
        while pos < end and count < stop_at:
            tag, pos = _read_varint(buf, pos)
            wire = tag & 7
            if wire == 0:
                _, pos = _read_varint(buf, pos)
            elif wire == 2:
                length, pos = _read_varint(buf, pos)
                pos += length
                if tag >> 3 == field_number:
                    count += 1
            elif wire in _FIXED_WIRE_SIZE:
                pos += _FIXED_WIRE_SIZE[wire]
            else:
                break
    except InvalidInputError:
        pass
    return count


def split_field(buf: bytes, field_number: int) -> tuple[bytes, list[memoryview]] | None:
    """Take the length-delimited records of ``field_number`` out of a serialized message.

    Returns the other top-level records (re-joined: a message of its own) and the payloads of
    ``field_number`` as zero-copy views of ``buf``, in order; ``None`` when the top level is
    not well formed (a protobuf parser of the whole ``buf`` then reports the error). Protobuf
    readers accept fields in any order, so parsing the rest gives the message without the field.
    """
    view = memoryview(buf)
    end = len(buf)
    rest: list[memoryview] = []
    found: list[memoryview] = []
    pos = 0
    try:
        while pos < end:
            start = pos
            tag, pos = _read_varint(buf, pos)
            wire = tag & 7
            if tag >> 3 == 0:
                return None
            if wire == 0:
                _, pos = _read_varint(buf, pos)
            elif wire == 2:
                length, pos = _read_varint(buf, pos)
                if pos + length > end:
                    return None
                if tag >> 3 == field_number:
                    found.append(view[pos : pos + length])
                    pos += length
                    continue
                pos += length
            elif wire in _FIXED_WIRE_SIZE:
                pos += _FIXED_WIRE_SIZE[wire]
            else:  # groups (deprecated) or an invalid wire type: leave it to the parser
                return None
            if pos > end:
                return None
            rest.append(view[start:pos])
    except InvalidInputError:  # a truncated varint
        return None
    return b"".join(rest), found


def _element_count(shape: Sequence[int], name: str) -> int:
    if any(dim < 0 for dim in shape):
        raise InvalidInputError(
            f"tensor {name!r}: shape {list(shape)} has a negative dimension", tensor=name
        )
    return math.prod(shape)


def _fill_contents(contents: Any, arr: np.ndarray[Any, Any], dtype: str) -> None:
    """Put ``arr`` into the typed list for ``dtype`` (floats / bools without a per-element loop).

    Numeric data is first normalised by :func:`tensor_to_bytes` (same casting rules as raw).
    """
    if dtype == "BYTES":
        contents.bytes_contents.extend(bytes_element(item) for item in arr.reshape(-1))
        return
    payload = tensor_to_bytes(arr, dtype)
    if dtype in _PACKED_FIXED:
        number = _field_number(contents, _CONTENTS_FIELD[dtype])
        if len(payload):
            contents.MergeFromString(
                varint(number << 3 | 2) + varint(len(payload)) + bytes(payload)
            )
        return
    values = np.frombuffer(payload, dtype=numpy_dtype(dtype)).tolist()
    getattr(contents, _CONTENTS_FIELD[dtype]).extend(values)


def _decode_contents(
    contents: Any, datatype: str, shape: list[int], name: str
) -> np.ndarray[Any, Any]:
    """Typed ``contents`` -> array of ``shape`` (checks the element count)."""
    field = _CONTENTS_FIELD.get(datatype)
    if field is None:
        numpy_dtype(datatype)  # raises DataTypeError for unknown datatypes
        raise InvalidInputError(
            f"tensor {name!r}: {datatype} has no typed contents in the v2 gRPC protocol; "
            "send it in raw_input_contents / raw_output_contents",
            tensor=name,
        )
    count = _element_count(shape, name)
    values = getattr(contents, field)
    if len(values) != count:
        used = [
            f.name
            for f in contents.DESCRIPTOR.fields
            if f.name != field and len(getattr(contents, f.name))
        ]
        hint = f" (data found in {', '.join(used)})" if used else ""
        raise InvalidInputError(
            f"tensor {name!r}: {datatype} shape {shape} needs {count} elements in "
            f"contents.{field}, got {len(values)}{hint}",
            tensor=name,
            expected=count,
            actual=len(values),
        )
    dt = numpy_dtype(datatype)
    if datatype in _PACKED_FIXED:
        number = _field_number(contents, field)
        payload = b"".join(_packed_payloads(contents.SerializeToString(), number))
        wire_dtype = _PACKED_FIXED[datatype]
        flat = np.frombuffer(payload, dtype=wire_dtype)
        if datatype == "BOOL":
            flat = flat.view(np.bool_)
    elif datatype == "BYTES":
        flat = np.empty(count, dtype=object)
        flat[:] = list(values)
    else:
        try:
            flat = np.fromiter(values, dtype=dt, count=count)
        except OverflowError as exc:
            raise InvalidInputError(
                f"tensor {name!r}: contents.{field} holds a value out of range for {datatype}",
                tensor=name,
            ) from exc
    return flat.reshape(shape)


def _tensor_bytes(arr: np.ndarray[Any, Any], datatype: str) -> bytes:
    data = tensor_to_bytes(arr, datatype)
    return data if isinstance(data, bytes) else bytes(data)


def _check_data(data: np.ndarray[Any, Any], datatype: str, shape: list[int], name: str) -> None:
    count = _element_count(shape, name)
    if data.size != count:
        raise InvalidInputError(
            f"tensor {name!r}: shape {shape} has {count} elements but the data has {data.size}",
            tensor=name,
            expected=count,
            actual=int(data.size),
        )


#: An ``InferInputTensor`` or ``InferOutputTensor`` message.
_AnyTensorMsg = Any


def encode_tensors(
    tensors: Sequence[InferInput] | Sequence[InferOutput],
    add: Callable[..., Any],
    raw_out: list[Any],
    *,
    raw: bool,
    views: bool = False,
) -> None:
    """Add one tensor message per tensor with ``add``; raw data goes to ``raw_out``.

    Typed contents (``raw=False``) are used only when every tensor has a typed form. With
    ``views``, a large C-contiguous array of its wire form goes to ``raw_out`` as a byte
    memoryview of itself (no copy: for a caller that writes the records itself); the rest
    goes as ``bytes``.
    """
    typed = not raw and all(t.data is None or t.datatype in _CONTENTS_FIELD for t in tensors)
    if not raw and not typed:
        logger.debug("FP16/BF16 tensor present: sending every tensor as raw contents")
    for tensor in tensors:
        data = tensor.data
        if raw and type(data) is np.ndarray:
            # the common case: a native little-endian array of its datatype and shape
            dtype = PLAIN_DTYPES.get(tensor.datatype)
            if dtype is not None and data.dtype == dtype and data.shape == tuple(tensor.shape):
                msg = add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
                if tensor.parameters:
                    params_to_proto(tensor.parameters, msg.parameters)
                if views and data.nbytes >= VIEW_MIN_BYTES and data.flags.c_contiguous:
                    raw_out.append(data.reshape(-1).view(np.uint8).data)
                else:
                    raw_out.append(data.tobytes())
                continue
        msg = add()
        msg.name = tensor.name
        msg.datatype = tensor.datatype
        msg.shape.extend(tensor.shape)
        params = tensor.parameters
        # BYTES with element sizes (the REST form of OVMS's encoded images): one element travels
        # as one unprefixed raw entry, as OVMS reads it; the sizes are a REST parameter only.
        ovms = tensor.datatype == "BYTES" and isinstance(params.get("binary_data_size"), str)
        if ovms:
            params = {k: v for k, v in params.items() if k != "binary_data_size"}
        if params:
            params_to_proto(params, msg.parameters)
        if tensor.data is None:  # lives in shared memory: no contents of its own
            continue
        _check_data(tensor.data, tensor.datatype, tensor.shape, tensor.name)
        if typed:
            _fill_contents(msg.contents, tensor.data, tensor.datatype)
        elif ovms and tensor.data.size == 1:
            raw_out.append(bytes_element(tensor.data.reshape(-1)[0]))
        else:
            raw_out.append(_tensor_bytes(tensor.data, tensor.datatype))


_Tensor = TypeVar("_Tensor", InferInput, InferOutput)


def _raw_tensor(buf: bytes, datatype: str, shape: list[int], name: str) -> np.ndarray[Any, Any]:
    """One raw contents entry; BYTES also as OVMS sends one encoded image: unprefixed."""
    if datatype == "BYTES":
        return decode_encoded_elements(buf, shape, name=name)
    return tensor_from_bytes(buf, datatype, shape, name=name)


def _in_shared_memory(buf: bytes, shape: list[int], kind: str) -> bool:
    """An output whose raw entry is empty though it has elements: written to shared memory."""
    return kind == "output" and not buf and math.prod(shape) > 0  # Triton's form


def decode_tensors(
    msgs: Sequence[_AnyTensorMsg],
    raw: Sequence[bytes],
    kind: str,
    make: type[_Tensor],
    *,
    lenient: bool = False,
    model: str = "",
) -> list[_Tensor]:
    """Decode tensor messages and their data into ``make`` (InferInput or InferOutput).

    The common message (one raw entry per tensor, no parameters, no typed contents) is decoded
    here: fixed-width data of the right size becomes a view of the (immutable, so read-only)
    bytes, the rest goes through :func:`tensor_from_bytes` (which raises every size error).
    Anything else is left to :func:`_decode_tensor_data`.
    """
    if len(raw) == len(msgs):
        out = []
        for msg, buf in zip(msgs, raw, strict=True):
            if msg.parameters or msg.HasField("contents"):
                break
            name = msg.name
            datatype = msg.datatype
            shape = list(msg.shape)
            dtype = PLAIN_DTYPES.get(datatype)
            if _in_shared_memory(buf, shape, kind):
                data = None
            elif (
                dtype is None
                or (type(buf) is not bytes and type(buf) is not memoryview)
                or len(buf) != math.prod(shape) * dtype.itemsize
                or (shape and min(shape) < 0)
            ):
                data = _raw_tensor(buf, datatype, shape, name)
            else:
                data = np.frombuffer(buf, dtype=dtype).reshape(shape)
            out.append(make(name, datatype, shape, data))
        else:
            return out
    return [
        make(m.name, m.datatype, shape, data, params)
        for m, shape, params, data in _decode_tensor_data(
            msgs, raw, kind, lenient=lenient, model=model
        )
    ]


def _empty(shape: list[int], datatype: str, name: str) -> np.ndarray[Any, Any]:
    """The empty tensor of a shape with a zero in it (numpy refuses absurd other dimensions)."""
    try:
        return np.empty(shape, dtype=numpy_dtype(datatype))
    except ValueError as exc:  # e.g. [0, 2**62]: "array is too big"
        raise InvalidInputError(
            f"tensor {name!r} has shape {shape}: a dimension is too large ({exc})",
            tensor=name,
            shape=shape,
        ) from None


def _decode_tensor_data(
    msgs: Sequence[_AnyTensorMsg],
    raw: Sequence[bytes],
    kind: str,
    *,
    lenient: bool = False,
    model: str = "",
) -> list[tuple[Any, list[int], Parameters, np.ndarray[Any, Any] | None]]:
    """Pair each tensor message with its data: raw entry, typed contents, or none (shm).

    Raw entries go one per tensor in order; tensors in shared memory or with typed contents
    take none (as tritonclient sends them) unless there is exactly one raw entry per tensor.
    Strict (requests, as Triton reads them): raw and typed contents in one message are refused.
    Lenient (responses, as tritonclient reads them; Seldon MLServer sends both): one raw entry
    per tensor wins over any typed contents, else tensors whose typed contents hold data use
    them and the others take the raw entries in order.
    """
    one_to_one = len(raw) == len(msgs)
    typed_one = next((m.name for m in msgs if m.HasField("contents")), None)
    if not lenient and raw and typed_one is not None:
        # Triton's wording first (its grpc_explicit_* examples match it), then ours
        raise InvalidInputError(
            f"contents field must not be specified when using raw_{kind}_contents for "
            f"{typed_one!r} for model {model!r}: raw_{kind}_contents and typed contents "
            "cannot be mixed in one message",
            tensor=typed_one,
        )
    out = []
    next_raw = 0
    for index, msg in enumerate(msgs):
        name = msg.name
        shape = list(msg.shape)
        params = params_from_proto(msg.parameters)
        data: np.ndarray[Any, Any] | None
        typed = msg.HasField("contents") and (not lenient or msg.contents.ByteSize() > 0)
        if one_to_one and _in_shared_memory(raw[index], shape, kind):
            data = None
        elif one_to_one:
            data = _raw_tensor(raw[index], msg.datatype, shape, name)
        elif typed:
            data = _decode_contents(msg.contents, msg.datatype, shape, name)
        elif "shared_memory_region" in params:
            data = None
        elif next_raw < len(raw):
            data = _raw_tensor(raw[next_raw], msg.datatype, shape, name)
            next_raw += 1
        elif not raw and _element_count(shape, name) == 0:
            data = _empty(shape, msg.datatype, name)
        else:
            raise InvalidInputError(
                f"{kind} tensor {name!r} has no data: {len(raw)} raw_{kind}_contents entries "
                f"for {len(msgs)} {kind}s and no typed contents",
                tensor=name,
            )
        out.append((msg, shape, params, data))
    if not one_to_one and next_raw != len(raw):
        raise InvalidInputError(
            f"{len(raw)} raw_{kind}_contents entries but only {next_raw} {kind}s take raw data"
        )
    return out
