"""JSON values of v2 tensors: the ``data`` arrays of REST messages, read strictly, written exactly.

Owns how a tensor's elements look in JSON. ``data`` may be flat or nested on input and is
always flat on output. BYTES travel as UTF-8 strings (non-UTF-8 bytes need binary data), BOOL as
``true`` / ``false``, FP16 and BF16 as numbers. Values are never changed silently: BOOL data must
be ``true`` / ``false``, numeric data numbers that fit the datatype (else an error naming the
tensor and the element). NaN and infinities travel as the ``NaN``, ``Infinity`` and
``-Infinity`` tokens, as tritonclient writes and reads them and Triton and KServe's server
accept them; ``null`` is refused in requests and read as NaN in responses (KServe writes it for
any non-finite float). :mod:`nbinfer.protocol.rest` builds whole messages on top of it.

Imports numpy, orjson and the protocol's tensor / dtype modules only: no I/O.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import bfloat16, numpy_dtype
from nbinfer.protocol.tensors import check_shape, element_count, to_bfloat16

__all__ = ["dumps", "dumps_with_tokens", "json_to_tensor", "loads", "tensor_to_json", "with_tokens"]

_OPTS = orjson.OPT_SERIALIZE_NUMPY
#: The non-finite tokens that send a document to the slow parser.
_NON_FINITE = ("NaN", "Infinity")

Buffer = bytes | bytearray | memoryview


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
        # orjson stops at the first token it cannot read: only a document stopped at NaN or
        # (-)Infinity goes to the slow parser. Looked up where it stopped, never searched for
        # (a search of a malformed 200 MB body held the GIL that every request waits for).
        stopped_at = exc.doc[exc.pos : exc.pos + 8]
        exc.doc = ""  # the whole input as a str: not kept alive with the error
        if not stopped_at.startswith(_NON_FINITE):
            raise InvalidInputError(f"malformed {what}: {exc}") from exc
        raw: Any = data.encode() if isinstance(data, str) else bytes(data)  # json.loads: bytes
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
        except TypeError as exc:
            i, bad = next((i, x) for i, x in enumerate(flat) if not isinstance(x, str))
            raise InvalidInputError(
                f"{_label(name)} (BYTES) element {i}: JSON data must be strings, got "
                f"{type(bad).__name__} {bad!r:.40}",
                tensor=name,
                element=i,
            ) from exc
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
        element=i,
    )


def _out_of_range(label: str, i: int, value: Any, name: str, datatype: str) -> InvalidInputError:
    return InvalidInputError(
        f"{label} element {i} is {_json_repr(value)}: out of range, does not fit {datatype}",
        tensor=name,
        datatype=datatype,
        element=i,
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
                    element=i,
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


class _Tokens(str):
    """A placeholder for float data with NaN / infinities, replaced by its ``json`` on writing.

    orjson writes ``null`` for NaN and infinities; the v2 peers that carry them (Triton,
    tritonclient, KServe's server) use the ``NaN`` / ``Infinity`` / ``-Infinity`` tokens.
    """

    json: bytes


def with_tokens(data: Any) -> Any:
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


def dumps_with_tokens(header: dict[str, Any]) -> bytes:
    """:func:`dumps` of a message header whose tensors' ``data`` came from :func:`with_tokens`."""
    head = dumps(header)
    for key in ("inputs", "outputs"):
        for tensor in header.get(key) or ():
            data = tensor.get("data")
            if isinstance(data, _Tokens):
                head = head.replace(f'"{data}"'.encode(), data.json, 1)
    return head
