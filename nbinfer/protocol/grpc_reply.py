"""The client's reader of gRPC inference replies: arrays viewed where the reply arrived.

The engines hand ``ModelInfer`` replies over as the bytes grpcio received. The raw output
records are split off before protobuf parses the rest, so each fixed-width output is a
read-only view of that buffer, never copied; a reply laid out byte for byte like an earlier
one reuses that one's layout. Other replies (typed contents, shared memory, BYTES, BOOL, a
message a test transport answers with) are decoded by :mod:`nbinfer.protocol.grpc`. Imports
protobuf, numpy and the protocol's own modules; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nbinfer.protocol.grpc import (
    RAW_OUTPUT_FIELD,
    RAW_OUTPUT_TAG,
    read_response,
    response_from_proto,
)
from nbinfer.protocol.grpc_tensors import params_from_proto, split_field, varint
from nbinfer.protocol.reader import PLAIN_DTYPES, PlainOutput
from nbinfer.protocol.reader import ResponseReader as _LazyReader
from nbinfer.protocol.types import Parameters

__all__ = ["ResponseReader"]


class ResponseReader(_LazyReader):
    """A ``ModelInferResponse`` whose outputs are decoded on first access.

    Takes the message, or its serialized bytes as the client's engines hand them over. Of the
    bytes, the outputs' raw contents are never copied: arrays are views of the received
    buffer, and a reply laid out byte for byte like an earlier one (every field before the
    contents identical, the same length) reuses that one's layout without parsing it again.
    Sizes are checked up front, so a malformed reply fails at once as with
    :func:`response_from_proto`; arrays are zero-copy read-only views made when first asked
    for. Replies this reader does not take apart cheaply (typed contents, shared memory, BYTES,
    BOOL) are decoded eagerly by :func:`response_from_proto`.

    Raises:
        InvalidInputError: not a ``ModelInferResponse`` (malformed protobuf), data and shape
            disagree, or data is missing.
        DataTypeError: an unknown datatype.
    """

    __slots__ = ("_msg",)

    def __init__(self, reply: Any) -> None:
        if isinstance(reply, bytes):
            for head, prefix, places, names in _LAYOUTS.get(len(reply), ()):
                if not reply.startswith(prefix):
                    continue
                for tag, start, *_ in places:
                    if not reply.startswith(tag, start):
                        break
                else:  # the same fields before the same records: the same layout
                    self._msg = head
                    views = [(*spec, reply, offset, n) for _, _, spec, offset, n in places]
                    super().__init__(plain=views, names=names)
                    return
            msg, plain = _read_reply(reply)
        else:
            msg, plain = reply, _message_layout(reply)
        self._msg = msg
        if plain is None:
            super().__init__(response_from_proto(msg))
        else:
            super().__init__(plain=plain)

    def _head(self, key: str) -> str:
        return str(getattr(self._msg, key))

    def _parameters(self) -> Parameters:
        return params_from_proto(self._msg.parameters)

    def _output_parameters(self, index: int) -> Parameters:
        return params_from_proto(self._msg.outputs[index].parameters)


#: Where one output's record lies: the tag and length that open it and where they start, the
#: output's name / datatype / dtype / shape, its contents' offset and element count.
_Place = tuple[bytes, int, tuple[str, str, Any, tuple[int, ...]], int, int]
#: Plain reply layouts by reply length: the message of every field before the raw contents
#: (never changed: read-only), those fields' bytes, each output's place, the output names.
_Layout = tuple[Any, bytes, list[_Place], list[str]]
_LAYOUTS: dict[int, list[_Layout]] = {}
_MAX_LAYOUTS = 256


def _read_reply(data: bytes) -> tuple[Any, list[PlainOutput] | None]:
    """Parse a serialized reply: its message, and its plain layout over ``data`` (or None).

    The raw contents are split off before protobuf parses the rest. When they are the last
    records (as protobuf writes them) the layout indexes ``data`` itself and is kept for the
    replies that repeat it; otherwise the whole reply is parsed as a message.

    Raises:
        InvalidInputError: not a ``ModelInferResponse``.
    """
    split = split_field(data, RAW_OUTPUT_FIELD)
    if split is not None and data.startswith(split[0]):
        prefix, raw = split
        head = read_response(prefix)
        if not raw:  # nothing was split off: the head is the whole reply
            return head, _plain_layout(head.outputs[:], ())
        plain = _plain_layout(head.outputs[:], raw)
        places = None if plain is None else _places(prefix, data, plain)
        if places is not None:
            if not head.id:  # a reply echoing a request id is not repeated
                names = [spec[0] for _, _, spec, *_ in places]
                _remember(len(data), (head, prefix, places, names))
            return head, [(*spec, data, offset, n) for _, _, spec, offset, n in places]
    msg = read_response(data)
    return msg, _message_layout(msg)


def _places(prefix: bytes, data: bytes, plain: list[PlainOutput]) -> list[_Place] | None:
    """Where each output's record lies in ``data``, if they follow ``prefix`` in order."""
    places: list[_Place] = []
    offset = len(prefix)
    for name, datatype, dtype, shape, _, _, count in plain:
        tag = RAW_OUTPUT_TAG + varint(count * dtype.itemsize)
        if not data.startswith(tag, offset):
            return None
        places.append((tag, offset, (name, datatype, dtype, shape), offset + len(tag), count))
        offset += len(tag) + count * dtype.itemsize
    return places if offset == len(data) else None


def _remember(length: int, layout: _Layout) -> None:
    """Keep ``layout`` for the replies of ``length`` bytes (a few per length, 256 lengths)."""
    known = _LAYOUTS.get(length)
    if known is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        known = _LAYOUTS[length] = []
    if len(known) >= 4:  # the oldest goes
        del known[0]
    known.append(layout)


def _message_layout(msg: Any) -> list[PlainOutput] | None:
    """The plain layout of a parsed reply, its contents read from the message."""
    return _plain_layout(msg.outputs[:], msg.raw_output_contents[:])


def _plain_layout(outs: Sequence[Any], raw: Sequence[Any]) -> list[PlainOutput] | None:
    """One raw entry of the exact size per fixed-width output and nothing else, or None."""
    # upb containers are sliced by the callers, not iterated: a slice is one C call
    if len(raw) != len(outs):
        return None
    plain: list[PlainOutput] = []
    for out, data in zip(outs, raw, strict=True):
        datatype = out.datatype
        dtype = PLAIN_DTYPES.get(datatype)
        shape = tuple(out.shape[:])
        if dtype is None or min(shape, default=0) < 0 or out.HasField("contents"):
            return None
        count = math.prod(shape)
        if len(data) != count * dtype.itemsize:
            return None
        plain.append((out.name, datatype, dtype, shape, data, 0, count))
    return plain
