"""The transport-neutral core of the embedded server: requests in, responses out.

The REST and gRPC frontends are thin adapters over :class:`DataPlane`: health, metadata,
inference, shared memory and the repository operations. An inference reads resolve -> check ->
run -> shape: :class:`~nbinfer.server.lifecycle.ServedModels` resolves the version (with its
:class:`~nbinfer.server.modelio.ModelIO`), ModelIO checks the inputs, the request runs inline
or through :class:`~nbinfer.server.execution.Execution` (on the model's threads, through the
version's scheduler or in its sequence), and ModelIO shapes the outputs. Model lifecycle lives
in ``lifecycle.py``, the run step in ``execution.py``, statistics in ``stats.py``, KServe v1 in
``kserve_v1.py``; errors are :mod:`nbinfer.errors` classes the frontends map onto statuses.

Imports protocol, errors and the server's core modules; never a frontend (rest, grpc, app).

Example::

    dp = DataPlane(ModelRepository(models=demo_models()))
    response = await dp.infer(InferRequest(model_name="add_sub", inputs=[...]))
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from typing import Any

from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.protocol.types import (
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RepositoryModel,
    ServerMetadata,
)
from nbinfer.server.batcher import Scheduler
from nbinfer.server.exception_handlers import ExceptionHandlers
from nbinfer.server.execution import Execution, Served, uint_param
from nbinfer.server.lifecycle import ServedModels
from nbinfer.server.model import InferContext, Model
from nbinfer.server.modelio import Timings, model_failed
from nbinfer.server.offload import DEFAULT_MAX_PARAMETERS, InflightBytes
from nbinfer.server.peers import IN_PROCESS, Caller, PeerIdentities, in_process
from nbinfer.server.repository import (
    READY,
    ModelRepository,
    is_latest_alias,
    unknown_version_error,
)
from nbinfer.server.sequence import (
    DEFAULT_MAX_SEQUENCE_ID_BYTES,
    DEFAULT_MAX_SEQUENCES,
    SequenceManager,
    parse_sequence,
)
from nbinfer.server.shm import MAX_SHM_REGIONS, MAX_SHM_REGIONS_PER_CALLER, SharedMemoryManager
from nbinfer.server.stats import statistics_json

__all__ = [
    "DEFAULT_EXTENSIONS",
    "EMPTY_FINAL",
    "FINAL_RESPONSE",
    "DataPlane",
    "check_parameter_count",
]

logger = logging.getLogger("nbinfer")

#: Protocol extensions the embedded server implements (the frontends do binary_tensor_data).
DEFAULT_EXTENSIONS: tuple[str, ...] = (
    "binary_tensor_data",
    "classification",
    "generate",
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


@functools.cache
def _server_version() -> str:
    """The installed nbinfer's version, looked up once.

    The lookup scans ``sys.path`` (~1 ms, once per server metadata request before), and
    importlib.metadata takes ~13 ms to import: neither belongs on the server's start.
    """
    import importlib.metadata

    try:
        return importlib.metadata.version("nbinfer")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "0.0.0"


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
        max_workers: Size of the shared pool (decoupled models, ``explain``); a quarter of it
            is the default of ``model_workers`` (``max(16, 4 * CPUs)`` threads).
        model_workers: Requests one model without a scheduler may run on threads at once
            (its own threads: a slow model cannot starve the others).
        max_abandoned: Threads of given-up requests one such model may leave finishing in the
            background while their slots serve new requests (default 16; 0: a given-up
            request keeps its slot until its thread returns). See ``workers.py``.
        max_inflight_bytes: Request bytes all connections (HTTP and gRPC) may hold at once;
            beyond, a request is refused with ``QueueFullError`` (0: unbounded). See
            ``offload.py``.
        max_parameters: Most parameters one inference request may carry (its own plus its
            inputs' and outputs'); more are an ``InvalidInputError`` (0: unbounded).
        max_sequences: Most open sequences of stateful models; a new one beyond is refused
            with ``QueueFullError`` (0: unbounded). See ``sequence.py``.
        max_sequence_id_bytes: Longest string ``sequence_id`` (UTF-8 bytes).
        max_shm_regions: Shared-memory regions registered at once, all callers together
            (default :data:`~nbinfer.server.shm.MAX_SHM_REGIONS`).
        max_shm_regions_per_caller: Regions one caller identity may hold (default
            :data:`~nbinfer.server.shm.MAX_SHM_REGIONS_PER_CALLER`).
        allow_remote_shm: Let callers whose uid the server cannot establish register shared
            memory (off: refused; see ``shm.py``).

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
        max_abandoned: int | None = None,
        max_inflight_bytes: int = 0,
        max_parameters: int = DEFAULT_MAX_PARAMETERS,
        max_sequences: int = DEFAULT_MAX_SEQUENCES,
        max_sequence_id_bytes: int = DEFAULT_MAX_SEQUENCE_ID_BYTES,
        max_shm_regions: int = MAX_SHM_REGIONS,
        max_shm_regions_per_caller: int = MAX_SHM_REGIONS_PER_CALLER,
        allow_remote_shm: bool = False,
    ) -> None:
        self.repository = repository
        self.server_name = server_name
        self.extensions = list(DEFAULT_EXTENSIONS if extensions is None else extensions)
        self._max_workers = max_workers or max(16, 4 * (os.cpu_count() or 1))
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        #: Registered shared-memory regions (system + CUDA extensions).
        self.shm = SharedMemoryManager(
            max_regions=max_shm_regions,
            max_regions_per_caller=max_shm_regions_per_caller,
            allow_remote=allow_remote_shm,
        )
        #: Owner identities of the connections that register or name regions (see peers.py).
        self.peers = PeerIdentities()
        #: Active sequences of stateful models (sequence extension).
        self.sequences = SequenceManager(
            max_sequences=max_sequences, max_id_bytes=max_sequence_id_bytes
        )
        #: Request bytes held by all connections at once (``--max-inflight-bytes``).
        self.inflight = InflightBytes(max_inflight_bytes)
        #: Most parameters of one inference request (``--max-parameters``; 0: unbounded).
        self.max_parameters = max(0, max_parameters)
        #: How checked requests run: sequences, schedulers, the models' own threads.
        self.execution = Execution(
            self.sequences,
            model_workers=model_workers or self._max_workers // 4,
            max_abandoned=16 if max_abandoned is None else max_abandoned,
        )
        #: The loaded versions with their I/O, flags and schedulers (model lifecycle).
        self.models = ServedModels(repository, self.shm, self.sequences, self.execution)
        #: Custom exception handlers for what models raise (``LocalServer(exception_handlers=)``).
        self.exception_handlers: ExceptionHandlers | None = None

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
        if version and not is_latest_alias(version, [v.version for v in versions]):
            match = [v for v in versions if v.version == str(version)]
            if not match:
                raise unknown_version_error(name, version, [v.version for v in versions])
            return match[0].state == READY
        return any(v.state == READY for v in versions)

    def server_metadata(self) -> ServerMetadata:
        """Server name, version and the extensions it implements."""
        return ServerMetadata(self.server_name, _server_version(), list(self.extensions))

    def model_metadata(self, name: str, version: str = "") -> ModelMetadata:
        """Model metadata: versions, platform, input/output specs and parameters (device ...).

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not loaded (the reason is in the message).
        """
        model = self.models.get(name, version).model
        mbs = model.max_batch_size
        versions = [v.version for v in self.repository.versions(name) if v.state == READY]
        return ModelMetadata(
            name=name,
            versions=versions,
            # as Triton: the config's platform, else its backend (a Python model: "python")
            platform=model.platform or str(getattr(model, "backend", "") or ""),
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
        return self.models.config(name, version)

    def is_decoupled(self, name: str, version: str = "") -> bool:
        """Whether a model gives 0..N responses per request (served only over the stream).

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not ready.
        """
        return self.models.get(name, version).decoupled

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """Triton-schema statistics ``{"model_stats": [...]}`` (all ready models when no name).

        Raises:
            ModelNotFoundError: unknown model / version.
        """
        return statistics_json(self.models.counted(name, version))

    # -- worker threads ----------------------------------------------------------------------
    def _executor_for(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="nbinfer-model"
            )
        return self._executor

    async def offload(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the shared thread pool (no per-model limit)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor_for(), fn, *args)

    # -- inference ---------------------------------------------------------------------------
    async def infer(
        self,
        request: InferRequest,
        *,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
        caller: Caller = in_process,
    ) -> InferResponse:
        """Run one inference request: resolve -> check -> run -> shape.

        ``headers`` (the request's) are visible to the model's hooks as ``context.headers``;
        headers they set in ``context.response_headers`` land in ``response_headers``.
        ``caller`` names the sender; it is asked only when a tensor names a shared-memory
        region, and only its own regions are used.

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not ready.
            InvalidInputError: unknown / missing inputs or outputs, wrong datatype, shape or size;
                a decoupled model (use :meth:`infer_stream`); a stateful model without an active
                sequence; a shared-memory region that is unknown or too small.
            InferenceError: the model raised (its message is included) or returned bad outputs.
        """
        t0 = time.perf_counter_ns()
        if self.max_parameters:
            check_parameter_count(
                _parameter_count(request), self.max_parameters, request.model_name
            )
        served = self.models.get(request.model_name, request.model_version)
        if served.decoupled:
            raise InvalidInputError(
                f"model {served.model.name!r} is decoupled (it sends 0..N responses per "
                "request); use the gRPC stream (ModelStreamInfer)",
                model=served.model.name,
            )
        mv, io = served.version, served.io
        mv.inflight += 1
        ctx: InferContext | None = None
        try:
            t = Timings()
            scheduler: Scheduler | None = None
            try:
                if request.parameters:
                    _check_parameters(request)
                inputs, batch = io.check_inputs(request, caller)
                wanted = io.requested(request)
                ctx = self._context(served, request, wanted, headers, response_headers)
                if request.outputs:  # outputs the model may compute straight into shm
                    ctx.output_buffers = io.output_buffers(request, caller)
                t.input = time.perf_counter_ns() - t0
                if not served.stateful or served.batches_sequences:
                    scheduler = self.models.scheduler_for(served)
                if scheduler is None and served.inline:
                    # declared cheap and synchronous: run inline, no thread hop
                    result = io.run_sync(inputs, ctx, t, time.perf_counter_ns())
                else:
                    result = await self.execution.run(
                        served, scheduler, request, inputs, batch, ctx, t
                    )
                out_start = time.perf_counter_ns()
                outputs = io.outputs(result, wanted, request, batch, caller)
                t.output += time.perf_counter_ns() - out_start
            except NbinferError:
                if ctx is not None and ctx.cancelled:  # its timeout passed: given up
                    mv.stats.record_cancel(time.perf_counter_ns() - t0)
                else:
                    mv.stats.record_failure(time.perf_counter_ns() - t0)
                raise
            except asyncio.CancelledError:
                # the client gave up (disconnect, gRPC cancel / deadline): cancelled, not a
                # success nor a failure
                if ctx is not None:
                    ctx.cancelled = True
                mv.stats.record_cancel(time.perf_counter_ns() - t0)
                raise
            except Exception as exc:
                raise self._model_raised(served, request, exc, t0) from exc
            # a scheduled request's execution was counted by Execution.run_batch
            _count_success(served, batch, time.perf_counter_ns() - t0, t, scheduler is None)
        finally:
            mv.inflight -= 1
        return _response(served, request, ctx, outputs)

    async def infer_stream(
        self,
        request: InferRequest,
        *,
        headers: Mapping[str, str] | None = None,
        caller: Caller = in_process,
    ) -> AsyncIterator[InferResponse]:
        """Run one request and yield its responses: one, or 0..N for a decoupled model.

        A decoupled model's ``predict`` is a generator / async generator (or returns a list)
        of results, each becoming a response as soon as it is produced.

        Raises:
            The errors of :meth:`infer` (also after some responses were yielded).
        """
        if self.max_parameters:
            check_parameter_count(
                _parameter_count(request), self.max_parameters, request.model_name
            )
        served = self.models.get(request.model_name, request.model_version)
        if not served.decoupled:
            yield await self.infer(request, headers=headers, caller=caller)
            return
        mv, io = served.version, served.io
        t0 = time.perf_counter_ns()
        mv.inflight += 1
        t = Timings()
        ctx: InferContext | None = None
        try:
            if request.parameters:
                _check_parameters(request)  # as infer does: a malformed priority / timeout
            timeout_us = uint_param(request, "timeout") if request.parameters else 0
            inputs, batch = io.check_inputs(request, caller)
            wanted = io.requested(request)
            ctx = self._context(served, request, wanted, headers)
            t.input = time.perf_counter_ns() - t0
            results = self.execution.stream(served, inputs, ctx, t, self.offload, timeout_us)
            async with aclosing(results):  # a stream left early leaves its sequence at once
                async for item in results:
                    out_start = time.perf_counter_ns()
                    outputs = io.outputs(item, wanted, request, batch, caller)
                    t.output += time.perf_counter_ns() - out_start
                    yield _response(served, request, ctx, outputs)
        except NbinferError:
            if ctx is not None and ctx.cancelled:  # its timeout passed: given up
                mv.stats.record_cancel(time.perf_counter_ns() - t0)
            else:
                mv.stats.record_failure(time.perf_counter_ns() - t0)
            raise
        except (asyncio.CancelledError, GeneratorExit):  # the client left the stream
            if ctx is not None:
                ctx.cancelled = True  # the model's generator / is_cancelled() sees it
            mv.stats.record_cancel(time.perf_counter_ns() - t0)
            raise
        except Exception as exc:
            raise self._model_raised(served, request, exc, t0) from exc
        else:
            _count_success(served, batch, time.perf_counter_ns() - t0, t, True)
        finally:
            mv.inflight -= 1

    def _model_raised(
        self, served: Served, request: InferRequest, exc: Exception, t0: int
    ) -> NbinferError:
        """Count a failed request whose model raised; return the error to raise ``from exc``."""
        served.version.stats.record_failure(time.perf_counter_ns() - t0)
        handlers = self.exception_handlers
        if handlers:
            mapped = handlers.map(exc, model=served.model.name, request_id=request.id)
            if mapped is not None:
                return mapped
        logger.warning("model %r raised", served.model.name, exc_info=True)
        return model_failed(served.model, request.id, exc)

    def _context(
        self,
        served: Served,
        request: InferRequest,
        wanted: list[str],
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferContext:
        model = served.model
        ctx = InferContext(
            model_name=model.name,
            model_version=served.version.version,
            request_id=request.id,
            parameters=dict(request.parameters),
            input_parameters={i.name: dict(i.parameters) for i in request.inputs},
            requested_outputs=list(wanted),
        )
        if "sequence_id" in request.parameters:
            ctx.sequence_id, ctx.sequence_start, ctx.sequence_end = parse_sequence(
                request.parameters, model.name, max_id_bytes=self.sequences.max_id_bytes
            )
        if headers is not None:
            ctx.headers = headers
        if response_headers is not None:
            ctx.response_headers = response_headers
        return ctx

    # -- repository (see lifecycle.py) -------------------------------------------------------
    def repository_index(self, *, ready_only: bool = False) -> list[RepositoryModel]:
        """Every model version with its state (READY / UNAVAILABLE / LOADING / UNLOADING)."""
        return self.models.index(ready_only=ready_only)

    async def load_model(
        self,
        name: str,
        *,
        config: str | None = None,
        files: dict[str, bytes] | None = None,
        remote: bool = False,
    ) -> None:
        """Load or reload a model (see :meth:`ServedModels.load`).

        ``remote``: the request came over the network (HTTP / gRPC), so the repository's
        model control applies; in-process and control-channel callers are the operator.

        Raises:
            ModelNotFoundError: nothing to load under that name.
            InvalidInputError: bad overrides (config, file paths).
            PermissionDeniedError: (remote) refused by the model control mode / replace rule.
            PayloadTooLargeError: (remote) more uploaded files or bytes than allowed.
            LimitExceededError: (remote) one model more than ``--max-models``.
            ModelLoadError: the model failed to load (its own error text included).
        """
        await self.models.load(name, config=config, files=files, remote=remote)

    async def add_model(self, model: Model) -> None:
        """Register (or replace) an in-memory model and load it (see :meth:`ServedModels.add`).

        Raises:
            InvalidInputError: the model has no name or invalid declarations.
        """
        await self.models.add(model)

    async def unload_model(self, name: str, *, remote: bool = False) -> None:
        """Unload a model after its in-flight requests finish; others keep serving.

        Raises:
            ModelNotFoundError: unknown model.
            PermissionDeniedError: (remote) refused by the model control mode, or an
                in-memory model without ``--allow-model-replace``.
        """
        await self.models.unload(name, remote=remote)

    # -- shared memory -----------------------------------------------------------------------
    def shm_status(
        self, kind: str, name: str = "", *, owner: str = IN_PROCESS
    ) -> list[dict[str, Any]]:
        """``owner``'s registered ``"system"`` / ``"cuda"`` regions (all, or ``name``).

        Raises:
            InvalidInputError: ``name`` is not registered (by ``owner``).
        """
        if kind == "system":
            return self.shm.status(name, owner=owner)
        return self.shm.cuda_status(name)

    def shm_register(
        self, kind: str, name: str, body: Mapping[str, Any], *, owner: str = IN_PROCESS
    ) -> None:
        """Register a region: system ``{key, offset, byte_size}``; CUDA ``{raw_handle, ...}``.

        The region belongs to ``owner`` (a :class:`PeerIdentities` answer): only requests
        from the same identity can use it.

        Raises:
            InvalidInputError: malformed body, unknown key, an object the caller does not
                own (or a caller of unknown uid), window out of bounds, name taken; CUDA
                without a CUDA device.
            LimitExceededError: the caller or the server holds as many regions as allowed.
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
            self.shm.register(
                name, key, offset=number("offset", 0), byte_size=number("byte_size"), owner=owner
            )
            return
        raw = body.get("raw_handle")
        handle = raw if isinstance(raw, bytes) else b""
        self.shm.cuda_register(name, handle, number("device_id", 0), number("byte_size", 0))

    def shm_unregister(self, kind: str, name: str = "", *, owner: str = IN_PROCESS) -> None:
        """Unregister ``owner``'s region (all of its regions of ``kind`` when ``name`` is "")."""
        if kind == "system":
            self.shm.unregister(name, owner=owner)
        else:
            self.shm.cuda_unregister(name)

    async def close(self) -> None:
        """Unload every model and stop the worker threads. Idempotent."""
        if self._closed:
            return
        self._closed = self.models.closed = True
        await self.sequences.close()
        self.shm.close()
        self.peers.close()
        await self.models.close_schedulers()
        self.models.shutdown_workers()
        await asyncio.get_running_loop().run_in_executor(None, self.repository.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def _response(
    served: Served, request: InferRequest, ctx: InferContext, outputs: list[InferOutput]
) -> InferResponse:
    """The response to ``request``: its id, the served version and what the model set on ``ctx``."""
    return InferResponse(
        model_name=served.model.name,
        outputs=outputs,
        model_version=served.version.version,
        id=request.id,
        parameters=dict(ctx.response_parameters),
    )


def _count_success(served: Served, batch: int, total: int, t: Timings, executed: bool) -> None:
    """Count a successful request, and its execution unless a scheduler counted that."""
    stats = served.version.stats
    if executed:
        size = batch if served.model.max_batch_size > 0 else 1
        stats.record_success(size, total, t.queue, t.input, t.infer, t.output)
    else:
        stats.record_request(
            total_ns=total, queue_ns=t.queue, input_ns=t.input, infer_ns=t.infer, output_ns=t.output
        )


def check_parameter_count(count: int, limit: int, model: str) -> None:
    """Refuse a request carrying ``count`` parameters when that is more than ``limit`` (0: any).

    Raises:
        InvalidInputError: too many parameters (the message names ``--max-parameters``).
    """
    if limit and count > limit:
        raise InvalidInputError(
            f"the request to model {model!r} carries {count} parameters, more than the "
            f"server's limit of {limit} (--max-parameters)",
            model=model,
        )


def _parameter_count(request: InferRequest) -> int:
    """The parameters of a request: its own, its inputs' and its requested outputs'."""
    count = len(request.parameters)
    for tensor in request.inputs:
        count += len(tensor.parameters)
    for out in request.outputs:
        count += len(out.parameters)
    return count


def _check_parameters(request: InferRequest) -> None:
    """Validate the request parameters the server reads (before the model sees any).

    Raises:
        InvalidInputError: a malformed ``priority``, ``timeout``, ``binary_data_output`` or
            ``triton_enable_empty_final_response`` (the message names it).
    """
    params = request.parameters
    if "priority" in params:
        uint_param(request, "priority")
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
    if "timeout" in params:
        uint_param(request, "timeout")
