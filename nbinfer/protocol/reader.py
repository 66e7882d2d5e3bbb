"""The lazy response reader shared by the REST and gRPC ends of the client.

A reader answers what a client's result needs (output names, one output's array, the whole
:class:`~nbinfer.protocol.types.InferResponse`) without decoding outputs nobody asks for. The
wire codecs (:mod:`nbinfer.protocol.rest`, :mod:`nbinfer.protocol.grpc`) find the *plain* layout
of a reply (fixed-width outputs whose sizes are already checked, each a slice of a received
buffer) and hand it here; anything else they decode eagerly and hand over decoded. Arrays are
zero-copy, read-only views made on first access.

Imports numpy and :mod:`nbinfer.protocol.types` only: no codec, no protobuf, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.types import InferOutput, InferResponse, Parameters

__all__ = ["PLAIN_DTYPES", "PlainOutput", "ResponseReader"]

#: Fixed-width datatypes whose bytes need no check beyond their size (BOOL checks its values,
#: BYTES has its own framing): their wire bytes are the little-endian array itself.
PLAIN_DTYPES: dict[str, np.dtype[Any]] = {
    name: numpy_dtype(name)
    for name in (
        *("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"),
        *("FP16", "FP32", "FP64", "BF16"),
    )
}


#: Where a plain output's data lies: ``(name, datatype, dtype, shape, buffer, offset, size)``,
#: ``size`` items of ``dtype`` at ``offset`` of the immutable ``buffer``, the codec that built it
#: having checked that they are exactly the tensor's bytes. (A plain tuple: it is built per
#: output of every reply, where a NamedTuple's constructor would cost more than the rest.)
PlainOutput = tuple[str, str, np.dtype[Any], tuple[int, ...], bytes, int, int]


class ResponseReader:
    """An inference response whose outputs are decoded on first access.

    Built either over a decoded response (``decoded``) or over a reply's plain layout
    (``plain``); subclasses for the latter read the reply-level fields (:meth:`_head`) and the
    output parameters (:meth:`_output_parameters`) from their own message.

    Args:
        decoded: The response, already decoded (every other argument is then ignored).
        plain: The plain layout of every output, in order.
        names: The outputs' names, when the caller has them already (copied).
    """

    __slots__ = ("_arrays", "_full", "_plain", "names")

    def __init__(
        self,
        decoded: InferResponse | None = None,
        plain: list[PlainOutput] | None = None,
        names: list[str] | None = None,
    ) -> None:
        self._full = decoded
        if decoded is not None:
            self.names: list[str] = [out.name for out in decoded.outputs]
            self._plain: list[PlainOutput] = []
            self._arrays: list[np.ndarray[Any, Any] | None] = []
        else:
            self._plain = plain or []
            self.names = [spec[0] for spec in self._plain] if names is None else names.copy()
            self._arrays = [None] * len(self._plain)

    def _head(self, key: str) -> str:
        """``model_name`` / ``model_version`` / ``id`` of a lazily read reply."""
        raise NotImplementedError

    def _parameters(self) -> Parameters:
        """The parameters of a lazily read reply."""
        raise NotImplementedError

    def _output_parameters(self, index: int) -> Parameters:
        """The parameters of output ``index`` of a lazily read reply (transport ones removed)."""
        raise NotImplementedError

    @property
    def model_name(self) -> str:
        """The model that answered."""
        return self._full.model_name if self._full is not None else self._head("model_name")

    @property
    def model_version(self) -> str:
        """The model version that answered."""
        if self._full is not None:
            return self._full.model_version
        return self._head("model_version")

    @property
    def id(self) -> str:
        """The request id echoed by the server."""
        return self._full.id if self._full is not None else self._head("id")

    @property
    def parameters(self) -> Parameters:
        """Response parameters."""
        return self._full.parameters if self._full is not None else self._parameters()

    def array(self, index: int) -> np.ndarray[Any, Any] | None:
        """The data of output ``index`` (None: it was written to shared memory)."""
        if self._full is not None:
            out = self._full.outputs[index]
            data = out.data
            shape = tuple(out.shape)
            if data is not None and data.shape != shape and data.size == math.prod(shape):
                data = data.reshape(shape)  # a peer's flat data under the declared shape
            return data
        arr = self._arrays[index]
        if arr is None:
            _, _, dtype, shape, buffer, offset, _ = self._plain[index]
            # a view of immutable bytes: read-only, as every decoded tensor is
            arr = self._arrays[index] = np.ndarray(shape, dtype, buffer, offset)
        return arr

    def output(self, index: int) -> InferOutput:
        """Output ``index`` with its datatype, shape and parameters."""
        if self._full is not None:
            return self._full.outputs[index]
        name, datatype, _, shape, *_ = self._plain[index]
        params = self._output_parameters(index)
        return InferOutput(name, datatype, list(shape), self.array(index), params)

    def response(self) -> InferResponse:
        """The whole reply as an :class:`InferResponse`."""
        if self._full is None:
            self._full = InferResponse(
                model_name=self.model_name,
                outputs=[self.output(i) for i in range(len(self.names))],
                model_version=self.model_version,
                id=self.id,
                parameters=self.parameters,
            )
        return self._full
