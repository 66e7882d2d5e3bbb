"""Triton's sequence batcher tensors: control inputs and implicit state, filled per request.

A config's ``sequence_batching`` may declare ``control_input`` entries (tensors the server fills
for the model, never sent by the client) and ``state`` entries (implicit state: the model reads
``input_name`` and writes ``output_name``, and the server carries the output of one request
into the input of the next request of the same sequence). As in Triton:

* ``CONTROL_SEQUENCE_START`` / ``_END`` / ``_READY`` hold the declared false / true value
  (``int32_false_true``, ``fp32_false_true`` or ``bool_false_true``) in INT32 / FP32 / BOOL;
  READY is true for every request the model receives.
* ``CONTROL_SEQUENCE_CORRID`` holds the ``sequence_id`` in ``data_type`` (``TYPE_UINT64``,
  ``TYPE_INT64`` or ``TYPE_STRING``).
* Each has shape ``[1]``, or ``[batch, 1]`` when the model batches (``max_batch_size > 0``).
* A state input starts at zeros (``initial_state { zero_data: true }``, also when none is
  declared) or the raw contents of ``initial_state { data_file }`` (under the model
  directory's ``initial_state/``), again at every ``sequence_start``.

Layer: the server; imports numpy, the protocol's dtype table, the error tree and the path
policy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol.dtypes import datatype_of_triton, numpy_dtype
from nbinfer.server.paths import ModelFiles

__all__ = ["ControlInput", "SequenceControls", "StateTensor"]

_FLAG_KINDS = {
    "CONTROL_SEQUENCE_START": "start",
    "CONTROL_SEQUENCE_END": "end",
    "CONTROL_SEQUENCE_READY": "ready",
}
_VALUE_FIELDS = (
    ("int32_false_true", "INT32"),
    ("fp32_false_true", "FP32"),
    ("bool_false_true", "BOOL"),
)
#: The ``TYPE_*`` names a correlation-id control may have (as Triton).
_CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_STRING")


def _datatype(triton: Any, what: str) -> str:
    """The v2 datatype of a config's ``data_type`` (the table is protocol/dtypes.py's)."""
    try:
        return datatype_of_triton(str(triton or ""))
    except DataTypeError as exc:
        raise InvalidInputError(f"{what}: unknown data_type {triton!r}") from exc


def _entries(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, Mapping)]
    return []


@dataclass(frozen=True, slots=True)
class ControlInput:
    """One control tensor: its input name, what it signals, datatype and false/true values."""

    name: str
    #: ``start``, ``end``, ``ready`` or ``corrid``.
    kind: str
    datatype: str
    false_true: tuple[Any, Any] = (0, 1)

    def value(self, sequence_id: int | str, *, start: bool, end: bool) -> Any:
        """The element this control holds for one request."""
        if self.kind == "corrid":
            if self.datatype == "BYTES":
                return str(sequence_id).encode("utf-8")
            if isinstance(sequence_id, str):
                raise InvalidInputError(
                    f"input {self.name!r} (CONTROL_SEQUENCE_CORRID) is {self.datatype}: the "
                    f"request's sequence_id must be an integer, got the string {sequence_id!r}",
                    tensor=self.name,
                )
            return sequence_id
        flag = {"start": start, "end": end, "ready": True}[self.kind]
        return self.false_true[1 if flag else 0]


@dataclass(frozen=True, slots=True)
class StateTensor:
    """One implicit state: the input the model reads, the output it writes, the first value."""

    input_name: str
    output_name: str
    datatype: str
    dims: tuple[int, ...]
    #: Raw bytes of the initial value (None: zeros).
    initial: bytes | None = None

    def initial_value(self, batch: int | None) -> np.ndarray[Any, Any]:
        """The value at sequence start, with the batch dimension when ``batch`` is given."""
        dims = [1 if d < 0 else d for d in self.dims]
        shape = [batch, *dims] if batch is not None else dims
        dtype = numpy_dtype(self.datatype)
        if self.initial is None:
            if self.datatype == "BYTES":
                return np.full(shape, b"", dtype=object)
            return np.zeros(shape, dtype=dtype)
        one = np.frombuffer(self.initial, dtype=dtype).reshape(dims)
        return np.broadcast_to(one, shape).copy()


class SequenceControls:
    """The control inputs and implicit states a ``sequence_batching`` config declares.

    Build with :meth:`from_config`; :meth:`feed` adds the tensors to a request's inputs and
    :meth:`keep` takes the state outputs out of the model's result.
    """

    def __init__(
        self, controls: list[ControlInput], states: list[StateTensor], *, batched: bool
    ) -> None:
        self.controls = controls
        self.states = states
        self.batched = batched
        self.state_outputs = frozenset(s.output_name for s in states)

    @property
    def names(self) -> frozenset[str]:
        """The input names the server fills (clients never send them)."""
        return frozenset([c.name for c in self.controls] + [s.input_name for s in self.states])

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], model_dir: Path | None = None
    ) -> SequenceControls | None:
        """The controls of a config (None when it declares neither controls nor state).

        Raises:
            InvalidInputError: a malformed control or state entry (named), or an initial
                state file that is missing or of the wrong size.
        """
        sb = config.get("sequence_batching")
        if not isinstance(sb, Mapping):
            return None
        controls = [c for entry in _entries(sb.get("control_input")) for c in _controls(entry)]
        states = [_state(entry, model_dir) for entry in _entries(sb.get("state"))]
        if not controls and not states:
            return None
        batched = int(config.get("max_batch_size", 0) or 0) > 0
        return cls(controls, states, batched=batched)

    def feed(
        self,
        inputs: Mapping[str, Any],
        state: dict[Any, Any],
        sequence_id: int | str | None,
        *,
        start: bool,
        end: bool,
    ) -> dict[str, Any]:
        """``inputs`` with the control tensors and the current state inputs added.

        ``state`` is the sequence's state dict (fresh at sequence start).

        Raises:
            InvalidInputError: a CORRID of an integer type for a string ``sequence_id``.
        """
        batch: int | None = None
        if self.batched:
            first = next(iter(inputs.values()), None)
            shape = getattr(first, "shape", None)
            batch = int(shape[0]) if shape else 1
        shape = [batch, 1] if batch is not None else [1]
        fed = dict(inputs)
        seq = sequence_id if sequence_id is not None else 0
        for c in self.controls:
            value = c.value(seq, start=start, end=end)
            dtype = object if c.datatype == "BYTES" else numpy_dtype(c.datatype)
            fed[c.name] = np.full(shape, value, dtype=dtype)
        for s in self.states:
            key = ("nbinfer.implicit_state", s.input_name)
            current = state.get(key)
            if current is None or start:
                current = s.initial_value(batch)
            fed[s.input_name] = current
        return fed

    def keep(self, result: Any, state: dict[Any, Any]) -> Any:
        """Store the state outputs of a result dict in ``state``; the result without them."""
        if not self.states or not isinstance(result, Mapping):
            return result
        rest = dict(result)
        for s in self.states:
            if s.output_name in rest:
                value = rest.pop(s.output_name)
                state[("nbinfer.implicit_state", s.input_name)] = np.asarray(value)
        return rest


def _controls(entry: Mapping[str, Any]) -> list[ControlInput]:
    name = str(entry.get("name") or "")
    if not name:
        raise InvalidInputError("config sequence_batching control_input: an entry has no name")
    out = []
    for control in _entries(entry.get("control")):
        what = f"config sequence_batching control_input {name!r}"
        kind = str(control.get("kind") or "")
        if kind == "CONTROL_SEQUENCE_CORRID":
            dt_name = str(control.get("data_type") or "")
            if dt_name not in _CORRID_TYPES:
                raise InvalidInputError(
                    f"{what}: CONTROL_SEQUENCE_CORRID needs data_type TYPE_UINT64, TYPE_INT64 "
                    f"or TYPE_STRING, got {dt_name or 'none'}"
                )
            out.append(ControlInput(name, "corrid", datatype_of_triton(dt_name)))
            continue
        if kind not in _FLAG_KINDS:
            raise InvalidInputError(
                f"{what}: unknown kind {kind!r} (CONTROL_SEQUENCE_START, _END, _READY, _CORRID)"
            )
        given = [(f, dt) for f, dt in _VALUE_FIELDS if control.get(f)]
        if len(given) != 1 or len(control[given[0][0]]) != 2:
            raise InvalidInputError(
                f"{what}: {kind} needs exactly one of int32_false_true, fp32_false_true, "
                "bool_false_true with two values [false, true]"
            )
        field_name, datatype = given[0]
        pair = control[field_name]
        out.append(ControlInput(name, _FLAG_KINDS[kind], datatype, (pair[0], pair[1])))
    return out


def _state(entry: Mapping[str, Any], model_dir: Path | None) -> StateTensor:
    in_name = str(entry.get("input_name") or "")
    out_name = str(entry.get("output_name") or "")
    what = f"config sequence_batching state {in_name or out_name or '#?'!r}"
    if not in_name or not out_name:
        raise InvalidInputError(f"{what}: needs input_name and output_name")
    datatype = _datatype(entry.get("data_type"), what)
    try:
        dims = tuple(int(d) for d in entry.get("dims") or [])
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what}: dims must be integers") from exc
    initial: bytes | None = None
    for init in _entries(entry.get("initial_state"))[:1]:
        data_file = init.get("data_file")
        if data_file and not init.get("zero_data"):
            initial = _initial_file(str(data_file), model_dir, what)
            size = int(np.prod([1 if d < 0 else d for d in dims])) * numpy_dtype(datatype).itemsize
            if datatype == "BYTES" or len(initial) != size:
                raise InvalidInputError(
                    f"{what}: initial_state data_file {data_file!r} holds {len(initial)} bytes, "
                    f"the state needs {size} ({datatype} {list(dims)})"
                )
    return StateTensor(in_name, out_name, datatype, dims, initial)


def _initial_file(name: str, model_dir: Path | None, what: str) -> bytes:
    if model_dir is None:
        raise InvalidInputError(f"{what}: initial_state data_file needs a model directory")
    path = ModelFiles(model_dir).file(
        name, what=f"{what}: initial_state data_file", base="initial_state"
    )
    if not path.is_file():
        raise InvalidInputError(
            f"{what}: initial_state data_file {name!r} not found in the model's initial_state/"
        )
    return path.read_bytes()
