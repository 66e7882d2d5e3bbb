"""Polars frames in and out: ``polars.DataFrame`` under the pandas column rules.

The column plan (:mod:`nbinfer.interop.pandas`, the one home of DataFrame planning) reads a
Polars frame through :func:`column_values` (its ``_column`` hook): the same column mapping,
coercion, errors, NaN notes and chunks as pandas, with no pandas (or Arrow) round-trip.

Zero-copy where the memory allows: ``Series.to_numpy()`` is a read-only view on the column's
buffer for a null-free numeric column in one chunk, and a 2-D view for an ``Array`` column of
numbers (one input of shape ``[-1, k]``). A copy is unavoidable for a column in several chunks
(``frame.rechunk()`` first makes it one), with nulls (numbers become float64 with NaN, as pandas
reads them, then flagged; nulls in other columns are refused), of booleans (bit-packed) and of
strings (Python objects).

:func:`outputs_to_polars` lays the outputs out as :func:`~nbinfer.interop.outputs.output_blocks`
says (the pandas result's columns, names and order); numeric columns wrap the received NumPy
arrays without a copy where they are contiguous, an output kept as one column of arrays
(``expand=False`` or deeper outputs) becomes an ``Array`` column.

Layer: interop (imports ``nbinfer.errors`` and its interop siblings; polars lazily, so
``import nbinfer`` never loads it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.interop.outputs import output_blocks
from nbinfer.protocol.types import InferOutput

__all__ = ["column_values", "outputs_to_polars"]


def _polars() -> Any:
    try:
        import polars
    except ImportError as exc:
        raise ImportError("Polars support needs polars: pip install 'nbinfer[polars]'") from exc
    return polars


def column_values(series: Any, name: str) -> np.ndarray[Any, Any]:
    """One Polars column as NumPy: a view where Polars can give one (see the module docstring).

    Raises:
        InvalidInputError: Nulls in a column that is not numeric (booleans, strings, lists).
    """
    nulls = series.null_count()
    if nulls and not series.dtype.is_numeric():
        fix = f"Fill them (`pl.col({name!r}).fill_null(...)`) or drop those rows (`drop_nulls`)."
        raise InvalidInputError(
            f"column {name!r} ({series.dtype}) has {nulls} null value(s); only numeric columns "
            f"take nulls (as NaN). {fix}",
            hint=fix,
            column=name,
            dtype=str(series.dtype),
        )
    values: np.ndarray[Any, Any] = np.asarray(series.to_numpy())
    return values


def _series(pl: Any, name: str, values: np.ndarray[Any, Any]) -> Any:
    """One result column as a Series; numbers (any rank) without a copy where contiguous."""
    if values.dtype.kind != "O":
        return pl.Series(name, np.ascontiguousarray(values))
    items = values.tolist()
    flat = values.reshape(-1).tolist()
    if values.ndim == 1 and any(isinstance(v, bytes) for v in flat):  # not all UTF-8: binary
        return pl.Series(name, [v.encode() if isinstance(v, str) else v for v in items], pl.Binary)
    return pl.Series(name, items)


def outputs_to_polars(
    outputs: Sequence[InferOutput],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    expand: bool = True,
    classified: Sequence[str] = (),
) -> Any:
    """Response outputs as a ``polars.DataFrame``: the pandas result's columns, in its order.

    Args:
        outputs: Decoded outputs (one response or a reassembled chunked run).
        labels: Class labels per output name (the columns of ``[n, k]`` outputs).
        expand: ``[n, k]`` outputs as ``k`` columns (default) or one ``Array`` column.
        classified: Outputs that carry classification strings (``label`` / ``score`` columns).
    """
    pl = _polars()
    series: list[Any] = []
    for block in output_blocks(outputs, labels=labels, expand=expand, classified=classified):
        if block.columns is not None:
            pairs = zip(block.names, block.columns, strict=True)
            series += [_series(pl, n, np.asarray(c)) for n, c in pairs]
        elif block.cells:
            assert block.values is not None
            series.append(_series(pl, block.names[0], block.values))
        else:
            assert block.values is not None
            series += [_series(pl, n, block.values[:, j]) for j, n in enumerate(block.names)]
    return pl.DataFrame(series)
