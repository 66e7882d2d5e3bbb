"""The classification extension: top-k scores as BYTES ``"value:index[:label]"``, best first.

A client asks for it with ``RequestedOutput(class_count=k)`` (REST output parameter
``classification``); the server replaces the output ``[batch, C]`` (or ``[C]``) by a BYTES tensor
``[batch, k]`` (or ``[k]``). Values are written like Triton does (``%f`` for floats, plain integers
for integer scores), so clients written for Triton parse ours. Pure: numpy and the protocol's
own types only (no I/O, no codec).

Example:
    >>> enc = encode_classification(np.array([0.1, 0.7, 0.2]), 2, ["cat", "dog", "eel"])
    >>> enc.tolist()
    [b'0.700000:1:dog', b'0.200000:2:eel']
    >>> decode_classification(enc)[0][0]
    ClassificationResult(score=0.7, index=1, label='dog')

Layer: protocol (pure); imports numpy, errors, protocol.dtypes and protocol.types; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import bfloat16
from nbinfer.protocol.types import ClassificationResult

__all__ = ["decode_classification", "encode_classification", "top_k"]


def top_k(
    scores: np.ndarray[Any, Any], k: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Indices and values of the ``k`` largest scores along the last axis, best first.

    Ties keep the lower index first; NaN scores rank last. ``k`` is clipped to the class count.

    Raises:
        InvalidInputError: ``k`` < 1 or ``scores`` is 0-d.
    """
    s = np.asarray(scores)
    if s.ndim == 0:
        raise InvalidInputError("classification needs at least one dimension of class scores")
    if k < 1:
        raise InvalidInputError(f"classification count must be >= 1, got {k}")
    if s.dtype == bfloat16 or s.dtype.kind == "b":
        s = s.astype(np.float32)
    classes = s.shape[-1]
    k = min(k, classes)
    key = -s.astype(np.float64) if s.dtype.kind in "fiu" else -s
    if s.dtype.kind == "f":
        key = np.where(np.isnan(key), np.inf, key)
    if classes > 4 * k:  # select the k best in O(C), ties broken by lower index, then order them
        kth = np.partition(key, k - 1, axis=-1)[..., k - 1 : k]
        better = key < kth
        tied = key == kth
        room = k - better.sum(axis=-1, keepdims=True)
        chosen = better | (tied & (np.cumsum(tied, axis=-1) <= room))
        part = np.nonzero(chosen)[-1].reshape(*key.shape[:-1], k)
        order = np.lexsort((part, np.take_along_axis(key, part, axis=-1)), axis=-1)
        idx = np.take_along_axis(part, order, axis=-1)
    else:
        idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return idx, np.take_along_axis(s, idx, axis=-1)


def _format_value(value: Any, integral: bool) -> str:
    return str(int(value)) if integral else f"{float(value):f}"


def encode_classification(
    scores: np.ndarray[Any, Any], k: int, labels: Sequence[str] | None = None
) -> np.ndarray[Any, Any]:
    """Top-``k`` classification of ``scores`` ``[..., C]`` as a BYTES array ``[..., k]``.

    Each element is ``b"value:index"`` or, when ``labels`` has an entry for the index,
    ``b"value:index:label"``; best first along the last axis. ``k`` is clipped to ``C``.

    Raises:
        InvalidInputError: ``k`` < 1 or ``scores`` is 0-d.
    """
    s = np.asarray(scores)
    idx, values = top_k(s, k)
    integral = s.dtype.kind in "iub"
    n_labels = len(labels) if labels is not None else 0
    flat = [
        (
            f"{_format_value(v, integral)}:{i}:{labels[i]}"  # type: ignore[index]
            if i < n_labels
            else f"{_format_value(v, integral)}:{i}"
        ).encode("utf-8")
        for v, i in zip(values.ravel().tolist(), idx.ravel().tolist(), strict=True)
    ]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(idx.shape)


def _parse(item: Any, row: int, col: int) -> ClassificationResult:
    text = item.decode("utf-8") if isinstance(item, (bytes, bytearray)) else str(item)
    parts = text.split(":", 2)
    try:
        score = float(parts[0])
        index = int(parts[1])
    except (ValueError, IndexError) as exc:
        raise InvalidInputError(
            f"classification entry [{row}][{col}] {text!r:.60} is not 'value:index[:label]'"
        ) from exc
    return ClassificationResult(
        score=score, index=index, label=parts[2] if len(parts) > 2 else None
    )


def decode_classification(
    arr: np.ndarray[Any, Any] | Sequence[Any],
) -> list[list[ClassificationResult]]:
    """Parse a classification output (BYTES ``[batch, k]`` or ``[k]``) into result records.

    A 1-D input gives one row; higher dimensions are flattened to rows of the last axis.

    Raises:
        InvalidInputError: an entry is not ``value:index[:label]``.
    """
    a = np.asarray(arr, dtype=object)
    if a.ndim == 0:
        a = a.reshape(1)
    rows = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(1, -1)
    return [
        [_parse(item, r, c) for c, item in enumerate(row)] for r, row in enumerate(rows.tolist())
    ]
