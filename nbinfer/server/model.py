"""The model API of the embedded server: :class:`Model`, :class:`FunctionModel`, :func:`model`.

A model declares its inputs and outputs (Triton semantics: when ``max_batch_size > 0`` the declared
shapes exclude the batch dimension) and implements KServe-like hooks::

    class Doubler(Model):
        name = "double"
        inputs = [("x", "FP32", [-1])]
        outputs = [("y", "FP32", [-1])]

        def predict(self, inputs, context):
            return inputs["x"] * 2

Sync hooks run in a thread pool so a CPU-heavy ``predict`` never blocks the event loop;
``async def`` hooks run on the loop. A plain function becomes a model with :func:`model` or
:class:`FunctionModel`. The options a model takes are declared once, in :data:`MODEL_OPTIONS`.

Imports numpy, ``protocol`` and the device policy only: ``export`` vendors this module's source
into a numpy-only runtime, so nothing here may need the rest of the server.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import (
    DATATYPES,
    TRITON_TYPES,
    datatype_of,
    datatype_of_triton,
    numpy_dtype,
)
from nbinfer.protocol.tensors import as_array
from nbinfer.protocol.types import Parameters, TensorSpec
from nbinfer.server.devices import resolve_device

__all__ = [
    "FunctionModel",
    "InferContext",
    "MODEL_OPTIONS",
    "Model",
    "ModelOption",
    "TensorDef",
    "as_tensor_def",
    "coerce_output",
    "model",
    "normalize_datatype",
    "to_bytes_array",
]

logger = logging.getLogger("nbinfer")


def normalize_datatype(datatype: Any) -> str:
    """Return the v2 datatype for ``"FP32"``, ``"TYPE_FP32"``, ``np.float32`` or a numpy dtype.

    Raises:
        InvalidInputError: the datatype is unknown.
    """
    if isinstance(datatype, str):
        upper = datatype.upper()
        if upper in DATATYPES:
            return upper
        if upper in TRITON_TYPES and upper != "TYPE_INVALID":
            return datatype_of_triton(upper)
        if upper in ("STRING", "STR", "OBJECT"):
            return "BYTES"
        try:
            return datatype_of(np.dtype(datatype))
        except TypeError:
            pass
        raise InvalidInputError(
            f"unknown datatype {datatype!r}; known: {', '.join(DATATYPES)} (or Triton TYPE_* names)"
        )
    if datatype in (str, bytes):
        return "BYTES"
    try:
        return datatype_of(np.dtype(datatype))
    except TypeError as exc:
        raise InvalidInputError(f"unknown datatype {datatype!r}") from exc


@dataclass(slots=True)
class TensorDef:
    """A declared input or output of a server-side model.

    Attributes:
        name: Tensor name.
        datatype: v2 datatype (``"FP32"``, ``"BYTES"``, ...).
        dims: Declared shape, -1 for variable dims; excludes the batch dim when the model's
            ``max_batch_size > 0`` (Triton semantics).
        optional: Inputs only: the request may omit it.
        reshape: Triton ``reshape``: the shape the model sees (inputs) or produces (outputs).
        labels: Outputs only: class labels for the classification extension.
        label_filename: Outputs only: the file the labels came from (shown in the config).
    """

    name: str
    datatype: str
    dims: list[int]
    optional: bool = False
    reshape: list[int] | None = None
    labels: list[str] | None = None
    label_filename: str = ""
    inferred: bool = False

    def spec(self, max_batch_size: int) -> TensorSpec:
        """Return the metadata view: a leading -1 when the model batches."""
        shape = ([-1] if max_batch_size > 0 else []) + list(self.dims)
        return TensorSpec(name=self.name, datatype=self.datatype, shape=shape)


def _dims(shape: Any, what: str) -> list[int]:
    if shape is None:
        return [-1]
    if isinstance(shape, int):
        shape = [shape]
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what}: shape must be a list of ints, got {shape!r}") from exc
    for d in dims:
        if d < -1 or d == 0:
            raise InvalidInputError(f"{what}: dims must be -1 or positive, got {dims}")
    return dims


def as_tensor_def(value: Any, *, what: str = "tensor") -> TensorDef:
    """Normalise a tensor declaration.

    Accepts a :class:`TensorDef`, a :class:`~nbinfer.protocol.types.TensorSpec`, a tuple
    ``(name, datatype, shape)`` or a dict with ``name``, ``datatype``/``data_type`` and
    ``shape``/``dims``.

    Raises:
        InvalidInputError: the declaration is malformed.
    """
    if isinstance(value, TensorDef):
        return TensorDef(
            name=value.name,
            datatype=normalize_datatype(value.datatype),
            dims=_dims(value.dims, f"{what} {value.name!r}"),
            optional=value.optional,
            reshape=list(value.reshape) if value.reshape is not None else None,
            labels=list(value.labels) if value.labels is not None else None,
            label_filename=value.label_filename,
            inferred=value.inferred,
        )
    if isinstance(value, TensorSpec):
        return TensorDef(
            value.name, normalize_datatype(value.datatype), _dims(value.shape, value.name)
        )
    if isinstance(value, tuple | list) and len(value) in (2, 3):
        name = str(value[0])
        shape = value[2] if len(value) == 3 else None
        return TensorDef(name, normalize_datatype(value[1]), _dims(shape, f"{what} {name!r}"))
    if isinstance(value, Mapping):
        name = str(value["name"])
        dt = value.get("datatype", value.get("data_type"))
        if dt is None:
            raise InvalidInputError(f"{what} {name!r}: no datatype given")
        shape = value.get("shape", value.get("dims"))
        labels = value.get("labels")
        return TensorDef(
            name=name,
            datatype=normalize_datatype(dt),
            dims=_dims(shape, f"{what} {name!r}"),
            optional=bool(value.get("optional", False)),
            reshape=_dims(value["reshape"], f"{what} {name!r} reshape")
            if value.get("reshape") is not None
            else None,
            labels=list(labels) if labels is not None else None,
        )
    raise InvalidInputError(
        f"cannot understand {what} declaration {value!r}; use TensorDef, TensorSpec, "
        "(name, datatype, shape) or a dict"
    )


@dataclass(slots=True)
class InferContext:
    """What a model hook may know about the request besides its input arrays.

    Attributes:
        model_name: The model's name.
        model_version: The version serving the request.
        request_id: The request's id ("" if none).
        parameters: The request-level parameters (custom parameters pass through).
        input_parameters: Per-input parameters, by input name.
        requested_outputs: The output names the client asked for (all when it asked for none).
        response_parameters: Parameters the model wants to return in the response.
        sequence_id: The request's ``sequence_id`` (None when it has none; stateful models
            always get one).
        sequence_start: The request starts its sequence.
        sequence_end: The request ends its sequence (its state is dropped afterwards).
        state: Stateful models: a dict kept across the requests of one sequence (fresh at
            ``sequence_start``); other models get an empty dict per request.
        cancelled: Set when every client of this execution gave up (disconnected, gRPC
            cancellation or deadline, ``timeout`` parameter). A slow synchronous ``predict``
            may check it and return early; async hooks are cancelled outright.
        headers: The request's HTTP headers (names in lower case) or gRPC metadata, as
            KServe's hooks get them; a merged dynamic batch sees its first request's.
        response_headers: Headers the model wants on the HTTP response (gRPC: initial
            metadata), as KServe's ``response_headers``; a merged batch's go to every request.
        merged: A merged execution (dynamic batch, sequences sharing one): each request's
            context and row count, in row order (Triton's Python backend: one request each).
        output_buffers: Set by the server: where :meth:`output_array` finds an output's
            shared-memory region (None: fresh arrays).
    """

    model_name: str = ""
    model_version: str = ""
    request_id: str = ""
    parameters: Parameters = field(default_factory=dict)
    input_parameters: dict[str, Parameters] = field(default_factory=dict)
    requested_outputs: list[str] = field(default_factory=list)
    response_parameters: Parameters = field(default_factory=dict)
    sequence_id: int | str | None = None
    sequence_start: bool = False
    sequence_end: bool = False
    state: dict[str, Any] = field(default_factory=dict)
    cancelled: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)
    merged: list[tuple[InferContext, int]] = field(default_factory=list)
    output_buffers: Callable[[str, tuple[int, ...], np.dtype[Any]], Any] | None = field(
        default=None, repr=False, compare=False
    )

    def output_array(self, name: str, shape: Sequence[int], dtype: Any) -> np.ndarray[Any, Any]:
        """An uninitialized, writable array for output ``name``: fill it, return it as ``name``.

        When the client asked for ``name`` in a shared-memory region that the server maps (the
        local zero-copy path: a sealed memfd of the server's own user), the array *is* that
        window of the region, so the output reaches the client without a copy; otherwise it
        is ``np.empty(shape, dtype)`` and is sent as any other output. Write every element;
        do not keep the array after the hook returns (it is the client's memory).

        Example::

            out = context.output_array("y", x.shape, x.dtype)
            np.multiply(x, 2, out=out)
            return {"y": out}
        """
        dims, kind = tuple(int(d) for d in shape), np.dtype(dtype)
        found = None if self.output_buffers is None else self.output_buffers(name, dims, kind)
        return np.empty(dims, kind) if found is None else found


def _wants_context(fn: Callable[..., Any]) -> bool:
    """Whether a hook accepts a second positional argument (the :class:`InferContext`)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    count = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
        if p.name == "context" and p.kind is p.KEYWORD_ONLY:
            return True
    return count >= 2


@dataclass(frozen=True, slots=True)
class ModelOption:
    """One option of :class:`Model`: a keyword of ``__init__`` and the attribute it sets.

    Attributes:
        name: The keyword and the attribute; ``type``: its annotation, as written.
        default: The class default, kept when ``__init__`` gets None.
        config_key: Where a Triton config holds it (``"parameters.device"``: a key inside a
            field); ``""`` when only nbinfer knows it.
        exported: Whether the export writes it (the target chooses device, platform, instances).
        coerce: Applied to a given value (``version`` is kept as a string).
    """

    name: str
    type: str
    default: Any
    config_key: str
    exported: bool
    coerce: Callable[[Any], Any] | None = None


_TENSORS = "Sequence[Any]"
_LABELS = "Mapping[str, Sequence[str]] | Sequence[str] | None"

#: The options of :class:`Model`, declared once: ``__init__`` sets them, the config writer
#: (:mod:`nbinfer.server.model_config`) and the export read their config keys from here.
MODEL_OPTIONS: tuple[ModelOption, ...] = (
    ModelOption("name", "str", "", "name", True),
    ModelOption("inputs", _TENSORS, (), "input", True),
    ModelOption("outputs", _TENSORS, (), "output", True),
    ModelOption("max_batch_size", "int", 0, "max_batch_size", True),
    ModelOption("labels", _LABELS, None, "output.label_filename", True),
    ModelOption("platform", "str", "nbinfer_python", "platform", False),
    ModelOption("backend", "str", "python", "backend", False),
    ModelOption("version", "str", "1", "", False, str),
    ModelOption("device", "str", "", "parameters.device", False),
    ModelOption("parameters", "Mapping[str, Any] | None", None, "parameters", True),
    ModelOption("run_in_thread", "bool", True, "", False),
    ModelOption("max_concurrency", "int | None", None, "instance_group.count", False),
)


class Model:
    """Base class of a server-side model (KServe-like hooks, Triton-like declarations).

    Subclasses set the class attributes (or pass them to ``__init__``) and override
    :meth:`predict`; :meth:`load`, :meth:`preprocess`, :meth:`postprocess`, :meth:`unload` and
    :meth:`explain` are optional. Hooks may be plain or ``async def``; plain hooks run in a thread
    pool (set ``run_in_thread = False`` for trivially cheap ones). Hooks may take the
    :class:`InferContext` as a second argument or omit it.

    Example::

        class AddOne(Model):
            name = "add_one"
            inputs = [("x", "FP32", [-1])]
            outputs = [("y", "FP32", [-1])]

            def predict(self, inputs, context):
                return {"y": inputs["x"] + 1}
    """

    name: str = ""
    inputs: Sequence[Any] = ()
    outputs: Sequence[Any] = ()
    max_batch_size: int = 0
    labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None
    platform: str = "nbinfer_python"
    backend: str = "python"
    version: str = "1"
    #: "cpu", "cuda:N", "auto", or "" for the server's default device.
    device: str = ""
    parameters: Mapping[str, Any] | None = None
    run_in_thread: bool = True
    #: At most this many requests run the hooks at once (None: no limit); a config's
    #: ``instance_group`` count sets it, like Triton's model instances.
    max_concurrency: int | None = None
    #: Keep per-sequence state (sequence extension): requests need a ``sequence_id`` and the
    #: hooks get ``context.state`` carried across a sequence's calls (see ``sequence.py``).
    stateful: bool = False
    #: Stateful models: drop a sequence idle for longer than this (None: 60 s).
    max_sequence_idle_microseconds: int | None = None
    #: Decoupled: ``predict`` returns / yields 0..N responses per request (only over the gRPC
    #: stream). A ``predict`` written as a generator is decoupled without saying so.
    decoupled: bool = False
    _ready: bool = False

    def __init__(
        self,
        name: str | None = None,
        *,
        inputs: Sequence[Any] | None = None,
        outputs: Sequence[Any] | None = None,
        max_batch_size: int | None = None,
        labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
        platform: str | None = None,
        backend: str | None = None,
        version: str | int | None = None,
        device: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        run_in_thread: bool | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        given = locals()
        for option in MODEL_OPTIONS:
            value = given[option.name]
            if value is not None:
                setattr(self, option.name, option.coerce(value) if option.coerce else value)
        self._ready = False

    # -- hooks -------------------------------------------------------------------------------
    def resolve_device(self, device: str) -> str:
        """The concrete device this model runs on when ``device`` is asked for.

        Called by the repository before :meth:`load`. The base asks torch (see
        :func:`resolve_device`); backends with their own notion of a GPU (ONNX Runtime's
        execution providers) override it. Every backend answers a request it cannot meet the
        same way.

        Raises:
            InvalidInputError: ``cuda:N`` (or ``cuda``) cannot be used; the message says why.
        """
        return resolve_device(device)

    def load(self) -> bool | None:
        """Load weights / sessions (runs once, in a worker thread). Return False to fail."""
        return None

    def unload(self) -> None:
        """Release resources when the model is unloaded."""

    def preprocess(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """Transform the validated input arrays before :meth:`predict` (identity by default)."""
        return inputs

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Run the model: input arrays by name -> output arrays by name (or one array)."""
        raise NotImplementedError(f"model {self.name!r} does not implement predict()")

    def postprocess(self, outputs: Any, context: InferContext) -> Any:
        """Transform :meth:`predict`'s result (identity by default)."""
        return outputs

    def explain(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Explain a prediction (KServe v1 ``:explain``); not implemented by default."""
        raise NotImplementedError(f"model {self.name!r} does not implement explain()")

    # -- state -------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether the model is loaded and can serve."""
        return self._ready

    @ready.setter
    def ready(self, value: bool) -> None:
        self._ready = bool(value)

    @property
    def is_decoupled(self) -> bool:
        """Whether the model gives 0..N responses per request (``decoupled`` or a generator)."""
        if self.decoupled:
            return True
        for fn in (getattr(self, "predict", None), self.__dict__.get("fn")):
            if fn is not None and (
                inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
            ):
                return True
        return False

    @property
    def implements_explain(self) -> bool:
        """Whether the subclass overrides :meth:`explain`."""
        return type(self).explain is not Model.explain

    # -- declarations ------------------------------------------------------------------------
    def input_defs(self) -> list[TensorDef]:
        """The declared inputs as :class:`TensorDef` (cached after :meth:`finalize`)."""
        cached: list[TensorDef] | None = self.__dict__.get("_input_defs")
        if cached is not None:
            return cached
        return [as_tensor_def(x, what=f"model {self.name!r} input") for x in self.inputs]

    def output_defs(self) -> list[TensorDef]:
        """The declared outputs as :class:`TensorDef`, with labels attached."""
        cached: list[TensorDef] | None = self.__dict__.get("_output_defs")
        if cached is not None:
            return cached
        defs = [as_tensor_def(x, what=f"model {self.name!r} output") for x in self.outputs]
        labels = self.labels
        if labels is not None:
            if isinstance(labels, Mapping):
                for d in defs:
                    if d.name in labels:
                        d.labels = [str(x) for x in labels[d.name]]
                unknown = set(labels) - {d.name for d in defs}
                if unknown and defs:
                    raise InvalidInputError(
                        f"model {self.name!r}: labels given for unknown output(s) "
                        f"{sorted(unknown)}; outputs: {[d.name for d in defs]}"
                    )
            elif defs:
                for d in defs:
                    if d.labels is None:
                        d.labels = [str(x) for x in labels]
                        break
        return defs

    def finalize(self) -> None:
        """Validate and freeze the declarations (called by the repository before loading).

        Raises:
            InvalidInputError: names are missing or not unique, datatypes or dims are invalid.
        """
        if not self.name:
            raise InvalidInputError(f"{type(self).__name__} has no name; set name=...")
        if int(self.max_batch_size) < 0:
            raise InvalidInputError(
                f"model {self.name!r}: max_batch_size must be >= 0, got {self.max_batch_size}"
            )
        self.max_batch_size = int(self.max_batch_size)
        ins = self.input_defs()
        outs = self.output_defs()
        for kind, defs in (("input", ins), ("output", outs)):
            seen: set[str] = set()
            for d in defs:
                if not d.name:
                    raise InvalidInputError(f"model {self.name!r}: an {kind} has no name")
                if d.name in seen:
                    raise InvalidInputError(f"model {self.name!r}: duplicate {kind} {d.name!r}")
                seen.add(d.name)
        self.__dict__["_input_defs"] = ins
        self.__dict__["_output_defs"] = outs
        self.version = str(self.version)

    def set_defs(self, inputs: list[TensorDef], outputs: list[TensorDef]) -> None:
        """Replace the declarations (used when a config file supplies them)."""
        self.__dict__["_input_defs"] = inputs
        self.__dict__["_output_defs"] = outputs

    def hook_wants_context(self, hook: str) -> bool:
        """Whether hook ``hook`` takes the context argument (cached)."""
        cache: dict[str, bool] = self.__dict__.setdefault("_wants_ctx", {})
        found = cache.get(hook)
        if found is None:
            found = cache[hook] = _wants_context(getattr(self, hook))
        return found

    def overrides(self, hook: str) -> bool:
        """Whether the subclass overrides hook ``hook`` of :class:`Model`."""
        return getattr(type(self), hook) is not getattr(Model, hook)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} version={self.version!r}>"


def _dtype_from_annotation(annotation: Any) -> str | None:
    """Best-effort v2 datatype from ``npt.NDArray[np.float32]``-style annotations."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return None
    if annotation in (str, bytes):
        return "BYTES"
    if annotation is bool:
        return "BOOL"
    if annotation is int:
        return "INT64"
    if annotation is float:
        return "FP64"
    for arg in typing.get_args(annotation):
        found = _dtype_from_annotation(arg)
        if found is not None:
            return found
        if isinstance(arg, type) and issubclass(arg, np.generic):
            try:
                return datatype_of(np.dtype(arg))
            except Exception:
                return None
    if isinstance(annotation, type) and issubclass(annotation, np.generic):
        try:
            return datatype_of(np.dtype(annotation))
        except Exception:
            return None
    return None


class FunctionModel(Model):
    """Wrap a plain Python / NumPy function as a :class:`Model`.

    The function receives the inputs as keyword arguments named after the inputs (or, for a
    one-input model, positionally) and returns one array, a tuple of arrays (in output order) or a
    dict. Inputs not given are inferred from the parameters' names and annotations
    (``npt.NDArray[np.float32]``), or from ``example``: the inputs of one call (a dict by
    parameter name, or the array of a one-parameter function), whose datatypes and shapes
    (the first dim free: the batch) become the specs; the function is called once on it, here,
    to read the outputs' too. Outputs default to one output ``"output"``.

    Example::

        def double(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
            return x * 2

        m = FunctionModel(double, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])

    Raises:
        InvalidInputError: specs were not given and cannot be inferred.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        inputs: Sequence[Any] | None = None,
        outputs: Sequence[Any] | None = None,
        max_batch_size: int = 0,
        labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
        version: str | int = "1",
        device: str = "",
        parameters: Mapping[str, Any] | None = None,
        run_in_thread: bool = True,
        platform: str = "nbinfer_function",
        example: Any = None,
    ) -> None:
        self.fn = fn
        fname = name or getattr(fn, "__name__", "") or ""
        if fname == "<lambda>" and name is None:
            raise InvalidInputError("a lambda needs an explicit name=...")
        try:
            sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        self._params: list[str] = []
        self._var_kw = False
        self._pass_context = False
        if sig is not None:
            try:
                hints = typing.get_type_hints(fn)
            except Exception:
                hints = {}
            for p in sig.parameters.values():
                if p.kind is p.VAR_KEYWORD:
                    self._var_kw = True
                elif p.name == "context":
                    self._pass_context = True
                elif p.kind is not p.VAR_POSITIONAL:
                    self._params.append(p.name)
            if example is not None:
                inputs, outputs = self._from_example(example, inputs, outputs)
            if inputs is None:
                inputs = [self._infer_input(p, hints.get(p)) for p in self._params]
            if outputs is None:
                dt = _dtype_from_annotation(hints.get("return"))
                if dt is None:
                    ins = [as_tensor_def(i) for i in inputs]
                    dt = ins[0].datatype if ins else "FP32"
                outputs = [TensorDef("output", dt, [-1], inferred=True)]
        if inputs is None or outputs is None:
            raise InvalidInputError(f"function {fname!r}: pass inputs=[...] and outputs=[...]")
        super().__init__(
            fname,
            inputs=inputs,
            outputs=outputs,
            max_batch_size=max_batch_size,
            labels=labels,
            version=version,
            device=device,
            parameters=parameters,
            run_in_thread=run_in_thread,
            platform=platform,
        )
        self.__doc__ = getattr(fn, "__doc__", None)
        if inspect.iscoroutinefunction(fn):
            self.__dict__["predict"] = self._apredict

    async def _apredict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        return await self.predict_call(inputs, context)

    def predict_call(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Call the wrapped function (returns its result, or its coroutine when async)."""
        kwargs: dict[str, Any] = {}
        if self._pass_context:
            kwargs["context"] = context
        if len(inputs) == 1 and (not self._params or next(iter(inputs)) not in self._params):
            return self.fn(next(iter(inputs.values())), **kwargs)
        if self._var_kw or all(k in self._params for k in inputs):
            return self.fn(**inputs, **kwargs)
        # names differ from the parameters: pass positionally in declared order
        order = [d.name for d in self.input_defs() if d.name in inputs]
        return self.fn(*(inputs[n] for n in order), **kwargs)

    def _infer_input(self, param: str, annotation: Any) -> TensorDef:
        dt = _dtype_from_annotation(annotation)
        if dt is None:
            raise InvalidInputError(
                f"function {getattr(self.fn, '__name__', '?')!r}: cannot infer the datatype of "
                f"input {param!r}: annotate it as npt.NDArray[np.float32], pass inputs=[...], "
                f"or pass the inputs of one call as example= (e.g. example={{{param!r}: x}})"
            )
        return TensorDef(param, dt, [-1])

    def _from_example(
        self, example: Any, inputs: Sequence[Any] | None, outputs: Sequence[Any] | None
    ) -> tuple[Sequence[Any], Sequence[Any]]:
        """Input / output specs read off one call on ``example`` (where not given)."""
        if not isinstance(example, Mapping):
            if len(self._params) != 1:
                raise InvalidInputError(
                    f"function {self.fn.__name__!r} takes {self._params}: pass example= as a "
                    "dict {parameter: value}"
                )
            example = {self._params[0]: example}
        arrays = {str(k): as_array(v)[0] for k, v in example.items()}
        if inputs is None:
            inputs = [_example_def(name, value) for name, value in arrays.items()]
        if outputs is None:
            kwargs = {"context": InferContext()} if self._pass_context else {}
            result = self.fn(**arrays, **kwargs)
            if isinstance(result, Mapping):
                named = {str(k): v for k, v in result.items()}
            elif isinstance(result, tuple):
                named = {f"output{i}": v for i, v in enumerate(result)}
            else:
                named = {"output": result}
            outputs = [_example_def(n, v) for n, v in named.items()]
        return inputs, outputs

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Call the wrapped function with the inputs."""
        return self.predict_call(inputs, context)


def _example_def(name: str, value: Any) -> TensorDef:
    """The spec of a tensor like ``value``, its first dim free (the batch)."""
    array, datatype = as_array(value)
    return TensorDef(name, datatype, [-1, *array.shape[1:]])


def model(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    inputs: Sequence[Any] | None = None,
    outputs: Sequence[Any] | None = None,
    max_batch_size: int = 0,
    labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    version: str | int = "1",
    device: str = "",
    parameters: Mapping[str, Any] | None = None,
    run_in_thread: bool = True,
) -> Any:
    """Turn a function into a :class:`FunctionModel` (usable bare or with options).

    Example::

        @nbinfer.model(name="double", inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
        def double(x):
            return x * 2
    """
    # the keywords above are FunctionModel's own (spelled out for completion and type checks)
    options = {key: value for key, value in locals().items() if key != "fn"}

    def wrap(f: Callable[..., Any]) -> FunctionModel:
        return FunctionModel(f, **options)

    if fn is not None:
        return wrap(fn)
    return wrap


def coerce_output(value: Any, datatype: str | None, *, what: str) -> np.ndarray[Any, Any]:
    """Turn a model's returned value into an array of ``datatype`` (None: keep its own).

    torch tensors are moved to the CPU; ``str`` BYTES are UTF-8 encoded.

    Raises:
        InvalidInputError: the value cannot be converted (the caller maps it to InferenceError).
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if datatype is None:
        datatype = datatype_of(arr.dtype)
    if datatype == "BYTES":
        return to_bytes_array(arr)
    want = numpy_dtype(datatype)
    if arr.dtype != want:
        if arr.dtype.kind in "OUS":
            raise InvalidInputError(f"{what} is {arr.dtype} but must be {datatype}")
        arr = arr.astype(want)
    return arr


def to_bytes_array(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Return an ``object`` array of ``bytes`` for str / bytes / object input."""
    if arr.dtype.kind == "S":
        return arr.astype(object)
    if arr.dtype.kind == "U":
        return np.char.encode(arr, "utf-8").astype(object)
    if arr.dtype.kind != "O":
        # numbers / StringDType: through str
        arr = arr.astype(str)
        return np.char.encode(arr, "utf-8").astype(object)
    out = np.empty(arr.shape, dtype=object)
    flat_in = arr.reshape(-1)
    flat_out = out.reshape(-1)
    for i, v in enumerate(flat_in):
        if isinstance(v, bytes):
            flat_out[i] = v
        elif isinstance(v, str):
            flat_out[i] = v.encode("utf-8")
        elif isinstance(v, bytearray | memoryview | np.bytes_):
            flat_out[i] = bytes(v)
        else:
            flat_out[i] = str(v).encode("utf-8")
    return out
