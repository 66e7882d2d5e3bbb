"""``tritonclient.utils`` over nbinfer: the exception, datatype helpers and BYTES codec.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbinfer.compat._codec import serialize_byte_tensor as _serialize
from nbinfer.compat._triton import (
    TRITON_RESERVED_REQUEST_PARAMS,
    TRITON_RESERVED_REQUEST_PARAMS_PREFIX,
    InferenceServerException,
    np_to_triton_dtype,
    raise_error,
    triton_to_np_dtype,
)
from nbinfer.errors import NbinferError
from nbinfer.protocol.tensors import decode_bytes_tensor

__all__ = [
    "TRITON_RESERVED_REQUEST_PARAMS",
    "TRITON_RESERVED_REQUEST_PARAMS_PREFIX",
    "InferenceServerException",
    "deserialize_bytes_tensor",
    "np_to_triton_dtype",
    "raise_error",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "triton_to_np_dtype",
]


def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A BYTES tensor's wire form (4-byte little-endian lengths), as a 0-d object array.

    Row-major order; non-bytes, non-str elements are written as ``str(element)``; an empty
    tensor gives an empty object array, as tritonclient.

    Raises:
        InferenceServerException: Not an object or ``S`` / ``U`` array.
    """
    try:
        return _serialize(input_tensor)
    except NbinferError as exc:
        raise InferenceServerException(exc.message, error=exc) from exc


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray[Any, Any]:
    """The elements of a serialized BYTES tensor, as a 1-D object array of ``bytes``."""
    return decode_bytes_tensor(encoded_tensor)


def serialized_byte_size(tensor_value: np.ndarray[Any, Any]) -> int:
    """Bytes the tensor takes on the wire (a serialized BYTES tensor or a numeric array)."""
    if tensor_value.dtype != np.object_:
        return int(tensor_value.nbytes)
    return sum(len(bytes(item)) for item in tensor_value.ravel())
