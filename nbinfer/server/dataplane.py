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
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from nbinfer.errors import (
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
    RepositoryModel,
    ServerMetadata,
)
from nbinfer.server.model import InferContext, Model, TensorDef, coerce_output, to_bytes_array
from nbinfer.server.repository import READY, ModelRepository, ModelVersion

__all__ = ["DEFAULT_EXTENSIONS", "DataPlane"]

logger = logging.getLogger("nbinfer")

#: Protocol extensions the embedded server implements (the frontends do binary_tensor_data).
DEFAULT_EXTENSIONS: tuple[str, ...] = (
    "binary_tensor_data",
    "classification",
    "model_configuration",
    "model_repository",
    "parameters",
    "statistics",
)


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


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


class _Timings:
    __slots__ = ("infer", "input", "output", "queue")

    def __init__(self) -> None:
        self.queue = 0
        self.input = 0
        self.infer = 0
        self.output = 0


def _call(model: Model, hook: str, value: Any, ctx: InferContext) -> Any:
    fn = getattr(model, hook)
    return fn(value, ctx) if model.hook_wants_context(hook) else fn(value)


def _run_sync_pipeline(
    model: Model, inputs: dict[str, Any], ctx: InferContext, submitted: int, t: _Timings
) -> Any:
    start = time.perf_counter_ns()
    t.queue = start - submitted
    if model.overrides("preprocess"):
        inputs = _call(model, "preprocess", inputs, ctx)
    mid = time.perf_counter_ns()
    t.input += mid - start
    result = _call(model, "predict", inputs, ctx)
    end = time.perf_counter_ns()
    t.infer = end - mid
    if model.overrides("postprocess"):
        result = _call(model, "postprocess", result, ctx)
    t.output += time.perf_counter_ns() - end
    return result


class DataPlane:
    """Transport-neutral server core over a :class:`ModelRepository`.

    Args:
        repository: The models to serve.
        server_name: Name reported by server metadata.
        extensions: Protocol extensions to advertise (default :data:`DEFAULT_EXTENSIONS`).
        max_workers: Threads running synchronous model hooks.

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
    ) -> None:
        self.repository = repository
        self.server_name = server_name
        self.extensions = list(DEFAULT_EXTENSIONS if extensions is None else extensions)
        self._max_workers = max_workers
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

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
        return dict(mv.config)

    # -- inference ---------------------------------------------------------------------------
    def _executor_for(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="nbinfer-model"
            )
        return self._executor

    def _check_inputs(
        self, model: Model, request: InferRequest
    ) -> tuple[dict[str, np.ndarray[Any, Any]], int]:
        """Validate the request's inputs; returns arrays by name and the batch size."""
        name = model.name
        defs = {d.name: d for d in model.input_defs()}
        mbs = model.max_batch_size
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        batch: int | None = None
        for inp in request.inputs:
            spec = defs.get(inp.name)
            if spec is None:
                raise InvalidInputError(
                    f"model {name!r} has no input {inp.name!r}; inputs: {', '.join(defs)}",
                    model=name,
                    tensor=inp.name,
                )
            if inp.name in arrays:
                raise InvalidInputError(
                    f"input {inp.name!r} of model {name!r} given more than once", model=name
                )
            arrays[inp.name] = self._check_input(model, spec, inp)
            if mbs > 0:
                b = int(inp.shape[0])
                if batch is not None and b != batch:
                    raise InvalidInputError(
                        f"inputs of model {name!r} disagree on the batch size: input "
                        f"{inp.name!r} has {b}, another input has {batch}",
                        model=name,
                    )
                batch = b
        missing = [d.name for d in defs.values() if not d.optional and d.name not in arrays]
        if missing:
            raise InvalidInputError(
                f"model {name!r} expects input(s) {', '.join(repr(m) for m in missing)} "
                f"(missing); got: {', '.join(arrays) or 'none'}",
                model=name,
            )
        return arrays, (batch if batch is not None else 1)

    def _check_input(self, model: Model, spec: TensorDef, inp: InferInput) -> np.ndarray[Any, Any]:
        name = model.name
        if inp.datatype != spec.datatype:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: datatype {inp.datatype} does not match "
                f"the expected {spec.datatype}",
                model=name,
                tensor=inp.name,
            )
        shape = [int(d) for d in inp.shape]
        mbs = model.max_batch_size
        expected = ([-1] if mbs > 0 else []) + list(spec.dims)
        if not _shape_matches(shape, expected) or any(d < 0 for d in shape):
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: shape {_fmt(shape)} does not match the "
                f"expected {_fmt(expected)}",
                model=name,
                tensor=inp.name,
            )
        if mbs > 0 and not 1 <= shape[0] <= mbs:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r}: batch size {shape[0]} is outside "
                f"1..{mbs} (max_batch_size {mbs})",
                model=name,
                tensor=inp.name,
            )
        data = inp.data
        if data is None:
            raise InvalidInputError(
                f"input {inp.name!r} of model {name!r} has no data (shared memory is not "
                "supported by this server)",
                model=name,
                tensor=inp.name,
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
        if spec.datatype == "BYTES":
            if data.dtype != object:
                data = to_bytes_array(data)
        elif data.dtype != numpy_dtype(spec.datatype):
            data = data.astype(numpy_dtype(spec.datatype))
        if list(data.shape) != shape:
            data = data.reshape(shape)
        if spec.reshape is not None:
            target = ([shape[0]] if mbs > 0 else []) + list(spec.reshape)
            data = data.reshape(target)
        return data

    def _requested(self, model: Model, request: InferRequest) -> list[str]:
        outs = model.output_defs()
        known = [d.name for d in outs]
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

    async def _execute(
        self, mv: ModelVersion, inputs: dict[str, Any], ctx: InferContext, t: _Timings
    ) -> Any:
        """Run the hooks, at most ``model.max_concurrency`` requests at a time."""
        model = mv.model
        assert model is not None
        limit = model.max_concurrency
        if not limit:
            return await self._run_hooks(model, inputs, ctx, t, time.perf_counter_ns())
        if mv.semaphore is None:
            mv.semaphore = asyncio.Semaphore(limit)
        waited = time.perf_counter_ns()
        async with mv.semaphore:
            return await self._run_hooks(model, inputs, ctx, t, waited)

    async def _run_hooks(
        self, model: Model, inputs: dict[str, Any], ctx: InferContext, t: _Timings, queued: int
    ) -> Any:
        loop = asyncio.get_running_loop()
        hooks = ("preprocess", "predict", "postprocess")
        any_async: bool | None = model.__dict__.get("_nbinfer_any_async")
        if any_async is None:
            any_async = model.__dict__["_nbinfer_any_async"] = any(
                inspect.iscoroutinefunction(getattr(model, h)) for h in hooks if model.overrides(h)
            )
        if not any_async:
            if model.run_in_thread:
                return await loop.run_in_executor(
                    self._executor_for(), _run_sync_pipeline, model, inputs, ctx, queued, t
                )
            return _run_sync_pipeline(model, inputs, ctx, queued, t)
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
            elif model.run_in_thread:
                value = await loop.run_in_executor(self._executor_for(), fn, *args)
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

    def _outputs(
        self,
        model: Model,
        result: Any,
        wanted: list[str],
        request: InferRequest,
        batch: int,
    ) -> list[InferOutput]:
        defs = {d.name: d for d in model.output_defs()}
        order = list(defs)
        if isinstance(result, Mapping):
            produced: dict[str, Any] = dict(result)
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
        class_counts = {ro.name: ro.class_count for ro in request.outputs if ro.class_count > 0}
        outputs: list[InferOutput] = []
        for out_name in wanted or list(produced):
            if out_name not in produced:
                raise InferenceError(
                    f"model {model.name!r} did not produce output {out_name!r}; it returned "
                    f"{', '.join(produced) or 'nothing'}",
                    model=model.name,
                )
            spec = defs.get(out_name)
            what = f"output {out_name!r} of model {model.name!r}"
            try:
                arr = coerce_output(produced[out_name], spec.datatype if spec else None, what=what)
            except NbinferError as exc:
                raise InferenceError(str(exc), model=model.name) from exc
            except (TypeError, ValueError) as exc:
                raise InferenceError(f"{what}: {exc}", model=model.name) from exc
            if spec is not None and not spec.inferred:
                arr = self._check_output_shape(model, spec, arr, batch, what)
            k = class_counts.get(out_name, 0)
            if k:
                arr = self._classify(model, spec, arr, k)
                datatype = "BYTES"
            else:
                datatype = spec.datatype if spec is not None else _datatype(arr)
            outputs.append(InferOutput(out_name, datatype, list(arr.shape), arr))
        return outputs

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

    async def infer(self, request: InferRequest) -> InferResponse:
        """Run one inference request.

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not ready.
            InvalidInputError: unknown / missing inputs or outputs, wrong datatype, shape or size.
            InferenceError: the model raised (its message is included) or returned bad outputs.
        """
        t0 = time.perf_counter_ns()
        mv = self._resolve(request.model_name, request.model_version)
        model = mv.model
        assert model is not None
        mv.inflight += 1
        try:
            t = _Timings()
            try:
                inputs, batch = self._check_inputs(model, request)
                wanted = self._requested(model, request)
                ctx = InferContext(
                    model_name=model.name,
                    model_version=mv.version,
                    request_id=request.id,
                    parameters=dict(request.parameters),
                    input_parameters={i.name: dict(i.parameters) for i in request.inputs},
                    requested_outputs=list(wanted),
                )
                t.input = time.perf_counter_ns() - t0
                result = await self._execute(mv, inputs, ctx, t)
                out_start = time.perf_counter_ns()
                outputs = self._outputs(model, result, wanted, request, batch)
                t.output += time.perf_counter_ns() - out_start
            except NbinferError:
                mv.stats.record_failure(time.perf_counter_ns() - t0)
                raise
            except Exception as exc:
                mv.stats.record_failure(time.perf_counter_ns() - t0)
                logger.warning("model %r raised", model.name, exc_info=True)
                raise InferenceError(
                    f"model {model.name!r} failed: {type(exc).__name__}: {exc}",
                    model=model.name,
                    request_id=request.id or None,
                ) from exc
            total = time.perf_counter_ns() - t0
            mv.stats.record_success(
                batch_size=batch if model.max_batch_size > 0 else 1,
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

    async def add_model(self, model: Model) -> None:
        """Register (or replace) an in-memory model and load it without blocking the loop.

        A model whose ``load()`` fails is recorded as UNAVAILABLE with the reason.

        Raises:
            InvalidInputError: the model has no name or invalid declarations.
        """
        await self.repository.add_async(model)

    async def unload_model(self, name: str) -> None:
        """Unload a model after its in-flight requests finish; others keep serving.

        Raises:
            ModelNotFoundError: unknown model.
        """
        await self.repository.unload(name)

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

    async def v1_predict(self, name: str, payload: Any) -> dict[str, Any]:
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
        response = await self.infer(request)
        if not response.outputs:
            return {"predictions": []}
        return {"predictions": _jsonable(response.outputs[0].data)}

    async def v1_explain(self, name: str, payload: Any) -> Any:
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
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.repository.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


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
