"""The model-I/O core: what one loaded model version does with a request and a result.

:class:`ModelIO` is built once per loaded model version from its declarations and owns
everything between the wire types and the model's hooks: input checks (names, datatypes,
shapes, sizes, batch agreement, shared-memory reads), requested outputs, the ONE hook runner
(``preprocess -> predict -> postprocess``, sync or async, inline or on a worker thread, and a
decoupled model's stream of results), output shaping (coercion to the declared datatype, shape
checks, reshape), classification and shared-memory writes. It needs no repository, scheduler or
server: tests build it straight from a :class:`~nbinfer.server.model.Model`.

Imports protocol, errors and the server's model / shared-memory modules only; never the
repository, the scheduler, the dataplane or a frontend.

Example::

    io = ModelIO(model)
    inputs, batch = io.check_inputs(request)
    outputs = io.outputs(model.predict(inputs), io.requested(request), request, batch)
"""

from __future__ import annotations

import inspect
import math
import os
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.errors import MODEL_TRACEBACK_MARKER, InferenceError, InvalidInputError, NbinferError
from nbinfer.protocol.dtypes import datatype_of, numpy_dtype
from nbinfer.protocol.types import InferInput, InferOutput, InferRequest, Parameters
from nbinfer.server.model import (
    InferContext,
    Model,
    TensorDef,
    coerce_output,
    to_bytes_array,
)
from nbinfer.server.peers import Caller, in_process
from nbinfer.server.shm import SHM_REGION, SharedMemoryManager, shm_reference

__all__ = ["ModelIO", "Offload", "Timings", "model_failed"]

#: Runs ``fn(*args)`` on a worker thread and awaits its result (the dataplane's thread pool).
Offload = Callable[..., Awaitable[Any]]

_DONE = object()
#: Where each hook's time is counted (Triton's compute_input / compute_infer / compute_output).
_SLOT = {"preprocess": 0, "predict": 1, "postprocess": 2, "explain": 1}


#: Where nbinfer's own code lives: its frames are left out of a model's traceback.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: Code that calls a model's hooks: nbinfer and the standard library (thread pool, asyncio).
_CALLERS = (_PACKAGE_DIR, os.path.dirname(os.__file__) + os.sep)
#: Longest model traceback sent back (gRPC carries it in a header): the last frames are kept.
MAX_TRACEBACK_CHARS = 4000


def format_model_traceback(exc: BaseException) -> str:
    """The traceback of an exception a model raised, as text: the model's own frames.

    The frames up to the hooks (thread pool, dataplane) and nbinfer's own are dropped unless
    nothing else is left. Frames of code the server cannot read (a notebook cell) have no
    source line here; the client adds it from its own ``linecache``. Only text travels back.
    """
    tb = traceback.TracebackException.from_exception(exc)
    first = 0  # the frames before the hooks: the thread pool's, the dataplane's
    while first < len(tb.stack) and (tb.stack[first].filename or "").startswith(_CALLERS):
        first += 1
    own = [f for f in tb.stack[first:] if not (f.filename or "").startswith(_PACKAGE_DIR)]
    if own:
        tb.stack = traceback.StackSummary.from_list(own)
    text = "".join(tb.format()).rstrip("\n")
    text = text.replace("Traceback (most recent call last):", _TRACEBACK_TITLE, 1)
    if len(text) > MAX_TRACEBACK_CHARS:
        text = _TRACEBACK_TITLE + "\n  ...\n" + text[-MAX_TRACEBACK_CHARS:].partition("\n")[2]
    return text


_TRACEBACK_TITLE = "Model traceback (most recent call last):"


class Timings:
    """Nanoseconds one request spent queued and in each compute phase."""

    __slots__ = ("infer", "input", "output", "queue")

    def __init__(self) -> None:
        self.queue = 0
        self.input = 0
        self.infer = 0
        self.output = 0

    def add(self, slot: int, ns: int) -> None:
        """Count ``ns`` in phase ``slot`` (0: input, 1: infer, 2: output)."""
        if slot == 0:
            self.input += ns
        elif slot == 1:
            self.infer += ns
        else:
            self.output += ns


def _input_shape_ok(shape: list[int], expected: list[int]) -> bool:
    """``shape`` matches ``expected`` (-1: any size) and has no negative dimension."""
    if len(shape) != len(expected):
        return False
    for s, e in zip(shape, expected, strict=True):  # noqa: SIM110 - hot path, no genexpr
        if s < 0 or (e != -1 and s != e):
            return False
    return True


def _output_shape_ok(shape: tuple[int, ...], dims: list[int], mbs: int, batch: int) -> bool:
    """A returned shape matches the declared ``dims`` (after the batch dim when ``mbs > 0``)."""
    if mbs > 0:
        if len(shape) != len(dims) + 1 or shape[0] != batch:
            return False
        shape = shape[1:]
    elif len(shape) != len(dims):
        return False
    for s, e in zip(shape, dims, strict=True):  # noqa: SIM110 - hot path, no genexpr
        if e != -1 and s != e:
            return False
    return True


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _dtype(spec: TensorDef) -> np.dtype[Any] | None:
    """The numpy dtype of a declared tensor (None for BYTES: object arrays of bytes)."""
    return None if spec.datatype == "BYTES" else numpy_dtype(spec.datatype)


class _InputPlan:
    """What validating one declared input needs, computed once per model."""

    __slots__ = ("datatype", "dtype", "expected", "reshape")

    def __init__(self, spec: TensorDef, mbs: int) -> None:
        self.datatype = spec.datatype
        self.dtype = _dtype(spec)
        self.expected: list[int] = ([-1] if mbs > 0 else []) + list(spec.dims)
        self.reshape: list[int] | None = list(spec.reshape) if spec.reshape is not None else None


class _OutputPlan:
    """What checking one declared output needs, computed once per model."""

    __slots__ = ("def_", "dtype", "expected", "plain")

    def __init__(self, spec: TensorDef) -> None:
        self.def_ = spec
        self.dtype = _dtype(spec)
        self.expected: list[int] = list(spec.dims)
        # the common case: the returned array is checked against fixed dims without reshaping
        self.plain = not spec.inferred and spec.reshape is None


def model_failed(model: Model, request_id: str, exc: BaseException) -> InferenceError:
    """The error a client gets when a model's hook raised: its message and traceback text."""
    return InferenceError(
        f"model {model.name!r} failed: {type(exc).__name__}: {exc}"
        f"{MODEL_TRACEBACK_MARKER}{format_model_traceback(exc)}",
        model=model.name,
        request_id=request_id or None,
    )


class ModelIO:
    """Checks, runs and shapes requests of one loaded model version.

    Built from the model's declarations (``input_defs`` / ``output_defs`` /
    ``max_batch_size``) once; :meth:`stale` says when they were replaced and it must be rebuilt.

    Args:
        model: The loaded model.
        shm: Shared-memory regions inputs may be read from and outputs written to (none when
            omitted: a request naming a region is then refused as unknown).
    """

    __slots__ = (
        "any_async",
        "batched",
        "input_names",
        "input_plans",
        "mbs",
        "model",
        "name",
        "output_names",
        "output_plans",
        "required",
        "shm",
        "source",
        "steps",
    )

    def __init__(self, model: Model, shm: SharedMemoryManager | None = None) -> None:
        ins = model.input_defs()
        outs = model.output_defs()
        mbs = int(model.max_batch_size)
        self.model = model
        self.name = model.name
        self.shm = shm if shm is not None else SharedMemoryManager()
        self.source = (ins, outs, mbs)
        self.mbs = mbs
        self.input_plans = {d.name: _InputPlan(d, mbs) for d in ins}
        self.input_names = ", ".join(d.name for d in ins)
        self.required = [d.name for d in ins if not d.optional]
        # The first dimension is a batch the inputs must agree on: always when the model
        # batches; without max_batch_size when every input and output leads with -1 (add_sub).
        self.batched = mbs > 0 or (
            len(ins) > 1
            and all(d.dims and d.dims[0] == -1 for d in ins)
            and all(d.inferred or (d.dims and d.dims[0] == -1) for d in outs)
        )
        self.output_plans = {d.name: _OutputPlan(d) for d in outs}
        self.output_names = [d.name for d in outs]
        #: The pipeline as (time slot, bound hook, takes the context), overridden hooks only.
        self.steps = tuple(
            (_SLOT[h], getattr(model, h), model.hook_wants_context(h))
            for h in ("preprocess", "predict", "postprocess")
            if h == "predict" or model.overrides(h)
        )
        self.any_async = any(inspect.iscoroutinefunction(fn) for _, fn, _ in self.steps)

    def stale(self) -> bool:
        """Whether the model's declarations changed since this object was built."""
        d = self.model.__dict__
        return (
            self.source[0] is not d.get("_input_defs")
            or self.source[1] is not d.get("_output_defs")
            or self.source[2] != self.model.max_batch_size
        )

    # -- inputs --------------------------------------------------------------------------------
    def check_inputs(
        self, request: InferRequest, caller: Caller = in_process
    ) -> tuple[dict[str, np.ndarray[Any, Any]], int]:
        """The request's inputs as arrays of the declared dtype and shape, and the batch size.

        ``caller`` is asked for its identity only when an input names a shared-memory region
        (only the caller's own regions can be read).

        Raises:
            InvalidInputError: an unknown, repeated or missing input; a wrong datatype, shape,
                element count or batch size; inputs disagreeing on the batch dimension; a
                shared-memory region that is unknown or too small.
        """
        name = self.name
        specs = self.input_plans
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        batch: int | None = None
        first = ""
        batched = self.batched
        for inp in request.inputs:
            spec = specs.get(inp.name)
            if spec is None:
                raise InvalidInputError(
                    f"model {name!r} has no input {inp.name!r}; inputs: {self.input_names}",
                    model=name,
                    tensor=inp.name,
                )
            if inp.name in arrays:
                raise InvalidInputError(
                    f"input {inp.name!r} of model {name!r} given more than once", model=name
                )
            arrays[inp.name] = self._check_input(spec, inp, caller)
            if batched:
                b = int(inp.shape[0])
                if batch is None:
                    batch, first = b, inp.name
                elif b != batch:
                    raise InvalidInputError(
                        f"inputs of model {name!r} disagree on the batch size (first dimension): "
                        f"input {first!r} has {batch}, input {inp.name!r} has {b}",
                        model=name,
                        tensor=inp.name,
                    )
        if len(arrays) != len(specs):
            missing = [n for n in self.required if n not in arrays]
            if missing:
                raise InvalidInputError(
                    f"model {name!r} expects input(s) {', '.join(repr(m) for m in missing)} "
                    f"(missing); got: {', '.join(arrays) or 'none'}",
                    model=name,
                )
        return arrays, (batch if batch is not None and self.mbs > 0 else 1)

    def _check_input(
        self, plan: _InputPlan, inp: InferInput, caller: Caller
    ) -> np.ndarray[Any, Any]:
        name = self.name
        if inp.datatype != plan.datatype:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: datatype {inp.datatype} does not match "
                f"the expected {plan.datatype}",
                model=name,
                tensor=inp.name,
            )
        shape = [int(d) for d in inp.shape]
        expected = plan.expected
        if not _input_shape_ok(shape, expected):
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: shape {_fmt(shape)} does not match the "
                f"expected {_fmt(expected)}",
                model=name,
                tensor=inp.name,
            )
        mbs = self.mbs
        if mbs > 0 and not 1 <= shape[0] <= mbs:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: batch size {shape[0]} is outside "
                f"1..{mbs} (max_batch_size {mbs})",
                model=name,
                tensor=inp.name,
            )
        data = inp.data
        if data is None:
            data = self._read_shm(plan, inp, shape, caller)
        if not isinstance(data, np.ndarray):
            data = np.asarray(data)
        count = math.prod(shape)
        if data.size != count:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: shape {_fmt(shape)} needs {count} "
                f"elements but {data.size} were given",
                model=name,
                tensor=inp.name,
            )
        if plan.dtype is None:  # BYTES
            if data.dtype != object:
                data = to_bytes_array(data)
        elif data.dtype != plan.dtype:
            data = data.astype(plan.dtype)
        if data.ndim != len(shape) or list(data.shape) != shape:
            data = data.reshape(shape)
        if plan.reshape is not None:
            target = ([shape[0]] if mbs > 0 else []) + plan.reshape
            data = data.reshape(target)
        return data

    def _read_shm(self, plan: _InputPlan, inp: InferInput, shape: list[int], caller: Caller) -> Any:
        what = f"input {inp.name!r} of model {self.name!r}"
        ref = shm_reference(inp.parameters, what)
        if ref is None:
            raise InvalidInputError(
                f"{what} has no data (nor a shared_memory_region)", model=self.name, tensor=inp.name
            )
        region, offset, byte_size = ref
        return self.shm.read(
            region,
            offset=offset,
            byte_size=byte_size,
            datatype=plan.datatype,
            shape=shape,
            tensor=inp.name,
            what=what,
            owner=caller(),
        )

    def output_buffers(
        self, request: InferRequest, caller: Caller
    ) -> Callable[[str, tuple[int, ...], np.dtype[Any]], np.ndarray[Any, Any] | None] | None:
        """What :meth:`InferContext.output_array` asks for ``request`` (None: fresh arrays).

        An output gets a view of its shared-memory region (see
        :meth:`SharedMemoryManager.output_view`) once, when it is asked unclassified, with its
        declared datatype, in a region no other tensor of the request names (an input read in
        place must not change while the model writes).
        """
        named: dict[str, int] = {}  # region -> tensors of the request naming it
        params: list[Parameters] = [t.parameters for t in request.inputs]
        params += [t.parameters for t in request.outputs]
        for p in params:
            region = p.get(SHM_REGION) if p else None
            if isinstance(region, str):
                named[region] = named.get(region, 0) + 1
        refs: dict[str, tuple[str, int, int]] = {}
        for ro in request.outputs:
            if ro.parameters and not ro.class_count:
                try:
                    ref = shm_reference(ro.parameters, ro.name)
                except InvalidInputError:  # said when the output is written
                    continue
                if ref is not None and named.get(ref[0]) == 1:
                    refs[ro.name] = ref
        if not refs:
            return None
        owner = caller()  # here: the model may ask from a worker thread, outside the request

        def view(name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
            ref, op = refs.pop(name, None), self.output_plans.get(name)
            if ref is None or op is None or op.dtype != dtype:
                return None
            region, offset, byte_size = ref
            return self.shm.output_view(
                region, offset=offset, byte_size=byte_size, shape=shape, dtype=dtype, owner=owner
            )

        return view

    def requested(self, request: InferRequest) -> list[str]:
        """The output names to answer (every declared one when the request names none).

        Raises:
            InvalidInputError: an unknown output, or a negative classification count.
        """
        known = self.output_names
        if not request.outputs:
            return known
        names: list[str] = []
        for ro in request.outputs:
            if known and ro.name not in known:
                raise InvalidInputError(
                    f"model {self.name!r} has no output {ro.name!r}; outputs: {', '.join(known)}",
                    model=self.name,
                    tensor=ro.name,
                )
            if ro.class_count < 0:
                raise InvalidInputError(
                    f"output {ro.name!r}: classification count must be >= 0, got {ro.class_count}"
                )
            names.append(ro.name)
        return names

    # -- the hook runner -------------------------------------------------------------------------
    def run_sync(self, value: Any, ctx: InferContext, t: Timings, queued: int) -> Any:
        """The pipeline of a model whose hooks are all synchronous, on the calling thread."""
        clock = time.perf_counter_ns
        start = clock()
        t.queue = start - queued
        for slot, fn, wants_ctx in self.steps:
            value = fn(value, ctx) if wants_ctx else fn(value)
            end = clock()
            if slot == 1:  # Timings.add inlined: the hot path
                t.infer += end - start
            elif slot == 0:
                t.input += end - start
            else:
                t.output += end - start
            start = end
        return value

    async def run(
        self, value: Any, ctx: InferContext, t: Timings, queued: int, offload: Offload
    ) -> Any:
        """The pipeline ``preprocess -> predict -> postprocess`` of one request or batch.

        Async hooks run on the loop; sync ones inline when the model declares them cheap
        (``run_in_thread = False``), else through ``offload``, all three in one thread hop when
        none is async.
        """
        if not self.any_async:
            if not self.model.run_in_thread:
                return self.run_sync(value, ctx, t, queued)
            return await offload(self.run_sync, value, ctx, t, queued)
        t.queue = time.perf_counter_ns() - queued
        for slot, fn, wants_ctx in self.steps:
            start = time.perf_counter_ns()
            value = await self.call(fn, value, ctx, wants_ctx, offload)
            t.add(slot, time.perf_counter_ns() - start)
        return value

    async def call(
        self, fn: Any, value: Any, ctx: InferContext, wants_ctx: bool, offload: Offload | None
    ) -> Any:
        """One hook call: awaited when async, offloaded when the model runs in threads."""
        args = (value, ctx) if wants_ctx else (value,)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        if offload is not None and self.model.run_in_thread:
            return await offload(fn, *args)
        return fn(*args)

    async def hook(
        self, hook: str, value: Any, ctx: InferContext, offload: Offload | None, t: Timings
    ) -> Any:
        """Run one named hook (``explain``, or a step of a decoupled model), timed."""
        start = time.perf_counter_ns()
        fn = getattr(self.model, hook)
        value = await self.call(fn, value, ctx, self.model.hook_wants_context(hook), offload)
        t.add(_SLOT[hook], time.perf_counter_ns() - start)
        return value

    async def iterate(
        self, inputs: dict[str, Any], ctx: InferContext, t: Timings, offload: Offload
    ) -> AsyncIterator[Any]:
        """A decoupled model's results, each postprocessed as soon as ``predict`` yields it."""
        model = self.model
        if model.overrides("preprocess"):
            inputs = await self.hook("preprocess", inputs, ctx, offload, t)
        fn = model.predict
        is_gen = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
        # a generator function only builds its generator here: no need for a thread
        result = await self.hook("predict", inputs, ctx, None if is_gen else offload, t)
        post = model.overrides("postprocess")
        items: AsyncIterator[Any] | Iterator[Any]
        if inspect.isasyncgen(result):
            items = result
        elif inspect.isgenerator(result) or isinstance(result, list | tuple):
            items = iter(result)
        elif result is None:
            items = iter(())
        else:
            items = iter((result,))
        while True:
            start = time.perf_counter_ns()
            if isinstance(items, AsyncIterator):
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    break
            else:
                threaded = inspect.isgenerator(items) and model.run_in_thread
                item = await offload(next, items, _DONE) if threaded else next(items, _DONE)
                if item is _DONE:
                    break
            t.infer += time.perf_counter_ns() - start
            if post:
                item = await self.hook("postprocess", item, ctx, offload, t)
            yield item

    # -- outputs -------------------------------------------------------------------------------
    def produced(self, result: Any, wanted: list[str]) -> dict[str, Any]:
        """What the hooks returned, by output name (a dict, a tuple in order, or one value).

        Raises:
            InferenceError: the result does not say which value is which output.
        """
        order = self.output_names
        if type(result) is dict:
            produced: dict[str, Any] = result  # only read
        elif isinstance(result, Mapping):
            produced = dict(result)
        elif isinstance(result, tuple) and len(order) > 1:
            if len(result) != len(order):
                raise InferenceError(
                    f"model {self.name!r} returned {len(result)} values for {len(order)} outputs "
                    f"({', '.join(order)})",
                    model=self.name,
                )
            produced = dict(zip(order, result, strict=True))
        elif len(order) == 1:
            produced = {order[0]: result}
        elif len(wanted) == 1:
            produced = {wanted[0]: result}
        else:
            raise InferenceError(
                f"model {self.name!r} returned one {type(result).__name__} but has outputs "
                f"{', '.join(order)}; return a dict by output name",
                model=self.name,
            )
        return produced

    def coerce(self, name: str, value: Any, spec: TensorDef | None) -> np.ndarray[Any, Any]:
        """An output as an array of its declared datatype; a bad one is the model's error."""
        what = f"output {name!r} of model {self.name!r}"
        try:
            return coerce_output(value, spec.datatype if spec else None, what=what)
        except NbinferError as exc:
            raise InferenceError(str(exc), model=self.name) from exc
        except (TypeError, ValueError) as exc:
            raise InferenceError(f"{what}: {exc}", model=self.name) from exc

    def batch_outputs(self, result: Any, wanted: list[str]) -> dict[str, np.ndarray[Any, Any]]:
        """A merged batch's outputs as arrays by name (the wanted ones, typed as declared)."""
        produced = self.produced(result, wanted)
        names = [n for n in wanted if n in produced] if wanted else list(produced)
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        for out_name in names:
            op = self.output_plans.get(out_name)
            spec = op.def_ if op is not None else None
            arrays[out_name] = self.coerce(out_name, produced[out_name], spec)
        return arrays

    def outputs(
        self,
        result: Any,
        wanted: list[str],
        request: InferRequest,
        batch: int,
        caller: Caller = in_process,
    ) -> list[InferOutput]:
        """The response outputs: typed, shape-checked, classified or written to shared memory.

        Outputs go only into ``caller``'s own regions (see :meth:`check_inputs`).

        Raises:
            InferenceError: a wanted output is missing, cannot be converted or has the wrong
                shape.
            InvalidInputError: classification of a non-numeric output; a shared-memory region
                that is unknown or too small.
        """
        defs = self.output_plans
        produced = self.produced(result, wanted)
        class_counts: dict[str, int] = {}
        in_shm: dict[str, Parameters] = {}
        for ro in request.outputs:
            if ro.class_count > 0:
                class_counts[ro.name] = ro.class_count
            if ro.parameters and SHM_REGION in ro.parameters:
                in_shm[ro.name] = ro.parameters
        outputs: list[InferOutput] = []
        for out_name in wanted or list(produced):
            if out_name not in produced:
                raise InferenceError(
                    f"model {self.name!r} did not produce output {out_name!r}; it returned "
                    f"{', '.join(produced) or 'nothing'}",
                    model=self.name,
                )
            op = defs.get(out_name)
            spec = op.def_ if op is not None else None
            value = produced[out_name]
            if (
                op is not None
                and op.dtype is not None
                and type(value) is np.ndarray
                and value.dtype == op.dtype
            ):
                arr = value  # already what was declared: nothing to convert
            else:
                arr = self.coerce(out_name, value, spec)
            if (
                op is not None
                and spec is not None
                and not spec.inferred
                and not (op.plain and _output_shape_ok(arr.shape, op.expected, self.mbs, batch))
            ):
                arr = self._check_output_shape(out_name, spec, arr, batch)
            k = class_counts.get(out_name, 0) if class_counts else 0
            if k:
                arr = self.classify(out_name, spec, arr, k)
                datatype = "BYTES"
            else:
                datatype = spec.datatype if spec is not None else datatype_of(arr.dtype)
            if in_shm and out_name in in_shm:
                outputs.append(
                    self._output_to_shm(out_name, datatype, arr, in_shm[out_name], caller)
                )
            else:
                outputs.append(InferOutput(out_name, datatype, list(arr.shape), arr))
        return outputs

    def _output_to_shm(
        self,
        name: str,
        datatype: str,
        arr: np.ndarray[Any, Any],
        params: Mapping[str, Any],
        caller: Caller,
    ) -> InferOutput:
        """Write an output into its shared-memory region; the response keeps only metadata."""
        what = f"output {name!r} of model {self.name!r}"
        ref = shm_reference(params, what)
        assert ref is not None
        region, offset, byte_size = ref
        written = self.shm.write(
            region,
            offset=offset,
            byte_size=byte_size,
            arr=arr,
            datatype=datatype,
            what=what,
            owner=caller(),
        )
        echo: dict[str, Any] = {SHM_REGION: region, "shared_memory_byte_size": written}
        if offset:
            echo["shared_memory_offset"] = offset
        return InferOutput(name, datatype, list(arr.shape), None, echo)

    def _check_output_shape(
        self, name: str, spec: TensorDef, arr: np.ndarray[Any, Any], batch: int
    ) -> np.ndarray[Any, Any]:
        what = f"output {name!r} of model {self.name!r}"
        expected = ([batch] if self.mbs > 0 else []) + list(spec.dims)
        if spec.reshape is not None and expected.count(-1) <= 1:
            try:
                return arr.reshape(expected)
            except ValueError as exc:
                raise InferenceError(
                    f"{what}: cannot reshape {_fmt(arr.shape)} to the declared {_fmt(expected)}",
                    model=self.name,
                ) from exc
        if not _output_shape_ok(arr.shape, expected, 0, 0):  # expected has the batch dim
            raise InferenceError(
                f"{what}: the model returned shape {_fmt(arr.shape)} but declares {_fmt(expected)}",
                model=self.name,
            )
        return arr

    def classify(
        self, name: str, spec: TensorDef | None, arr: np.ndarray[Any, Any], k: int
    ) -> np.ndarray[Any, Any]:
        """The top ``k`` classes of each row as ``"score:index[:label]"`` BYTES.

        Raises:
            InvalidInputError: the output is not numeric.
        """
        from nbinfer.protocol.classification import encode_classification

        if arr.dtype.kind not in "fiub" and arr.dtype != numpy_dtype("BF16"):
            raise InvalidInputError(
                f"classification needs a numeric output; {name!r} of model {self.name!r} is "
                f"{arr.dtype}",
                model=self.name,
            )
        labels = spec.labels if spec is not None else None
        scores: np.ndarray[Any, Any]
        if self.mbs > 0 or arr.ndim >= 2:
            scores = arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, -1)
        else:
            scores = arr.reshape(-1)
        k = min(k, scores.shape[-1])
        encoded: np.ndarray[Any, Any] = encode_classification(scores, k, labels)
        return encoded
