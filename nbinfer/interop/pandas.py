"""DataFrames <-> v2 tensors, at any size: the one home of DataFrame planning.

Everything that reads a table lives here; :mod:`nbinfer.protocol` knows nothing of DataFrames.
By section:

- **Column plan** (:func:`plan_inputs` -> :class:`InputPlan`): which columns feed which model
  input, checked once per frame (every column can be coerced to its input's datatype); the plan
  then builds the tensors of any row range, zero-copy where a column already has the input's
  dtype. It never imports pandas and reads a frame only through ``_names`` / ``_column`` and
  ``len`` (``frame.columns``, ``frame[c].to_numpy()``): Arrow (:mod:`nbinfer.interop.arrow`)
  and Polars (:mod:`nbinfer.interop.polars`) plug in there, beside pandas, with the same rules.
- **Input specs** (:func:`plan_frame`): the metadata a frame is planned against: ``inputs=``,
  else the server's, its gaps (no inputs, no datatypes or shapes: common on KServe) filled from
  the frame's columns.
- **Requests** (:func:`request_from_dataframe`, :func:`dataframe_to_inputs`): a whole frame as
  one request, for any client.
- **Outputs** (:func:`output_blocks`): response outputs as columns, laid out once; a pandas
  DataFrame (:func:`outputs_to_dataframe`), or a frame of the input's library
  (:func:`outputs_to_frame`: Arrow and Polars in, Arrow and Polars out).

A frame of any size runs in chunks through :mod:`nbinfer.interop.chunks` (row ranges of one
plan, requests in flight, answers reassembled in row order): it works on an :class:`InputPlan`,
whatever library the frame came from.

How columns become inputs (first rule that applies):

1. an explicit ``columns=`` mapping ``{input: column or [columns]}`` (a plain list of columns is
   shorthand for a single-input model);
2. every model input is a column of the frame: each column becomes that input (cells that are
   arrays or lists are stacked, so an image column works);
3. the model has one input of shape ``[-1, k]`` (or ``[k]`` with batching) and the frame ``k``
   columns: they become that input, in order, one row per batch element;
4. the frame has as many columns as the model has inputs: the model's declared input order.

Without model metadata every column becomes an input of its own name, its datatype read from the
column's dtype (strings and objects: BYTES); a column that cannot be coerced to its input is an
:class:`~nbinfer.InvalidInputError` naming it.

Outputs come back as columns: an output of shape ``[n]`` or ``[n, 1]`` is one column named after
it; ``[n, k]`` becomes ``k`` columns named ``<output>[<label or index>]`` (class labels when the
model has them), or one column of arrays with ``expand=False``; deeper outputs stay one column
holding an array per row. BYTES become ``str`` when they are valid UTF-8. Classification outputs
(the v2 classification extension) become ``label`` / ``score`` columns (``label_2`` /
``score_2``, ... for the next ranks; prefixed ``<output>.`` when several outputs are classified).

Example::

    plan = plan_inputs(frame, metadata)
    first_rows = plan.tensors(0, 1000)      # [(input, datatype, array)] for rows 0..999
    request = request_from_dataframe(frame, metadata)

Layer: interop (imports ``nbinfer.errors``, ``protocol`` and ``interop`` siblings only, plus
pandas, pyarrow and polars lazily); never the client, transports, session or server.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.interop._blocks import row_block
from nbinfer.interop.outputs import output_blocks
from nbinfer.protocol.dtypes import datatype_of, numpy_dtype
from nbinfer.protocol.tensors import Destination, as_array, conform
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    ModelMetadata,
    TensorSpec,
    infer_inputs,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ColumnSelection",
    "InputPlan",
    "InputSpecs",
    "PlannedInput",
    "column_datatype",
    "dataframe_to_inputs",
    "frame_library",
    "outputs_to_dataframe",
    "outputs_to_frame",
    "plan_frame",
    "plan_inputs",
    "request_from_dataframe",
]

logger = logging.getLogger("nbinfer")

#: Columns for ``plan_inputs(columns=...)``: ``{input: column | [columns]}`` or ``[columns]``.
ColumnSelection = Mapping[str, Any] | Sequence[Any]
#: ``inputs=`` of :meth:`Session.infer`: specs, or ``{input: datatype | (datatype, shape)}``.
InputSpecs = Sequence[TensorSpec] | Mapping[str, str | tuple[str, Sequence[int]]]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:  # pragma: no cover - pandas is a runtime dependency
        raise ImportError("DataFrame support needs pandas: pip install pandas") from exc
    return pandas


# --------------------------------------------------------------------------------- column plan

_TEXT_KINDS = "OSUT"
#: Float datatypes a float column is cast to per row range (BF16 rounds its own way: at once).
_FLOATS = frozenset({"FP16", "FP32", "FP64"})


class _Spec(NamedTuple):
    """An input the frame implies (no metadata, or a column-named input the model lacks)."""

    name: str
    datatype: str
    shape: list[int]


@dataclass(slots=True)
class PlannedInput:
    """How one model input is built from columns.

    Attributes:
        kind: ``"column"`` (one column, one element per row; a 2-D or deeper array, from an
            Arrow fixed-size list / Polars ``Array``, gives its ``row_shape``), ``"matrix"``
            (several columns side by side, ``[rows, k]``) or ``"cells"`` (one column whose
            cells are arrays).
    """

    spec: TensorSpec | _Spec
    columns: list[str]
    arrays: list[np.ndarray[Any, Any]]
    kind: str
    row_shape: tuple[int, ...]
    model: str = ""
    #: The columns as one ``[rows, k]`` array (``"matrix"`` columns that are side by side in
    #: one row-major block, as a frame built from a 2-D array holds them), else ``None``.
    block: np.ndarray[Any, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind == "matrix":
            self.block = row_block(self.arrays)

    @property
    def row_bytes(self) -> int:
        """Estimated wire bytes per row (BYTES: from a sample of the data)."""
        if self.spec.datatype == "BYTES":
            sample = self.arrays[0][:64]
            mean = sum(len(str(v)) for v in sample) / max(len(sample), 1)
            return int(4 + 2 * mean) * max(1, int(np.prod(self.row_shape)))
        return numpy_dtype(self.spec.datatype).itemsize * max(1, int(np.prod(self.row_shape)))

    def build(self, start: int, stop: int) -> np.ndarray[Any, Any]:
        """This input's tensor for rows ``start:stop``.

        Float columns of another width are cast here, one row range at a time (in cache, while
        the ranges before are in flight), by :func:`conform`'s rule: a value out of range is
        refused naming its column. Columns of the input's dtype side by side in one block are
        a view on it (nothing copied).
        """
        datatype = self.spec.datatype
        if self.kind == "matrix":
            return self._matrix(start, stop)
        part = self.arrays[0][start:stop]
        if self.kind == "cells":
            part = np.stack([np.asarray(v) for v in part])
        if datatype == "BYTES":
            part = as_array(part, "BYTES")[0]
        elif part.dtype != numpy_dtype(datatype):
            if self.kind == "cells":
                part = part.astype(numpy_dtype(datatype))
            else:  # a float column of another width
                part = conform(part, datatype, self._to(0))
        return part.reshape((stop - start, *self.row_shape))

    def _to(self, j: int) -> Destination:
        column = self.columns[j]
        return Destination(self.model, self.spec.name, f"df[{column!r}]", column)

    def _matrix(self, start: int, stop: int) -> np.ndarray[Any, Any]:
        datatype = self.spec.datatype
        target = numpy_dtype(datatype)
        if self.block is not None and self.block.dtype == target:
            return self.block[start:stop]  # a view on the frame's own block
        out = np.empty((stop - start, len(self.arrays)), dtype=target)
        with np.errstate(over="ignore", invalid="ignore"):  # out of range: refused below
            if self.block is not None and datatype != "BYTES":
                out[...] = self.block[start:stop]  # one pass over contiguous rows
            else:
                for j, arr in enumerate(self.arrays):
                    out[:, j] = arr[start:stop]
        if datatype == "BYTES":
            return as_array(out, "BYTES")[0]
        if out.dtype.kind == "f" and np.isinf(out).any():  # overflow, or inf in the frame
            for j, arr in enumerate(self.arrays):
                if arr.dtype != target:
                    conform(arr[start:stop], datatype, self._to(j))  # names what overflowed
        return out


@dataclass(slots=True)
class InputPlan:
    """Which columns feed which input; :meth:`inputs` builds the tensors of a row range."""

    model: str
    rows: int
    planned: list[PlannedInput]

    @property
    def row_bytes(self) -> int:
        """Estimated request bytes per row, all inputs together."""
        return sum(p.row_bytes for p in self.planned)

    def arrays(self, start: int, stop: int) -> dict[str, np.ndarray[Any, Any]]:
        """``{input: array}`` for rows ``start:stop``."""
        return {p.spec.name: p.build(start, stop) for p in self.planned}

    def tensors(
        self, start: int = 0, stop: int | None = None
    ) -> list[tuple[str, str, np.ndarray[Any, Any]]]:
        """``(input, datatype, array)`` for rows ``start:stop`` (default: every row)."""
        stop = self.rows if stop is None else stop
        return [(p.spec.name, p.spec.datatype, p.build(start, stop)) for p in self.planned]


def column_datatype(values: np.ndarray[Any, Any]) -> str:
    """The v2 datatype a column's values carry: text -> BYTES; arrays in cells -> their dtype."""
    if (
        values.dtype.kind == "O"
        and len(values)
        and isinstance(values[0], np.ndarray | list | tuple)
    ):
        values = np.asarray(values[0])
    return "BYTES" if values.dtype.kind in _TEXT_KINDS else datatype_of(values.dtype)


def frame_library(data: Any) -> str | None:
    """``"pandas"``, ``"arrow"`` (a ``pyarrow.Table`` / ``RecordBatch``) or ``"polars"``.

    ``None`` for anything else. Imports no frame library: one nobody imported has no frames.

    Raises:
        InvalidInputError: A ``polars.LazyFrame`` (a query, not rows: ``.collect()`` it first).
    """
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(data, pandas.DataFrame):
        return "pandas"
    arrow = sys.modules.get("pyarrow")
    if arrow is not None and isinstance(data, arrow.Table | arrow.RecordBatch):
        return "arrow"
    polars = sys.modules.get("polars")
    if polars is not None and isinstance(data, polars.DataFrame):
        return "polars"
    if polars is not None and isinstance(data, polars.LazyFrame):
        raise InvalidInputError(
            "a polars LazyFrame is a query, not rows: run it first (`lazy_frame.collect()`) "
            "and pass the DataFrame"
        )
    return None


def _names(frame: Any) -> list[Any]:
    """A frame's column names, in order (the plan's one read of the frame's layout)."""
    if frame_library(frame) == "arrow":
        return list(frame.column_names)
    return list(frame.columns)


def _column(frame: Any, name: Any) -> np.ndarray[Any, Any]:
    """One column's values as an array (the plan's one read of a frame's data).

    pandas: ``to_numpy()``; Arrow and Polars: :func:`nbinfer.interop.arrow.column_values` /
    :func:`nbinfer.interop.polars.column_values` (a view on the library's buffer where it
    allows one). A fixed-size list / Polars ``Array`` column comes back 2-D or deeper.
    """
    library = frame_library(frame)
    if library == "arrow":
        from nbinfer.interop.arrow import column_values

        return column_values(frame.column(name), str(name))
    if library == "polars":
        from nbinfer.interop.polars import column_values as polars_values

        return polars_values(frame[name], str(name))
    values: np.ndarray[Any, Any] = np.asarray(frame[name].to_numpy())
    return values


def _row_shape(spec: TensorSpec | _Spec, kind: str, width: int, sample: Any) -> tuple[int, ...]:
    if kind == "matrix":
        return (width,)
    if kind == "cells":
        return tuple(np.shape(sample))
    dims = spec.shape[1:] if len(spec.shape) >= 1 else []
    # a column feeding an input declared [-1, 1] (or [1] with batching) gets its trailing axis
    return (1,) if len(dims) == 1 and dims[0] in (1, -1) else ()


def _coerce_error(
    model: str, spec: TensorSpec | _Spec, column: Any, arr: Any, why: str
) -> Exception:
    return InvalidInputError(
        f"model {model!r}: column {column!r} ({arr.dtype}) cannot be coerced to "
        f"{spec.datatype} for input {spec.name!r}: {why}",
        model=model,
        tensor=spec.name,
        column=str(column),
        dtype=str(arr.dtype),
        datatype=spec.datatype,
    )


def _is_missing(value: Any) -> bool:
    """``None``, ``NaN``, ``pd.NA`` / ``NaT``: a cell that holds no value."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pd.NA: its comparisons are NA, whose truth is ambiguous
        return True


def _refuse_missing(
    model: str, spec: TensorSpec | _Spec, column: Any, arr: np.ndarray[Any, Any]
) -> None:
    """Refuse an object column with missing cells for a non-float input (it would change them).

    ``astype(bool)`` reads ``None`` as False and ``NaN`` as True; nothing else knows what a
    missing value means for the model, so the caller fills or drops them.
    """
    rows = np.flatnonzero([_is_missing(v) for v in arr])
    if not len(rows):
        return
    shown = ", ".join(str(int(r)) for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
    fix = (
        f"Fill them (`df[{str(column)!r}].fillna(...)`) or drop those rows "
        f"(`df.dropna(subset=[{str(column)!r}])`) first."
    )
    raise InvalidInputError(
        f"model {model!r}: column {column!r} has {len(rows)} missing value(s) (None / NaN / NA) "
        f"at rows [{shown}] (positions) and input {spec.name!r} is {spec.datatype}, which has "
        f"no missing value. {fix}",
        hint=fix,
        model=model,
        tensor=spec.name,
        column=str(column),
        datatype=spec.datatype,
        rows=len(rows),
    )


def _checked(model: str, spec: TensorSpec | _Spec, column: Any, arr: np.ndarray[Any, Any]) -> Any:
    """``arr`` ready to be sliced into ``spec``'s datatype; raises a named error if it cannot."""
    datatype = spec.datatype
    kind = arr.dtype.kind
    if datatype == "BYTES":
        if kind not in _TEXT_KINDS:
            raise _coerce_error(model, spec, column, arr, "BYTES inputs take str or bytes columns")
        if kind == "O" and len(arr):
            try:
                as_array(arr[:64], "BYTES")
            except InvalidInputError as exc:
                raise _coerce_error(model, spec, column, arr, exc.message) from exc
        return arr
    if kind == "O" and len(arr) and isinstance(arr[0], np.ndarray | list | tuple):
        return arr  # a column of arrays: stacked per chunk
    target = numpy_dtype(datatype)
    if kind == "O" and target.kind not in "fc":  # floats read a missing value as NaN
        _refuse_missing(model, spec, column, arr)
    if kind in "OSUT":
        try:
            return arr.astype(target)
        except (TypeError, ValueError) as exc:
            raise _coerce_error(model, spec, column, arr, str(exc)) from exc
    if arr.dtype == target or (kind == "f" and datatype in _FLOATS):
        return arr  # floats are cast per row range, as each chunk is built
    # the one conversion rule (value-safe), once per column: chunks then slice it as is
    to = Destination(model, spec.name, f"df[{str(column)!r}]", str(column))
    return conform(arr, datatype, to)


def _planned(model: str, spec: TensorSpec | _Spec, frame: Any, names: list[Any]) -> PlannedInput:
    arrays = [_checked(model, spec, name, _column(frame, name)) for name in names]
    if len(names) == 1 and arrays[0].ndim > 1:  # an Arrow fixed-size list / Polars Array column
        shape = arrays[0].shape[1:]
        return PlannedInput(spec, [str(names[0])], arrays, "column", shape, model)
    if len(names) > 1:
        kind = "matrix"
    elif arrays[0].dtype.kind == "O" and len(arrays[0]) and spec.datatype != "BYTES":
        kind = "cells" if isinstance(arrays[0][0], np.ndarray | list | tuple) else "column"
    else:
        kind = "column"
    sample = arrays[0][0] if len(arrays[0]) else None
    row_shape = _row_shape(spec, kind, len(names), sample)
    return PlannedInput(spec, [str(n) for n in names], arrays, kind, row_shape, model)


def _selection(
    columns: list[Any], inputs: list[TensorSpec], explicit: ColumnSelection | None, model: str
) -> dict[str, list[Any]] | None:
    names = {str(c): c for c in columns}

    def pick(name: Any) -> Any:
        if name in names:
            return names[name]
        if str(name) in names:
            return names[str(name)]
        fix = f"Use one of the frame's columns {list(names)} in `columns=`, or add {name!r}."
        raise InvalidInputError(
            f"model {model!r}: no column {name!r} (named in columns=); the frame has "
            f"{list(names)}. {fix}",
            hint=fix,
            model=model,
            expected=name,
            got=list(names),
        )

    if explicit is not None:
        if not isinstance(explicit, Mapping):
            if len(inputs) != 1:
                raise InvalidInputError(
                    f"model {model!r} has {len(inputs)} inputs: pass columns= as a mapping "
                    "{input: column or [columns]}",
                    model=model,
                )
            explicit = {inputs[0].name: list(explicit)}
        known = {s.name for s in inputs}
        chosen: dict[str, list[Any]] = {}
        for name, cols in explicit.items():
            if known and name not in known:
                raise InvalidInputError(
                    f"model {model!r} has no input {name!r}; inputs: {', '.join(sorted(known))}",
                    model=model,
                    tensor=name,
                )
            listed = cols if isinstance(cols, list | tuple) else [cols]
            chosen[name] = [pick(c) for c in listed]
        return chosen
    if inputs and all(s.name in names for s in inputs):
        return {s.name: [names[s.name]] for s in inputs}
    if len(inputs) == 1 and len(inputs[0].shape) >= 1:
        width = inputs[0].shape[-1]
        if (width == len(columns) or (width == -1 and len(columns) > 1)) and (
            inputs[0].datatype != "BYTES" or len(columns) == 1
        ):
            return {inputs[0].name: list(columns)}
    if inputs and len(inputs) == len(columns):
        return {s.name: [c] for s, c in zip(inputs, columns, strict=True)}
    return None


def _unmapped(model: str, inputs: Sequence[TensorSpec], got: list[str]) -> InvalidInputError:
    """Why a frame's columns fit no rule: what the model expects, what it got, what to write."""
    names = [s.name for s in inputs]
    wanted = ", ".join(f"{s.name} {s.datatype} {s.shape}" for s in inputs)
    width = inputs[0].shape[-1] if len(inputs) == 1 and inputs[0].shape else -1
    if width > 0:
        spec = inputs[0]
        if len(got) > width:
            fix = (
                f"Pick the {width} feature columns, in the order the model reads them: "
                f"`df[[...]]` (or `df.drop(columns=[...])`), or map them: "
                f"`columns={{{spec.name!r}: [...]}}`."
            )
        else:
            fix = (
                f"Add the missing feature column(s): the model reads {width} per row, in order "
                f"(or one column {spec.name!r} holding {width}-element arrays)."
            )
        return InvalidInputError(
            f"{model} needs {width} columns, got {len(got)}: {got}. Its input {spec.name!r} "
            f"({spec.datatype} {spec.shape}) takes {width} feature columns per row, in order, "
            f"or one column named {spec.name!r}. {fix}",
            hint=fix,
            model=model,
            expected=f"{width} columns",
            got=got,
        )
    missing = [n for n in names if n not in got]
    extra = [c for c in got if c not in names]
    fix = (
        "Name the columns after the inputs (`df.rename(columns={...})`), or map them: "
        "`columns={input: column or [columns]}`."
    )
    return InvalidInputError(
        f"model {model!r} reads the columns {names} (its inputs: {wanted}); the frame has "
        f"{got}: missing {missing}, not read {extra}. {fix}",
        hint=fix,
        model=model,
        expected=names,
        got=got,
    )


def plan_inputs(
    frame: Any, metadata: ModelMetadata | None = None, *, columns: ColumnSelection | None = None
) -> InputPlan:
    """Plan how ``frame``'s columns become the model's inputs (see the module docstring).

    Args:
        frame: A pandas DataFrame, ``pyarrow.Table`` / ``RecordBatch`` or ``polars.DataFrame``
            (else duck-typed: ``frame.columns`` and ``frame[column].to_numpy()``).
        metadata: The model's metadata; ``None``: one input per column, datatype from dtype.
        columns: ``{input: column or [columns]}``, or a list of columns for a single input.

    Raises:
        InvalidInputError: the columns match no rule (the message lists the model's inputs),
            or a column cannot be coerced to its input's datatype (the message names the
            column, model, input and dtypes).
    """
    all_columns = _names(frame)
    rows = len(frame)
    if metadata is None:
        planned = []
        for c in all_columns:
            values = _column(frame, c)
            spec = _Spec(str(c), column_datatype(values), [-1, *values.shape[1:]])
            planned.append(_planned("", spec, frame, [c]))
        return InputPlan("", rows, planned)
    model = metadata.name
    chosen = _selection(all_columns, metadata.inputs, columns, model)
    if chosen is None:
        raise _unmapped(model, metadata.inputs, [str(c) for c in all_columns])
    specs = {s.name: s for s in metadata.inputs}
    planned = [
        _planned(model, specs.get(name) or _Spec(name, "FP32", [-1]), frame, cols)
        for name, cols in chosen.items()
    ]
    return InputPlan(model, rows, planned)


# --------------------------------------------------------------------------------- input specs


def _input_specs(inputs: InputSpecs) -> list[TensorSpec]:
    """``inputs=`` as tensor specs (``{name: "FP32"}`` or ``{name: ("FP32", [-1, 16])}``)."""
    if not isinstance(inputs, Mapping):
        return list(inputs)
    specs = []
    for name, spec in inputs.items():
        datatype, shape = (spec, [-1]) if isinstance(spec, str) else (spec[0], list(spec[1]))
        specs.append(TensorSpec(str(name), str(datatype), [int(d) for d in shape]))
    return specs


def _frame_specs(meta: ModelMetadata, frame: Any, columns: Any) -> list[TensorSpec]:
    """Input specs read off a frame: one per declared input (or column, or ``columns=`` key).

    Datatypes come from the column's dtype (arrays in cells: the cells' dtype; text: BYTES).
    """
    declared = {s.name: s for s in meta.inputs}
    if isinstance(columns, Mapping):
        chosen = {
            str(k): list(v) if isinstance(v, list | tuple) else [v] for k, v in columns.items()
        }
    elif columns is not None and len(declared) == 1:
        chosen = {next(iter(declared)): list(columns)}
    elif declared:
        chosen = {name: [name] for name in declared}
    else:
        chosen = {str(c): [c] for c in (columns if columns is not None else _names(frame))}
    have = {str(c): c for c in _names(frame)}
    specs = []
    for name, cols in chosen.items():
        spec = declared.get(name, TensorSpec(name, "", []))
        if str(cols[0]) not in have:
            raise InvalidInputError(
                f"model {meta.name!r} declares input {name!r} without a datatype or shape and "
                f"the frame has no column {cols[0]!r} to read them from (columns: {list(have)})",
                model=meta.name,
                tensor=name,
            )
        values = _column(frame, have[str(cols[0])])
        datatype = spec.datatype or column_datatype(values)
        if spec.shape:
            shape = list(spec.shape)
        elif len(cols) > 1:
            shape = [-1, len(cols)]
        elif values.ndim > 1:
            shape = [-1, *values.shape[1:]]
        elif values.dtype.kind == "O" and len(values) and isinstance(values[0], np.ndarray | list):
            shape = [-1, *np.shape(values[0])]
        else:
            shape = [-1]
        specs.append(TensorSpec(name, datatype, shape))
    return specs


def _declared(
    meta: ModelMetadata,
    frame: Any,
    columns: ColumnSelection | None,
    inputs: InputSpecs | None,
    said: set[str] | None,
) -> ModelMetadata:
    """The metadata a frame is planned against (see :func:`plan_frame`)."""
    if inputs is not None:
        return dataclasses.replace(meta, inputs=_input_specs(inputs))
    if meta.inputs and all(s.datatype and s.shape for s in meta.inputs):
        return meta
    if said is None or meta.name not in said:
        if said is not None:
            said.add(meta.name)
        logger.debug(
            "model %r declares %s: mapping DataFrame columns by name, datatypes from dtypes",
            meta.name,
            "no input datatypes / shapes" if meta.inputs else "no inputs",
        )
    return dataclasses.replace(meta, inputs=_frame_specs(meta, frame, columns))


def plan_frame(
    frame: Any,
    metadata: ModelMetadata,
    *,
    columns: ColumnSelection | None = None,
    inputs: InputSpecs | None = None,
    said: set[str] | None = None,
) -> InputPlan:
    """Plan ``frame`` onto a model's inputs as :meth:`Session.infer` does.

    The specs planned against are ``inputs=`` when given, else the model's metadata; gaps in
    the metadata (no inputs, or inputs without datatypes / shapes, common on KServe) are filled
    from the frame's columns: one input per declared input (or column, or ``columns=`` key), its
    datatype from the column's dtype (arrays in cells: their dtype; text: BYTES). That is said
    at debug level, once per model name in ``said`` (a set the caller keeps; ``None``: always).

    Raises:
        InvalidInputError: The columns fit no rule, a column cannot be coerced to its input,
            or a spec-less input has no column to read its datatype from.
    """
    declared = _declared(metadata, frame, columns, inputs, said)
    return plan_inputs(frame, declared, columns=columns)


# ------------------------------------------------------------------------------------ requests


def dataframe_to_inputs(
    df: Any, metadata: ModelMetadata | None, *, columns: ColumnSelection | None = None
) -> list[InferInput]:
    """Turn a DataFrame into the model's inputs, one row per batch element.

    Raises:
        InvalidInputError: the frame's columns match none of the mapping rules (the message
            lists what the model expects), or a column cannot be coerced to its input.
    """
    return infer_inputs(plan_inputs(df, metadata, columns=columns).tensors())


def request_from_dataframe(
    frame: Any,
    metadata: ModelMetadata | None = None,
    *,
    columns: ColumnSelection | None = None,
    model_name: str = "",
    request_id: str = "",
) -> InferRequest:
    """A request with one batch element per row of ``frame``, for any client.

    With ``metadata`` the columns are mapped onto the model's inputs (by name, a single
    ``[-1, k]`` input, declared order, or ``columns=``) and coerced to their datatypes; without
    it every column is an input of its own name and dtype (str / object columns: BYTES). The
    whole frame goes in one request: chunking is :meth:`nbinfer.Session.infer`'s job.

    Args:
        frame: A pandas DataFrame, a ``pyarrow.Table`` / ``RecordBatch`` or a
            ``polars.DataFrame`` (numeric columns read zero-copy where the memory allows).
        metadata: The model's metadata (``client.get_model_metadata(name)``), or ``None``.
        columns: ``{input: column or [columns]}``, or a list of columns for a single input.
        model_name: The request's model name (default: the metadata's).
        request_id: The request's ``id``.

    Example::

        request = nbinfer.request_from_dataframe(df, client.get_model_metadata("iris"))
        client.infer("iris", request)

    Raises:
        InvalidInputError: The columns do not fit the model's inputs, or a column cannot be
            coerced (the message names it).
    """
    plan = plan_inputs(frame, metadata, columns=columns)
    name = model_name or (metadata.name if metadata is not None else "")
    return InferRequest(infer_inputs(plan.tensors()), id=request_id, model_name=name)


# ------------------------------------------------------------------------------------- outputs


def outputs_to_dataframe(
    outputs: Sequence[InferOutput],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    index: Any = None,
    expand: bool = True,
    classified: Sequence[str] = (),
) -> pd.DataFrame:
    """Turn response outputs into a DataFrame, one row per batch element.

    Args:
        outputs: Decoded outputs of one response (or of a reassembled chunked run).
        labels: Optional class labels per output name, used to name the columns of ``[n, k]``
            outputs.
        index: Index for the frame (e.g. the input frame's index).
        expand: ``[n, k]`` outputs as ``k`` columns (default) or one column of arrays.
        classified: Outputs that carry classification-extension strings: they become
            ``label`` / ``score`` columns.
    """
    pd_ = _pandas()
    frames: list[Any] = []
    rows = next((len(o.data) for o in outputs if o.data is not None and o.data.ndim), None)
    use_index = index if index is not None and rows is not None and len(index) == rows else None
    blocks = output_blocks(outputs, labels=labels, expand=expand, classified=classified)
    for block in blocks:
        if block.columns is not None:
            columns = dict(zip(block.names, block.columns, strict=True))
            frames.append(pd_.DataFrame(columns, index=use_index))
            continue
        assert block.values is not None
        values = block.values
        if block.cells:
            cells = np.empty(len(values), dtype=object)
            cells[:] = list(values)
            values = cells.reshape(-1, 1)
        if not values.flags.writeable:  # a view on received bytes: the user's frame is editable
            values = values.copy()
        # one 2-D block per output: pandas keeps it as is (no per-column copies)
        frames.append(pd_.DataFrame(values, columns=block.names, index=use_index, copy=False))
    if not frames:
        return pd_.DataFrame(index=use_index)
    from nbinfer.interop.probabilities import with_probabilities  # shown as 0.9976, not 9.98e-01

    if len(frames) == 1:
        return with_probabilities(frames[0])
    if int(pd_.__version__.split(".")[0]) < 3:  # pandas 3 never copies here (copy-on-write)
        return with_probabilities(pd_.concat(frames, axis=1, copy=False))
    return with_probabilities(pd_.concat(frames, axis=1))


def outputs_to_frame(
    like: Any,
    outputs: Sequence[InferOutput],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    index: Any = None,
    expand: bool = True,
    classified: Sequence[str] = (),
    note: str = "",
) -> Any:
    """Outputs as a frame of ``like``'s library: what :meth:`Session.infer` returns for a frame.

    A ``pyarrow.Table`` / ``RecordBatch`` gives the same (``note`` in the schema metadata,
    ``b"nbinfer.note"``), a ``polars.DataFrame`` a Polars frame; anything else a pandas
    DataFrame under ``index`` (``note`` in ``frame.attrs["note"]``). Same columns either way
    (:func:`output_blocks`).
    """
    library = frame_library(like)
    if library == "arrow":
        from nbinfer.interop.arrow import outputs_to_arrow

        record_batch = isinstance(like, sys.modules["pyarrow"].RecordBatch)
        return outputs_to_arrow(
            outputs,
            labels=labels,
            expand=expand,
            classified=classified,
            record_batch=record_batch,
            note=note,
        )
    if library == "polars":
        from nbinfer.interop.polars import outputs_to_polars

        return outputs_to_polars(outputs, labels=labels, expand=expand, classified=classified)
    frame = outputs_to_dataframe(
        outputs, labels=labels, index=index, expand=expand, classified=classified
    )
    if note:
        frame.attrs["note"] = note
    return frame
