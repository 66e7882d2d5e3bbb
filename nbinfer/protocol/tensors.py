"""Tensor codecs: raw little-endian wire bytes <-> numpy, BYTES and BF16, vectorised.

The v2 protocol sends a tensor as its elements back to back in row-major order, little endian.
Fixed-width datatypes map one-to-one onto numpy dtypes (see :mod:`nbinfer.protocol.dtypes`); BOOL
is one byte per element; BF16 is the upper half of a float32, rounded to nearest even; BYTES
elements are each a 4-byte little-endian length followed by that many bytes.

Decoding fixed-width data is a zero-copy, read-only :func:`numpy.frombuffer` view over the message
buffer; encoding makes at most one copy (none for contiguous little-endian arrays).

Example:
    >>> arr = np.array([b"a", b"", b"xyz"], dtype=object)
    >>> wire = encode_bytes_tensor(arr)
    >>> decode_bytes_tensor(wire, 3).tolist()
    [b'a', b'', b'xyz']

Layer: protocol (pure); imports numpy, errors and protocol.dtypes; no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice, takewhile
from typing import Any

import numpy as np

from nbinfer.errors import DataTypeError, InvalidInputError
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

_U4 = np.dtype("<u4")
_LEN = struct.Struct("<I")
#: Above this many wire bytes per element, BYTES decoding slices element by element (the copy
#: dominates); below it, offsets are found with numpy and numpy builds the objects in C.
_SHORT_ELEMENT_BYTES = 512
#: Above these sizes the short-element decoder's temporaries (about 3 bytes per input byte when
#: finding starts from candidates, 4 more when following the chain, up to 2 x 4 + 1 when
#: gathering the elements into a matrix) are not worth it: slice.
_SHORT_PATH_MAX_BYTES = 64 << 20
_CHAIN_MAX_BYTES = 16 << 20
#: Up to this size the numpy set-up costs more than slicing a few elements one by one.
_LOOP_MAX_BYTES = 1024
#: Up to this element width, the mask that zeroes each row past its element's length is taken
#: from a small table (rows of k ones) instead of being computed by a broadcast comparison.
_MASK_TABLE_WIDTH = 512


def _tensor_label(name: str) -> str:
    return f"tensor '{name}'" if name else "tensor"


def element_count(shape: Sequence[int], *, name: str = "") -> int:
    """Number of elements of a tensor shape (1 for ``[]``).

    Raises:
        InvalidInputError: a dimension is negative or not an integer.
    """
    count = 1
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise InvalidInputError(
                f"{_tensor_label(name)} has invalid shape {list(shape)}: dimensions must be "
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
            f"{_tensor_label(name)} has {actual} elements but shape {list(shape)} needs {expected}",
            tensor=name,
            shape=list(shape),
            expected=expected,
            actual=actual,
        )
    return expected


# ----------------------------------------------------------------------------------------- BYTES


def bytes_element(value: Any) -> bytes:
    """Convert one BYTES element (bytes, bytearray, memoryview, str as UTF-8) to ``bytes``.

    Raises:
        DataTypeError: ``value`` is not bytes-like or a string.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(f"a BYTES string is not encodable as UTF-8: {exc}") from exc
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise DataTypeError(
        f"BYTES elements must be bytes or str, got {type(value).__name__} ({value!r:.40})",
        element_type=type(value).__name__,
    )


def _flat_items(arr: np.ndarray[Any, Any] | Sequence[Any]) -> list[Any]:
    """Row-major list of the elements of an array or (nested) sequence of BYTES elements."""
    if isinstance(arr, np.ndarray):
        if arr.dtype.kind == "U":
            arr = np.strings.encode(arr, "utf-8")  # U cannot hold trailing NULs: nothing lost
        return arr.ravel().tolist()
    if isinstance(arr, (bytes, bytearray, memoryview, str)):
        return [arr]
    items = list(arr)
    if any(isinstance(x, (list, tuple, np.ndarray)) for x in items):
        nested = np.empty(0, dtype=object)
        try:
            nested = np.array(items, dtype=object)
        except ValueError as exc:
            raise InvalidInputError(f"BYTES data is ragged: {exc}") from exc
        return nested.ravel().tolist()
    return items


def _lengths(items: list[Any]) -> np.ndarray[Any, Any]:
    n = len(items)
    try:  # all shorter than 256 (the usual case): bytes() packs the lengths fastest
        return np.frombuffer(bytes(map(len, items)), dtype=np.uint8).astype(np.intp)
    except ValueError:
        return np.fromiter(map(len, items), dtype=np.intp, count=n)


def _payload_and_lengths(items: list[Any]) -> tuple[bytes, np.ndarray[Any, Any]]:
    """The concatenated element bytes and each element's byte length, at C speed when possible."""
    try:
        payload = b"".join(items)
    except TypeError:
        pass
    else:
        lengths = _lengths(items)
        if int(lengths.sum()) == len(payload):  # not so for e.g. a memoryview of int32
            return payload, lengths
    try:
        text = "".join(items)  # all str: the other common case
    except TypeError:
        items = [bytes_element(x) for x in items]
    else:
        if text.isascii():  # one encode for all; characters are bytes
            return text.encode("ascii"), _lengths(items)
        try:
            items = list(map(str.encode, items))
        except UnicodeEncodeError as exc:
            raise InvalidInputError(f"a BYTES string is not encodable as UTF-8: {exc}") from exc
    return b"".join(items), _lengths(items)


def encode_bytes_tensor(arr: np.ndarray[Any, Any] | Sequence[Any]) -> bytes:
    """Serialize a BYTES tensor: per element a 4-byte little-endian length, then the bytes.

    Elements may be ``bytes``, ``bytearray``, ``memoryview`` or ``str`` (UTF-8); numpy ``S``, ``U``
    and ``StringDType`` arrays are accepted too. Row-major order. Vectorised: one pass in C to
    join the payloads, numpy to interleave the length prefixes.

    Raises:
        DataTypeError: an element is not bytes-like or a string.
    """
    items = _flat_items(arr)
    n = len(items)
    if n == 0:
        return b""
    payload, lengths = _payload_and_lengths(items)
    if int(lengths.max()) > 0xFFFFFFFF:
        raise InvalidInputError("a BYTES element is larger than 4 GiB")
    total = 4 * n + len(payload)
    starts = np.arange(0, 4 * n, 4, dtype=np.intp)
    starts[1:] += np.cumsum(lengths[:-1])
    out = np.empty(total, dtype=np.uint8)
    if payload:
        is_payload = np.ones(total, dtype=bool)
        # 4-byte unaligned views: one store per element clears/writes its whole length prefix
        np.ndarray(shape=(total - 3,), dtype=_U4, buffer=is_payload, strides=(1,))[starts] = 0
        out[is_payload] = np.frombuffer(payload, dtype=np.uint8)
    np.ndarray(shape=(total - 3,), dtype=_U4, buffer=out, strides=(1,))[starts] = lengths
    return out.tobytes()


def _bytes_error(name: str, message: str, **context: Any) -> InvalidInputError:
    return InvalidInputError(f"BYTES {_tensor_label(name)}: {message}", tensor=name, **context)


def _decode_uniform(data: bytes, count: int) -> np.ndarray[Any, Any] | None:
    """All elements the same length (a common case): decode with one structured view, or None."""
    first = _LEN.unpack_from(data, 0)[0]
    if len(data) != count * (4 + first):
        return None
    if first == 0:
        return _empties(count) if not any(data) else None
    records = np.frombuffer(data, dtype=np.dtype([("n", "<u4"), ("b", f"V{first}")]))
    if not bool((records["n"] == first).all()):
        return None
    return records["b"].astype(object)  # void -> bytes, exact (no NUL stripping)


def _empties(count: int) -> np.ndarray[Any, Any]:
    out = np.empty(count, dtype=object)
    out[:] = b""
    return out


def _object_array(items: list[bytes]) -> np.ndarray[Any, Any]:
    return np.fromiter(items, dtype=object, count=len(items))


def _starts_from_candidates(data: bytes, count: int | None) -> np.ndarray[Any, Any] | None:
    """Find the element starts without a per-element loop, when the data makes it easy.

    A length below 16 MiB has a zero high byte, so a start ``p`` has ``data[p + 3] == 0``.
    Other such positions ("candidates") are, in text-like data, only the 1-2 bytes just before a
    true start (the zero bytes of a small length) and the zeros of empty elements; so the last
    candidate of each run of adjacent ones is taken, plus the empty elements (4 zero bytes) right
    before it. The guess is then verified exactly (each start + 4 + its length is the next start,
    the last ends at the end of ``data``); None when it does not hold (binary payloads full of
    zeros, huge elements: the caller then follows the chain).
    """
    size = len(data)
    lengths_at = np.ndarray(shape=(size - 3,), dtype=_U4, buffer=data, strides=(1,))
    zero = np.frombuffer(data, dtype=np.uint8) == 0
    last_of_run = zero[3:].copy()  # index p: p is a candidate ...
    last_of_run[:-1] &= ~zero[4:]  # ... and p + 1 is not
    starts = np.flatnonzero(last_of_run)
    if starts.size == 0 or starts[0] != 0:
        return None
    found = [starts]
    frontier = starts
    for _ in range(64):  # empty elements right before a start: 4 zero bytes each
        prev = frontier[frontier >= 4] - 4
        prev = prev[lengths_at[prev] == 0]
        if prev.size == 0:
            break
        frontier = prev
        found.append(frontier)
    else:
        return None
    if len(found) > 1:
        starts = np.sort(np.concatenate(found))
    if count is not None and starts.size != count:
        return None
    ends = starts + 4
    ends += lengths_at[starts]
    if int(ends[-1]) != size or not bool((ends[:-1] == starts[1:]).all()):
        return None
    return starts


def _starts_by_chain(data: bytes, count: int | None) -> np.ndarray[Any, Any]:
    """Find the element starts by following the length prefixes (C-level loop, any data).

    ``nxt[p]`` is where the next element would start if one started at byte ``p``; following it
    from 0 through ``map`` yields the starts. The caller validates them.
    """
    size = len(data)
    nxt = np.empty(size + 1, dtype=np.uint32)
    np.add(  # wraps around on garbage lengths, landing before p + 4: caught by validation
        np.ndarray(shape=(size - 3,), dtype=_U4, buffer=data, strides=(1,)),
        np.arange(4, size + 1, dtype=np.uint32),
        out=nxt[: size - 3],
    )
    nxt[size - 3 :] = size
    np.minimum(nxt, size, out=nxt)
    hop = nxt.data  # format "I": C-level lookups returning ints (faster than numpy scalars)
    starts_list = [0]
    if count is None:  # bounded: garbage lengths may form a cycle
        chain = takewhile(size.__gt__, map(hop.__getitem__, starts_list))
        starts_list.extend(islice(chain, size // 4))
    else:
        starts_list.extend(islice(map(hop.__getitem__, starts_list), count - 1))
    return np.fromiter(starts_list, dtype=np.intp, count=len(starts_list))


def _decode_short(data: bytes, count: int | None, name: str) -> np.ndarray[Any, Any]:
    """Many short elements: find the element starts with numpy, build the objects in C.

    The starts are validated: each is at least 4 bytes after the previous one and the last
    element ends exactly at the end of ``data``, so every element is a 4-byte length followed by
    exactly that many bytes, ending where the next begins. The elements are then copied out by
    :func:`_gather_elements` (plain byte copies; nothing in ``data`` is interpreted further).
    """
    size = len(data)
    starts = _starts_from_candidates(data, count)
    if starts is None:
        if size > _CHAIN_MAX_BYTES:
            return _object_array(_decode_loop(data, count, name))
        starts = _starts_by_chain(data, count)
    n = int(starts.size)
    last = int(starts[-1])
    lengths = np.empty(n, dtype=np.intp)  # each start is followed by 4 + its length bytes
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = size - last
    lengths -= 4
    if (
        (n > 1 and int(lengths[:-1].min()) < 0)
        or last > size - 4
        or last + 4 + _LEN.unpack_from(data, last)[0] != size
    ):
        raise _bytes_error(name, _truncation_message(data, count), expected=count)
    return _gather_elements(data, starts + 4, lengths)


def _gather_elements(
    data: bytes, begins: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """``data[b : b + l]`` for each begin and length, as an ``object`` array of ``bytes``.

    The elements are copied into the rows of a zero-padded ``(n, width)`` byte matrix (one
    fancy-indexed copy over a sliding window of ``data``, then the bytes past each length are
    zeroed); viewed as numpy ``S{width}`` strings, ``astype(object)`` creates the ``bytes`` in
    C. ``S`` drops trailing NUL bytes, and rows are cut at ``width``: the few elements that end
    in a NUL byte or are longer than ``width`` are sliced from ``data`` again, one by one.
    ``width`` is bounded so that the matrix stays within about 4x the size of ``data``; at
    most a quarter of the elements can then be longer than it.
    """
    n = int(lengths.size)
    size = len(data)
    longest = int(lengths.max())
    if longest == 0:
        return _empties(n)
    width = min(longest, (4 * size + (1 << 20)) // n)
    padded = np.empty(size + width, dtype=np.uint8)  # the last rows read past the end
    padded[:size] = np.frombuffer(data, dtype=np.uint8)
    padded[size:] = 0
    windows = np.ndarray(shape=(size + 1,), dtype=f"S{width}", buffer=padded, strides=(1,))
    rows: np.ndarray[Any, Any] = windows[begins]
    matrix = rows.view(np.uint8).reshape(n, width)
    if width <= min(_MASK_TABLE_WIDTH, n):  # row k of the table: k ones, then zeros
        table = np.tri(width + 1, width, -1, dtype=np.uint8)
        matrix *= np.take(table, np.minimum(lengths, width), axis=0)
    else:
        matrix *= np.arange(width, dtype=np.intp) < lengths[:, None]
    out: np.ndarray[Any, Any] = rows.astype(object)
    ends_in_nul = padded[begins + lengths - 1] == 0  # begins >= 4: an empty one reads its prefix
    redo = np.flatnonzero((ends_in_nul & (lengths > 0)) | (lengths > width))
    if redo.size:
        redo_begins = begins[redo].tolist()
        redo_ends = (begins[redo] + lengths[redo]).tolist()
        out[redo] = _object_array([data[b:e] for b, e in zip(redo_begins, redo_ends, strict=True)])
    return out


def _decode_loop(data: bytes, count: int | None, name: str) -> list[bytes]:
    """Few long elements: slice element by element (the copies dominate the loop overhead)."""
    items: list[bytes] = []
    append = items.append
    unpack = _LEN.unpack_from
    offset, size = 0, len(data)
    while offset < size:
        if offset + 4 > size:
            raise _bytes_error(name, _truncation_message(data, count), expected=count)
        (length,) = unpack(data, offset)
        offset += 4
        if offset + length > size:
            raise _bytes_error(name, _truncation_message(data, count), expected=count)
        append(data[offset : offset + length])
        offset += length
    return items


def _truncation_message(data: bytes | memoryview, count: int | None) -> str:
    """Describe how a BYTES buffer is malformed (slow path, only on errors)."""
    offset, size, n = 0, len(data), 0
    while offset < size:
        if offset + 4 > size:
            return (
                f"truncated length prefix of element {n} at byte {offset} "
                f"({size - offset} of 4 bytes present; {size} bytes in total)"
            )
        (length,) = _LEN.unpack_from(data, offset)
        if offset + 4 + length > size:
            return (
                f"element {n} at byte {offset} declares {length} bytes but only "
                f"{size - offset - 4} remain ({size} bytes in total)"
            )
        offset += 4 + length
        n += 1
        if count is not None and n == count and offset < size:
            return f"{size - offset} unexpected bytes after the {count} expected elements"
    if count is not None and n != count:
        return f"expected {count} elements, found {n} in {size} bytes"
    return "malformed data"


def decode_bytes_tensor(
    buf: bytes | bytearray | memoryview, count: int | None = None, *, name: str = ""
) -> np.ndarray[Any, Any]:
    """Deserialize BYTES wire data into a 1-D ``object`` array of ``bytes`` (caller reshapes).

    Empty elements, embedded and trailing NUL bytes and non-UTF-8 bytes survive unchanged.

    Args:
        buf: The serialized elements.
        count: The expected number of elements (``prod(shape)``), or None to take all.
        name: Tensor name, used in error messages.

    Raises:
        InvalidInputError: truncated data, trailing bytes or an element count other than ``count``.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    size = len(data)
    if count is not None and count < 0:
        raise _bytes_error(name, f"invalid element count {count}")
    if count == 0 or (count is None and size == 0):
        if size:
            raise _bytes_error(name, f"expected 0 elements but got {size} bytes", expected=0)
        return np.empty(0, dtype=object)
    if size < 4:
        raise _bytes_error(name, _truncation_message(data, count), expected=count)
    if count is not None and 4 * count > size:  # each element takes at least 4 bytes
        raise _bytes_error(
            name, f"{count} elements need at least {4 * count} bytes, got {size}", expected=count
        )
    out: np.ndarray[Any, Any] | None = None
    if count is not None:
        out = _decode_uniform(data, count)
    if out is None:
        if size > _SHORT_PATH_MAX_BYTES or size <= _LOOP_MAX_BYTES:
            short = False
        elif count is None:
            short = _LEN.unpack_from(data, 0)[0] <= _SHORT_ELEMENT_BYTES
        else:
            short = size <= _SHORT_ELEMENT_BYTES * count
        if short:
            out = _decode_short(data, count, name)
        else:
            out = _object_array(_decode_loop(data, count, name))
    if count is not None and out.size != count:
        raise _bytes_error(name, _truncation_message(data, count), expected=count)
    return out


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
            f"{_tensor_label(name)} ({datatype}, shape {dims}) needs {expected} bytes, "
            f"got {actual}",
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
            raise _bytes_error(
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
    if count == 1 and (len(view) < 4 or _LEN.unpack_from(view)[0] != len(view) - 4):
        out = np.empty(1, dtype=object)
        out[0] = bytes(view)  # one raw element (an encoded image), no length prefix
        return out.reshape(dims)
    return decode_bytes_tensor(view, count, name=name).reshape(dims)
