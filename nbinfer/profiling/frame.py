"""The load profiler's results: :class:`ProfileFrame` (one row per setting) and :func:`compare`.

Layer: part of ``nbinfer.profiling``; imports ``nbinfer.errors``; the renderer
``nbinfer.render.profile`` only lazily inside the frame's repr hook (matplotlib lives there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from nbinfer.errors import InvalidInputError

__all__ = ["COLUMNS", "CLIENT_PARTS", "PERCENTILES", "SERVER_PARTS", "ProfileFrame", "compare"]

#: The latency percentiles of each row.
PERCENTILES = (50, 90, 95, 99)
#: Client-side parts of a request, in the order they happen.
CLIENT_PARTS = ("encode", "network", "decode")
#: Server-side parts from the statistics extension (Triton's names).
SERVER_PARTS = ("queue", "compute_input", "compute_infer", "compute_output")
#: The columns of a :class:`ProfileFrame`, in order.
COLUMNS = (
    "run",
    "model",
    "protocol",
    "shared_memory",
    "mode",
    "concurrency",
    "request_rate",
    "batch_size",
    "requests",
    "errors",
    "throughput",
    "latency_avg_ms",
    *(f"latency_p{p}_ms" for p in PERCENTILES),
    "latency_max_ms",
    *(f"client_{p}_ms" for p in CLIENT_PARTS),
    *(f"server_{p}_ms" for p in SERVER_PARTS),
    "server_requests",
    "windows",
    "stable",
    "stability",
    "window_s",
    "send_rate",
    "schedule_lag_p99_ms",
    "client_cpu",
    "generator_busy",
    "client_saturated",
    "first_error",
)


class ProfileFrame(pd.DataFrame):  # type: ignore[misc]
    """Profile results, one row per setting: a DataFrame that plots itself in Jupyter.

    ``throughput`` is inferences per second (requests x batch size); latencies are in
    milliseconds. Several runs (a ``run`` column, see :func:`compare`) draw as overlaid curves.
    """

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return ProfileFrame

    def compare(self, other: pd.DataFrame, *, labels: Sequence[str] | None = None) -> ProfileFrame:
        """This run and ``other`` in one frame (a ``run`` column), drawn overlaid."""
        return compare(self, other, labels=labels)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.profile import mimebundle

        return mimebundle(self)


def compare(*runs: pd.DataFrame, labels: Sequence[str] | None = None) -> ProfileFrame:
    """Overlay runs (two models, two servers, HTTP vs gRPC, batching on / off) in one frame.

    Args:
        *runs: Frames returned by :func:`profile` / ``session.profile``.
        labels: One name per run (default: each run's own ``run`` label, else ``run 1`` ...).

    Raises:
        InvalidInputError: The number of labels does not match the runs.
    """
    if labels is not None and len(labels) != len(runs):
        raise InvalidInputError(f"{len(labels)} labels for {len(runs)} runs")
    parts = []
    seen: set[str] = set()
    for i, run in enumerate(runs):
        frame = pd.DataFrame(run).copy()
        if labels is not None:
            frame["run"] = labels[i]
        elif "run" not in frame or frame["run"].nunique() <= 1:
            own = str(frame["run"].iloc[0]) if "run" in frame and len(frame) else ""
            own = own or f"run {i + 1}"
            frame["run"] = f"{own} #{i + 1}" if own in seen else own  # two runs, two curves
        seen.update(str(r) for r in frame["run"].unique())
        parts.append(frame)
    return ProfileFrame(pd.concat(parts, ignore_index=True))
