"""How a profile (``session.profile(...)``, a :class:`~nbinfer.profiling.ProfileFrame`) draws.

Layer: render (pure, duck-typed: a profile is any frame with ``to_dict("records")`` and the
profile's columns); imports nothing of nbinfer outside :mod:`nbinfer.render`. matplotlib is
imported only inside :func:`figure` / :func:`png` (for files and for users who want a figure),
pandas only inside :func:`mimebundle`; the card itself needs neither.

The card draws two charts as inline SVG: throughput, and latency (p50 solid, p99 dashed), each
against the setting (concurrency or request rate) on an evenly spaced axis, the points of a run
sorted and joined in setting order, one line per run. The SVG takes its colours from JupyterLab's
theme variables through the card's stylesheet (with fallbacks for nbconvert and plain HTML), so
it follows light and dark themes, and it scales to the width of its output. Below: where the
time goes (client: encode / network + server / decode; server, from its statistics: queue /
compute input / infer / output) as stacked bars, what ``stable`` means and what to do when a
setting was not, settings where the load generator set the pace, and the table.

Example::

    from nbinfer.render import profile
    profile.figure(frame).savefig("profile.png")
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nbinfer.render.html import (
    Html,
    badge,
    bars,
    card,
    code_spans,
    escape,
    facts,
    legend,
    section,
    table,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["chart_svg", "figure", "mimebundle", "png", "render_profile", "sorted_records"]

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
#: One colour per run (the palette of ``style.css``), in order.
RUN_COLOURS = ("var(--nbi-c3)", "var(--nbi-c1)", "var(--nbi-c2)", "var(--nbi-c4)")
#: Used when a frame predates the ``stability`` / ``window_s`` columns.
DEFAULT_STABILITY = 0.1
STABLE_WINDOWS = 3  # as nbinfer.profiling.STABLE_WINDOWS (not imported: the layer below)

# SVG geometry, in viewBox units (the SVG scales to its container's width).
_W, _H = 380, 236
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 14, 30, 46
_PAD = 18  # between the y axis and the first / last point


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


def _key(row: dict[str, Any]) -> tuple[int, float]:
    """Order of settings: concurrency levels ascending, then request rates ascending."""
    if row.get("mode") == "rate":
        return (1, _num(row.get("request_rate")))
    return (0, _num(row.get("concurrency")))


def _runs(records: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["run"]) for r in records))


def sorted_records(frame: Any) -> list[dict[str, Any]]:
    """The frame's rows grouped by run (first-seen order), each run's settings ascending."""
    records: list[dict[str, Any]] = frame.to_dict("records")
    order = {run: i for i, run in enumerate(_runs(records))}
    return sorted(records, key=lambda r: (order[str(r["run"])], _key(r)))


def _nice_max(value: float) -> tuple[float, float]:
    """An axis top >= ``value`` and a tick step (1, 2, 2.5 or 5 x 10^k, about 4 ticks)."""
    if value <= 0:
        return 1.0, 0.25
    raw = value / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return step * math.ceil(value / step - 1e-9), step


def _tick(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:g}k"
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def chart_svg(
    title: str,
    axis: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, str, bool, Sequence[tuple[int, float]]]],
    *,
    unit: str = "",
    rings: Sequence[tuple[int, float]] = (),
    key: Sequence[tuple[str, bool]] = (),
) -> Html:
    """A line chart as inline SVG whose colours follow the notebook's theme.

    Args:
        title: Shown above the plot (and as its accessible name).
        axis: The x axis title (e.g. ``concurrency``).
        categories: The x positions' labels, in order, evenly spaced.
        series: ``(name, css colour, dashed, [(category index, y), ...])``; points are joined
            in category order.
        unit: Appended to each point's tooltip value.
        rings: Points to ring (e.g. where the load generator was saturated).
        key: Line styles to explain top right: ``(name, dashed)``.
    """
    count = max(len(categories), 1)
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    top, step = _nice_max(max((y for *_, pts in series for _, y in pts), default=0.0))

    def x_at(i: int) -> float:
        if count == 1:
            return _LEFT + plot_w / 2
        return _LEFT + _PAD + i * (plot_w - 2 * _PAD) / (count - 1)

    def y_at(v: float) -> float:
        return _TOP + plot_h * (1 - min(max(v, 0.0), top) / top)

    parts = [f"<title>{escape(title)}</title>"]
    ticks = round(top / step)
    for k in range(ticks + 1):
        v = k * step
        y = y_at(v)
        cls = "nbi-axis" if k == 0 else "nbi-grid"
        parts.append(
            f'<line class="{cls}" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
        )
        parts.append(
            f'<text class="nbi-tick" x="{_LEFT - 6}" y="{y + 3.5:.1f}" text-anchor="end">'
            f"{escape(_tick(v))}</text>"
        )
    parts.append(
        f'<line class="nbi-axis" x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_TOP + plot_h}"/>'
    )
    for i, name in enumerate(categories):
        parts.append(
            f'<text class="nbi-tick" x="{x_at(i):.1f}" y="{_TOP + plot_h + 15}" '
            f'text-anchor="middle">{escape(name)}</text>'
        )
    parts.append(
        f'<text class="nbi-axis-title" x="{_LEFT + plot_w / 2:.1f}" y="{_H - 6}" '
        f'text-anchor="middle">{escape(axis)}</text>'
    )
    parts.append(f'<text class="nbi-chart-title" x="4" y="16">{escape(title)}</text>')
    x = _W - _RIGHT
    for name, dashed in reversed(key):
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        parts.append(
            f'<text class="nbi-tick" x="{x}" y="16" text-anchor="end">{escape(name)}</text>'
            f'<line class="nbi-key" x1="{x - 8 * len(name) - 30}" x2="{x - 8 * len(name) - 6}" '
            f'y1="12" y2="12"{dash}/>'
        )
        x -= 8 * len(name) + 44
    for name, colour, dashed, points in series:
        ordered = sorted(points)
        if not ordered:
            continue
        coords = " ".join(f"{x_at(i):.1f},{y_at(v):.1f}" for i, v in ordered)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        parts.append(
            f'<polyline class="nbi-line" points="{coords}" style="stroke:{colour}"{dash}>'
            f"<title>{escape(name)}</title></polyline>"
        )
        for i, v in ordered:
            tip = f"{name}, {categories[i]}: {_fmt(v)}{unit}"
            parts.append(
                f'<circle class="nbi-point" cx="{x_at(i):.1f}" cy="{y_at(v):.1f}" r="3.5" '
                f'style="fill:{colour}"><title>{escape(tip)}</title></circle>'
            )
    for i, v in rings:
        parts.append(
            f'<circle class="nbi-ring" cx="{x_at(i):.1f}" cy="{y_at(v):.1f}" r="8">'
            "<title>load generator saturated</title></circle>"
        )
    return Html(
        f'<svg class="nbi-chart" viewBox="0 0 {_W} {_H}" width="100%" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


def _axis(records: Sequence[dict[str, Any]]) -> tuple[str, list[tuple[int, float]]]:
    modes = {r.get("mode") for r in records}
    if modes == {"rate"}:
        return "requests per second (open loop)", sorted({_key(r) for r in records})
    if modes == {"concurrency"}:
        return "concurrency (requests in flight)", sorted({_key(r) for r in records})
    return "setting", sorted({_key(r) for r in records})


def _category(key: tuple[int, float], mixed: bool) -> str:
    mode, value = key
    if mode == 1:
        return f"{value:g}/s" if mixed else f"{value:g}"
    return f"c={int(value)}" if mixed else f"{int(value)}"


def _charts(records: list[dict[str, Any]]) -> Html:
    runs = _runs(records)
    axis, keys = _axis(records)
    mixed = axis == "setting"
    position = {key: i for i, key in enumerate(keys)}
    categories = [_category(k, mixed) for k in keys]
    throughput, latency = [], []
    for n, run in enumerate(runs):
        colour = RUN_COLOURS[n % len(RUN_COLOURS)]
        rows = [r for r in records if str(r["run"]) == run]
        where = [position[_key(r)] for r in rows]
        throughput.append(
            (
                run,
                colour,
                False,
                [(i, _num(r["throughput"])) for i, r in zip(where, rows, strict=True)],
            )
        )
        for column, dashed, name in (
            ("latency_p50_ms", False, "p50"),
            ("latency_p99_ms", True, "p99"),
        ):
            points = [(i, _num(r.get(column))) for i, r in zip(where, rows, strict=True)]
            latency.append((f"{run} {name}" if len(runs) > 1 else name, colour, dashed, points))
    hot = [r for r in records if r.get("client_saturated")]
    rings_t = [(position[_key(r)], _num(r["throughput"])) for r in hot]
    rings_l = [(position[_key(r)], _num(r.get("latency_p50_ms"))) for r in hot]
    left = chart_svg(
        "throughput (infer/s)", axis, categories, throughput, unit=" infer/s", rings=rings_t
    )
    right = chart_svg(
        "latency (ms)",
        axis,
        categories,
        latency,
        unit=" ms",
        rings=rings_l,
        key=(("p50", False), ("p99", True)),
    )
    keys_html = ""
    if len(runs) > 1:
        keys_html = "".join(
            f'<span><i style="background:{RUN_COLOURS[n % len(RUN_COLOURS)]}"></i>'
            f"{escape(run)}</span>"
            for n, run in enumerate(runs)
        )
        keys_html = f'<div class="nbi-legend">{keys_html}</div>'
    return Html(f'<div class="nbi-charts">{left}{right}</div>{keys_html}')


def _split(records: list[dict[str, Any]], runs: int) -> Html:
    """Where the time goes: client parts, then the server's (when it has statistics)."""
    client = [(_label(r, runs), [_num(r.get(c)) for _, c in CLIENT_SPLIT]) for r in records]
    scale = max((sum(segs) for _, segs in client), default=0.0)

    def ms(segs: Sequence[float]) -> str:
        return f"{sum(segs):.3g} ms"

    body = [
        Html('<div class="nbi-muted">client, mean per request</div>'),
        legend([name for name, _ in CLIENT_SPLIT]),
        bars(client, scale=scale or None, value=ms),
    ]
    server = [(_label(r, runs), [_num(r.get(c)) for _, c in SERVER_SPLIT]) for r in records]
    if any(sum(segs) > 0 for _, segs in server):
        body += [
            Html('<div class="nbi-muted">server (statistics extension), same windows</div>'),
            legend([name for name, _ in SERVER_SPLIT]),
            bars(server, scale=scale or None, value=ms),
        ]
    return section("Where the time goes (ms)", "".join(body), open=False)


def _tolerance(row: dict[str, Any]) -> float:
    value = _num(row.get("stability"))
    return value if value > 0 else DEFAULT_STABILITY


def stability_note(records: Sequence[dict[str, Any]], runs: int) -> tuple[str, bool]:
    """What ``stable`` means, and for unstable settings what to do: (text, any unstable)."""
    tolerance = max((_tolerance(r) for r in records), default=DEFAULT_STABILITY)
    criterion = (
        f"last {STABLE_WINDOWS} measurement windows agreed within {tolerance:.0%} on "
        "throughput and mean latency"
    )
    shaky = [r for r in records if not bool(r.get("stable"))]
    if not shaky:
        return f"stable: in every setting the {criterion}.", False
    window = max((_num(r.get("window_s")) for r in shaky), default=0.0)
    longer = f"window={2 * window:g}, max_windows=12" if window else "window=1, max_windows=12"
    names = ", ".join(_label(r, runs) for r in shaky)
    return (
        f"not stable: {names}. Stable means the {criterion}; these did not, so their numbers "
        f"moved while measured. Measure longer (`{longer}`) and stop other busy processes "
        "(other kernels, training jobs) while profiling.",
        True,
    )


def _cell(row: dict[str, Any], column: str | None, runs: int) -> Any:
    if column is None:
        return _label(row, runs)
    value = row.get(column)
    if column == "client_cpu":
        return f"{_num(value):.0%}"
    if column == "stable":
        return "yes" if bool(value) else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return value


def _notes(records: list[dict[str, Any]], runs: int) -> tuple[list[str], list[str]]:
    """HTML notes and their plain-text twins: saturation, errors, stability."""
    html: list[str] = []
    text: list[str] = []
    saturated = [_label(r, runs) for r in records if r.get("client_saturated")]
    if saturated:
        names = ", ".join(saturated)
        html.append(
            badge("load generator saturated: " + names, "warn")
            + Html(" these settings measure the client as much as the server (ringed in red)")
        )
        text.append(f"load generator saturated: {names}")
    failed = sum(int(_num(r.get("errors"))) for r in records)
    if failed:
        first = next((r["first_error"] for r in records if r.get("first_error")), "")
        html.append(badge(f"{failed} errors", "err") + Html(" ") + escape(first))
        text.append(f"{failed} errors: {first}")
    note, shaky = stability_note(records, runs)
    if shaky:
        head, rest = note.split(". ", 1)
        html.append(badge(head, "warn") + Html(" ") + code_spans(rest))
    else:
        html.append(Html('<span class="nbi-muted">') + code_spans(note) + Html("</span>"))
    text.append(note.replace("`", ""))
    return html, text


def render_profile(frame: Any) -> Html:
    """A profile as a card: the charts, what to read in them, and the table."""
    records = sorted_records(frame)
    runs = len(_runs(records))
    notes, _ = _notes(records, runs)
    body = [
        facts(
            {
                "model": ", ".join(dict.fromkeys(str(r["model"]) for r in records)),
                "protocol": ", ".join(dict.fromkeys(str(r["protocol"]) for r in records)),
                "batch": ", ".join(dict.fromkeys(str(r["batch_size"]) for r in records)),
            }
        )
    ]
    if records:
        body.append(_charts(records))
    body += [Html(f'<div class="nbi-note">{n}</div>') for n in notes]
    header = [name for name, _ in TABLE]
    rows = [[_cell(r, column, runs) for _, column in TABLE] for r in records]
    body.append(section("Results", table(header, rows, numeric=tuple(range(1, 9)))))
    if records:
        body.append(_split(records, runs))
    title = f"{len(records)} settings" + (f", {runs} runs" if runs > 1 else "")
    return card("Profile", title, "".join(body), text=text_profile(frame))


def text_profile(frame: Any) -> str:
    """The plain-text twin of the card: the table, then the notes."""
    records = sorted_records(frame)
    runs = len(_runs(records))
    _, notes = _notes(records, runs)
    return "\n".join([frame.to_string(), *notes])


def mimebundle(frame: Any) -> dict[str, str]:
    """``text/plain`` + ``text/html`` for a profile frame (pandas' own for a column subset)."""
    if not set(NEEDED) <= set(frame.columns):
        import pandas as pd

        plain = pd.DataFrame(frame)
        return {"text/plain": repr(plain), "text/html": plain._repr_html_()}
    return {"text/plain": text_profile(frame), "text/html": render_profile(frame)}


# -- matplotlib, for files and for users who want a figure ---------------------------------


def figure(frame: Any) -> Figure:
    """Throughput, latency (p50 / p99) and the time split as a matplotlib Figure.

    No pyplot, no global state; points sorted and joined by setting, as in the card.
    """
    from matplotlib.figure import Figure

    records = sorted_records(frame)
    runs = _runs(records)
    axis, keys = _axis(records)
    position = {key: i for i, key in enumerate(keys)}
    categories = [_category(k, axis == "setting") for k in keys]
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    tput, lat, split = fig.subplots(1, 3, width_ratios=(1, 1, 1.2))
    for n, run in enumerate(runs):
        rows = [r for r in records if str(r["run"]) == run]
        x = [position[_key(r)] for r in rows]
        colour = f"C{n % 10}"
        tput.plot(x, [_num(r["throughput"]) for r in rows], "o-", color=colour, label=run)
        lat.plot(x, [_num(r["latency_p50_ms"]) for r in rows], "o-", color=colour, label=run)
        lat.plot(x, [_num(r["latency_p99_ms"]) for r in rows], "^--", color=colour, alpha=0.7)
    hot = [r for r in records if r.get("client_saturated")]
    if hot:
        tput.scatter(
            [position[_key(r)] for r in hot],
            [_num(r["throughput"]) for r in hot],
            s=140,
            facecolors="none",
            edgecolors="red",
            label="client saturated",
        )
    for ax, title in ((tput, "throughput (infer/s)"), (lat, "latency (ms): p50 ─, p99 ┄")):
        ax.set_xticks(range(len(categories)), categories)
        ax.set_xlabel(axis)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    if len(runs) > 1 or hot:
        tput.legend(fontsize=8)

    labels = [_label(r, len(runs)) for r in records]
    ticks: list[str] = []
    for i, r in enumerate(records):
        for k, (who, parts) in enumerate((("client", CLIENT_SPLIT), ("server", SERVER_SPLIT))):
            left = 0.0
            for m, (part, column) in enumerate(parts):
                value = _num(r.get(column))
                colour = f"C{m}" if who == "client" else f"C{m + 4}"
                split.barh(
                    i * 2.6 + k, value, left=left, color=colour, label=part if i == 0 else None
                )
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
    """The profile figure as PNG bytes (``nbinfer profile --png``)."""
    buffer = io.BytesIO()
    figure(frame).savefig(buffer, format="png", dpi=dpi, facecolor="white")
    return buffer.getvalue()
