"""The statistics DataFrame: a plain ``pandas.DataFrame`` that also draws itself in Jupyter.

Layer: interop (imports ``nbinfer.errors`` and ``protocol`` only, plus pandas / Pillow); never the
client, transports, session or server; its repr hook names its renderer in
:mod:`nbinfer.render.cards`.

``session.stats()`` returns a :class:`StatsFrame`: everything a DataFrame does still works
(indexing, ``plot``, ``to_csv``; derived frames are plain DataFrames), and in a notebook it
displays as a table plus a latency breakdown chart (queue / compute input / infer / output).

One server: one row per model version (:data:`STATS_COLUMNS`). Several servers
(``Session([url1, url2])``): one row per replica, model and version (:data:`REPLICA_COLUMNS`:
``replica`` and ``state`` first, ``error`` last), each replica's own statistics; a replica that
could not answer is one row saying so. The session's own calls per replica (the client-side
counts) ride along in ``attrs["replicas"]`` (one dict per replica, :data:`COUNT_COLUMNS`) and
show in the card; ``session.replica_stats()`` gives them as a frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = [
    "COUNT_COLUMNS",
    "REPLICA_COLUMNS",
    "STATS_COLUMNS",
    "StatsFrame",
    "replica_counts_frame",
    "replica_stats_frame",
    "stats_frame",
]

#: The columns of ``session.stats()`` on one server, in order.
STATS_COLUMNS = [
    "name",
    "version",
    "inference_count",
    "execution_count",
    "success",
    "fail",
    "cancel",
    "success_ms",
    "queue_ms",
    "compute_infer_ms",
    "compute_input_ms",
    "compute_output_ms",
]
#: The columns of ``session.stats()`` over several replicas, in order.
REPLICA_COLUMNS = ["replica", "state", *STATS_COLUMNS, "error"]
#: The columns of ``session.replica_stats()`` (the session's own calls per replica).
COUNT_COLUMNS = [
    "url",
    "state",
    "outstanding",
    "requests",
    "infers",
    "failures",
    "retried",
    "last_error",
]


class StatsFrame(pd.DataFrame):  # type: ignore[misc]
    """Inference statistics, one row per model version (a DataFrame with a rich HTML repr).

    Over several replicas: one row per replica, model and version, with ``replica`` (the URL),
    ``state`` (``up`` / ``down`` / ``error``) and ``error`` columns.
    """

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.cards import stats_bundle

        return stats_bundle(self)


def stats_frame(answer: Mapping[str, Any]) -> StatsFrame:
    """One server's statistics answer (``{"model_stats": [...]}``) as a :class:`StatsFrame`."""
    rows = [stats_row(entry) for entry in answer.get("model_stats", [])]
    return StatsFrame(rows, columns=STATS_COLUMNS)


def replica_stats_frame(
    answers: Sequence[Mapping[str, Any]], counts: Sequence[Mapping[str, Any]] = ()
) -> StatsFrame:
    """Each replica's answer as rows of one :class:`StatsFrame` (:data:`REPLICA_COLUMNS`).

    Args:
        answers: One dict per replica, as ``ReplicaClient.replica_statistics`` gives them:
            ``url``, ``state``, ``statistics`` (its answer, or None) and ``error`` (or None).
        counts: The session's own calls per replica (``ReplicaClient.replica_stats()``), kept
            in ``attrs["replicas"]`` for the card.
    """
    rows: list[dict[str, Any]] = []
    for answer in answers:
        error = answer.get("error")
        head = {"replica": answer["url"], "state": answer["state"]}
        tail = {"error": "" if error is None else str(error)}
        entries = (answer.get("statistics") or {}).get("model_stats", [])
        # a replica with nothing to show (down, an error, no model): one row of zeros
        rows += [{**head, **stats_row(e), **tail} for e in entries or [{}]]
    frame = StatsFrame(rows, columns=REPLICA_COLUMNS)
    frame.attrs["replicas"] = [_counts(c) for c in counts]
    return frame


def replica_counts_frame(counts: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The client-side counts per replica as a DataFrame (:data:`COUNT_COLUMNS`)."""
    return pd.DataFrame([_counts(c) for c in counts], columns=COUNT_COLUMNS)


def _counts(row: Mapping[str, Any]) -> dict[str, Any]:
    """A replica's counts with ``state`` (``healthy`` / ``skipped``) for its ``up`` flag."""
    state = "healthy" if row.get("up", True) else "skipped"
    return {c: state if c == "state" else row.get(c) for c in COUNT_COLUMNS}


def stats_row(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the statistics frame from a model's ``model_stats`` entry."""
    stats = entry.get("inference_stats", {})

    def mean_ms(key: str) -> float:
        item = stats.get(key) or {}
        count = int(item.get("count", 0))
        return float(item.get("ns", 0)) / count / 1e6 if count else 0.0

    return {
        "name": entry.get("name", ""),
        "version": entry.get("version", ""),
        "inference_count": int(entry.get("inference_count", 0)),
        "execution_count": int(entry.get("execution_count", 0)),
        "success": int((stats.get("success") or {}).get("count", 0)),
        "fail": int((stats.get("fail") or {}).get("count", 0)),
        # requests their clients gave up (Triton's field: the first response's cancel count)
        "cancel": int(_response_stat(entry, "cancel").get("count", 0)),
        "success_ms": mean_ms("success"),
        "queue_ms": mean_ms("queue"),
        "compute_infer_ms": mean_ms("compute_infer"),
        "compute_input_ms": mean_ms("compute_input"),
        "compute_output_ms": mean_ms("compute_output"),
    }


def _response_stat(entry: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``key`` of the first response's statistics (``response_stats["0"]``), or empty."""
    first = (entry.get("response_stats") or {}).get("0") or {}
    return first.get(key) or {}
