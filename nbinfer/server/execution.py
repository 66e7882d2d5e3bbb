"""The run step of an inference: how a checked request executes, and what one version needs.

The dataplane resolves a request (:class:`~nbinfer.server.lifecycle.ServedModels`), checks its
inputs (:class:`~nbinfer.server.modelio.ModelIO`) and hands it to :class:`Execution`, which runs
it in its sequence (stateful models: the sequence's slot, control tensors and implicit state),
through the version's :class:`~nbinfer.server.batcher.Scheduler` (dynamic batching, instances,
queue policies: :meth:`Execution.run_batch` is the scheduler's execution), or right away on the
model's own threads (:class:`~nbinfer.server.workers.ModelWorkers`), within the request's
``timeout`` parameter. A decoupled model's responses come from :meth:`Execution.stream`.

:class:`Served` is one loaded version and what running it needs (built by lifecycle).

Imports batcher, model, modelio, repository, sequence, sequence_controls and workers; never
lifecycle, the dataplane or a frontend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from nbinfer.errors import InvalidInputError, ServerUnavailableError
from nbinfer.protocol.types import InferRequest
from nbinfer.server.batcher import PendingRequest, Scheduler, concat_inputs, split_rows
from nbinfer.server.model import InferContext, Model
from nbinfer.server.modelio import ModelIO, Offload, Timings
from nbinfer.server.repository import ModelVersion
from nbinfer.server.sequence import SequenceManager, SequenceSlot
from nbinfer.server.sequence_controls import SequenceControls
from nbinfer.server.workers import ModelWorkers, when_done

__all__ = ["Execution", "Served", "uint_param"]


@dataclass(slots=True, eq=False)
class Served:
    """One loaded model version and what serving it needs (built once per version)."""

    version: ModelVersion
    model: Model
    io: ModelIO
    #: 0..N responses per request (served over the gRPC stream only).
    decoupled: bool
    #: Requests carry a sequence whose state the model keeps.
    stateful: bool
    #: A stateful model's idle timeout for its sequences (µs).
    idle_us: int
    #: Declared cheap (``run_in_thread = False``), all hooks synchronous and no sequence to
    #: join: runs on the loop unless a scheduler takes it.
    inline: bool
    #: The model's own threads when it has no scheduler (made by :class:`Execution` when needed).
    workers: ModelWorkers | None = None
    #: A stateful model whose sequences share executions (Triton's ``direct`` / ``oldest``
    #: sequence batching: ``max_batch_size > 0`` and control tensors or implicit state in
    #: its config, so the model reads each row's sequence from its inputs): its requests go
    #: through its scheduler, one row per sequence in an execution.
    batches_sequences: bool = False


class Execution:
    """Runs checked requests: in their sequence, through a scheduler, or on the model's threads.

    Args:
        sequences: Active sequences of stateful models.
        model_workers: Requests one model without a scheduler may run on threads at once.
        max_abandoned: Threads of given-up requests one such model may leave finishing.

    Example::

        execution = Execution(SequenceManager(), model_workers=4, max_abandoned=16)
        result = await execution.run(served, None, request, inputs, batch, ctx, Timings())
    """

    def __init__(
        self, sequences: SequenceManager, *, model_workers: int, max_abandoned: int
    ) -> None:
        self.sequences = sequences
        self.model_workers = max(1, model_workers)
        self.max_abandoned = max(0, max_abandoned)

    async def run(
        self,
        served: Served,
        scheduler: Scheduler | None,
        request: InferRequest,
        inputs: dict[str, Any],
        batch: int,
        ctx: InferContext,
        t: Timings,
    ) -> Any:
        """Run a checked request: in its sequence, through its scheduler, or right away."""
        if served.stateful:
            return await self._in_sequence(served, inputs, ctx, t, scheduler, request, batch)
        if scheduler is not None:
            return await self._schedule(scheduler, request, inputs, batch, ctx, t)
        timeout_us = uint_param(request, "timeout") if request.parameters else 0
        if timeout_us:
            return await _deadline(self._execute(served, inputs, ctx, t), timeout_us, ctx)
        return await self._execute(served, inputs, ctx, t)

    async def stream(
        self,
        served: Served,
        inputs: dict[str, Any],
        ctx: InferContext,
        t: Timings,
        offload: Offload,
        timeout_us: int = 0,
    ) -> AsyncGenerator[Any, None]:
        """A decoupled model's results, in its sequence when stateful, within ``timeout_us``."""
        slot = await self._enter_sequence(served, ctx) if served.stateful else None
        controls = served.version.controls if slot is not None else None
        try:
            if controls is not None:
                inputs = _feed_controls(controls, inputs, ctx)
            items = served.io.iterate(inputs, ctx, t, offload)
            if timeout_us:
                items = _within(items, timeout_us, ctx)
            async for item in items:
                yield item if controls is None else controls.keep(item, ctx.state)
        finally:
            if slot is not None:
                self._leave_sequence(slot, ctx)

    # -- unscheduled models: the model's own threads ------------------------------------------
    def _workers(self, served: Served) -> ModelWorkers:
        """The threads of a model without a scheduler (made at its first threaded request)."""
        workers = served.workers
        if workers is None:
            workers = served.workers = ModelWorkers(
                served.model.name, workers=self.model_workers, max_abandoned=self.max_abandoned
            )
        return workers

    async def _execute(
        self,
        served: Served,
        inputs: dict[str, Any],
        ctx: InferContext,
        t: Timings,
        jobs: list[Future[Any]] | None = None,
    ) -> Any:
        """Run the hooks of an unscheduled model right away (threads: gated per model).

        ``jobs`` receives each thread's future (see :meth:`_gated`).
        """
        return await served.io.run(
            inputs, ctx, t, time.perf_counter_ns(), self._gated(served, jobs)
        )

    def _gated(self, served: Served, jobs: list[Future[Any]] | None = None) -> Offload:
        """Offload onto the model's own threads (see :class:`ModelWorkers`).

        ``jobs`` receives each thread's future (so a sequence can outlive an abandoned call).
        """
        workers = self._workers(served)

        async def offload(fn: Any, *args: Any) -> Any:
            return await workers.run(fn, *args, jobs=jobs)

        return offload

    # -- sequences (stateful models) ---------------------------------------------------------
    async def _in_sequence(
        self,
        served: Served,
        inputs: dict[str, Any],
        ctx: InferContext,
        t: Timings,
        scheduler: Scheduler | None = None,
        request: InferRequest | None = None,
        batch: int = 1,
    ) -> Any:
        """Run a request in its sequence (one at a time per sequence, in arrival order).

        With a ``scheduler`` (a model that batches sequences, :attr:`Served.batches_sequences`)
        the request, its control tensors added, joins an execution with the waiting requests
        of other sequences; otherwise it runs alone.
        """
        slot = await self._enter_sequence(served, ctx)
        jobs: list[Future[Any]] = []
        controls = served.version.controls
        try:
            if controls is None:
                return await self._execute(served, inputs, ctx, t, jobs)
            inputs = _feed_controls(controls, inputs, ctx)
            if scheduler is not None and request is not None:
                result = await self._schedule(scheduler, request, inputs, batch, ctx, t)
            else:
                result = await self._execute(served, inputs, ctx, t, jobs)
            return controls.keep(result, ctx.state)
        finally:
            running = next((job for job in jobs if not job.done()), None)
            if running is None:
                self._leave_sequence(slot, ctx)
            else:  # given up while its thread runs: the sequence's state is still in use
                loop = asyncio.get_running_loop()
                when_done(running, loop, lambda: self._leave_sequence(slot, ctx))

    async def _enter_sequence(self, served: Served, ctx: InferContext) -> SequenceSlot:
        """Claim the request's sequence (in arrival order) and hand its state to the context."""
        mv = served.version
        slot = self.sequences.acquire(
            mv.name, mv.version, ctx.sequence_id, start=ctx.sequence_start, idle_us=served.idle_us
        )
        await slot.lock.acquire()
        ctx.state = slot.state
        return slot

    def _leave_sequence(self, slot: SequenceSlot, ctx: InferContext) -> None:
        slot.lock.release()
        self.sequences.release(slot, end=ctx.sequence_end)

    # -- scheduled models (dynamic batching, instances, queue policies: see batcher.py) ------
    async def _schedule(
        self,
        scheduler: Scheduler,
        request: InferRequest,
        inputs: dict[str, Any],
        batch: int,
        ctx: InferContext,
        t: Timings,
    ) -> Any:
        """Queue a validated request and wait for its share of an execution."""
        priority = uint_param(request, "priority")
        timeout_us = uint_param(request, "timeout")
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

    async def run_batch(
        self, served: Served, scheduler: Scheduler, items: list[PendingRequest]
    ) -> list[Any]:
        """Run one execution for ``items`` (merged when several) and split the results."""
        mv, io, model = served.version, served.io, served.model
        if mv.model is None:
            raise ServerUnavailableError(f"model {mv.name!r} was unloaded", model=mv.name)
        t = Timings()
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
        executor = scheduler.executor  # the model's instances
        if executor is None:  # hooks on the loop (async, or declared cheap)
            offload = self._gated(served)
        else:
            loop = asyncio.get_running_loop()

            async def offload(fn: Any, *args: Any) -> Any:
                return await loop.run_in_executor(executor, fn, *args)

        result = await io.run(inputs, ctx, t, merged, offload)
        total = sum(item.batch_size for item in items)
        values: list[Any]
        if len(items) == 1:
            values = [result]
        else:
            out_start = time.perf_counter_ns()
            produced = io.batch_outputs(result, ctx.requested_outputs)
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


def _feed_controls(
    controls: SequenceControls, inputs: dict[str, Any], ctx: InferContext
) -> dict[str, Any]:
    """A sequence request's inputs with its control tensors and implicit state added.

    The state outputs are added to the outputs the model is asked for (taken out again by
    :meth:`SequenceControls.keep`).
    """
    missing = [n for n in controls.state_outputs if n not in ctx.requested_outputs]
    if missing:
        ctx.requested_outputs = [*ctx.requested_outputs, *sorted(missing)]
    return controls.feed(
        inputs, ctx.state, ctx.sequence_id, start=ctx.sequence_start, end=ctx.sequence_end
    )


async def _deadline(work: Any, timeout_us: int, ctx: InferContext) -> Any:
    """Await ``work`` for at most ``timeout_us`` µs (the request's ``timeout`` parameter)."""
    try:
        return await asyncio.wait_for(work, timeout_us / 1e6)
    except asyncio.TimeoutError as exc:
        raise _timed_out(timeout_us, ctx) from exc


async def _within(
    items: AsyncIterator[Any], timeout_us: int, ctx: InferContext
) -> AsyncIterator[Any]:
    """``items`` (a decoupled model's responses) until ``timeout_us`` µs have passed in all."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_us / 1e6
    try:
        while True:
            try:
                item = await asyncio.wait_for(anext(items), max(0.0, end - loop.time()))
            except StopAsyncIteration:
                return
            except asyncio.TimeoutError as exc:
                raise _timed_out(timeout_us, ctx) from exc
            yield item
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


def _timed_out(timeout_us: int, ctx: InferContext) -> ServerUnavailableError:
    """The error of a request whose ``timeout`` parameter passed (marked given up)."""
    ctx.cancelled = True
    return ServerUnavailableError(
        f"request to model {ctx.model_name!r} timed out after {timeout_us} µs (timeout "
        "parameter); it was cancelled",
        model=ctx.model_name,
    )


def uint_param(request: InferRequest, key: str) -> int:
    """A non-negative integer request parameter (``priority``, ``timeout``); 0 when absent.

    Raises:
        InvalidInputError: the parameter is not a non-negative integer (the message names it).
    """
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
    {
        "priority",
        "timeout",
        "binary_data_output",
        "triton_enable_empty_final_response",
        # the server's own (a batching sequence model reads them as control tensors)
        "sequence_id",
        "sequence_start",
        "sequence_end",
    }
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
        merged=[(item.context, item.batch_size) for item in items],
    )
