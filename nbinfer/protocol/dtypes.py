"""The one two-way table between v2 datatypes and numpy dtypes, and Triton's ``TYPE_*`` names.

BYTES tensors are numpy ``object`` arrays whose elements are ``bytes`` (``str`` is accepted on
input and encoded as UTF-8). BF16 tensors use ``ml_dtypes.bfloat16``. Wire byte order is little
endian; :func:`numpy_dtype` returns the little-endian dtype for each datatype. Triton's model
configs name datatypes ``TYPE_FP32`` (``BYTES`` is ``TYPE_STRING``) and number them in
``model_config.proto``: :data:`TRITON_TYPES`, :func:`triton_type` and :func:`datatype_of_triton`.

A leaf of the protocol layer: imports numpy, ml_dtypes and :mod:`nbinfer.errors` only.
"""

from __future__ import annotations

from typing import Any, Final

import ml_dtypes
import numpy as np

from nbinfer.errors import DataTypeError

__all__ = [
    "DATATYPES",
    "TRITON_TYPES",
    "bfloat16",
    "datatype_of",
    "datatype_of_triton",
    "element_size",
    "numpy_dtype",
    "triton_type",
]

#: numpy dtype of bfloat16 (from ml_dtypes).
bfloat16: Final[np.dtype[Any]] = np.dtype(ml_dtypes.bfloat16)

_TO_NUMPY: Final[dict[str, np.dtype[Any]]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BF16": bfloat16,
    "BYTES": np.dtype(object),
}

#: All v2 datatypes nbinfer knows, in the order of the specification.
DATATYPES: Final[tuple[str, ...]] = tuple(_TO_NUMPY)

#: Triton's ``DataType`` enum (``model_config.proto``): ``TYPE_*`` name -> number.
TRITON_TYPES: Final[dict[str, int]] = {
    "TYPE_INVALID": 0,
    "TYPE_BOOL": 1,
    "TYPE_UINT8": 2,
    "TYPE_UINT16": 3,
    "TYPE_UINT32": 4,
    "TYPE_UINT64": 5,
    "TYPE_INT8": 6,
    "TYPE_INT16": 7,
    "TYPE_INT32": 8,
    "TYPE_INT64": 9,
    "TYPE_FP16": 10,
    "TYPE_FP32": 11,
    "TYPE_FP64": 12,
    "TYPE_STRING": 13,
    "TYPE_BF16": 14,
}

#: ``TYPE_*`` name -> v2 datatype (every name but ``TYPE_INVALID``).
_FROM_TRITON: Final[dict[str, str]] = {
    name: "BYTES" if name == "TYPE_STRING" else name[5:]
    for name in TRITON_TYPES
    if name != "TYPE_INVALID"
}

_FROM_KIND: Final[dict[tuple[str, int], str]] = {
    ("b", 1): "BOOL",
    ("u", 1): "UINT8",
    ("u", 2): "UINT16",
    ("u", 4): "UINT32",
    ("u", 8): "UINT64",
    ("i", 1): "INT8",
    ("i", 2): "INT16",
    ("i", 4): "INT32",
    ("i", 8): "INT64",
    ("f", 2): "FP16",
    ("f", 4): "FP32",
    ("f", 8): "FP64",
}


def numpy_dtype(datatype: str) -> np.dtype[Any]:
    """Return the (little-endian) numpy dtype for a v2 datatype.

    Raises:
        DataTypeError: ``datatype`` is not a v2 datatype.
    """
    try:
        return _TO_NUMPY[datatype]
    except KeyError as exc:
        raise DataTypeError(
            f"unknown datatype {datatype!r}; known: {', '.join(DATATYPES)}", datatype=datatype
        ) from exc


def datatype_of(dtype: np.dtype[Any] | type[Any] | str) -> str:
    """Return the v2 datatype for a numpy dtype (any byte order).

    ``object``, bytes (``S``), unicode (``U``) and numpy 2 ``StringDType`` all map to ``BYTES``.

    Raises:
        DataTypeError: the dtype has no v2 datatype (complex, datetime, structured, ...).
    """
    dt = np.dtype(dtype)
    if dt == bfloat16:
        return "BF16"
    if dt.kind in "OSUT":
        return "BYTES"
    found = _FROM_KIND.get((dt.kind, dt.itemsize))
    if found is None:
        raise DataTypeError(
            f"numpy dtype {dt} has no v2 datatype; supported: bool, (u)int8-64, float16/32/64, "
            "bfloat16, bytes/str/object",
            dtype=str(dt),
        )
    return found


def element_size(datatype: str) -> int:
    """Bytes per element on the wire for a fixed-width datatype (0 for BYTES).

    Raises:
        DataTypeError: ``datatype`` is not a v2 datatype.
    """
    dt = numpy_dtype(datatype)
    return 0 if datatype == "BYTES" else dt.itemsize


def triton_type(datatype: str) -> str:
    """The Triton ``TYPE_*`` name of a v2 datatype (``BYTES`` is ``TYPE_STRING``).

    Raises:
        DataTypeError: ``datatype`` is not a v2 datatype.
    """
    if datatype not in _TO_NUMPY:
        numpy_dtype(datatype)  # raises with the known names
    return "TYPE_STRING" if datatype == "BYTES" else "TYPE_" + datatype


def datatype_of_triton(name: str) -> str:
    """The v2 datatype of a Triton ``TYPE_*`` name (``TYPE_STRING`` is ``BYTES``).

    Raises:
        DataTypeError: ``name`` is not a Triton datatype name.
    """
    try:
        return _FROM_TRITON[name]
    except KeyError as exc:
        raise DataTypeError(
            f"unknown Triton datatype {name!r}; known: {', '.join(_FROM_TRITON)}", datatype=name
        ) from exc
