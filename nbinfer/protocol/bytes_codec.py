"""BYTES tensors on the wire: each element a 4-byte little-endian length, then its bytes.

Encoding is one vectorised pass (byte-identical to tritonclient's); decoding finds the element
starts with numpy when the data makes it cheap (all elements one length, short elements) and
slices element by element otherwise. Empty elements, embedded and trailing NUL bytes and
non-UTF-8 bytes survive unchanged; malformed data (truncated, trailing bytes, a count other than
the shape's) is an :class:`~nbinfer.InvalidInputError` naming the tensor.

Example:
    >>> arr = np.array([b"a", b"", b"xyz"], dtype=object)
    >>> wire = encode_bytes_tensor(arr)
    >>> decode_bytes_tensor(wire, 3).tolist()
    [b'a', b'', b'xyz']

:mod:`nbinfer.protocol.tensors` re-exports the public names (the tensor codecs' one entry point).

Layer: protocol (pure); imports numpy and errors; no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import islice, takewhile
from typing import Any

import numpy as np

from nbinfer.errors import DataTypeError, InvalidInputError

__all__ = [
    "LENGTH",
    "bytes_element",
    "bytes_error",
    "decode_bytes_tensor",
    "encode_bytes_tensor",
    "tensor_label",
]

_U4 = np.dtype("<u4")
#: The 4-byte little-endian length before each BYTES element.
LENGTH = struct.Struct("<I")
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
#: Up to this many elements a BYTES tensor is encoded element by element: numpy's set-up costs
#: more than a few ``struct`` packs (a streamed token is one element).
_FEW_ELEMENTS = 8


def tensor_label(name: str) -> str:
    """``"tensor 'x'"`` (or ``"tensor"``): how messages name a tensor."""
    return f"tensor '{name}'" if name else "tensor"


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
    if n <= _FEW_ELEMENTS:
        return _encode_few(items)
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


def _encode_few(items: list[Any]) -> bytes:
    """:func:`encode_bytes_tensor` of a few elements, one ``struct`` pack each."""
    parts: list[bytes] = []
    for item in items:
        data = bytes_element(item)
        if len(data) > 0xFFFFFFFF:
            raise InvalidInputError("a BYTES element is larger than 4 GiB")
        parts.append(LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def bytes_error(name: str, message: str, **context: Any) -> InvalidInputError:
    """The error of malformed BYTES data: ``"BYTES tensor 'x': <message>"``."""
    return InvalidInputError(f"BYTES {tensor_label(name)}: {message}", tensor=name, **context)


def _decode_uniform(data: bytes, count: int) -> np.ndarray[Any, Any] | None:
    """All elements the same length (a common case): decode with one structured view, or None."""
    first = LENGTH.unpack_from(data, 0)[0]
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
        or last + 4 + LENGTH.unpack_from(data, last)[0] != size
    ):
        raise bytes_error(name, _truncation_message(data, count), expected=count)
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
    unpack = LENGTH.unpack_from
    offset, size = 0, len(data)
    while offset < size:
        if offset + 4 > size:
            raise bytes_error(name, _truncation_message(data, count), expected=count)
        (length,) = unpack(data, offset)
        offset += 4
        if offset + length > size:
            raise bytes_error(name, _truncation_message(data, count), expected=count)
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
        (length,) = LENGTH.unpack_from(data, offset)
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
        raise bytes_error(name, f"invalid element count {count}")
    if count == 0 or (count is None and size == 0):
        if size:
            raise bytes_error(name, f"expected 0 elements but got {size} bytes", expected=0)
        return np.empty(0, dtype=object)
    if size < 4:
        raise bytes_error(name, _truncation_message(data, count), expected=count)
    if count is not None and 4 * count > size:  # each element takes at least 4 bytes
        raise bytes_error(
            name, f"{count} elements need at least {4 * count} bytes, got {size}", expected=count
        )
    out: np.ndarray[Any, Any] | None = None
    if count is not None:
        out = _decode_uniform(data, count)
    if out is None:
        if size > _SHORT_PATH_MAX_BYTES or size <= _LOOP_MAX_BYTES:
            short = False
        elif count is None:
            short = LENGTH.unpack_from(data, 0)[0] <= _SHORT_ELEMENT_BYTES
        else:
            short = size <= _SHORT_ELEMENT_BYTES * count
        if short:
            out = _decode_short(data, count, name)
        else:
            out = _object_array(_decode_loop(data, count, name))
    if count is not None and out.size != count:
        raise bytes_error(name, _truncation_message(data, count), expected=count)
    return out
