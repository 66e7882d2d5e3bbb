"""The load profiler's load generator: one request repeated by threads, timed in parts.

:class:`Load` sends the request closed loop (N always in flight) or open loop (at a fixed rate,
latency counted from each scheduled send time) and times every request into the open
:class:`Window`: encode, network + server, decode; it reads the server's cumulative statistics
between windows. The load comes from threads, each blocking on a sync :class:`Client` (one
thread per concurrency slot; open loop: a scheduler thread and a pool of sender threads), which
costs less CPU per request than asyncio tasks (about half over HTTP); the AsyncClient only sets
up and reads the statistics (and drives the load when no sync client can be made from the
options).
:class:`GeneratorClock` measures what the generator threads themselves use: CPU and the time
they waited for one. :func:`random_inputs` shapes inputs from a model's metadata.

Layer: part of ``nbinfer.profiling``; imports ``nbinfer.errors``, ``protocol`` and ``client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbinfer.client import AsyncClient, Client, InferResult
from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.profiling.frame import SERVER_PARTS
from nbinfer.profiling.shm import Slot
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.types import InferRequest, ModelMetadata

__all__ = ["GeneratorClock", "Load", "Options", "Window", "random_inputs", "request_rows"]

logger = logging.getLogger("nbinfer")


def random_inputs(
    metadata: ModelMetadata, *, batch_size: int = 1, seed: int = 0
) -> dict[str, np.ndarray[Any, Any]]:
    """Random inputs shaped from a model's metadata (a leading -1 -> ``batch_size``, others 1).

    Integers are drawn from 0..9 (safe as indices), floats from N(0, 1), BYTES are short
    ASCII strings.

    Raises:
        InvalidInputError: The metadata declares no inputs (pass ``inputs=``).
    """
    if not metadata.inputs:
        raise InvalidInputError(
            f"model {metadata.name!r} declares no inputs in its metadata: pass inputs= "
            "(a DataFrame or {name: array})"
        )
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for spec in metadata.inputs:
        shape = [
            (batch_size if i == 0 else 1) if d < 0 else int(d) for i, d in enumerate(spec.shape)
        ]
        if spec.datatype == "BYTES":
            size = int(np.prod(shape))
            words = [bytes(rng.integers(97, 123, 8, dtype=np.uint8)) for _ in range(size)]
            arrays[spec.name] = np.array(words, dtype=object).reshape(shape)
        elif spec.datatype == "BOOL":
            arrays[spec.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            dtype = numpy_dtype(spec.datatype)
            if dtype.kind in "iu":
                arrays[spec.name] = rng.integers(0, 10, shape).astype(dtype)
            else:
                arrays[spec.name] = rng.standard_normal(shape).astype(dtype)
    return arrays


def request_rows(request: InferRequest) -> int:
    """The batch size a request carries (leading dimension of its first input)."""
    shape = request.inputs[0].shape if request.inputs else []
    return int(shape[0]) if shape else 1


@dataclass
class Window:
    """What completed between two ticks of the monitor."""

    latency: list[float] = field(default_factory=list)
    encode: list[float] = field(default_factory=list)
    network: list[float] = field(default_factory=list)
    decode: list[float] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    sent: int = 0
    elapsed: float = 0.0
    cpu: float = 0.0
    generator: float = 0.0
    stats: dict[str, tuple[int, int]] | None = None

    @property
    def rate(self) -> float:
        """Requests completed per second."""
        return len(self.latency) / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def mean(self) -> float:
        """Mean latency in seconds (0 when none completed)."""
        return float(np.mean(self.latency)) if self.latency else 0.0


@dataclass
class Options:
    """What every setting of a run shares: the model and the measurement's timing."""

    model: str
    version: str
    window: float
    max_windows: int
    warmup: float
    stability: float
    timeout: float | None


def _thread_seconds(native_id: int) -> float:
    """Seconds thread ``native_id`` of this process ran plus waited to run (0 once it is gone).

    Linux's ``schedstat`` has both: time on a CPU and time runnable on a run queue. A generator
    starved of CPU by other processes waits there, which its CPU time alone would not show.
    """
    try:
        with open(f"/proc/self/task/{native_id}/schedstat", "rb") as fh:
            ran, waited, *_ = fh.read().split()
    except (OSError, ValueError):
        return 0.0
    return (int(ran) + int(waited)) / 1e9


class GeneratorClock:
    """The busy time of the load generator's own threads (CPU plus waiting for a CPU).

    Threads register themselves; :meth:`read` sums them. Where ``/proc`` has no ``schedstat``
    (not Linux) it falls back to the process's CPU time.
    """

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._lock = threading.Lock()
        self.per_thread = os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat")

    def register(self) -> None:
        """Count the calling thread from now on."""
        with self._lock:
            self._ids.append(threading.get_native_id())

    def clear(self) -> None:
        """Forget the threads (between settings, once they have ended)."""
        with self._lock:
            self._ids.clear()

    def read(self) -> float:
        """Busy seconds so far of the registered threads (a counter: use differences)."""
        if not self.per_thread:
            return time.process_time()
        with self._lock:
            ids = list(self._ids)
        return sum(_thread_seconds(i) for i in ids)


class Load:
    """The request repeated against the server; times every request into the open window.

    ``client`` (async) sets up and reads the statistics; ``sync`` (when given) sends the load
    from threads; without it the load runs as asyncio tasks on ``client``.
    """

    def __init__(
        self,
        client: AsyncClient,
        request: InferRequest,
        opts: Options,
        slots: list[Slot],
        sync: Client | None = None,
    ) -> None:
        self.client = client
        self.sync = sync
        self.request = request
        self.opts = opts
        self.slots = slots  # shared memory: request i of a setting goes through slots[i % n]
        self.current = Window()
        self.stats_ok = True
        self.clock = GeneratorClock()
        self._sent = threading.Lock()
        self._threads: list[threading.Thread] = []

    def take(self, elapsed: float, cpu: float, generator: float = 0.0) -> Window:
        """Close the open window (its wall, CPU and generator seconds) and open the next one."""
        done, self.current = self.current, Window()
        done.elapsed, done.cpu, done.generator = elapsed, cpu, generator
        return done

    # -- the threads -----------------------------------------------------------------------

    def call(self, scheduled: float | None, slot: int) -> None:
        """Send the request once from this thread (the sync client); as :meth:`one`."""
        client = self.sync
        assert client is not None
        place = self.slots[slot % len(self.slots)] if self.slots else None
        request = self.request if place is None else place.request
        with self._sent:
            self.current.sent += 1
        t0 = time.perf_counter()
        try:
            op = client._infer_op(
                self.opts.model,
                request,
                headers=None,
                timeout=self.opts.timeout,
                binary=None,
                retry=False,
                sequence=None,
                sequence_end=False,
            )
            call = next(op)
            t1 = time.perf_counter()
            network = decode = 0.0
            while True:
                sent_at = time.perf_counter()
                try:
                    reply = client._execute(call)
                except NbinferError as exc:
                    back = time.perf_counter()
                    network += back - sent_at
                    call = op.throw(exc)
                else:
                    back = time.perf_counter()
                    network += back - sent_at
                    call = op.send(reply)
                decode += time.perf_counter() - back
        except StopIteration as stop:
            self._finish(stop.value, place, scheduled, (t0, t1, network, decode))
        except NbinferError as exc:
            self.failed(exc)

    def _finish(
        self,
        result: InferResult,
        place: Slot | None,
        scheduled: float | None,
        times: tuple[float, float, float, float],
    ) -> None:
        """Read the outputs and time the request into the window it completed in."""
        t0, t1, network, decode = times
        d0 = time.perf_counter()
        try:
            if place is None:
                for name in result.output_names:
                    result.as_numpy(name)
            else:
                place.read(result)  # views on the region, dropped at once (it must close)
        except NbinferError as exc:  # an output that cannot be read counts as a failure
            self.failed(exc)
            return
        end = time.perf_counter()
        window = self.current  # the window the request completed in
        window.latency.append(end - (t0 if scheduled is None else scheduled))
        window.encode.append(t1 - t0)
        window.network.append(network)
        window.decode.append(decode + end - d0)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            self.clock.register()
            target(*args)

        thread = threading.Thread(target=run, name="nbinfer-profile-load", daemon=True)
        self._threads.append(thread)
        thread.start()

    def start_closed(self, concurrency: int, stop: threading.Event) -> None:
        """Closed loop on threads: one per slot, each sending again as soon as it has a reply."""

        def worker(slot: int) -> None:
            while not stop.is_set():
                self.call(None, slot)

        for slot in range(concurrency):
            self._spawn(worker, slot)

    def start_open(self, rate: float, stop: threading.Event, senders: int) -> None:
        """Open loop on threads: a scheduler hands each due time to a free sender thread.

        Latency counts from the scheduled time and ``lag`` is how late a sender took it, so a
        generator that falls behind (no free sender, or no CPU) shows in both.
        """
        # bounded: a scheduler ahead of busy senders waits, and those sends go out late
        due_times: queue.Queue[float | None] = queue.Queue(maxsize=senders)

        def sender(slot: int) -> None:
            while (due := due_times.get()) is not None:  # until its own None
                if not stop.is_set():  # once stopped, what is left is not sent
                    self.current.lag.append(time.perf_counter() - due)
                    self.call(due, slot)

        def scheduler() -> None:
            interval = 1.0 / rate
            start = time.perf_counter()
            i = 0
            while not stop.is_set():
                due = start + i * interval
                wait = due - time.perf_counter()
                if wait > 0 and stop.wait(wait):
                    break
                with contextlib.suppress(queue.Full):
                    due_times.put(due, timeout=0.1)
                    i += 1
            for _ in range(senders):  # each sender takes one, after any due time left
                due_times.put(None)

        for slot in range(senders):
            self._spawn(sender, slot)
        self._spawn(scheduler)

    def join(self) -> None:
        """Wait for the threads of the setting that ended (its ``stop`` is set)."""
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        self.clock.clear()

    # -- asyncio (when the options allow no sync client) -------------------------------------

    async def one(self, scheduled: float | None, slot: int) -> None:
        """Send the request once; latency counts from ``scheduled`` when given (open loop)."""
        client, window = self.client, self.current
        place = self.slots[slot % len(self.slots)] if self.slots else None
        request = self.request if place is None else place.request
        window.sent += 1
        t0 = time.perf_counter()
        try:
            # The client's own op, driven here so the three parts can be timed apart.
            op = client._infer_op(
                self.opts.model,
                request,
                headers=None,
                timeout=self.opts.timeout,
                binary=None,
                retry=False,
                sequence=None,
                sequence_end=False,
            )
            call = next(op)
            t1 = time.perf_counter()
            network = decode = 0.0
            while True:
                sent_at = time.perf_counter()
                try:
                    reply = await client._execute(call)
                except NbinferError as exc:
                    back = time.perf_counter()
                    network += back - sent_at
                    call = op.throw(exc)
                else:
                    back = time.perf_counter()
                    network += back - sent_at
                    call = op.send(reply)
                decode += time.perf_counter() - back
        except StopIteration as stop:
            self._finish(stop.value, place, scheduled, (t0, t1, network, decode))
        except NbinferError as exc:
            self.failed(exc)

    def failed(self, exc: NbinferError) -> None:
        """Count a failed request in the window open now."""
        window = self.current
        window.errors += 1
        window.first_error = window.first_error or f"{type(exc).__name__}: {exc}"

    async def server_stats(self) -> dict[str, tuple[int, int]] | None:
        """Cumulative ``{part: (count, ns)}`` for the model (None: no statistics extension)."""
        if not self.stats_ok:
            return None
        try:
            raw = await self.client.get_inference_statistics(self.opts.model, self.opts.version)
        except NbinferError as exc:
            logger.info("profile: no server statistics (%s); client-side split only", exc)
            self.stats_ok = False
            return None
        totals: dict[str, tuple[int, int]] = {}
        for entry in raw.get("model_stats", []):
            stats = entry.get("inference_stats", {})
            for part in ("success", *SERVER_PARTS):
                item = stats.get(part) or {}
                count, ns = totals.get(part, (0, 0))
                totals[part] = (count + int(item.get("count", 0)), ns + int(item.get("ns", 0)))
        return totals

    async def closed(self, concurrency: int, stop: asyncio.Event) -> None:
        """Closed loop: ``concurrency`` requests always in flight until ``stop``."""

        async def worker(slot: int) -> None:
            while not stop.is_set():
                await self.one(None, slot)

        await asyncio.gather(*(worker(i) for i in range(concurrency)))

    async def opened(self, rate: float, stop: asyncio.Event) -> None:
        """Open loop: ``rate`` requests per second, each sent at its scheduled time."""
        interval = 1.0 / rate
        start = time.perf_counter()
        pending: set[asyncio.Task[None]] = set()
        i = 0
        while not stop.is_set():
            due = start + i * interval
            await asyncio.sleep(max(due - time.perf_counter(), 0.0))
            self.current.lag.append(time.perf_counter() - due)
            task = asyncio.create_task(self.one(due, i))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
        await asyncio.gather(*pending)
