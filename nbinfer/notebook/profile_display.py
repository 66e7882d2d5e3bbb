"""How a profile (``session.profile(...)``, a :class:`~nbinfer.profiling.ProfileFrame`) draws.

Layer: the notebook floor: matplotlib is imported here and only here; nothing below the notebook
layer imports this module except the profile frame's repr hook.

Three panels from matplotlib (imported here, only when a profile is drawn): throughput against
latency (p50 solid, p99 dashed; one curve per run), the latency percentiles of every setting,
and where the time goes (client: encode / network + server / decode; server, from its
statistics: queue / compute input / infer / output) as stacked bars. The HTML card adds the
table and flags settings where the load generator, not the server, set the pace.

Example::

    from nbinfer.notebook import profile_display
    profile_display.figure(frame).savefig("profile.png")
"""

from __future__ import annotations

import base64
import io
import math
from typing import TYPE_CHECKING, Any

from nbinfer.notebook.display import Html, badge, card, escape, facts, section, table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["figure", "mimebundle", "png", "render_profile"]

PERCENTILES = ("p50", "p90", "p95", "p99", "max")
CLIENT_SPLIT = (
    ("encode", "client_encode_ms"),
    ("network + server", "client_network_ms"),
    ("decode", "client_decode_ms"),
)
SERVER_SPLIT = (
    ("queue", "server_queue_ms"),
    ("compute input", "server_compute_input_ms"),
    ("infer", "server_compute_infer_ms"),
    ("output", "server_compute_output_ms"),
)
#: The columns a frame needs to draw as a profile (a column subset draws as a plain DataFrame).
NEEDED = ("run", "model", "protocol", "mode", "concurrency", "request_rate", "throughput")
TABLE = (
    ("setting", None),
    ("infer/s", "throughput"),
    ("p50 ms", "latency_p50_ms"),
    ("p90 ms", "latency_p90_ms"),
    ("p99 ms", "latency_p99_ms"),
    ("max ms", "latency_max_ms"),
    ("errors", "errors"),
    ("stable", "stable"),
    ("client cpu", "client_cpu"),
)


def _setting(row: dict[str, Any]) -> str:
    if row.get("mode") == "rate":
        return f"{float(row['request_rate']):g}/s"
    return f"c={int(row['concurrency'])}"


def _label(row: dict[str, Any], runs: int) -> str:
    return f"{row['run']} · {_setting(row)}" if runs > 1 else _setting(row)


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def figure(frame: Any) -> Figure:
    """The three profile panels as a matplotlib Figure (no pyplot, no global state)."""
    from matplotlib.figure import Figure

    records: list[dict[str, Any]] = frame.to_dict("records")
    runs = list(dict.fromkeys(str(r["run"]) for r in records))
    fig = Figure(figsize=(13, 4.2), layout="constrained")
    curve, pct, split = fig.subplots(1, 3, width_ratios=(1.1, 1.2, 1.2))
    colours = [f"C{i % 10}" for i in range(len(runs))]
    for run, colour in zip(runs, colours, strict=True):
        rows = [r for r in records if str(r["run"]) == run]
        x = [_num(r["throughput"]) for r in rows]
        curve.plot(x, [_num(r["latency_p50_ms"]) for r in rows], "o-", color=colour, label=run)
        curve.plot(x, [_num(r["latency_p99_ms"]) for r in rows], "^--", color=colour, alpha=0.6)
        for r, xi in zip(rows, x, strict=True):
            curve.annotate(
                _setting(r),
                (xi, _num(r["latency_p50_ms"])),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
                color=colour,
            )
    hot = [r for r in records if r.get("client_saturated")]
    if hot:  # the load generator set the pace there: ringed, and named in the legend
        curve.scatter(
            [_num(r["throughput"]) for r in hot],
            [_num(r["latency_p50_ms"]) for r in hot],
            s=140,
            facecolors="none",
            edgecolors="red",
            label="client saturated",
        )
    curve.set_xlabel("throughput (infer/s)")
    curve.set_ylabel("latency (ms)")
    curve.set_title("Throughput vs latency (p50 ─, p99 ┄)", fontsize=10)
    curve.set_ylim(bottom=0)
    curve.grid(alpha=0.3)
    if len(runs) > 1 or hot:
        curve.legend(fontsize=8)

    labels = [_label(r, len(runs)) for r in records]
    width = 0.8 / len(PERCENTILES)
    for j, name in enumerate(PERCENTILES):
        column = "latency_max_ms" if name == "max" else f"latency_{name}_ms"
        pct.bar(
            [i + (j - 2) * width for i in range(len(records))],
            [_num(r[column]) for r in records],
            width,
            label=name,
            color=f"C{j}",
            alpha=0.85,
        )
    pct.set_xticks(range(len(records)), labels, rotation=30, ha="right", fontsize=8)
    pct.set_ylabel("latency (ms)")
    pct.set_title("Latency percentiles", fontsize=10)
    pct.legend(fontsize=7, ncols=len(PERCENTILES))
    pct.grid(axis="y", alpha=0.3)

    ticks: list[str] = []
    for i, r in enumerate(records):
        for k, (who, parts) in enumerate((("client", CLIENT_SPLIT), ("server", SERVER_SPLIT))):
            y = i * 2.6 + k
            left = 0.0
            for n, (part, column) in enumerate(parts):
                value = _num(r.get(column))
                colour = f"C{n}" if who == "client" else f"C{n + 4}"
                split.barh(y, value, left=left, color=colour, label=part if i == 0 else None)
                left += value
            ticks.append(f"{labels[i]} {who}")
    split.set_yticks([i * 2.6 + k for i in range(len(records)) for k in (0, 1)], ticks)
    split.tick_params(axis="y", labelsize=7)
    split.invert_yaxis()
    split.set_xlabel("mean time per request (ms)")
    split.set_title("Where the time goes", fontsize=10)
    split.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=4)
    split.grid(axis="x", alpha=0.3)
    return fig


def png(frame: Any, *, dpi: int = 90) -> bytes:
    """The profile figure as PNG bytes."""
    buffer = io.BytesIO()
    figure(frame).savefig(buffer, format="png", dpi=dpi, facecolor="white")
    return buffer.getvalue()


def _cell(row: dict[str, Any], column: str | None, runs: int) -> Any:
    if column is None:
        return _label(row, runs)
    value = row.get(column)
    if column == "client_cpu":
        return f"{_num(value):.0%}"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return value


def render_profile(frame: Any) -> Html:
    """A profile as a card: the plots, the saturation warnings and the table."""
    records: list[dict[str, Any]] = frame.to_dict("records")
    runs = len({str(r["run"]) for r in records})
    notes = []
    saturated = [_label(r, runs) for r in records if r.get("client_saturated")]
    if saturated:
        notes.append(
            badge("load generator saturated: " + ", ".join(saturated), "warn")
            + Html(" these settings measure the client as much as the server")
        )
    failed = sum(int(_num(r.get("errors"))) for r in records)
    if failed:
        first = next((r["first_error"] for r in records if r.get("first_error")), "")
        notes.append(badge(f"{failed} errors", "err") + Html(" ") + escape(first))
    body = [
        facts(
            {
                "model": ", ".join(dict.fromkeys(str(r["model"]) for r in records)),
                "protocol": ", ".join(dict.fromkeys(str(r["protocol"]) for r in records)),
                "batch": ", ".join(dict.fromkeys(str(r["batch_size"]) for r in records)),
            }
        ),
        *(Html(f"<div>{n}</div>") for n in notes),
    ]
    if records:
        uri = "data:image/png;base64," + base64.b64encode(png(frame)).decode("ascii")
        body.append(Html(f'<img alt="profile plots" style="max-width:100%" src="{uri}">'))
    header = [name for name, _ in TABLE]
    rows = [[_cell(r, column, runs) for _, column in TABLE] for r in records]
    body.append(section("Results", table(header, rows, numeric=tuple(range(1, 9)))))
    title = f"{len(records)} settings" + (f", {runs} runs" if runs > 1 else "")
    return card("Profile", title, "".join(body), text=frame.to_string())


def mimebundle(frame: Any) -> dict[str, str]:
    """``text/plain`` + ``text/html`` for a profile frame (pandas' own for a column subset)."""
    if not set(NEEDED) <= set(frame.columns):
        import pandas as pd

        plain = pd.DataFrame(frame)
        return {"text/plain": repr(plain), "text/html": plain._repr_html_()}
    return {"text/plain": frame.to_string(), "text/html": render_profile(frame)}
