"""Columns that sit side by side in one row-major block, seen as one ``[rows, k]`` array.

A frame built from one 2-D array (``pd.DataFrame(values)``) holds its columns as strided views
of that array: :func:`row_block` finds it, so each chunk of those columns is one contiguous
slice (a view when it already has the input's dtype; one cast pass otherwise) instead of ``k``
strided column copies.

Layer: interop (NumPy only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["row_block"]


def row_block(arrays: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any] | None:
    """Columns that sit side by side in one row-major block, as a ``[rows, k]`` view on it."""
    first = arrays[0]
    if len(arrays) < 2 or first.ndim != 1 or first.dtype.kind not in "biuf":
        return None
    size, stride = first.dtype.itemsize, first.strides[0]
    root, address = _root(first), first.__array_interface__["data"][0]
    for j, arr in enumerate(arrays):
        if (
            arr.ndim != 1
            or arr.dtype != first.dtype
            or arr.shape != first.shape
            or arr.strides != first.strides
            or _root(arr) is not root
            or arr.__array_interface__["data"][0] != address + j * size
        ):
            return None
    if stride < len(arrays) * size:
        return None
    shape, strides = (len(first), len(arrays)), (stride, size)
    return np.lib.stride_tricks.as_strided(first, shape, strides, writeable=False)


def _root(arr: np.ndarray[Any, Any]) -> Any:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr.base if arr.base is not None else arr
