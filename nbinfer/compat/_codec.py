"""The BYTES tensor serializer both compat faces offer as ``serialize_byte_tensor``.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbinfer.errors import DataTypeError
from nbinfer.protocol.tensors import encode_bytes_tensor

__all__ = ["serialize_byte_tensor"]

_BYTES_LIKE = (bytes, bytearray, memoryview, str)


def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A BYTES tensor's wire form (4-byte little-endian lengths), as a 0-d object array.

    Row-major order. Elements of an object array that are neither bytes nor ``str`` are
    written as ``str(element)`` in UTF-8, as tritonclient and KServe do. An empty tensor gives
    an empty 1-D object array.

    Raises:
        DataTypeError: Not an object or ``S`` / ``U`` array.
    """
    arr = np.asarray(input_tensor)
    if arr.size == 0:
        return np.empty([0], dtype=np.object_)
    if arr.dtype != np.object_ and arr.dtype.kind not in "SU":
        raise DataTypeError(
            f"cannot serialize bytes tensor: invalid datatype {arr.dtype} "
            "(an object, bytes or str array is needed)"
        )
    if arr.dtype == np.object_ and not all(isinstance(x, _BYTES_LIKE) for x in arr.flat):
        arr = np.array(
            [x if isinstance(x, _BYTES_LIKE) else str(x) for x in arr.flat], dtype=np.object_
        )
    out = np.empty((), dtype=np.object_)
    out[()] = encode_bytes_tensor(arr)
    return out
