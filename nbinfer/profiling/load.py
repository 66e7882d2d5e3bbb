"""The load profiler's load generator: one AsyncClient repeating one request, timed in parts.

:class:`Load` sends the request closed loop (N always in flight) or open loop (at a fixed rate,
latency counted from each scheduled send time) and times every request into the open
:class:`Window`: encode, network + server, decode; it reads the server's cumulative statistics
between windows. :func:`random_inputs` shapes inputs from a model's metadata.

Layer: part of ``nbinfer.profiling``; imports ``nbinfer.errors``, ``protocol`` and ``client``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbinfer.client import AsyncClient, InferResult
from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.profiling.frame import SERVER_PARTS
from nbinfer.profiling.shm import Slot
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.types import InferRequest, ModelMetadata

__all__ = ["Load", "Options", "Window", "random_inputs", "request_rows"]

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


class Load:
    """One AsyncClient and the request it repeats; times every request into the open window."""

    def __init__(
        self, client: AsyncClient, request: InferRequest, opts: Options, slots: list[Slot]
    ) -> None:
        self.client = client
        self.request = request
        self.opts = opts
        self.slots = slots  # shared memory: request i of a setting goes through slots[i % n]
        self.current = Window()
        self.stats_ok = True

    def take(self, elapsed: float, cpu: float) -> Window:
        """Close the open window (its wall and CPU seconds) and open the next one."""
        done, self.current = self.current, Window()
        done.elapsed, done.cpu = elapsed, cpu
        return done

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
            result: InferResult = stop.value
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
