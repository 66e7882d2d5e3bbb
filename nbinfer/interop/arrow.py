"""Arrow tables in and out: ``pyarrow.Table`` / ``RecordBatch`` under the pandas column rules.

The column plan (:mod:`nbinfer.interop.pandas`, the one home of DataFrame planning) reads an
Arrow frame through :func:`column_values` (its ``_column`` hook), so a Table gets exactly the
pandas rules: the same column mapping, coercion, errors, NaN notes and chunks. No pandas
round-trip: a column goes straight from its Arrow buffer to NumPy.

Zero-copy where the memory allows: a null-free numeric (or temporal) column held in one chunk
is a read-only NumPy view on the Arrow buffer (``to_numpy(zero_copy_only=True)``), and so is a
null-free ``fixed_size_list`` column of numbers (a 2-D view on its child buffer: one input of
shape ``[-1, k]``). A copy is unavoidable for a column in several chunks (joined once), with
nulls (numbers become float64 with NaN, as pandas reads them, then flagged; nulls in other
columns are refused), of booleans (Arrow packs them in bits) and of strings (Python objects).
Chunks sent in the input's datatype are then slices of the view, sent without a further copy.

:func:`outputs_to_arrow` lays the outputs out as :func:`~nbinfer.interop.outputs.output_blocks`
says (the pandas result's columns, names and order) in a Table (or a RecordBatch): numeric
columns wrap the received NumPy arrays without a copy where they are contiguous, an output kept
as one column of arrays (``expand=False`` or deeper outputs) becomes a ``fixed_size_list``.

Layer: interop (imports ``nbinfer.errors`` and its interop siblings; pyarrow lazily, so
``import nbinfer`` never loads it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.interop.outputs import output_blocks
from nbinfer.protocol.types import InferOutput

__all__ = ["column_values", "outputs_to_arrow"]


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as exc:
        raise ImportError("Arrow support needs pyarrow: pip install 'nbinfer[arrow]'") from exc
    return pyarrow


def _nulls_refused(name: str, arr: Any) -> InvalidInputError:
    fix = (
        f"Fill them (`pyarrow.compute.fill_null(table[{name!r}], ...)`) or drop those rows "
        "(`table.drop_null()`) first."
    )
    return InvalidInputError(
        f"column {name!r} ({arr.type}) has {arr.null_count} null value(s); only numeric "
        f"columns take nulls (as NaN). {fix}",
        hint=fix,
        column=name,
        dtype=str(arr.type),
    )


def column_values(column: Any, name: str) -> np.ndarray[Any, Any]:
    """One Arrow column (``ChunkedArray`` or ``Array``) as NumPy, zero-copy where it can be.

    See the module docstring for when a copy is unavoidable.

    Raises:
        InvalidInputError: Nulls in a column that is not numeric (booleans, strings, lists).
    """
    pa = _pyarrow()
    if isinstance(column, pa.ChunkedArray):
        # one chunk: its buffer as is; several: joined once (a copy the plan cannot avoid)
        arr = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    else:
        arr = column
    kind = arr.type
    if pa.types.is_dictionary(kind):
        arr = arr.dictionary_decode()
        kind = arr.type
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if arr.null_count and not numeric:
        raise _nulls_refused(name, arr)
    if pa.types.is_fixed_size_list(kind):
        inner = column_values(arr.flatten(), name)  # the child buffer, this array's rows
        return inner.reshape(len(arr), kind.list_size, *inner.shape[1:])
    try:
        values: np.ndarray[Any, Any] = arr.to_numpy(zero_copy_only=True)
    except pa.ArrowInvalid:  # nulls, booleans, strings, lists: NumPy needs its own copy
        values = np.asarray(arr.to_numpy(zero_copy_only=False))
    return values


def _array(pa: Any, values: np.ndarray[Any, Any]) -> Any:
    """One result column (``[n]`` or deeper) as an Arrow array; numbers without a copy."""
    if values.ndim > 1:
        flat = _array(pa, values.reshape(-1))
        for size in reversed(values.shape[1:]):
            flat = pa.FixedSizeListArray.from_arrays(flat, size)
        return flat
    if values.dtype.kind != "O":
        return pa.array(np.ascontiguousarray(values))  # contiguous: wraps the buffer
    items = values.tolist()
    if any(isinstance(v, bytes) for v in items):  # not all UTF-8: the column stays binary
        return pa.array([v.encode() if isinstance(v, str) else v for v in items], pa.binary())
    return pa.array(items, pa.string())


def outputs_to_arrow(
    outputs: Sequence[InferOutput],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    expand: bool = True,
    classified: Sequence[str] = (),
    record_batch: bool = False,
    note: str = "",
) -> Any:
    """Response outputs as a ``pyarrow.Table`` (or ``RecordBatch``): the pandas result's columns.

    Args:
        outputs: Decoded outputs (one response or a reassembled chunked run).
        labels: Class labels per output name (the columns of ``[n, k]`` outputs).
        expand: ``[n, k]`` outputs as ``k`` columns (default) or one ``fixed_size_list`` column.
        classified: Outputs that carry classification strings (``label`` / ``score`` columns).
        record_batch: Return a ``RecordBatch`` instead of a ``Table``.
        note: Said in the schema metadata under ``b"nbinfer.note"`` (e.g. NaN in the inputs).
    """
    pa = _pyarrow()
    names: list[str] = []
    arrays: list[Any] = []
    for block in output_blocks(outputs, labels=labels, expand=expand, classified=classified):
        names += block.names
        if block.columns is not None:
            arrays += [_array(pa, np.asarray(col)) for col in block.columns]
        elif block.cells:
            assert block.values is not None
            arrays.append(_array(pa, block.values))
        else:
            assert block.values is not None
            arrays += [_array(pa, block.values[:, j]) for j in range(len(block.names))]
    metadata = {"nbinfer.note": note} if note else None
    if record_batch:
        return pa.RecordBatch.from_arrays(arrays, names=names, metadata=metadata)
    return pa.Table.from_arrays(arrays, names=names, metadata=metadata)
