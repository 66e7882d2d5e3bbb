"""Table columns -> v2 input tensors, planned once and cut into row ranges (no pandas here).

A *frame* is anything with ``columns`` and ``frame[name].to_numpy()`` (a pandas DataFrame, a
polars-like frame, ...): this module never imports a DataFrame library, so the protocol layer
stays pure. :func:`plan_inputs` decides, once per frame, which columns feed which model input and
checks that every column can be coerced to its input's datatype; :meth:`InputPlan.tensors` then
builds the tensors of any row range, zero-copy where the column already has the input's dtype.

How columns become inputs (first rule that applies):

1. an explicit ``columns=`` mapping ``{input: column or [columns]}`` (a plain list of columns is
   shorthand for a single-input model);
2. every model input is a column of the frame: each column becomes that input (cells that are
   arrays or lists are stacked, so an image column works);
3. the model has one input of shape ``[-1, k]`` (or ``[k]`` with batching) and the frame ``k``
   columns: they become that input, in order, one row per batch element;
4. the frame has as many columns as the model has inputs: the model's declared input order.

Without model metadata every column becomes an input of its own name, its datatype read from the
column's dtype (strings and objects: BYTES).

Example::

    plan = plan_inputs(frame, metadata)
    first_rows = plan.tensors(0, 1000)      # [(input, datatype, array)] for rows 0..999

Layer: protocol (pure); imports numpy, errors, protocol.dtypes and protocol.tensors. It reads
model metadata duck-typed and returns plain tuples, so it never imports protocol.types at run
time: the types (``InferRequest.from_dataframe``) build on this module, not the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import datatype_of, numpy_dtype
from nbinfer.protocol.tensors import Destination, as_array, conform

if TYPE_CHECKING:
    from nbinfer.protocol.types import ModelMetadata, TensorSpec

__all__ = ["InputPlan", "PlannedInput", "column_datatype", "plan_inputs"]

#: Columns for ``plan_inputs(columns=...)``: ``{input: column | [columns]}`` or ``[columns]``.
ColumnSelection = Mapping[str, Any] | Sequence[Any]

_TEXT_KINDS = "OSUT"


class _Spec(NamedTuple):
    """An input the frame implies (no metadata, or a column-named input the model lacks)."""

    name: str
    datatype: str
    shape: list[int]


@dataclass(slots=True)
class PlannedInput:
    """How one model input is built from columns.

    Attributes:
        kind: ``"column"`` (one column, one element per row), ``"matrix"`` (several columns
            side by side, ``[rows, k]``) or ``"cells"`` (one column whose cells are arrays).
    """

    spec: TensorSpec | _Spec
    columns: list[str]
    arrays: list[np.ndarray[Any, Any]]
    kind: str
    row_shape: tuple[int, ...]

    @property
    def row_bytes(self) -> int:
        """Estimated wire bytes per row (BYTES: from a sample of the data)."""
        if self.spec.datatype == "BYTES":
            sample = self.arrays[0][:64]
            mean = sum(len(str(v)) for v in sample) / max(len(sample), 1)
            return int(4 + 2 * mean) * max(1, int(np.prod(self.row_shape)))
        return numpy_dtype(self.spec.datatype).itemsize * max(1, int(np.prod(self.row_shape)))

    def build(self, start: int, stop: int) -> np.ndarray[Any, Any]:
        """This input's tensor for rows ``start:stop``."""
        datatype = self.spec.datatype
        if self.kind == "matrix":
            out = np.empty((stop - start, len(self.arrays)), dtype=numpy_dtype(datatype))
            for j, arr in enumerate(self.arrays):
                out[:, j] = arr[start:stop]
            return as_array(out, "BYTES")[0] if datatype == "BYTES" else out
        part = self.arrays[0][start:stop]
        if self.kind == "cells":
            part = np.stack([np.asarray(v) for v in part])
        if datatype == "BYTES":
            part = as_array(part, "BYTES")[0]
        elif part.dtype != numpy_dtype(datatype):
            part = part.astype(numpy_dtype(datatype))
        return part.reshape((stop - start, *self.row_shape))


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


def _column(frame: Any, name: Any) -> np.ndarray[Any, Any]:
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
    if kind in "OSUT":
        try:
            return arr.astype(target)
        except (TypeError, ValueError) as exc:
            raise _coerce_error(model, spec, column, arr, str(exc)) from exc
    if arr.dtype == target:
        return arr
    # the one conversion rule (value-safe), once per column: chunks then slice it as is
    to = Destination(model, spec.name, f"df[{str(column)!r}]", str(column))
    return conform(arr, datatype, to)


def _planned(model: str, spec: TensorSpec | _Spec, frame: Any, names: list[Any]) -> PlannedInput:
    arrays = [_checked(model, spec, name, _column(frame, name)) for name in names]
    if len(names) > 1:
        kind = "matrix"
    elif arrays[0].dtype.kind == "O" and len(arrays[0]) and spec.datatype != "BYTES":
        kind = "cells" if isinstance(arrays[0][0], np.ndarray | list | tuple) else "column"
    else:
        kind = "column"
    sample = arrays[0][0] if len(arrays[0]) else None
    row_shape = _row_shape(spec, kind, len(names), sample)
    return PlannedInput(spec, [str(n) for n in names], arrays, kind, row_shape)


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
        frame: An object with ``columns`` and ``frame[column].to_numpy()`` (a DataFrame).
        metadata: The model's metadata; ``None``: one input per column, datatype from dtype.
        columns: ``{input: column or [columns]}``, or a list of columns for a single input.

    Raises:
        InvalidInputError: the columns match no rule (the message lists the model's inputs),
            or a column cannot be coerced to its input's datatype (the message names the
            column, model, input and dtypes).
    """
    all_columns = list(frame.columns)
    rows = len(frame)
    if metadata is None:
        planned = []
        for c in all_columns:
            spec = _Spec(str(c), column_datatype(_column(frame, c)), [-1])
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
