"""The statistics card over several replicas: each row's replica and state, the session's calls."""

from __future__ import annotations

import re
from typing import Any

from nbinfer.interop.stats import REPLICA_COLUMNS, replica_stats_frame, stats_frame
from nbinfer.render.cards import render_stats
from tests.render.pages import EVIL, safe, themed


def _entry(name: str, count: int, ns: int) -> dict[str, Any]:
    """A model's ``model_stats`` entry as a server sends it."""
    timed = {"count": count, "ns": ns}
    return {
        "name": name,
        "version": "1",
        "inference_count": count,
        "execution_count": count,
        "inference_stats": {k: timed for k in ("success", "queue", "compute_infer")},
    }


def _answers() -> list[dict[str, Any]]:
    return [
        {
            "url": "http://127.0.0.1:8000",
            "state": "up",
            "statistics": {"model_stats": [_entry("iris", 4, 8_000_000)]},
            "error": None,
        },
        {"url": "http://127.0.0.1:9000", "state": "down", "statistics": None, "error": EVIL},
        {
            "url": "http://127.0.0.1:9100",
            "state": "error",
            "statistics": None,
            "error": ValueError("model iris unknown here"),
        },
    ]


def _counts() -> list[dict[str, Any]]:
    row = {"outstanding": 0, "requests": 3, "infers": 3, "failures": 0, "retried": 0}
    return [
        {"url": "http://127.0.0.1:8000", "up": True, **row, "last_error": ""},
        {"url": "http://127.0.0.1:9000", "up": False, **row, "failures": 1, "last_error": EVIL},
        {"url": "http://127.0.0.1:9100", "up": True, **row, "last_error": ""},
    ]


def test_each_replica_is_a_row_and_one_that_cannot_answer_says_why() -> None:
    frame = replica_stats_frame(_answers(), _counts())
    assert list(frame.columns) == REPLICA_COLUMNS
    assert list(frame["state"]) == ["up", "down", "error"]
    assert list(frame["success"]) == [4, 0, 0] and frame.loc[0, "success_ms"] == 2.0
    assert list(frame["error"]) == ["", EVIL, "model iris unknown here"]
    assert [c["state"] for c in frame.attrs["replicas"]] == ["healthy", "skipped", "healthy"]
    markup = render_stats(frame)
    themed(markup)
    page = safe(markup)  # the hostile error text stays text
    text = page.joined()
    assert "1 model versions on 3 replicas (1 down, 1 error)" in text
    assert EVIL in text and "model iris unknown here" in text
    assert re.findall(r"<th>(.*?)</th>", markup)[:3] == ["replica", "model", "version"]
    assert "<code>127.0.0.1:9000</code>" in markup  # short: no scheme
    assert "iris v1 · 127.0.0.1:8000" in text  # the chart says which replica a bar is
    assert "This session's calls per replica" in text and "skipped" in text
    badges = [a.get("class") for t, a in page.tags if t == "span" and "nbi-badge" in str(a)]
    assert {"nbi-badge nbi-ok", "nbi-badge nbi-err", "nbi-badge nbi-warn"} <= set(badges)
    plain = frame._repr_mimebundle_()["text/plain"]
    assert "calls per replica" in plain and "state=skipped" in plain


def test_a_one_server_frame_has_no_replica_column_or_counts() -> None:
    frame = stats_frame({"model_stats": [_entry("iris", 2, 2_000_000)]})
    assert "replica" not in frame.columns and "replicas" not in frame.attrs
    text = safe(render_stats(frame)).joined()
    assert "1 model versions" in text and "replicas" not in text
    assert "iris v1" in text and "·" not in text
