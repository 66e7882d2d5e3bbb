"""The transport-neutral core of the embedded server.

The REST and gRPC frontends are thin adapters over :class:`DataPlane`: health, metadata, config,
inference (validation, output subsets, classification, statistics), the model repository and
KServe v1. Errors are :mod:`nbinfer.errors` classes; the frontends map them onto statuses.

Example::

    dp = DataPlane(ModelRepository(models=demo_models()))
    response = await dp.infer(InferRequest(model_name="add_sub", inputs=[...]))
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from nbinfer.errors import (
    MODEL_TRACEBACK_MARKER,
    InferenceError,
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    ServerUnavailableError,
)
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    Parameters,
    RepositoryModel,
    ServerMetadata,
)
from nbinfer.server.batcher import (
    PendingRequest,
    Scheduler,
    SchedulingPolicy,
    concat_inputs,
    scheduling_policy,
    split_rows,
)
from nbinfer.server.model import (
    InferContext,
    Model,
    TensorDef,
    coerce_output,
    format_model_traceback,
    to_bytes_array,
)
from nbinfer.server.repository import READY, UNAVAILABLE, ModelRepository, ModelVersion
from nbinfer.server.sequence import (
    SequenceManager,
    SequenceSlot,
    is_stateful,
    parse_sequence,
    sequence_idle_us,
)
from nbinfer.server.shm import SHM_REGION, SharedMemoryManager, shm_reference

__all__ = ["DEFAULT_EXTENSIONS", "DataPlane"]

logger = logging.getLogger("nbinfer")

#: Protocol extensions the embedded server implements (the frontends do binary_tensor_data).
DEFAULT_EXTENSIONS: tuple[str, ...] = (
    "binary_tensor_data",
    "classification",
    "model_configuration",
    "model_repository",
    "parameters",
    "sequence",
    "statistics",
    "system_shared_memory",
)

#: Request parameter asking a stream for Triton's empty final response of decoupled models.
EMPTY_FINAL = "triton_enable_empty_final_response"
#: Response parameter marking the last response of a request on a stream.
FINAL_RESPONSE = "triton_final_response"
_DONE = object()


def _server_version() -> str:
    try:
        return importlib.metadata.version("nbinfer")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "0.0.0"


def _shape_matches(shape: Sequence[int], expected: Sequence[int]) -> bool:
    if len(shape) != len(expected):
        return False
    for s, e in zip(shape, expected, strict=True):  # noqa: SIM110 - hot path, no genexpr
        if e != -1 and s != e:
            return False
    return True


def _input_shape_ok(shape: list[int], expected: list[int]) -> bool:
    """``shape`` matches ``expected`` (-1: any size) and has no negative dimension."""
    if len(shape) != len(expected):
        return False
    for s, e in zip(shape, expected, strict=True):  # noqa: SIM110 - hot path, no genexpr
        if s < 0 or (e != -1 and s != e):
            return False
    return True


def _output_shape_ok(shape: tuple[int, ...], dims: list[int], mbs: int, batch: int) -> bool:
    """A returned shape matches the declared ``dims`` (after the batch dim when batching)."""
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


class _Timings:
    __slots__ = ("infer", "input", "output", "queue")

    def __init__(self) -> None:
        self.queue = 0
        self.input = 0
        self.infer = 0
        self.output = 0


class _InputPlan:
    """What validating one declared input needs, computed once per model."""

    __slots__ = ("datatype", "def_", "dtype", "expected", "reshape")

    def __init__(self, spec: TensorDef, mbs: int) -> None:
        self.def_ = spec
        self.datatype = spec.datatype
        self.dtype: np.dtype[Any] | None = (
            None if spec.datatype == "BYTES" else numpy_dtype(spec.datatype)
        )
        self.expected: list[int] = ([-1] if mbs > 0 else []) + list(spec.dims)
        self.reshape: list[int] | None = list(spec.reshape) if spec.reshape is not None else None


class _OutputPlan:
    """What checking one declared output needs, computed once per model."""

    __slots__ = ("def_", "dtype", "expected", "plain")

    def __init__(self, spec: TensorDef, mbs: int) -> None:
        self.def_ = spec
        self.dtype: np.dtype[Any] | None = (
            None if spec.datatype == "BYTES" else numpy_dtype(spec.datatype)
        )
        self.expected: list[int] = list(spec.dims)
        # the common case: the returned array is checked against fixed dims without reshaping
        self.plain = not spec.inferred and spec.reshape is None


class _Plan:
    """Per-model facts the request path needs, derived from the declarations once.

    Cached on the model and rebuilt when its declarations are replaced (``set_defs``).
    """

    __slots__ = (
        "any_async",
        "batched",
        "input_names",
        "inputs",
        "mbs",
        "output_names",
        "outputs",
        "post",
        "post_ctx",
        "pre",
        "pre_ctx",
        "predict_ctx",
        "required",
        "source",
    )

    def __init__(self, model: Model) -> None:
        ins = model.input_defs()
        outs = model.output_defs()
        self.source = (ins, outs, model.max_batch_size)
        mbs = model.max_batch_size
        self.mbs = mbs
        self.inputs = {d.name: _InputPlan(d, mbs) for d in ins}
        self.input_names = ", ".join(d.name for d in ins)
        self.required = [d.name for d in ins if not d.optional]
        # The first dimension is a batch the inputs must agree on: always when the model
        # batches; without max_batch_size when every input and output leads with -1 (add_sub).
        self.batched = mbs > 0 or (
            len(ins) > 1
            and all(d.dims and d.dims[0] == -1 for d in ins)
            and all(d.inferred or (d.dims and d.dims[0] == -1) for d in outs)
        )
        self.outputs = {d.name: _OutputPlan(d, mbs) for d in outs}
        self.output_names = [d.name for d in outs]
        self.pre = model.overrides("preprocess")
        self.post = model.overrides("postprocess")
        self.pre_ctx = self.pre and model.hook_wants_context("preprocess")
        self.post_ctx = self.post and model.hook_wants_context("postprocess")
        self.predict_ctx = model.hook_wants_context("predict")
        hooks = ("preprocess", "predict", "postprocess")
        self.any_async = any(
            inspect.iscoroutinefunction(getattr(model, h)) for h in hooks if model.overrides(h)
        )


def _plan(model: Model) -> _Plan:
    """The model's cached :class:`_Plan` (rebuilt when its declarations changed)."""
    plan: _Plan | None = model.__dict__.get("_nbinfer_plan")
    d = model.__dict__
    if (
        plan is None
        or plan.source[0] is not d.get("_input_defs")
        or plan.source[1] is not d.get("_output_defs")
        or plan.source[2] != model.max_batch_size
    ):
        plan = _Plan(model)
        if d.get("_input_defs") is not None and d.get("_output_defs") is not None:
            d["_nbinfer_plan"] = plan
    return plan


def _call(model: Model, hook: str, value: Any, ctx: InferContext) -> Any:
    fn = getattr(model, hook)
    return fn(value, ctx) if model.hook_wants_context(hook) else fn(value)


def _run_sync_pipeline(
    model: Model,
    inputs: dict[str, Any],
    ctx: InferContext,
    submitted: int,
    t: _Timings,
    plan: _Plan | None = None,
) -> Any:
    plan = plan or _plan(model)
    start = time.perf_counter_ns()
    t.queue = start - submitted
    fn: Any
    if plan.pre:
        fn = model.preprocess
        inputs = fn(inputs, ctx) if plan.pre_ctx else fn(inputs)
    mid = time.perf_counter_ns()
    t.input += mid - start
    fn = model.predict
    result = fn(inputs, ctx) if plan.predict_ctx else fn(inputs)
    end = time.perf_counter_ns()
    t.infer = end - mid
    if plan.post:
        fn = model.postprocess
        result = fn(result, ctx) if plan.post_ctx else fn(result)
    t.output += time.perf_counter_ns() - end
    return result


def _coerce(model: Model, name: str, value: Any, spec: TensorDef | None) -> np.ndarray[Any, Any]:
    """An output as an array of its declared datatype; a bad one is the model's error."""
    what = f"output {name!r} of model {model.name!r}"
    try:
        return coerce_output(value, spec.datatype if spec else None, what=what)
    except NbinferError as exc:
        raise InferenceError(str(exc), model=model.name) from exc
    except (TypeError, ValueError) as exc:
        raise InferenceError(f"{what}: {exc}", model=model.name) from exc


def _model_raised(
    mv: ModelVersion, model: Model, request: InferRequest, exc: Exception, t0: int
) -> InferenceError:
    """Count a failed request whose model raised; return the error to raise ``from exc``."""
    mv.stats.record_failure(time.perf_counter_ns() - t0)
    logger.warning("model %r raised", model.name, exc_info=True)
    return InferenceError(
        f"model {model.name!r} failed: {type(exc).__name__}: {exc}"
        f"{MODEL_TRACEBACK_MARKER}{format_model_traceback(exc)}",  # text for the client
        model=model.name,
        request_id=request.id or None,
    )


class DataPlane:
    """Transport-neutral server core over a :class:`ModelRepository`.

    Models with ``dynamic_batching``, an ``instance_group`` count or a queue limit are served
    through a :class:`~nbinfer.server.batcher.Scheduler` (merged batches, N executions in
    flight, ``priority`` / ``timeout`` request parameters, queue limits); the others run each
    request as it comes.

    Args:
        repository: The models to serve.
        server_name: Name reported by server metadata.
        extensions: Protocol extensions to advertise (default :data:`DEFAULT_EXTENSIONS`).
        max_workers: Threads running synchronous model hooks (default ``max(16, 4 * CPUs)``).
        model_workers: Of those, the most one model may occupy at once (default a quarter),
            so a slow model cannot starve the others.

    Example::

        dp = DataPlane(ModelRepository(models=demo_models()))
        meta = dp.model_metadata("iris")
    """

    def __init__(
        self,
        repository: ModelRepository,
        *,
        server_name: str = "nbinfer",
        extensions: Sequence[str] | None = None,
        max_workers: int | None = None,
        model_workers: int | None = None,
    ) -> None:
        self.repository = repository
        self.server_name = server_name
        self.extensions = list(DEFAULT_EXTENSIONS if extensions is None else extensions)
        self._max_workers = max_workers or max(16, 4 * (os.cpu_count() or 1))
        self._model_workers = max(1, model_workers or self._max_workers // 4)
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self._policies: dict[ModelVersion, SchedulingPolicy | None] = {}
        self._schedulers: dict[ModelVersion, Scheduler] = {}
        #: Registered shared-memory regions (system + CUDA extensions).
        self.shm = SharedMemoryManager()
        #: Active sequences of stateful models (sequence extension).
        self.sequences = SequenceManager()
        self._check_scheduling()

    # -- health / metadata -------------------------------------------------------------------
    def live(self) -> bool:
        """Whether the server process is alive (True until closed)."""
        return not self._closed

    def ready(self) -> bool:
        """Whether the server accepts inference (models that failed to load do not count)."""
        return not self._closed

    def model_ready(self, name: str, version: str = "") -> bool:
        """Whether a model (version) is ready.

        Raises:
            ModelNotFoundError: unknown model or version.
        """
        versions = self.repository.versions(name)
        if version:
            match = [v for v in versions if v.version == str(version)]
            if not match:
                known = ", ".join(v.version for v in versions) or "(none loaded)"
                raise ModelNotFoundError(
                    f"model {name!r} has no version {version!r}; versions: {known}", model=name
                )
            return match[0].state == READY
        return any(v.state == READY for v in versions)

    def server_metadata(self) -> ServerMetadata:
        """Server name, version and the extensions it implements."""
        return ServerMetadata(self.server_name, _server_version(), list(self.extensions))

    def _resolve(self, name: str, version: str) -> ModelVersion:
        if self._closed:
            raise ServerUnavailableError("the server is shutting down")
        return self.repository.resolve(name, version)

    def model_metadata(self, name: str, version: str = "") -> ModelMetadata:
        """Model metadata: versions, platform, input/output specs and parameters (device ...).

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not loaded (the reason is in the message).
        """
        mv = self._resolve(name, version)
        model = mv.model
        assert model is not None
        mbs = model.max_batch_size
        versions = [v.version for v in self.repository.versions(name) if v.state == READY]
        return ModelMetadata(
            name=name,
            versions=versions,
            platform=model.platform,
            inputs=[d.spec(mbs) for d in model.input_defs()],
            outputs=[d.spec(mbs) for d in model.output_defs()],
            parameters={"device": model.device, "max_batch_size": mbs},
        )

    def model_spec(self, name: str, version: str = "") -> ModelMetadata:
        """Alias of :meth:`model_metadata` used by frontends to decode raw single-input bodies."""
        return self.model_metadata(name, version)

    def model_config(self, name: str, version: str = "") -> dict[str, Any]:
        """The model's Triton-shaped config JSON (name, platform, max_batch_size, input, ...).

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not loaded.
        """
        mv = self._resolve(name, version)
        cfg = dict(mv.config)
        if mv.model is not None:
            decoupled, stateful, idle_us = self._flags(mv, mv.model)
            if stateful and not cfg.get("sequence_batching"):
                cfg["sequence_batching"] = {"max_sequence_idle_microseconds": idle_us}
            if decoupled:
                policy_cfg = cfg.get("model_transaction_policy")
                cfg["model_transaction_policy"] = {
                    **(policy_cfg if isinstance(policy_cfg, Mapping) else {}),
                    "decoupled": True,
                }
        try:
            policy = self._policy_for(mv)
        except NbinferError:
            policy = None
        if policy is not None and policy.batching:
            # the effective settings, in Triton's JSON shape (also when a config.pbtxt wrote
            # priority_queue_policy as key/value entries)
            given = cfg.get("dynamic_batching")
            merged = dict(given) if isinstance(given, Mapping) else {}
            effective = policy.to_config()
            if "preserve_ordering" in merged:
                effective["preserve_ordering"] = bool(merged["preserve_ordering"])
            merged.update(effective)
            cfg["dynamic_batching"] = merged
        return cfg

    # -- inference ---------------------------------------------------------------------------
    async def _in_thread(self, model: Model, fn: Any, *args: Any) -> Any:
        """Run ``fn`` on the shared pool, at most ``model_workers`` threads per model.

        A caller that gives up (cancellation) leaves at once; a thread that already started
        keeps the model's slot until it returns, so an abandoned slow model only blocks itself.
        """
        gate: asyncio.Semaphore | None = model.__dict__.get("_nbinfer_gate")
        if gate is None:
            gate = model.__dict__["_nbinfer_gate"] = asyncio.Semaphore(self._model_workers)
        await gate.acquire()
        loop = asyncio.get_running_loop()
        try:
            job = self._executor_for().submit(fn, *args)
        except BaseException:
            gate.release()
            raise
        try:
            result = await asyncio.wrap_future(job, loop=loop)
        except asyncio.CancelledError:
            if job.cancel() or job.done():
                gate.release()
            else:  # the thread cannot be stopped: its slot frees when it returns
                job.add_done_callback(lambda _: loop.call_soon_threadsafe(gate.release))
            raise
        except BaseException:
            gate.release()
            raise
        gate.release()
        return result

    def _executor_for(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="nbinfer-model"
            )
        return self._executor

    def _check_inputs(
        self, model: Model, request: InferRequest, plan: _Plan | None = None
    ) -> tuple[dict[str, np.ndarray[Any, Any]], int]:
        """Validate the request's inputs; returns arrays by name and the batch size."""
        name = model.name
        plan = plan or _plan(model)
        specs = plan.inputs
        mbs = plan.mbs
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        batch: int | None = None
        first = ""
        batched = plan.batched
        for inp in request.inputs:
            spec = specs.get(inp.name)
            if spec is None:
                raise InvalidInputError(
                    f"model {name!r} has no input {inp.name!r}; inputs: {plan.input_names}",
                    model=name,
                    tensor=inp.name,
                )
            if inp.name in arrays:
                raise InvalidInputError(
                    f"input {inp.name!r} of model {name!r} given more than once", model=name
                )
            arrays[inp.name] = self._check_input(model, spec, inp)
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
            missing = [n for n in plan.required if n not in arrays]
            if missing:
                raise InvalidInputError(
                    f"model {name!r} expects input(s) {', '.join(repr(m) for m in missing)} "
                    f"(missing); got: {', '.join(arrays) or 'none'}",
                    model=name,
                )
        return arrays, (batch if batch is not None and mbs > 0 else 1)

    def _check_input(self, model: Model, plan: _InputPlan, inp: InferInput) -> np.ndarray[Any, Any]:
        name = model.name
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
        mbs = model.max_batch_size
        if mbs > 0 and not 1 <= shape[0] <= mbs:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: batch size {shape[0]} is outside "
                f"1..{mbs} (max_batch_size {mbs})",
                model=name,
                tensor=inp.name,
            )
        data = inp.data
        if data is None:
            what = f"input {inp.name!r} of model {name!r}"
            ref = shm_reference(inp.parameters, what)
            if ref is None:
                raise InvalidInputError(
                    f"{what} has no data (nor a shared_memory_region)", model=name, tensor=inp.name
                )
            region, offset, byte_size = ref
            data = self.shm.read(
                region,
                offset=offset,
                byte_size=byte_size,
                datatype=plan.datatype,
                shape=shape,
                tensor=inp.name,
                what=what,
            )
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

    def _requested(
        self, model: Model, request: InferRequest, plan: _Plan | None = None
    ) -> list[str]:
        known = (plan or _plan(model)).output_names
        if not request.outputs:
            return known
        names: list[str] = []
        for ro in request.outputs:
            if known and ro.name not in known:
                raise InvalidInputError(
                    f"model {model.name!r} has no output {ro.name!r}; outputs: {', '.join(known)}",
                    model=model.name,
                    tensor=ro.name,
                )
            if ro.class_count < 0:
                raise InvalidInputError(
                    f"output {ro.name!r}: classification count must be >= 0, got {ro.class_count}"
                )
            names.append(ro.name)
        return names

    # -- scheduling (dynamic batching, instances, queue policies: see batcher.py) --------------
    def _policy_for(self, mv: ModelVersion) -> SchedulingPolicy | None:
        """The model version's scheduling policy (None: unscheduled), cached.

        Raises:
            InvalidInputError: the model's ``dynamic_batching`` settings are malformed.
        """
        try:
            return self._policies[mv]
        except KeyError:
            pass
        model = mv.model
        assert model is not None
        policy = scheduling_policy(
            model.name,
            max_batch_size=int(model.max_batch_size),
            config=mv.config,
            dynamic_batching=getattr(model, "dynamic_batching", None),
            max_queue_size=getattr(model, "max_queue_size", None),
            instances=model.max_concurrency,
        )
        self._policies[mv] = policy
        return policy

    def _check_scheduling(self, name: str | None = None) -> str:
        """Validate the scheduling settings of newly loaded versions.

        A version whose settings are malformed is marked UNAVAILABLE with the reason; returns
        the reason for model ``name`` ("" when fine).
        """
        self._purge_schedulers()
        problem = ""
        for mv in self.repository.ready_versions():
            if mv in self._policies:
                continue
            try:
                self._policy_for(mv)
            except NbinferError as exc:
                mv.state = UNAVAILABLE
                mv.reason = str(exc)
                logger.warning("model %r version %s cannot serve: %s", mv.name, mv.version, exc)
                if mv.name == name:
                    problem = str(exc)
        return problem

    def _purge_schedulers(self) -> None:
        """Forget the policies and schedulers of retired model versions."""
        for mv in [v for v in self._policies if v.model is None]:
            self._policies.pop(mv, None)
            scheduler = self._schedulers.pop(mv, None)
            if scheduler is not None:
                scheduler.discard()

    def _scheduler_for(self, mv: ModelVersion) -> Scheduler | None:
        policy = self._policy_for(mv)
        if policy is None:
            return None
        scheduler = self._schedulers.get(mv)
        loop = asyncio.get_running_loop()
        if scheduler is not None and scheduler.loop is loop and not scheduler.closed:
            return scheduler
        if scheduler is not None:  # made on another (finished) event loop
            scheduler.discard()
        self._purge_schedulers()
        model = mv.model
        assert model is not None
        box: list[Scheduler] = []

        async def runner(items: list[PendingRequest]) -> list[Any]:
            return await self._run_batch(mv, box[0], items)

        scheduler = Scheduler(
            policy, runner, use_threads=model.run_in_thread, cancel_running=_plan(model).any_async
        )
        box.append(scheduler)
        self._schedulers[mv] = scheduler
        return scheduler

    async def _schedule(
        self,
        scheduler: Scheduler,
        request: InferRequest,
        inputs: dict[str, Any],
        batch: int,
        ctx: InferContext,
        t: _Timings,
    ) -> Any:
        """Queue a validated request and wait for its share of an execution."""
        priority = _uint_param(request, "priority")
        timeout_us = _uint_param(request, "timeout")
        group = _params_key(request.parameters) if scheduler.policy.batching else None
        future = scheduler.submit(
            inputs, batch, ctx, priority=priority, timeout_us=timeout_us, group=group
        )
        try:
            value, bt, queue_ns = await future
        except asyncio.CancelledError:
            abandoned = scheduler.cancel(future)
            if abandoned and abandoned[0].execution_context is not None:
                abandoned[0].execution_context.cancelled = True
            raise
        t.queue = queue_ns
        t.input += bt.input
        t.infer = bt.infer
        t.output += bt.output
        return value

    async def _run_batch(
        self, mv: ModelVersion, scheduler: Scheduler, items: list[PendingRequest]
    ) -> list[tuple[Any, _Timings, int]]:
        """Run one execution for ``items`` (merged when several) and split the results."""
        model = mv.model
        if model is None:
            raise ServerUnavailableError(f"model {mv.name!r} was unloaded", model=mv.name)
        t = _Timings()
        start = time.perf_counter_ns()
        ctx: InferContext
        if len(items) == 1:
            inputs = items[0].inputs
            ctx = items[0].execution_context = items[0].context
        else:
            inputs = concat_inputs([item.inputs for item in items])
            ctx = _batch_context(model, items)
            for item in items:
                item.execution_context = ctx
        merged = time.perf_counter_ns()
        t.input = merged - start
        result = await self._run_hooks(model, inputs, ctx, t, merged, scheduler.executor)
        total = sum(item.batch_size for item in items)
        values: list[Any]
        if len(items) == 1:
            values = [result]
        else:
            out_start = time.perf_counter_ns()
            produced = self._batch_outputs(model, result, ctx.requested_outputs)
            values = split_rows(
                produced, [item.batch_size for item in items], model_name=model.name
            )
            for item in items:
                item.context.response_parameters.update(ctx.response_parameters)
                item.context.response_headers.update(ctx.response_headers)
            t.output += time.perf_counter_ns() - out_start
        mv.stats.record_execution(
            batch_size=total if model.max_batch_size > 0 else 1,
            input_ns=t.input,
            infer_ns=t.infer,
            output_ns=t.output,
        )
        return [
            (value, t, item.dispatched_ns - item.enqueued_ns + t.queue)
            for value, item in zip(values, items, strict=True)
        ]

    def _batch_outputs(
        self, model: Model, result: Any, wanted: list[str]
    ) -> dict[str, np.ndarray[Any, Any]]:
        """A batch's outputs as arrays by name (the wanted ones, typed as declared)."""
        produced = self._produced(model, result, wanted)
        defs = {d.name: d for d in model.output_defs()}
        names = [n for n in wanted if n in produced] if wanted else list(produced)
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        for out_name in names:
            spec = defs.get(out_name)
            arrays[out_name] = _coerce(model, out_name, produced[out_name], spec)
        return arrays

    async def _execute(
        self, mv: ModelVersion, inputs: dict[str, Any], ctx: InferContext, t: _Timings
    ) -> Any:
        """Run the hooks of an unscheduled model right away."""
        model = mv.model
        assert model is not None
        return await self._run_hooks(model, inputs, ctx, t, time.perf_counter_ns())

    async def _run_hooks(
        self,
        model: Model,
        inputs: dict[str, Any],
        ctx: InferContext,
        t: _Timings,
        queued: int,
        executor: ThreadPoolExecutor | None = None,
    ) -> Any:
        if not _plan(model).any_async:
            if not model.run_in_thread:
                # declared cheap: run inline, no thread hop
                return _run_sync_pipeline(model, inputs, ctx, queued, t)
            if executor is None:
                return await self._in_thread(
                    model, _run_sync_pipeline, model, inputs, ctx, queued, t
                )
            return await asyncio.get_running_loop().run_in_executor(
                executor, _run_sync_pipeline, model, inputs, ctx, queued, t
            )
        loop = asyncio.get_running_loop()
        hooks = ("preprocess", "predict", "postprocess")
        t.queue = time.perf_counter_ns() - queued
        value: Any = inputs
        for hook in hooks:
            if hook != "predict" and not model.overrides(hook):
                continue
            start = time.perf_counter_ns()
            fn = getattr(model, hook)
            args = (value, ctx) if model.hook_wants_context(hook) else (value,)
            if inspect.iscoroutinefunction(fn):
                value = await fn(*args)
            elif model.run_in_thread and executor is None:
                value = await self._in_thread(model, fn, *args)
            elif model.run_in_thread:
                value = await loop.run_in_executor(executor, fn, *args)
            else:
                value = fn(*args)
            spent = time.perf_counter_ns() - start
            if hook == "preprocess":
                t.input += spent
            elif hook == "predict":
                t.infer += spent
            else:
                t.output += spent
        return value

    @staticmethod
    def _produced(
        model: Model, result: Any, wanted: list[str], plan: _Plan | None = None
    ) -> dict[str, Any]:
        """What the hooks returned, by output name."""
        order = (plan or _plan(model)).output_names
        if type(result) is dict:
            produced: dict[str, Any] = result  # only read
        elif isinstance(result, Mapping):
            produced = dict(result)
        elif isinstance(result, tuple) and len(order) > 1:
            if len(result) != len(order):
                raise InferenceError(
                    f"model {model.name!r} returned {len(result)} values for {len(order)} outputs "
                    f"({', '.join(order)})",
                    model=model.name,
                )
            produced = dict(zip(order, result, strict=True))
        elif len(order) == 1:
            produced = {order[0]: result}
        elif len(wanted) == 1:
            produced = {wanted[0]: result}
        else:
            raise InferenceError(
                f"model {model.name!r} returned one {type(result).__name__} but has outputs "
                f"{', '.join(order)}; return a dict by output name",
                model=model.name,
            )
        return produced

    def _outputs(
        self,
        model: Model,
        result: Any,
        wanted: list[str],
        request: InferRequest,
        batch: int,
        plan: _Plan | None = None,
    ) -> list[InferOutput]:
        plan = plan or _plan(model)
        defs = plan.outputs
        produced = self._produced(model, result, wanted, plan)
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
                    f"model {model.name!r} did not produce output {out_name!r}; it returned "
                    f"{', '.join(produced) or 'nothing'}",
                    model=model.name,
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
                arr = _coerce(model, out_name, value, spec)
            if (
                op is not None
                and spec is not None
                and not spec.inferred
                and not (op.plain and _output_shape_ok(arr.shape, op.expected, plan.mbs, batch))
            ):
                what = f"output {out_name!r} of model {model.name!r}"
                arr = self._check_output_shape(model, spec, arr, batch, what)
            k = class_counts.get(out_name, 0) if class_counts else 0
            if k:
                arr = self._classify(model, spec, arr, k)
                datatype = "BYTES"
            else:
                datatype = spec.datatype if spec is not None else _datatype(arr)
            if in_shm and out_name in in_shm:
                what = f"output {out_name!r} of model {model.name!r}"
                outputs.append(self._output_to_shm(out_name, datatype, arr, in_shm[out_name], what))
            else:
                outputs.append(InferOutput(out_name, datatype, list(arr.shape), arr))
        return outputs

    def _output_to_shm(
        self,
        name: str,
        datatype: str,
        arr: np.ndarray[Any, Any],
        params: Mapping[str, Any],
        what: str,
    ) -> InferOutput:
        """Write an output into its shared-memory region; the response keeps only metadata."""
        ref = shm_reference(params, what)
        assert ref is not None
        region, offset, byte_size = ref
        written = self.shm.write(
            region, offset=offset, byte_size=byte_size, arr=arr, datatype=datatype, what=what
        )
        echo: dict[str, Any] = {SHM_REGION: region, "shared_memory_byte_size": written}
        if offset:
            echo["shared_memory_offset"] = offset
        return InferOutput(name, datatype, list(arr.shape), None, echo)

    @staticmethod
    def _check_output_shape(
        model: Model, spec: TensorDef, arr: np.ndarray[Any, Any], batch: int, what: str
    ) -> np.ndarray[Any, Any]:
        mbs = model.max_batch_size
        expected = ([batch] if mbs > 0 else []) + list(spec.dims)
        if spec.reshape is not None and expected.count(-1) <= 1:
            try:
                return arr.reshape(expected)
            except ValueError as exc:
                raise InferenceError(
                    f"{what}: cannot reshape {_fmt(arr.shape)} to the declared {_fmt(expected)}",
                    model=model.name,
                ) from exc
        if not _shape_matches(list(arr.shape), expected):
            raise InferenceError(
                f"{what}: the model returned shape {_fmt(arr.shape)} but declares {_fmt(expected)}",
                model=model.name,
            )
        return arr

    @staticmethod
    def _classify(
        model: Model, spec: TensorDef | None, arr: np.ndarray[Any, Any], k: int
    ) -> np.ndarray[Any, Any]:
        from nbinfer.protocol.classification import encode_classification

        if arr.dtype.kind not in "fiub" and arr.dtype != numpy_dtype("BF16"):
            raise InvalidInputError(
                f"classification needs a numeric output; {spec.name if spec else '?'!r} of "
                f"model {model.name!r} is {arr.dtype}",
                model=model.name,
            )
        labels = spec.labels if spec is not None else None
        scores: np.ndarray[Any, Any]
        if model.max_batch_size > 0 or arr.ndim >= 2:
            scores = arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, -1)
        else:
            scores = arr.reshape(-1)
        k = min(k, scores.shape[-1])
        encoded: np.ndarray[Any, Any] = encode_classification(scores, k, labels)
        return encoded

    def _flags(self, mv: ModelVersion, model: Model) -> tuple[bool, bool, int]:
        """``(decoupled, stateful, idle_us)`` of a model version (cached on the model)."""
        flags: tuple[bool, bool, int] | None = model.__dict__.get("_nbinfer_flags")
        if flags is None:
            stateful = is_stateful(model, mv.config)
            decoupled = model.is_decoupled or bool(
                (mv.config.get("model_transaction_policy") or {}).get("decoupled")
            )
            flags = (decoupled, stateful, sequence_idle_us(model, mv.config))
            model.__dict__["_nbinfer_flags"] = flags
        return flags

    def is_decoupled(self, name: str, version: str = "") -> bool:
        """Whether a model gives 0..N responses per request (served only over the stream).

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not ready.
        """
        mv = self._resolve(name, version)
        assert mv.model is not None
        return self._flags(mv, mv.model)[0]

    def _context(
        self,
        mv: ModelVersion,
        model: Model,
        request: InferRequest,
        wanted: list[str],
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferContext:
        ctx = InferContext(
            model_name=model.name,
            model_version=mv.version,
            request_id=request.id,
            parameters=dict(request.parameters),
            input_parameters={i.name: dict(i.parameters) for i in request.inputs},
            requested_outputs=list(wanted),
        )
        if "sequence_id" in request.parameters:
            ctx.sequence_id, ctx.sequence_start, ctx.sequence_end = parse_sequence(
                request.parameters, model.name
            )
        if headers is not None:
            ctx.headers = headers
        if response_headers is not None:
            ctx.response_headers = response_headers
        return ctx

    async def _enter_sequence(
        self, mv: ModelVersion, ctx: InferContext, idle_us: int
    ) -> SequenceSlot:
        """Claim the request's sequence (in arrival order) and hand its state to the context."""
        slot = self.sequences.acquire(
            mv.name, mv.version, ctx.sequence_id, start=ctx.sequence_start, idle_us=idle_us
        )
        await slot.lock.acquire()
        ctx.state = slot.state
        return slot

    def _leave_sequence(self, slot: SequenceSlot, ctx: InferContext) -> None:
        slot.lock.release()
        self.sequences.release(slot, end=ctx.sequence_end)

    async def infer(
        self,
        request: InferRequest,
        *,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferResponse:
        """Run one inference request.

        ``headers`` (the request's) are visible to the model's hooks as ``context.headers``;
        headers they set in ``context.response_headers`` land in ``response_headers``.

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not ready.
            InvalidInputError: unknown / missing inputs or outputs, wrong datatype, shape or size;
                a decoupled model (use :meth:`infer_stream`); a stateful model without an active
                sequence; a shared-memory region that is unknown or too small.
            InferenceError: the model raised (its message is included) or returned bad outputs.
        """
        t0 = time.perf_counter_ns()
        mv = self._resolve(request.model_name, request.model_version)
        model = mv.model
        assert model is not None
        decoupled, stateful, idle_us = self._flags(mv, model)
        if decoupled:
            raise InvalidInputError(
                f"model {model.name!r} is decoupled (it sends 0..N responses per request); "
                "use the gRPC stream (ModelStreamInfer)",
                model=model.name,
            )
        mv.inflight += 1
        ctx: InferContext | None = None
        try:
            t = _Timings()
            scheduler: Scheduler | None = None
            try:
                timeout_us = _check_parameters(request) if request.parameters else 0
                plan = _plan(model)
                inputs, batch = self._check_inputs(model, request, plan)
                wanted = self._requested(model, request, plan)
                ctx = self._context(mv, model, request, wanted, headers, response_headers)
                t.input = time.perf_counter_ns() - t0
                if stateful:
                    slot = await self._enter_sequence(mv, ctx, idle_us)
                    try:
                        result = await self._execute(mv, inputs, ctx, t)
                    finally:
                        self._leave_sequence(slot, ctx)
                else:
                    scheduler = self._scheduler_for(mv)
                    if scheduler is None and not model.run_in_thread and not plan.any_async:
                        # declared cheap and synchronous: run inline, no thread hop
                        result = _run_sync_pipeline(
                            model, inputs, ctx, time.perf_counter_ns(), t, plan
                        )
                    elif scheduler is None and timeout_us:
                        result = await _deadline(self._execute(mv, inputs, ctx, t), timeout_us, ctx)
                    elif scheduler is None:
                        result = await self._execute(mv, inputs, ctx, t)
                    else:
                        result = await self._schedule(scheduler, request, inputs, batch, ctx, t)
                out_start = time.perf_counter_ns()
                outputs = self._outputs(model, result, wanted, request, batch, plan)
                t.output += time.perf_counter_ns() - out_start
            except NbinferError:
                mv.stats.record_failure(time.perf_counter_ns() - t0)
                raise
            except asyncio.CancelledError:
                # the client gave up (disconnect, gRPC cancel / deadline): not a success
                if ctx is not None:
                    ctx.cancelled = True
                mv.stats.record_failure(time.perf_counter_ns() - t0)
                raise
            except Exception as exc:
                raise _model_raised(mv, model, request, exc, t0) from exc
            total = time.perf_counter_ns() - t0
            if scheduler is None:
                mv.stats.record_success(
                    batch if model.max_batch_size > 0 else 1,
                    total,
                    t.queue,
                    t.input,
                    t.infer,
                    t.output,
                )
            else:  # the execution was counted by _run_batch
                mv.stats.record_request(
                    total_ns=total,
                    queue_ns=t.queue,
                    input_ns=t.input,
                    infer_ns=t.infer,
                    output_ns=t.output,
                )
        finally:
            mv.inflight -= 1
        return InferResponse(
            model_name=model.name,
            outputs=outputs,
            model_version=mv.version,
            id=request.id,
            parameters=dict(ctx.response_parameters),
        )

    async def infer_stream(
        self, request: InferRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[InferResponse]:
        """Run one request and yield its responses: one, or 0..N for a decoupled model.

        A decoupled model's ``predict`` is a generator / async generator (or returns a list)
        of results, each becoming a response as soon as it is produced.

        Raises:
            The errors of :meth:`infer` (also after some responses were yielded).
        """
        mv = self._resolve(request.model_name, request.model_version)
        model = mv.model
        assert model is not None
        decoupled, stateful, idle_us = self._flags(mv, model)
        if not decoupled:
            yield await self.infer(request, headers=headers)
            return
        t0 = time.perf_counter_ns()
        mv.inflight += 1
        t = _Timings()
        try:
            inputs, batch = self._check_inputs(model, request)
            wanted = self._requested(model, request)
            ctx = self._context(mv, model, request, wanted, headers)
            t.input = time.perf_counter_ns() - t0
            slot = await self._enter_sequence(mv, ctx, idle_us) if stateful else None
            try:
                async for item in self._iterate(model, inputs, ctx, t):
                    out_start = time.perf_counter_ns()
                    outputs = self._outputs(model, item, wanted, request, batch)
                    t.output += time.perf_counter_ns() - out_start
                    params = dict(ctx.response_parameters)
                    yield InferResponse(
                        model_name=model.name,
                        outputs=outputs,
                        model_version=mv.version,
                        id=request.id,
                        parameters=params,
                    )
            finally:
                if slot is not None:
                    self._leave_sequence(slot, ctx)
        except NbinferError:
            mv.stats.record_failure(time.perf_counter_ns() - t0)
            raise
        except Exception as exc:
            raise _model_raised(mv, model, request, exc, t0) from exc
        else:
            mv.stats.record_success(
                batch if model.max_batch_size > 0 else 1,
                time.perf_counter_ns() - t0,
                t.queue,
                t.input,
                t.infer,
                t.output,
            )
        finally:
            mv.inflight -= 1

    async def _hook(
        self, model: Model, hook: str, value: Any, ctx: InferContext, sync_in_thread: bool
    ) -> Any:
        fn = getattr(model, hook)
        args = (value, ctx) if model.hook_wants_context(hook) else (value,)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        if sync_in_thread and model.run_in_thread:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor_for(), fn, *args)
        return fn(*args)

    async def _iterate(
        self, model: Model, inputs: dict[str, Any], ctx: InferContext, t: _Timings
    ) -> AsyncIterator[Any]:
        """The results of a decoupled model's ``predict``, postprocessed one by one."""
        if model.overrides("preprocess"):
            start = time.perf_counter_ns()
            inputs = await self._hook(model, "preprocess", inputs, ctx, True)
            t.input += time.perf_counter_ns() - start
        fn = model.predict
        is_gen = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
        start = time.perf_counter_ns()
        # a generator function only builds its generator here: no need for a thread
        result = await self._hook(model, "predict", inputs, ctx, not is_gen)
        t.infer += time.perf_counter_ns() - start
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
        loop = asyncio.get_running_loop()
        while True:
            start = time.perf_counter_ns()
            if isinstance(items, AsyncIterator):
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    break
            elif inspect.isgenerator(items) and model.run_in_thread:
                item = await loop.run_in_executor(self._executor_for(), next, items, _DONE)
                if item is _DONE:
                    break
            else:
                item = next(items, _DONE)
                if item is _DONE:
                    break
            t.infer += time.perf_counter_ns() - start
            if post:
                item = await self._hook(model, "postprocess", item, ctx, True)
            yield item

    # -- repository --------------------------------------------------------------------------
    def repository_index(self, *, ready_only: bool = False) -> list[RepositoryModel]:
        """Every model version with its state (READY / UNAVAILABLE / LOADING / UNLOADING)."""
        return self.repository.index(ready_only=ready_only)

    async def load_model(
        self,
        name: str,
        *,
        config: str | None = None,
        files: dict[str, bytes] | None = None,
    ) -> None:
        """Load or reload a model (see :meth:`ModelRepository.load`).

        Raises:
            ModelNotFoundError: nothing to load under that name.
            InvalidInputError: bad overrides, or the model failed to load (reason included).
        """
        await self.repository.load(name, config=config, files=files)
        self.sequences.drop_model(name)
        problem = self._check_scheduling(name)
        if problem:
            raise InvalidInputError(f"failed to load model {name!r}: {problem}", model=name)

    async def add_model(self, model: Model) -> None:
        """Register (or replace) an in-memory model and load it without blocking the loop.

        A model whose ``load()`` fails is recorded as UNAVAILABLE with the reason.

        Raises:
            InvalidInputError: the model has no name or invalid declarations.
        """
        await self.repository.add_async(model)
        self.sequences.drop_model(model.name)
        self._check_scheduling()

    async def unload_model(self, name: str) -> None:
        """Unload a model after its in-flight requests finish; others keep serving.

        Raises:
            ModelNotFoundError: unknown model.
        """
        await self.repository.unload(name)
        self._purge_schedulers()
        self.sequences.drop_model(name)

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """Triton-schema statistics ``{"model_stats": [...]}`` (all ready models when no name).

        Raises:
            ModelNotFoundError: unknown model / version.
        """
        if not name:
            rows = self.repository.ready_versions()
        elif version:
            rows = [self.repository.resolve(name, version)]
        else:
            rows = [v for v in self.repository.versions(name) if v.state == READY]
        return {"model_stats": [v.stats.to_json(v.name, v.version) for v in rows]}

    # -- shared memory -----------------------------------------------------------------------
    def shm_status(self, kind: str, name: str = "") -> list[dict[str, Any]]:
        """Registered ``"system"`` / ``"cuda"`` shared-memory regions (all, or ``name``).

        Raises:
            InvalidInputError: ``name`` is not registered.
        """
        return self.shm.status(name) if kind == "system" else self.shm.cuda_status(name)

    def shm_register(self, kind: str, name: str, body: Mapping[str, Any]) -> None:
        """Register a region: system ``{key, offset, byte_size}``; CUDA ``{raw_handle, ...}``.

        Raises:
            InvalidInputError: malformed body, unknown key, window out of bounds, name taken;
                CUDA without a CUDA device.
        """

        def number(field: str, default: int | None = None) -> int:
            value = body.get(field, default)
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise InvalidInputError(
                    f"shared memory region {name!r}: {field!r} must be an integer, got {value!r}"
                )
            try:
                return int(value)
            except ValueError as exc:
                raise InvalidInputError(
                    f"shared memory region {name!r}: {field!r} must be an integer, got {value!r}"
                ) from exc

        if kind == "system":
            key = body.get("key")
            if not isinstance(key, str) or not key:
                raise InvalidInputError(
                    f"shared memory region {name!r}: 'key' must be a non-empty string"
                )
            self.shm.register(name, key, offset=number("offset", 0), byte_size=number("byte_size"))
            return
        raw = body.get("raw_handle")
        handle = raw if isinstance(raw, bytes) else b""
        self.shm.cuda_register(name, handle, number("device_id", 0), number("byte_size", 0))

    def shm_unregister(self, kind: str, name: str = "") -> None:
        """Unregister a region (all regions of that kind when ``name`` is empty)."""
        if kind == "system":
            self.shm.unregister(name)
        else:
            self.shm.cuda_unregister(name)

    # -- KServe v1 ---------------------------------------------------------------------------
    async def v1_model(self, name: str) -> dict[str, Any]:
        """KServe v1 model status ``{"name", "ready"}``.

        Raises:
            ModelNotFoundError: unknown model.
        """
        return {"name": name, "ready": self.model_ready(name)}

    def _v1_request(self, model: Model, payload: Any) -> InferRequest:
        if isinstance(payload, Mapping):
            if "instances" in payload:
                instances = payload["instances"]
            elif "inputs" in payload:
                instances = payload["inputs"]
            else:
                raise InvalidInputError(
                    "KServe v1 request needs an 'instances' list; got keys: "
                    + ", ".join(map(str, payload))
                )
        else:
            instances = payload
        defs = model.input_defs()
        if not defs:
            raise InvalidInputError(f"model {model.name!r} declares no inputs")
        spec = defs[0]
        try:
            if spec.datatype == "BYTES":
                arr = to_bytes_array(np.asarray(instances, dtype=object))
            else:
                arr = np.asarray(instances, dtype=numpy_dtype(spec.datatype))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"KServe v1 instances for input {spec.name!r} of model {model.name!r} are not "
                f"a rectangular {spec.datatype} array: {exc}"
            ) from exc
        return InferRequest(
            inputs=[InferInput(spec.name, spec.datatype, list(arr.shape), arr)],
            model_name=model.name,
        )

    async def v1_predict(
        self,
        name: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """KServe v1 predict: ``{"instances": [...]}`` -> ``{"predictions": [...]}``.

        The instances feed the model's first input; the predictions are its first output.

        Raises:
            ModelNotFoundError: unknown model.
            InvalidInputError: malformed instances.
            InferenceError: the model raised.
        """
        model = self._resolve(name, "").model
        assert model is not None
        request = self._v1_request(model, payload)
        response = await self.infer(request, headers=headers, response_headers=response_headers)
        if not response.outputs:
            return {"predictions": []}
        return {"predictions": _jsonable(response.outputs[0].data)}

    async def v1_explain(
        self,
        name: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> Any:
        """KServe v1 explain (only for models implementing ``explain()``).

        Raises:
            ModelNotFoundError: unknown model, or it has no explainer.
            InvalidInputError: malformed instances.
            InferenceError: ``explain()`` raised.
        """
        mv = self._resolve(name, "")
        model = mv.model
        assert model is not None
        if not model.implements_explain:
            raise ModelNotFoundError(
                f"model {name!r} has no explainer (it does not implement explain())", model=name
            )
        request = self._v1_request(model, payload)
        inputs, _ = self._check_inputs(model, request)
        ctx = InferContext(model_name=name, model_version=mv.version)
        if headers is not None:
            ctx.headers = headers
        if response_headers is not None:
            ctx.response_headers = response_headers
        fn = model.explain
        args = (inputs, ctx) if model.hook_wants_context("explain") else (inputs,)
        mv.inflight += 1
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(*args)
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor_for(), fn, *args)
        except NbinferError:
            raise
        except Exception as exc:
            raise InferenceError(
                f"explain() of model {name!r} failed: {type(exc).__name__}: {exc}", model=name
            ) from exc
        finally:
            mv.inflight -= 1
        if isinstance(result, Mapping):
            return {str(k): _jsonable(v) for k, v in result.items()}
        return {"explanations": _jsonable(result)}

    async def close(self) -> None:
        """Unload every model and stop the worker threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self.sequences.close()
        self.shm.close()
        loop = asyncio.get_running_loop()
        schedulers = list(self._schedulers.values())
        self._schedulers.clear()
        for scheduler in schedulers:
            if scheduler.loop is loop:
                await scheduler.close("is stopping: the server is shutting down")
            else:
                scheduler.discard()
        await loop.run_in_executor(None, self.repository.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


async def _deadline(work: Any, timeout_us: int, ctx: InferContext) -> Any:
    """Await ``work`` for at most ``timeout_us`` µs (the request's ``timeout`` parameter)."""
    try:
        return await asyncio.wait_for(work, timeout_us / 1e6)
    except asyncio.TimeoutError as exc:
        ctx.cancelled = True
        raise ServerUnavailableError(
            f"request to model {ctx.model_name!r} timed out after {timeout_us} µs (timeout "
            "parameter); it was cancelled",
            model=ctx.model_name,
        ) from exc


def _check_parameters(request: InferRequest) -> int:
    """Validate the request parameters the server reads; returns ``timeout`` (µs, 0: none).

    Raises:
        InvalidInputError: a malformed ``priority``, ``timeout``, ``binary_data_output`` or
            ``triton_enable_empty_final_response`` (the message names it).
    """
    params = request.parameters
    if "priority" in params:
        _uint_param(request, "priority")
    for key in ("binary_data_output", EMPTY_FINAL):
        value = params.get(key)
        if (
            value is not None
            and not isinstance(value, bool)
            and not (isinstance(value, str) and value.lower() in ("true", "false"))
        ):
            raise InvalidInputError(
                f"request parameter {key!r} must be a boolean, got {value!r}",
                model=request.model_name,
            )
    return _uint_param(request, "timeout") if "timeout" in params else 0


def _uint_param(request: InferRequest, key: str) -> int:
    """A non-negative integer request parameter (``priority``, ``timeout``); 0 when absent."""
    value = request.parameters.get(key)
    if value is None or value == "":
        return 0
    try:
        number = int(value)
        ok = number >= 0 and not isinstance(value, bool) and number == float(value)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InvalidInputError(
            f"request parameter {key!r} must be a non-negative integer, got {value!r}",
            model=request.model_name,
        )
    return number


#: Request parameters that do not keep requests from sharing a dynamic batch.
_NOT_MODEL_PARAMETERS = frozenset(
    {"priority", "timeout", "binary_data_output", "triton_enable_empty_final_response"}
)


def _params_key(parameters: Mapping[str, Any]) -> Hashable:
    """The custom request parameters (which the model may read): equal keys may share a batch."""
    if not parameters:
        return None
    items = []
    for k, v in parameters.items():
        if k not in _NOT_MODEL_PARAMETERS:
            items.append((k, v if isinstance(v, str | int | float | bool | None) else repr(v)))
    return tuple(sorted(items)) or None


def _batch_context(model: Model, items: list[PendingRequest]) -> InferContext:
    """The context of a merged execution: the shared parameters, all wanted outputs."""
    first: InferContext = items[0].context
    wanted: set[str] = set()
    for item in items:
        wanted.update(item.context.requested_outputs)
    order = [d.name for d in model.output_defs()]
    return InferContext(
        model_name=first.model_name,
        model_version=first.model_version,
        request_id="",
        parameters=dict(first.parameters),
        input_parameters=first.input_parameters,
        requested_outputs=[n for n in order if n in wanted] or sorted(wanted),
        headers=first.headers,
    )


def _datatype(arr: np.ndarray[Any, Any]) -> str:
    from nbinfer.protocol.dtypes import datatype_of

    return datatype_of(arr.dtype)


def _jsonable(value: Any) -> Any:
    """Numpy -> JSON-ready Python (BYTES decoded as UTF-8 when possible)."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [_jsonable(v) for v in value.tolist()]
        if value.dtype.kind == "V" or value.dtype == numpy_dtype("BF16"):
            return value.astype(np.float32).tolist()
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, np.generic):
        return value.item()
    return value
