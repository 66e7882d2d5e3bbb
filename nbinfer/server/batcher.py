"""Request scheduling for the embedded server: dynamic batching, model instances, queue policies.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

A model gets a :class:`Scheduler` when its config (or its class attributes) asks for one, with
Triton's semantics:

* ``dynamic_batching`` (needs ``max_batch_size > 0``): queued requests whose non-batch shapes
  agree are merged along the batch dimension into one ``predict`` call and split back row by row.
  A batch is dispatched as soon as it reaches ``max_batch_size`` or the largest reachable
  ``preferred_batch_size``, else when the oldest request has waited
  ``max_queue_delay_microseconds``.
* ``instance_group [{count: N}]``: up to N executions (batches) in flight, on N threads.
* ``default_queue_policy`` / ``priority_queue_policy``: ``max_queue_size`` (full ->
  :class:`~nbinfer.errors.QueueFullError`), ``default_timeout_microseconds``,
  ``allow_timeout_override``, ``timeout_action`` (``REJECT`` or ``DELAY``).
* ``priority_levels`` / ``default_priority_level``: the request parameter ``priority`` (1 = most
  urgent) orders the queue; without levels the queue is FIFO and ``priority`` is ignored.

The request parameter ``timeout`` (microseconds) fails a request still queued when it expires
with :class:`~nbinfer.errors.ServerUnavailableError`. Requests merge only when their inputs' names
and non-batch shapes and their custom request parameters agree; a merged execution's context has
those parameters, request id ``""`` and every output any of its requests asked for, and the
response parameters the model sets go to every response. A model with a scheduler runs at most
``instances`` executions at once (1 unless ``instance_group`` / ``max_concurrency`` says more);
models without ``dynamic_batching``, ``instance_group`` or ``max_queue_size`` run requests as they
come, with no queue (``priority`` is then ignored and ``timeout`` bounds the whole request:
it is cancelled when the timeout passes).

From a model class::

    class Mlp(Model):
        max_batch_size = 32
        dynamic_batching = {"max_queue_delay_microseconds": 2000, "preferred_batch_size": [8]}
        max_queue_size = 64

or from ``config.pbtxt``::

    max_batch_size: 32
    dynamic_batching { preferred_batch_size: [8] max_queue_delay_microseconds: 2000 }
    instance_group [{ count: 2, kind: KIND_CPU }]
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbinfer.errors import (
    InferenceError,
    InvalidInputError,
    QueueFullError,
    ServerUnavailableError,
)
from nbinfer.server.sequence import sequence_strategy

__all__ = [
    "PendingRequest",
    "QueuePolicy",
    "Scheduler",
    "SchedulingPolicy",
    "batch_key",
    "concat_inputs",
    "non_negative_int",
    "scheduling_policy",
    "split_rows",
]

logger = logging.getLogger("nbinfer")

_REJECT = "REJECT"
_DELAY = "DELAY"


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """Triton's ``ModelQueuePolicy`` for one priority level (or the default).

    Attributes:
        max_queue_size: Requests that may wait at this level (0 = unlimited).
        default_timeout_us: Queue timeout of requests that set none (0 = none).
        allow_timeout_override: Whether a request's ``timeout`` may shorten the default.
        timeout_action: ``"REJECT"`` (fail the request) or ``"DELAY"`` (move it to the back).
    """

    max_queue_size: int = 0
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    timeout_action: str = _REJECT

    def timeout_us(self, requested: int) -> int:
        """The queue timeout of a request that asked for ``requested`` µs (0 = none asked)."""
        if not self.default_timeout_us:
            return requested
        if self.allow_timeout_override and 0 < requested < self.default_timeout_us:
            return requested
        return self.default_timeout_us

    def to_config(self) -> dict[str, Any]:
        """Triton-shaped JSON of this policy."""
        return {
            "timeout_action": self.timeout_action,
            "default_timeout_microseconds": self.default_timeout_us,
            "allow_timeout_override": self.allow_timeout_override,
            "max_queue_size": self.max_queue_size,
        }


@dataclass(frozen=True, slots=True)
class SchedulingPolicy:
    """How requests to one model are queued, batched and executed.

    Attributes:
        model_name: The model, for messages.
        batching: Whether compatible requests are merged (dynamic batching).
        max_batch_size: Largest merged batch (the model's ``max_batch_size``).
        preferred_batch_sizes: Batch sizes dispatched without waiting for the delay.
        max_queue_delay_us: Longest wait for more requests before a batch goes anyway.
        instances: Executions in flight at once (``instance_group`` count).
        priority_levels: Number of priority levels (0 = FIFO, ``priority`` ignored).
        default_priority_level: Level of requests with no (or an out-of-range) priority.
        default_queue_policy: Queue policy of every level without its own.
        priority_queue_policies: Queue policy per priority level.
        from_attributes: The policy came from the model's attributes, not its config file.
    """

    model_name: str
    batching: bool = False
    max_batch_size: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    instances: int = 1
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy = field(default_factory=QueuePolicy)
    priority_queue_policies: Mapping[int, QueuePolicy] = field(default_factory=dict)
    from_attributes: bool = False

    def level_of(self, priority: int) -> int:
        """The queue level of a request's ``priority`` (Triton: 0 or out of range -> default)."""
        if not self.priority_levels:
            return 0
        if 1 <= priority <= self.priority_levels:
            return priority
        return self.default_priority_level

    def queue_policy(self, level: int) -> QueuePolicy:
        """The queue policy of a level."""
        return self.priority_queue_policies.get(level, self.default_queue_policy)

    def to_config(self) -> dict[str, Any]:
        """Triton-shaped ``dynamic_batching`` JSON (what ``GET .../config`` shows)."""
        cfg: dict[str, Any] = {
            "preferred_batch_size": list(self.preferred_batch_sizes),
            "max_queue_delay_microseconds": self.max_queue_delay_us,
            "preserve_ordering": False,
            "priority_levels": self.priority_levels,
            "default_priority_level": self.default_priority_level,
            "default_queue_policy": self.default_queue_policy.to_config(),
        }
        if self.priority_queue_policies:
            cfg["priority_queue_policy"] = {
                str(k): v.to_config() for k, v in sorted(self.priority_queue_policies.items())
            }
        return cfg


def non_negative_int(value: Any, what: str) -> int:
    """``value`` as an int (config numbers arrive as text from pbtxt / JSON).

    Raises:
        InvalidInputError: not an integer, or negative (``what`` names it).
    """
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} must be a non-negative integer, got {value!r}") from exc
    if number < 0:
        raise InvalidInputError(f"{what} must be a non-negative integer, got {value!r}")
    return number


def _queue_policy(raw: Any, what: str, base: QueuePolicy | None = None) -> QueuePolicy:
    base = base or QueuePolicy()
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{what} must be a mapping, got {raw!r}")
    action = str(raw.get("timeout_action", base.timeout_action) or _REJECT).upper()
    if action not in (_REJECT, _DELAY):
        raise InvalidInputError(f"{what}.timeout_action must be REJECT or DELAY, got {action!r}")
    override = raw.get("allow_timeout_override", base.allow_timeout_override)
    if isinstance(override, str):
        override = override.strip().lower() == "true"
    return QueuePolicy(
        max_queue_size=non_negative_int(
            raw.get("max_queue_size", base.max_queue_size), f"{what}.max_queue_size"
        ),
        default_timeout_us=non_negative_int(
            raw.get("default_timeout_microseconds", base.default_timeout_us),
            f"{what}.default_timeout_microseconds",
        ),
        allow_timeout_override=bool(override),
        timeout_action=action,
    )


def _priority_policies(raw: Any, what: str, levels: int) -> dict[int, QueuePolicy]:
    """Parse ``priority_queue_policy``: a JSON map ``{"1": {...}}`` or pbtxt entries."""
    if raw is None:
        return {}
    pairs: list[tuple[Any, Any]]
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    elif isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        pairs = []
        for entry in raw:
            if not isinstance(entry, Mapping) or "key" not in entry:
                raise InvalidInputError(f"{what}: entries need a key and a value, got {entry!r}")
            pairs.append((entry["key"], entry.get("value")))
    else:
        raise InvalidInputError(f"{what} must be a map from priority level to a queue policy")
    out: dict[int, QueuePolicy] = {}
    for key, value in pairs:
        level = non_negative_int(key, f"{what} key")
        if not 1 <= level <= max(levels, 1):
            raise InvalidInputError(f"{what}: level {level} is outside 1..{levels}")
        out[level] = _queue_policy(value, f"{what}[{level}]")  # replaces the default (Triton)
    return out


def scheduling_policy(
    model_name: str,
    *,
    max_batch_size: int,
    config: Mapping[str, Any] | None,
    dynamic_batching: Any = None,
    max_queue_size: Any = None,
    instances: int | None = None,
) -> SchedulingPolicy | None:
    """Build a model's :class:`SchedulingPolicy` (None: requests run unscheduled, as they come).

    The config's ``dynamic_batching`` wins over the model attribute ``dynamic_batching`` (a dict
    with the same keys, or True for the defaults); ``max_queue_size`` (attribute) fills in the
    default queue policy's limit when the config sets none.

    Args:
        model_name: The model, for messages.
        max_batch_size: The model's ``max_batch_size`` (batching needs > 0).
        config: The model's Triton-shaped config JSON (may be None).
        dynamic_batching: The model's ``dynamic_batching`` attribute.
        max_queue_size: The model's ``max_queue_size`` attribute.
        instances: Executions in flight (``instance_group`` count; None = 1).

    Raises:
        InvalidInputError: a malformed ``dynamic_batching`` section.
    """
    what = f"model {model_name!r} dynamic_batching"
    raw: Any = None
    from_attributes = False
    cap = max_batch_size
    if config is not None and config.get("dynamic_batching") is not None:
        raw = config["dynamic_batching"]
    elif config is not None and isinstance(config.get("sequence_batching"), Mapping):
        what = f"model {model_name!r} sequence_batching"
        raw, cap = sequence_strategy(config["sequence_batching"], max_batch_size, what)
    elif dynamic_batching is not None and dynamic_batching is not False:
        raw = {} if dynamic_batching is True else dynamic_batching
        from_attributes = True
    if raw is not None and not isinstance(raw, Mapping):
        raise InvalidInputError(f"{what} must be a mapping (or True), got {raw!r}")
    if raw is None and max_queue_size is None and instances is None:
        return None
    batching = raw is not None
    raw = raw if raw is not None else {}
    if batching and max_batch_size <= 0:
        logger.warning(
            "%s is ignored: dynamic batching needs max_batch_size > 0 (requests run one by one)",
            what,
        )
        batching = False
    base = _queue_policy(raw.get("default_queue_policy"), f"{what}.default_queue_policy")
    if max_queue_size is not None and not base.max_queue_size:
        base = QueuePolicy(
            max_queue_size=non_negative_int(max_queue_size, f"model {model_name!r} max_queue_size"),
            default_timeout_us=base.default_timeout_us,
            allow_timeout_override=base.allow_timeout_override,
            timeout_action=base.timeout_action,
        )
    preferred_raw = raw.get("preferred_batch_size") or []
    if isinstance(preferred_raw, int | str):
        preferred_raw = [preferred_raw]
    preferred: list[int] = []
    for p in preferred_raw:
        size = non_negative_int(p, f"{what}.preferred_batch_size")
        if batching and not 1 <= size <= max_batch_size:
            raise InvalidInputError(
                f"{what}.preferred_batch_size {size} is outside 1..{max_batch_size} "
                f"(max_batch_size {max_batch_size})"
            )
        preferred.append(size)
    levels = non_negative_int(raw.get("priority_levels", 0), f"{what}.priority_levels")
    default_level = non_negative_int(
        raw.get("default_priority_level", 0), f"{what}.default_priority_level"
    )
    if levels and not 1 <= default_level <= levels:
        if default_level:
            raise InvalidInputError(
                f"{what}.default_priority_level {default_level} is outside 1..{levels}"
            )
        default_level = levels  # unset: requests without a priority go last
    count = 1 if instances is None else int(instances)
    if count < 1:
        raise InvalidInputError(f"model {model_name!r}: instance count must be >= 1, got {count}")
    return SchedulingPolicy(
        model_name=model_name,
        batching=batching,
        max_batch_size=cap if batching else 0,
        preferred_batch_sizes=tuple(sorted(set(preferred))),
        max_queue_delay_us=non_negative_int(
            raw.get("max_queue_delay_microseconds", 0), f"{what}.max_queue_delay_microseconds"
        ),
        instances=count,
        priority_levels=levels,
        default_priority_level=default_level if levels else 0,
        default_queue_policy=base,
        priority_queue_policies=_priority_policies(
            raw.get("priority_queue_policy"), f"{what}.priority_queue_policy", levels
        ),
        from_attributes=from_attributes,
    )


# -- merging and splitting --------------------------------------------------------------------
def batch_key(inputs: Mapping[str, np.ndarray[Any, Any]]) -> tuple[Any, ...]:
    """What must agree for requests to share a batch: input names and non-batch shapes."""
    return tuple((name, inputs[name].shape[1:]) for name in sorted(inputs))


def concat_inputs(
    requests: Sequence[Mapping[str, np.ndarray[Any, Any]]],
) -> dict[str, np.ndarray[Any, Any]]:
    """Stack the requests' inputs along the batch dimension (one copy per input)."""
    if len(requests) == 1:
        return dict(requests[0])
    return {name: np.concatenate([r[name] for r in requests], axis=0) for name in requests[0]}


def split_rows(
    outputs: Mapping[str, np.ndarray[Any, Any]], sizes: Sequence[int], *, model_name: str
) -> list[dict[str, np.ndarray[Any, Any]]]:
    """Cut a batch's outputs back into per-request row ranges (views, no copy).

    Raises:
        InferenceError: an output does not have the batch's number of rows.
    """
    total = sum(sizes)
    for name, arr in outputs.items():
        if arr.ndim == 0 or arr.shape[0] != total:
            rows = "a scalar" if arr.ndim == 0 else f"{arr.shape[0]} rows"
            raise InferenceError(
                f"model {model_name!r} returned {rows} for output {name!r} of a dynamic batch "
                f"of {total} rows ({len(sizes)} requests); batched outputs need one row per "
                "input row",
                model=model_name,
            )
    parts: list[dict[str, np.ndarray[Any, Any]]] = []
    start = 0
    for size in sizes:
        stop = start + size
        parts.append({name: arr[start:stop] for name, arr in outputs.items()})
        start = stop
    return parts


# -- the queue ---------------------------------------------------------------------------------
_seq = itertools.count()


class PendingRequest:
    """One queued request (its validated input arrays, batch size and bookkeeping).

    Attributes:
        inputs: Validated input arrays by name (batch dim first when batching).
        batch_size: Rows this request contributes.
        key: :func:`batch_key` of the inputs (requests merge only with equal keys).
        context: The caller's per-request context object (opaque here).
        level: Priority level (0 when FIFO).
        enqueued_ns: ``perf_counter_ns()`` at submission.
        dispatched_ns: ``perf_counter_ns()`` when its batch left the queue.
        execution_context: The context of the execution running it (set by the executor).
        future: Resolved with the value the executor returns for this request.
    """

    __slots__ = (
        "arrived",
        "batch_size",
        "context",
        "deadline",
        "delayed",
        "dispatched_ns",
        "enqueued_ns",
        "execution_context",
        "future",
        "inputs",
        "key",
        "level",
        "reject",
        "seq",
        "timeout_us",
    )

    def __init__(
        self,
        inputs: dict[str, np.ndarray[Any, Any]],
        batch_size: int,
        context: Any,
        future: asyncio.Future[Any],
        *,
        level: int,
        key: tuple[Any, ...],
        arrived: float,
        deadline: float | None,
        timeout_us: int,
        reject: bool,
    ) -> None:
        self.inputs = inputs
        self.batch_size = batch_size
        self.context = context
        self.future = future
        self.level = level
        self.key = key
        self.arrived = arrived
        self.deadline = deadline
        self.timeout_us = timeout_us
        self.reject = reject
        self.delayed = False
        self.seq = next(_seq)
        self.enqueued_ns = time.perf_counter_ns()
        self.dispatched_ns = 0
        self.execution_context: Any = None

    def order(self) -> tuple[bool, int, int]:
        """Queue order: timed-out DELAY requests last, then priority level, then arrival."""
        return (self.delayed, self.level, self.seq)


#: Runs one batch: returns one value per request, in order (or raises to fail them all).
BatchRunner = Callable[[list[PendingRequest]], Awaitable[list[Any]]]


class Scheduler:
    """The queue and dispatcher of one model version (bound to the running event loop).

    Args:
        policy: What to batch and how many executions may run at once.
        execute: Coroutine function running a list of requests as one execution.
        use_threads: Whether to own a thread pool of ``policy.instances`` workers.
        cancel_running: Whether an execution whose every request was cancelled is cancelled
            too (async hooks; a thread cannot be pre-empted).

    Example::

        sched = Scheduler(policy, run_batch, use_threads=True)
        value = await sched.submit(inputs, 1, ctx, priority=0, timeout_us=0)
    """

    def __init__(
        self,
        policy: SchedulingPolicy,
        execute: BatchRunner,
        *,
        use_threads: bool,
        cancel_running: bool = False,
    ) -> None:
        self.policy = policy
        self._execute = execute
        self.loop = asyncio.get_running_loop()
        self._queue: list[PendingRequest] = []
        self._per_level: dict[int, int] = {}
        self._free = policy.instances
        self._wake = asyncio.Event()
        #: Executions in flight and their requests.
        self._running: dict[asyncio.Task[None], list[PendingRequest]] = {}
        self._cancel_running = cancel_running
        self._executor: ThreadPoolExecutor | None = None
        self._use_threads = use_threads
        self.closed = False
        self._task = self.loop.create_task(self._dispatch_loop())

    @property
    def executor(self) -> ThreadPoolExecutor | None:
        """The model's own worker threads, one per instance (None when hooks run on the loop)."""
        if self._executor is None and self._use_threads and not self.closed:
            self._executor = ThreadPoolExecutor(
                max_workers=self.policy.instances,
                thread_name_prefix=f"nbinfer-{self.policy.model_name}",
            )
        return self._executor

    @property
    def queued(self) -> int:
        """Requests waiting in the queue (not yet executing)."""
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing executing."""
        return not self._queue and not self._running

    def submit(
        self,
        inputs: dict[str, np.ndarray[Any, Any]],
        batch_size: int,
        context: Any,
        *,
        priority: int = 0,
        timeout_us: int = 0,
        group: Hashable = None,
    ) -> asyncio.Future[Any]:
        """Queue a validated request; the returned future resolves with its execution's value.

        Requests merge only when their input names, non-batch shapes and ``group`` (e.g. their
        custom request parameters) are equal.

        Raises:
            QueueFullError: the queue of the request's priority level is full.
            ServerUnavailableError: the scheduler is closed (model unloading / server stopping).
        """
        policy = self.policy
        name = policy.model_name
        if self.closed:
            raise ServerUnavailableError(f"model {name!r} is shutting down", model=name)
        level = policy.level_of(priority)
        qp = policy.queue_policy(level)
        if qp.max_queue_size and self._per_level.get(level, 0) >= qp.max_queue_size:
            where = f" at priority level {level}" if policy.priority_levels else ""
            raise QueueFullError(
                f"the queue of model {name!r} is full ({qp.max_queue_size} requests waiting"
                f"{where}); retry later",
                model=name,
            )
        timeout = qp.timeout_us(timeout_us)
        now = self.loop.time()
        deadline = now + timeout / 1e6 if timeout else None
        future: asyncio.Future[Any] = self.loop.create_future()
        item = PendingRequest(
            inputs,
            batch_size,
            context,
            future,
            level=level,
            key=(batch_key(inputs), group) if policy.batching else (),
            arrived=now,
            deadline=deadline,
            timeout_us=timeout,
            reject=qp.timeout_action == _REJECT,
        )
        bisect.insort(self._queue, item, key=PendingRequest.order)
        self._per_level[level] = self._per_level.get(level, 0) + 1
        # a full (or preferred-size) batch goes right away; one whose delay has run out waits
        # for the dispatch loop, a later loop iteration: every request that arrived in this
        # iteration joins it, even when the process was descheduled between two of them
        self._pump(by_time=False)
        if self._queue:
            self._wake.set()  # the loop re-arms its timer for this request's delay / timeout
        return future

    # -- dispatching -----------------------------------------------------------------------
    def _remove(self, item: PendingRequest) -> None:
        self._queue.remove(item)
        self._per_level[item.level] -= 1

    def _expire(self, now: float) -> float | None:
        """Fail (or demote) requests whose queue timeout passed; returns the next deadline."""
        nearest: float | None = None
        for item in list(self._queue):
            if item.future.done():  # the caller gave up (cancelled)
                self._remove(item)
                continue
            if item.deadline is None or item.delayed:
                continue
            if item.deadline <= now:
                name = self.policy.model_name
                if item.reject:
                    self._remove(item)
                    item.future.set_exception(
                        ServerUnavailableError(
                            f"request to model {name!r} timed out after {item.timeout_us} µs "
                            "in the queue (timeout parameter / queue policy); retry later or "
                            "raise the timeout",
                            model=name,
                        )
                    )
                else:
                    self._remove(item)
                    item.delayed = True
                    bisect.insort(self._queue, item, key=PendingRequest.order)
                    self._per_level[item.level] += 1
            elif nearest is None or item.deadline < nearest:
                nearest = item.deadline
        return nearest

    def _form(self, now: float, by_time: bool = True) -> tuple[list[PendingRequest], float | None]:
        """Pick the next batch, or return ([], when to look again).

        ``by_time=False``: only a batch that is full or of a preferred size is ready, or any
        batch when the model asks for no delay (a delay that ran out is left to the dispatch
        loop).
        """
        head = self._queue[0]
        policy = self.policy
        if not policy.batching:
            return [head], None
        limit = policy.max_batch_size
        preferred = policy.preferred_batch_sizes
        enough = min(limit, preferred[-1]) if preferred else limit
        chosen: list[PendingRequest] = []
        size = 0
        preferred_count = 0
        for item in self._queue:
            if item.key != head.key:
                continue  # different shapes: a later batch
            if size + item.batch_size > limit:
                break
            chosen.append(item)
            size += item.batch_size
            if size in preferred:
                preferred_count = len(chosen)
            if size >= enough:
                break
        if preferred_count:  # the largest preferred size reachable goes now (Triton)
            return chosen[:preferred_count], None
        if size >= limit:
            return chosen, None
        ready_at = head.arrived + policy.max_queue_delay_us / 1e6
        if ready_at <= now and (by_time or not policy.max_queue_delay_us):
            return chosen, None
        return [], ready_at

    def _pump(self, by_time: bool = True) -> float | None:
        """Expire timed-out requests and dispatch every ready batch an instance can take.

        Returns the loop time at which something next becomes due (None: nothing pending);
        ``by_time`` as in :meth:`_form`.
        """
        while True:
            now = self.loop.time()
            wake_at = self._expire(now)
            if not self._queue or self._free <= 0:
                return wake_at
            batch, later = self._form(now, by_time)
            if not batch:
                if later is not None and (wake_at is None or later < wake_at):
                    wake_at = later
                return wake_at
            self._dispatch(batch)

    async def _dispatch_loop(self) -> None:
        loop = self.loop
        timer: asyncio.TimerHandle | None = None
        try:
            while True:
                self._wake.clear()
                if timer is not None:
                    timer.cancel()
                    timer = None
                wake_at = self._pump()
                if wake_at is not None:
                    timer = loop.call_at(wake_at, self._wake.set)
                await self._wake.wait()
        except Exception as exc:  # a bug here must not leave requests waiting forever
            logger.exception("scheduler of model %r failed", self.policy.model_name)
            self.closed = True
            for item in self._queue:
                if not item.future.done():
                    item.future.set_exception(exc)
            self._queue.clear()
            self._per_level.clear()
        finally:
            if timer is not None:
                timer.cancel()

    def _dispatch(self, batch: list[PendingRequest]) -> None:
        now = time.perf_counter_ns()
        for item in batch:
            self._remove(item)
            item.dispatched_ns = now
        self._free -= 1
        task = self.loop.create_task(self._run(batch))
        self._running[task] = batch
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)

    def cancel(self, future: asyncio.Future[Any]) -> list[PendingRequest] | None:
        """Drop a request whose caller gave up (its ``future`` is cancelled).

        A queued request leaves the queue at once. Returns the requests of its execution when
        it was running and every request of that execution has been given up (the execution
        is cancelled when ``cancel_running``), else None.
        """
        for item in self._queue:
            if item.future is future:
                self._remove(item)
                self._wake.set()
                return None
        for task, batch in self._running.items():
            if any(item.future is future for item in batch):
                if not all(item.future.done() for item in batch):
                    return None
                if self._cancel_running:
                    task.cancel()
                return batch
        return None

    async def _run(self, batch: list[PendingRequest]) -> None:
        try:
            live = [item for item in batch if not item.future.done()]
            if not live:
                return
            try:
                values = await self._execute(live)
            except Exception as exc:
                for item in live:
                    if not item.future.done():
                        item.future.set_exception(exc)
                return
            for item, value in zip(live, values, strict=True):
                if not item.future.done():
                    item.future.set_result(value)
        finally:
            self._free += 1
            if not self.closed:
                self._pump()  # the freed instance takes the next ready batch at once
                if self._queue:
                    self._wake.set()

    async def close(self, reason: str = "is being unloaded") -> None:
        """Stop dispatching, fail queued requests, wait for running batches; idempotent."""
        if self.closed:
            return
        self.closed = True
        self._task.cancel()
        name = self.policy.model_name
        for item in self._queue:
            if not item.future.done():
                item.future.set_exception(
                    ServerUnavailableError(f"model {name!r} {reason}", model=name)
                )
        self._queue.clear()
        self._per_level.clear()
        if self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)
        self.shutdown_threads()

    def discard(self) -> None:
        """Close without waiting (for a scheduler of a finished event loop or a retired model)."""
        if not self.closed and not self.loop.is_closed():
            name = self.policy.model_name
            for item in self._queue:
                if not item.future.done():
                    item.future.set_exception(
                        ServerUnavailableError(f"model {name!r} was unloaded", model=name)
                    )
            if not self._task.done():
                self._task.cancel()
        self._queue.clear()
        self._per_level.clear()
        self.shutdown_threads()

    def shutdown_threads(self) -> None:
        """Release the worker threads without waiting (safe from any loop)."""
        self.closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
