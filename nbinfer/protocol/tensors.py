"""Tensor codecs: raw little-endian wire bytes <-> numpy, BF16, and the one conversion rule.

The v2 protocol sends a tensor as its elements back to back in row-major order, little endian.
Fixed-width datatypes map one-to-one onto numpy dtypes (see :mod:`nbinfer.protocol.dtypes`); BOOL
is one byte per element; BF16 is the upper half of a float32, rounded to nearest even; BYTES
elements are each a 4-byte little-endian length followed by that many bytes (their codec is
:mod:`nbinfer.protocol.bytes_codec`, whose public names this module re-exports: the tensor
codecs have one entry point).

Decoding fixed-width data is a zero-copy, read-only :func:`numpy.frombuffer` view over the message
buffer; encoding makes at most one copy (none for contiguous little-endian arrays). User data
becomes a tensor of a model's datatype by one rule, :func:`conform` (value-safe).

Example:
    >>> tensor_from_bytes(tensor_to_bytes(np.array([1.5, 2.0]), "FP32"), "FP32", [2]).tolist()
    [1.5, 2.0]

Layer: protocol (pure); imports numpy, errors, protocol.dtypes and protocol.bytes_codec; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol.bytes_codec import (
    LENGTH,
    bytes_element,
    bytes_error,
    decode_bytes_tensor,
    encode_bytes_tensor,
    tensor_label,
)
from nbinfer.protocol.dtypes import bfloat16, datatype_of, numpy_dtype

__all__ = [
    "Destination",
    "as_array",
    "bytes_element",
    "check_shape",
    "conform",
    "decode_bytes_tensor",
    "decode_encoded_elements",
    "element_count",
    "encode_bytes_tensor",
    "tensor_from_bytes",
    "tensor_to_bytes",
    "to_bfloat16",
]


def element_count(shape: Sequence[int], *, name: str = "") -> int:
    """Number of elements of a tensor shape (1 for ``[]``).

    Raises:
        InvalidInputError: a dimension is negative or not an integer.
    """
    count = 1
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise InvalidInputError(
                f"{tensor_label(name)} has invalid shape {list(shape)}: dimensions must be "
                "integers >= 0",
                tensor=name,
                shape=list(shape),
            )
        count *= int(dim)
    return count


def check_shape(arr_or_size: np.ndarray[Any, Any] | int, shape: Sequence[int], *, name: str) -> int:
    """Check that an array (or an element count) fits ``shape``; return the element count.

    Raises:
        InvalidInputError: the element count differs from ``prod(shape)``.
    """
    expected = element_count(shape, name=name)
    actual = arr_or_size if isinstance(arr_or_size, int) else int(arr_or_size.size)
    if actual != expected:
        raise InvalidInputError(
            f"{tensor_label(name)} has {actual} elements but shape {list(shape)} needs {expected}",
            tensor=name,
            shape=list(shape),
            expected=expected,
            actual=actual,
        )
    return expected


# ------------------------------------------------------------------------------------------ BF16


def to_bfloat16(arr: Any) -> np.ndarray[Any, Any]:
    """Convert numbers to ``bfloat16`` with round-to-nearest-even (NaN stays NaN, overflow -> inf).

    Float64 input is rounded to float32 first (ties can differ from direct float64 rounding in the
    last bf16 bit, as in PyTorch and ml_dtypes). Integers and bools are converted through float32.

    Raises:
        DataTypeError: ``arr`` is not numeric.
    """
    a = np.asarray(arr)
    if a.dtype == bfloat16:
        return a
    if a.dtype.kind not in "biuf":
        raise DataTypeError(f"cannot convert {a.dtype} data to BF16", dtype=str(a.dtype))
    with np.errstate(invalid="ignore", over="ignore"):  # NaN stays NaN, overflow -> inf
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        return a.astype(bfloat16)


# ------------------------------------------------------------------------------ normalising data


def _to_bytes_array(value: Any) -> np.ndarray[Any, Any]:
    """Object array of ``bytes`` with the shape of ``value`` (str encoded as UTF-8)."""
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (bytes, bytearray, memoryview, str)):
        arr = np.empty((), dtype=object)
        arr[()] = value
    else:
        try:
            arr = np.array(value, dtype=object)
        except ValueError as exc:
            raise InvalidInputError(f"BYTES data is ragged: {exc}") from exc
    if arr.dtype.kind == "S":
        return arr.astype(object)
    if arr.dtype.kind in "UT":
        out = np.empty(arr.shape, dtype=object)
        out.reshape(-1)[:] = [s.encode("utf-8") for s in arr.ravel().tolist()]
        return out
    if arr.dtype.kind != "O":
        raise DataTypeError(
            f"cannot use {arr.dtype} data as BYTES: pass bytes or str elements",
            dtype=str(arr.dtype),
        )
    flat = arr.ravel().tolist()
    if all(type(x) is bytes for x in flat):
        return arr
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = [bytes_element(x) for x in flat]
    return out


def _is_textual(value: Any) -> bool:
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return True
    if isinstance(value, (list, tuple)):
        return bool(value) and _is_textual(value[0])
    return False


#: How a cast to each datatype is written in NumPy (the fix a refusal names).
_CAST: dict[str, str] = {
    "BOOL": "bool",
    "UINT8": "np.uint8",
    "UINT16": "np.uint16",
    "UINT32": "np.uint32",
    "UINT64": "np.uint64",
    "INT8": "np.int8",
    "INT16": "np.int16",
    "INT32": "np.int32",
    "INT64": "np.int64",
    "FP16": "np.float16",
    "FP32": "np.float32",
    "FP64": "np.float64",
    "BF16": "ml_dtypes.bfloat16",
}


@dataclass(frozen=True, slots=True)
class Destination:
    """Where data goes, for the messages of :func:`conform` (model, input, how it is named).

    ``data`` is how the caller's data is written in the cast a refusal suggests (``x``, or
    ``df['sepal_length']`` for the DataFrame ``column`` it comes from).
    """

    model: str = ""
    tensor: str = ""
    data: str = "x"
    column: str = ""

    def head(self) -> str:
        """``"model 'iris', input 'input': "`` (what is known of it), or ``""``."""
        parts = [
            f"model {self.model!r}" if self.model else "",
            f"input {self.tensor!r}" if self.tensor else "",
            f"column {self.column!r}" if self.column else "",
        ]
        where = ", ".join(p for p in parts if p)
        return f"{where}: " if where else ""

    def context(self) -> dict[str, str]:
        """The error context this destination names (model, tensor)."""
        named = (("model", self.model), ("tensor", self.tensor), ("column", self.column))
        return {k: v for k, v in named if v}


_ANYWHERE = Destination()


def _refusal(
    arr: np.ndarray[Any, Any], datatype: str, to: Destination, why: str, fix: str, value: Any
) -> DataTypeError:
    """The error of a refused conversion: what, where, the value, and the line to write."""
    shown = value.item() if isinstance(value, np.generic) else value
    why = why.format(value=shown)
    return DataTypeError(
        f"{to.head()}{arr.dtype} data cannot be sent as {datatype} unchanged: {why}. {fix}",
        hint=fix,
        **to.context(),
        dtype=str(arr.dtype),
        datatype=datatype,
        value=shown,
    )


def _first(arr: np.ndarray[Any, Any], bad: np.ndarray[Any, Any]) -> Any:
    return arr[bad].flat[0] if bad.ndim else arr[()]


def _inexact(values: np.ndarray[Any, Any], out: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Where integers ``values`` did not survive the conversion to floats ``out`` exactly."""
    back = out.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bad: np.ndarray[Any, Any] = ~np.isfinite(back)
        small = (values <= 2**53) & (values >= -(2**53))  # exact in float64: compare there
        bad |= small & (back != values.astype(np.float64))
    for i in np.flatnonzero(~small & ~bad):  # huge integers: compare as Python ints
        flat = bad.reshape(-1)
        flat[i] = int(back.flat[i]) != int(values.flat[i])
    return bad


def _whole_number_cast(
    arr: np.ndarray[Any, Any], datatype: str, target: np.dtype[Any], to: Destination
) -> np.ndarray[Any, Any]:
    """Floats into an integer type: only finite whole numbers within its range."""
    values = arr.astype(np.float64) if arr.dtype == bfloat16 else arr
    cast = f"`{to.data}.astype({_CAST[datatype]})`"
    finite = np.isfinite(values)
    if not finite.all():
        raise _refusal(
            arr,
            datatype,
            to,
            "it holds {value}, which an integer type cannot",
            f"Fill or drop them first (`np.nan_to_num({to.data})`, `df.fillna(0)`, "
            f"`df.dropna()`), then {cast}.",
            _first(values, ~finite),
        )
    fraction = values != np.trunc(values)
    if fraction.any():
        raise _refusal(
            arr,
            datatype,
            to,
            f"{{value}} is not a whole number ({datatype} holds whole numbers only)",
            f"Round it yourself if that is what you mean: `np.rint({to.data}).astype("
            f"{_CAST[datatype]})`.",
            _first(values, fraction),
        )
    return _ranged_int_cast(values, datatype, target, to, arr)


def _ranged_int_cast(
    values: np.ndarray[Any, Any],
    datatype: str,
    target: np.dtype[Any],
    to: Destination,
    original: np.ndarray[Any, Any] | None = None,
) -> np.ndarray[Any, Any]:
    """Integers (or whole floats) into an integer type: only values within its range."""
    shown = values if original is None else original
    if target.kind == "b":
        bad = (values != 0) & (values != 1)
        if bad.any():
            raise _refusal(
                shown,
                datatype,
                to,
                "{value} is not 0 or 1 (BOOL holds False / True only)",
                f"Say what true means: `{to.data} != 0` (or `{to.data}.astype(bool)`).",
                _first(values, bad),
            )
        return values.astype(target, order="C")
    if values.size:
        info = np.iinfo(target)
        bad = (values < info.min) | (values > info.max)
        if bad.any():
            raise _refusal(
                shown,
                datatype,
                to,
                f"{{value}} is outside {datatype}'s range [{info.min}, {info.max}]",
                f"Clip it (`np.clip({to.data}, {info.min}, {info.max})`) or rescale it, then "
                f"`.astype({_CAST[datatype]})`.",
                _first(values, bad),
            )
    return values.astype(target, order="C")


def _float_cast(
    arr: np.ndarray[Any, Any], datatype: str, target: np.dtype[Any], to: Destination
) -> np.ndarray[Any, Any]:
    """Numbers into a float type: every finite value within its range; integers exactly."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = to_bfloat16(arr) if datatype == "BF16" else arr.astype(target, order="C")
    kind = arr.dtype.kind
    if kind == "b" or (
        datatype != "BF16"
        and np.can_cast(arr.dtype, target, "safe")
        and (kind == "f" or arr.dtype.itemsize < target.itemsize)  # int64 -> FP64 can round
    ):
        return out
    if kind in "iu":
        bad = _inexact(arr, out)
        if bad.any():
            raise _refusal(
                arr,
                datatype,
                to,
                f"{{value}} is not exactly representable in {datatype}",
                f"Cast it yourself if rounding is fine: `{to.data}.astype({_CAST[datatype]})`.",
                _first(arr, bad),
            )
        return out
    values = arr.astype(np.float32) if arr.dtype == bfloat16 else arr
    shown = out.astype(np.float32) if datatype == "BF16" else out
    overflow = np.isinf(shown) & np.isfinite(values)
    if overflow.any():
        biggest = float(np.finfo(np.float32).max if datatype == "BF16" else np.finfo(target).max)
        limit = f"{biggest:.3g}"
        raise _refusal(
            arr,
            datatype,
            to,
            f"{{value}} is outside {datatype}'s range (±{biggest:.7g})",
            f"Rescale it, or clip it: `np.clip({to.data}, -{limit}, {limit}).astype("
            f"{_CAST[datatype]})`.",
            _first(values, overflow),
        )
    return out


def _cast_numeric(
    arr: np.ndarray[Any, Any], datatype: str, to: Destination = _ANYWHERE
) -> np.ndarray[Any, Any]:
    """``arr`` as ``datatype``, value-safely: the one conversion rule (docs/client.md).

    Floats go to a float type when every finite value is within its range (the mantissa is
    rounded: that is what a narrower float means; NaN / inf stay as they are); integers go to
    any type that holds them exactly; floats go to an integer type only as finite whole numbers
    within range; BOOL takes bools, or numbers that are all 0 / 1. Anything else is refused
    with a :class:`DataTypeError` naming the value and the cast to write.
    """
    target = numpy_dtype(datatype)
    if arr.dtype == target:
        return arr
    if arr.dtype.kind == target.kind and arr.dtype.itemsize == target.itemsize:
        return arr.astype(target, order="C")  # byte order only
    if arr.dtype.kind not in "biuf" and arr.dtype != bfloat16:
        raise DataTypeError(
            f"{to.head()}cannot use {arr.dtype} data as {datatype}",
            **to.context(),
            dtype=str(arr.dtype),
            datatype=datatype,
        )
    if target.kind == "f" or datatype == "BF16":
        return _float_cast(arr, datatype, target, to)
    if arr.dtype.kind == "f" or arr.dtype == bfloat16:
        return _whole_number_cast(arr, datatype, target, to)
    return _ranged_int_cast(arr, datatype, target, to)


def conform(
    value: np.ndarray[Any, Any], datatype: str, to: Destination = _ANYWHERE
) -> np.ndarray[Any, Any]:
    """A numeric array as the model's declared ``datatype``, when no value changes.

    The one conversion rule of nbinfer (Client, Session, DataFrames, classify, the model
    browser): float64 -> FP32 / FP16 / BF16 when every finite value is within range (the
    mantissa is rounded, as a narrower float does); integers into any type that holds them
    exactly; floats into integers only as finite whole numbers; NaN / inf pass into floats
    unchanged. Returns ``value`` itself when it already has the datatype.

    Example:
        >>> conform(np.array([5.1, 3.5]), "FP32").dtype
        dtype('float32')

    Raises:
        DataTypeError: A value would change (out of range, NaN into an integer, a fraction
            into an integer, an integer a float cannot hold exactly); the message names the
            model, input, dtype, datatype, the value and the cast to write.
    """
    return _cast_numeric(value, datatype, to)


def as_array(
    value: Any, datatype: str | None = None, to: Destination = _ANYWHERE
) -> tuple[np.ndarray[Any, Any], str]:
    """Normalise user data (array, nested list, scalar, str, bytes) into ``(array, datatype)``.

    With ``datatype`` None it is inferred (``str``/``bytes`` -> BYTES, Python floats -> FP64, ...).
    BYTES data becomes an ``object`` array of ``bytes`` (``str`` encoded as UTF-8). Numbers are
    converted to ``datatype`` by :func:`conform`'s rule: only when no value changes (rounding a
    float's mantissa aside); ``to`` names the model and input in its messages.

    Example:
        >>> as_array([[1, 2]], "FP32")[0].dtype
        dtype('float32')

    Raises:
        DataTypeError: unknown datatype or data that cannot be represented in it.
        InvalidInputError: ragged nested lists.
    """
    if datatype is not None:
        numpy_dtype(datatype)  # validates the name
    if datatype == "BYTES" or (
        datatype is None
        and (_is_textual(value) or (isinstance(value, np.ndarray) and value.dtype.kind in "OSUT"))
    ):
        return _to_bytes_array(value), "BYTES"
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
            if datatype is not None and arr.dtype.kind == "O":  # e.g. ints beyond int64
                arr = np.asarray(value, dtype=numpy_dtype(datatype))
        except (ValueError, OverflowError, TypeError) as exc:
            raise InvalidInputError(
                f"{to.head()}cannot build a {datatype or ''} tensor: {exc}", **to.context()
            ) from exc
    if arr.dtype.kind == "O":
        raise DataTypeError(
            f"{to.head()}object data that is not bytes/str needs an explicit numeric array",
            dtype=str(arr.dtype),
        )
    if datatype is None:
        datatype = datatype_of(arr.dtype)
    return _cast_numeric(arr, datatype, to), datatype


# ------------------------------------------------------------------------------ raw tensor bytes


def tensor_to_bytes(arr: np.ndarray[Any, Any], datatype: str) -> bytes | memoryview:
    """The raw little-endian wire bytes of a tensor, row-major.

    Contiguous little-endian arrays are returned as a zero-copy ``memoryview``; big-endian,
    non-contiguous or differently typed arrays cost exactly one copy. BYTES uses
    :func:`encode_bytes_tensor`; BOOL is one byte per element.

    Raises:
        DataTypeError: the data cannot be represented as ``datatype``.
    """
    if datatype == "BYTES":
        return encode_bytes_tensor(arr)
    a = np.asarray(arr)
    target = numpy_dtype(datatype)
    if a.dtype != target:
        a = _cast_numeric(a, datatype)
    a = np.ascontiguousarray(a)
    return a.reshape(-1).view(np.uint8).data


def tensor_from_bytes(
    buf: bytes | bytearray | memoryview,
    datatype: str,
    shape: Sequence[int],
    *,
    name: str = "",
) -> np.ndarray[Any, Any]:
    """Decode raw wire bytes into an array of ``shape``.

    Fixed-width datatypes give a zero-copy read-only view of ``buf`` (little endian, possibly
    unaligned); BYTES gives an ``object`` array of ``bytes``.

    Raises:
        InvalidInputError: the byte size does not match ``datatype`` x ``shape`` (the message names
            the tensor, the expected and the actual size) or the BYTES data is malformed.
        DataTypeError: unknown datatype.
    """
    dtype = numpy_dtype(datatype)
    count = element_count(shape, name=name)
    dims = [int(d) for d in shape]
    if datatype == "BYTES":
        return decode_bytes_tensor(buf, count, name=name).reshape(dims)
    expected = count * dtype.itemsize
    actual = memoryview(buf).nbytes
    if actual != expected:
        raise InvalidInputError(
            f"{tensor_label(name)} ({datatype}, shape {dims}) needs {expected} bytes, got {actual}",
            tensor=name,
            datatype=datatype,
            shape=dims,
            expected=expected,
            actual=actual,
        )
    arr = np.frombuffer(buf, dtype=dtype if datatype != "BOOL" else np.uint8)
    if datatype == "BOOL":
        arr = arr.view(np.bool_) if count == 0 or int(arr.max()) <= 1 else arr != 0
    arr = arr.reshape(dims)
    arr.flags.writeable = False
    return arr


def decode_encoded_elements(
    buf: bytes | bytearray | memoryview,
    shape: Sequence[int],
    *,
    sizes: Sequence[int] | None = None,
    name: str = "",
) -> np.ndarray[Any, Any]:
    """BYTES elements in any form users send encoded images (Triton's and OVMS's).

    Triton's 4-byte length prefixes, concatenated elements of the given ``sizes`` (OVMS's
    ``binary_data_size: "645,94"``), or one unprefixed element (a single-element tensor whose
    data is not prefixed).

    Raises:
        InvalidInputError: sizes that do not add up to the data or count the wrong number of
            elements; several elements with neither prefixes nor sizes.
    """
    count = element_count(shape, name=name)
    dims = [int(d) for d in shape]
    view = memoryview(buf).cast("B")
    if sizes is not None:
        if len(sizes) != count or sum(sizes) != len(view) or min(sizes, default=0) < 0:
            raise bytes_error(
                name,
                f"binary_data_size lists {len(sizes)} element sizes adding up to {sum(sizes)} "
                f"bytes; shape {dims} needs {count} elements in {len(view)} bytes",
                expected=count,
            )
        out = np.empty(count, dtype=object)
        offset = 0
        for i, size in enumerate(sizes):
            out[i] = bytes(view[offset : offset + size])
            offset += size
        return out.reshape(dims)
    if count == 1 and (len(view) < 4 or LENGTH.unpack_from(view)[0] != len(view) - 4):
        out = np.empty(1, dtype=object)
        out[0] = bytes(view)  # one raw element (an encoded image), no length prefix
        return out.reshape(dims)
    return decode_bytes_tensor(view, count, name=name).reshape(dims)
