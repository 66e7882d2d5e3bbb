"""Per model-version inference statistics in Triton's JSON schema.

``inference_count`` counts batch elements (1 per request for non-batching models),
``execution_count`` model executions (a dynamic batch is one execution, counted once in
``batch_stats`` under its merged size); ``inference_stats`` count requests (each request of a
batch gets the batch's compute durations and its own queue time); durations are nanoseconds.
Updated from the event loop only. :func:`statistics_json` answers the statistics extension.

A request given up before it finished (client disconnect, gRPC cancellation or deadline, the
``timeout`` parameter cancelling a running request) is counted once, as cancelled: never as a
success or a failure, also when its thread finishes later. Triton's ``InferStatistics`` has no
such field (its ``cancel`` lives in the per-response ``InferResponseStatistics``), so the count
is ``response_stats["0"].cancel``: a cancelled request's first response (index ``"0"``) is the
one that was cancelled. The JSON stays exactly Triton's schema, and gRPC carries the same field.
``response_stats`` is ``{}`` while nothing was cancelled. A request whose queue timeout passed
before it started is a failure, as in Triton (the server refused it).

A leaf of the server: imports nothing of nbinfer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["ModelStats", "statistics_json"]


@dataclass(slots=True)
class _Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns if ns > 0 else 0

    def json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(slots=True)
class _BatchStats:
    compute_input: _Duration = field(default_factory=_Duration)
    compute_infer: _Duration = field(default_factory=_Duration)
    compute_output: _Duration = field(default_factory=_Duration)


@dataclass(slots=True)
class ModelStats:
    """Counters of one model version (see Triton's statistics extension)."""

    last_inference: int = 0
    inference_count: int = 0
    execution_count: int = 0
    success: _Duration = field(default_factory=_Duration)
    fail: _Duration = field(default_factory=_Duration)
    cancel: _Duration = field(default_factory=_Duration)
    queue: _Duration = field(default_factory=_Duration)
    compute_input: _Duration = field(default_factory=_Duration)
    compute_infer: _Duration = field(default_factory=_Duration)
    compute_output: _Duration = field(default_factory=_Duration)
    batches: dict[int, _BatchStats] = field(default_factory=dict)

    def record_success(
        self,
        batch_size: int,
        total_ns: int,
        queue_ns: int,
        input_ns: int,
        infer_ns: int,
        output_ns: int,
    ) -> None:
        """Count one successful request executed on its own (one execution of its batch).

        Equivalent to :meth:`record_request` + :meth:`record_execution`, inlined: the hot path.
        """
        self.last_inference = time.time_ns() // 1_000_000
        self.inference_count += batch_size
        self.execution_count += 1
        input_ns = input_ns if input_ns > 0 else 0
        infer_ns = infer_ns if infer_ns > 0 else 0
        output_ns = output_ns if output_ns > 0 else 0
        d = self.success
        d.count += 1
        d.ns += total_ns if total_ns > 0 else 0
        d = self.queue
        d.count += 1
        d.ns += queue_ns if queue_ns > 0 else 0
        d = self.compute_input
        d.count += 1
        d.ns += input_ns
        d = self.compute_infer
        d.count += 1
        d.ns += infer_ns
        d = self.compute_output
        d.count += 1
        d.ns += output_ns
        b = self.batches.get(batch_size)
        if b is None:
            b = self.batches[batch_size] = _BatchStats()
        d = b.compute_input
        d.count += 1
        d.ns += input_ns
        d = b.compute_infer
        d.count += 1
        d.ns += infer_ns
        d = b.compute_output
        d.count += 1
        d.ns += output_ns

    def record_request(
        self, *, total_ns: int, queue_ns: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """Count one successful request (its time in the queue and its execution's phases)."""
        self.last_inference = time.time_ns() // 1_000_000
        self.success.add(total_ns)
        self.queue.add(queue_ns)
        self.compute_input.add(input_ns)
        self.compute_infer.add(infer_ns)
        self.compute_output.add(output_ns)

    def record_execution(
        self, *, batch_size: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """Count one model execution of ``batch_size`` batch elements (``batch_stats``)."""
        self.inference_count += batch_size
        self.execution_count += 1
        b = self.batches.get(batch_size)
        if b is None:
            b = self.batches[batch_size] = _BatchStats()
        b.compute_input.add(input_ns)
        b.compute_infer.add(infer_ns)
        b.compute_output.add(output_ns)

    def record_failure(self, total_ns: int) -> None:
        """Count one failed request."""
        self.last_inference = time.time_ns() // 1_000_000
        self.fail.add(total_ns)

    def record_cancel(self, total_ns: int) -> None:
        """Count one request given up before it finished (time from arrival to giving up)."""
        self.last_inference = time.time_ns() // 1_000_000
        self.cancel.add(total_ns)

    def to_json(self, name: str, version: str) -> dict[str, Any]:
        """Return the Triton ``model_stats`` entry for this version."""
        return {
            "name": name,
            "version": version,
            "last_inference": self.last_inference,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.json(),
                "fail": self.fail.json(),
                "queue": self.queue.json(),
                "compute_input": self.compute_input.json(),
                "compute_infer": self.compute_infer.json(),
                "compute_output": self.compute_output.json(),
                "cache_hit": {"count": 0, "ns": 0},
                "cache_miss": {"count": 0, "ns": 0},
            },
            "batch_stats": [
                {
                    "batch_size": size,
                    "compute_input": b.compute_input.json(),
                    "compute_infer": b.compute_infer.json(),
                    "compute_output": b.compute_output.json(),
                }
                for size, b in sorted(self.batches.items())
            ],
            "memory_usage": [],
            "response_stats": {"0": {"cancel": self.cancel.json()}} if self.cancel.count else {},
        }


class _Counted(Protocol):
    """A model version with its counters (``repository.ModelVersion``)."""

    name: str
    version: str
    stats: ModelStats


def statistics_json(versions: Iterable[_Counted]) -> dict[str, Any]:
    """Triton's statistics answer ``{"model_stats": [...]}`` for these model versions."""
    return {"model_stats": [v.stats.to_json(v.name, v.version) for v in versions]}
