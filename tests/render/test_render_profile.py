"""The profile card, the statistics table and probability frames, drawn without a server.

Frames are built by hand (the columns a run produces), so each case is exact: settings given out
of order, an unstable and a saturated setting, two runs, a model never used.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import nbinfer
from nbinfer.interop.pandas import outputs_to_dataframe
from nbinfer.interop.probabilities import ProbabilityFrame, probability_columns
from nbinfer.interop.stats import StatsFrame
from nbinfer.profiling import COLUMNS, ProfileFrame, ProfileProgress
from nbinfer.render import profile
from nbinfer.render.html import css as stylesheet

#: Given out of order on purpose: the card sorts by concurrency.
ORDER = (8, 1, 4, 2)
THROUGHPUT = {1: 900.0, 2: 1700.0, 4: 1500.0, 8: 2100.0}  # not monotone: would zig-zag by x


def _row(concurrency: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS, 0.0)
    row.update(
        run="iris (http)",
        model="iris",
        protocol="http",
        shared_memory="none",
        mode="concurrency",
        concurrency=concurrency,
        request_rate=None,
        batch_size=1,
        requests=500,
        errors=0,
        throughput=THROUGHPUT[concurrency],
        latency_avg_ms=concurrency * 0.5,
        latency_p50_ms=concurrency * 0.5,
        latency_p90_ms=concurrency * 0.8,
        latency_p95_ms=concurrency * 0.9,
        latency_p99_ms=concurrency * 1.2,
        latency_max_ms=concurrency * 2.0,
        client_encode_ms=0.05,
        client_network_ms=concurrency * 0.4,
        client_decode_ms=0.02,
        server_queue_ms=0.01,
        server_compute_input_ms=0.02,
        server_compute_infer_ms=0.2,
        server_compute_output_ms=0.02,
        windows=3,
        stable=True,
        stability=0.1,
        window_s=0.5,
        client_cpu=0.3,
        client_saturated=False,
        first_error="",
    )
    row.update(changes)
    return row


def _frame(**changes_by_level: dict[str, Any]) -> ProfileFrame:
    rows = [_row(c, **changes_by_level.get(f"c{c}", {})) for c in ORDER]
    return ProfileFrame(rows, columns=list(COLUMNS))


class Svg(HTMLParser):
    """The polylines and texts of every inline SVG chart in a card."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.charts: list[dict[str, Any]] = []
        self.in_text = False
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.charts.append({"attrs": a, "lines": [], "texts": []})
        elif tag == "polyline" and self.charts:
            points = [tuple(map(float, p.split(","))) for p in a["points"].split()]
            self.charts[-1]["lines"].append({**a, "points": points})
        self.in_text = tag == "text"

    def handle_data(self, data: str) -> None:
        if self.in_text and self.charts:
            self.charts[-1]["texts"].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "text":
            self.in_text = False


def test_points_are_sorted_and_joined_by_concurrency() -> None:
    html = profile.render_profile(_frame())
    charts = Svg(html).charts
    assert len(charts) == 2  # throughput, latency
    throughput, latency = charts
    (line,) = throughput["lines"]
    xs = [x for x, _ in line["points"]]
    assert xs == sorted(xs) and len(set(xs)) == 4  # monotone x: no zig-zag, no crossing
    ys = [y for _, y in line["points"]]
    # SVG y grows downwards: the ranks of -y follow the throughputs in concurrency order
    expected = [THROUGHPUT[c] for c in sorted(ORDER)]
    assert np.argsort([-y for y in ys]).tolist() == np.argsort(expected).tolist()
    # the x axis names the settings in order, evenly spaced
    assert [t for t in throughput["texts"] if t in {"1", "2", "4", "8"}] == ["1", "2", "4", "8"]
    assert np.allclose(np.diff(xs), np.diff(xs)[0], atol=0.2)  # rounded to 0.1
    assert "concurrency (requests in flight)" in throughput["texts"]
    # latency: p50 solid and p99 dashed, both monotone in x
    assert [("stroke-dasharray" in ln) for ln in latency["lines"]] == [False, True]
    for ln in latency["lines"]:
        assert [x for x, _ in ln["points"]] == xs
    # the table lists the settings in the same order
    rows = re.findall(r"<tr><td>(c=\d+)</td>", html)
    assert rows == ["c=1", "c=2", "c=4", "c=8"]


def test_the_chart_is_inline_svg_in_theme_colours_and_scales_to_its_column() -> None:
    html = profile.render_profile(_frame())
    assert "data:image/png" not in html and "<img" not in html
    (first, _) = Svg(html).charts
    assert first["attrs"]["width"] == "100%" and first["attrs"]["viewbox"].startswith("0 0 ")
    assert "var(--nbi-c3)" in first["lines"][0]["style"]  # the run's colour: a theme variable
    css = stylesheet()
    rules = css[css.index(".nbi svg.nbi-chart") :]
    assert "color: var(--nbi-fg)" in rules and "fill: currentColor" in rules
    assert "stroke: var(--nbi-border)" in rules
    assert "--nbi-fg: var(--jp-content-font-color0" in css  # JupyterLab's, with a fallback


def test_the_card_needs_no_matplotlib() -> None:
    code = (
        "import sys\n"
        "from tests.render.test_render_profile import _frame\n"
        "from nbinfer.render.profile import render_profile\n"
        "assert '<svg' in render_profile(_frame())\n"
        "print('matplotlib' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_unstable_settings_are_explained_with_what_to_do() -> None:
    frame = _frame(c4={"stable": False}, c8={"stable": False, "windows": 6})
    bundle = frame._repr_mimebundle_()
    for text in (bundle["text/plain"], bundle["text/html"]):
        assert "not stable: c=4, c=8" in text
        assert "Stable means the last 3 measurement windows agreed within 10%" in text
        assert "window=1, max_windows=12" in text  # twice the window the run used
        assert "other busy processes" in text
    assert "<code>window=1, max_windows=12</code>" in bundle["text/html"]


def test_stable_runs_still_say_what_stable_means() -> None:
    bundle = _frame()._repr_mimebundle_()
    for text in (bundle["text/plain"], bundle["text/html"]):
        assert "not stable" not in text
        assert "stable: in every setting the last 3 measurement windows agreed within 10%" in text


def test_saturated_points_are_ringed_and_named() -> None:
    html = profile.render_profile(_frame(c8={"client_saturated": True}))
    assert html.count('class="nbi-ring"') == 2  # on both charts
    assert "load generator saturated: c=8" in html


def test_two_runs_draw_two_lines_and_a_legend() -> None:
    other = _frame().assign(run="iris (grpc)", throughput=lambda f: f["throughput"] / 2)
    both = _frame().compare(other)
    html = profile.render_profile(both)
    throughput, latency = Svg(html).charts
    assert len(throughput["lines"]) == 2 and len(latency["lines"]) == 4
    for line in throughput["lines"]:
        xs = [x for x, _ in line["points"]]
        assert xs == sorted(xs)
    assert "iris (http)" in html and "iris (grpc)" in html and "nbi-legend" in html


def test_request_rates_sort_numerically() -> None:
    rows = [
        {**_row(1), "mode": "rate", "concurrency": None, "request_rate": rate, "throughput": rate}
        for rate in (500.0, 50.0, 100.0)
    ]
    html = profile.render_profile(ProfileFrame(rows))
    (line,) = Svg(html).charts[0]["lines"]
    assert [x for x, _ in line["points"]] == sorted(x for x, _ in line["points"])
    assert re.findall(r"<tr><td>([\d.]+/s)</td>", html) == ["50/s", "100/s", "500/s"]
    assert "requests per second (open loop)" in html


def test_the_matplotlib_figure_is_sorted_too() -> None:
    fig = profile.figure(_frame())
    throughput = fig.axes[0]
    (line,) = throughput.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2, 3]
    assert list(line.get_ydata()) == [THROUGHPUT[c] for c in sorted(ORDER)]


def test_names_in_the_chart_are_escaped() -> None:
    svg = profile.chart_svg("<t>", "x", ["<c>"], [("<b>", "red", False, [(0, 1.0)])])
    assert "<t>" not in svg and "&lt;t&gt;" in svg and "&lt;b&gt;" in svg and "<b>" not in svg


def test_progress_events_read_as_phases() -> None:
    warm = ProfileProgress("warm-up", "c=2", 1, 4)
    assert str(warm) == "c=2 (2/4): warm-up"
    window = ProfileProgress("measure", "c=2", 1, 4, 2, 6, 1234.0, 0.5)
    assert str(window) == "c=2 (2/4): window 2/6, 1,234 infer/s, 0.50 ms"
    assert "not stable" in str(ProfileProgress("done", "c=2", 1, 4, 6, 6, 1.0, 1.0, False))


# -- statistics ------------------------------------------------------------------------------


def _stats(used: bool) -> dict[str, Any]:
    count = 31 if used else 0
    return {
        "name": "iris" if used else "digits",
        "version": "1",
        "inference_count": count,
        "execution_count": count,
        "success": count,
        "fail": 0,
        "cancel": 0,
        "success_ms": 5.44 if used else 0.0,
        "queue_ms": 0.01 if used else 0.0,
        "compute_infer_ms": 5.2 if used else 0.0,
        "compute_input_ms": 0.1 if used else 0.0,
        "compute_output_ms": 0.05 if used else 0.0,
    }


def test_unused_models_show_a_dash_not_zero_ms() -> None:
    stats = StatsFrame([_stats(True), _stats(False)])
    bundle = stats._repr_mimebundle_()
    html = bundle["text/html"]
    cells = re.findall(r"<tr><td><code>(\w+)</code></td>(.*?)</tr>", html)
    by_name = {name: re.findall(r">([^<]*)</td>", rest) for name, rest in cells}
    assert by_name["iris"][-1] == "5.440" and by_name["digits"][-1] == "—"
    assert "0.000" not in html.split("Latency per request")[0]
    digits = next(line for line in bundle["text/plain"].splitlines() if "digits" in line)
    assert "—" in digits and "0.000" not in digits
    assert stats.loc[1, "success_ms"] == 0.0  # the data is unchanged: only the display


def test_stats_name_requests_executions_and_inferences_and_say_what_rows_are() -> None:
    bundle = StatsFrame([_stats(True)])._repr_mimebundle_()
    head = re.findall(r"<th>([^<]*)</th>", bundle["text/html"])
    assert head[:6] == ["model", "version", "requests", "executions", "inferences", "fail"]
    for text in (bundle["text/html"], bundle["text/plain"]):
        assert "batch elements" in text and "does not count rows" in text


def test_code_names_keep_their_style_on_striped_rows() -> None:
    css = stylesheet()
    # JupyterLab's .jp-RenderedHTMLCommon tbody tr:nth-child(even) is (0,2,2): ours outranks it
    assert ".nbi table.nbi-table tr:nth-child(n) { background: transparent; }" in css
    rule = css[css.index(".nbi table.nbi-table :not(pre) > code") :].split("}")[0]
    assert "border: 1px solid" in rule and "background: var(--nbi-code-bg)" in rule


# -- probabilities ---------------------------------------------------------------------------

SOFTMAX = np.array(
    [
        [9.975868e-01, 0.002413, 5.209688e-13],
        [1.054164e-07, 0.005028, 9.949716e-01],
        [4.554820e-03, 0.963226, 3.221898e-02],
    ],
    dtype=np.float32,
)
LABELS = {"probabilities": ["setosa", "versicolor", "virginica"]}


def _probabilities() -> pd.DataFrame:
    out = nbinfer.InferOutput("probabilities", "FP32", [3, 3], SOFTMAX)
    frame: pd.DataFrame = outputs_to_dataframe([out], labels=LABELS)
    return frame


def test_probabilities_display_with_four_decimals_in_text_and_html() -> None:
    frame = _probabilities()
    assert isinstance(frame, ProbabilityFrame)
    text, html = repr(frame), frame._repr_html_() or ""
    for shown in (text, html):
        assert "e-" not in shown and "e+" not in shown
        for value in ("0.9976", "0.0024", "0.0000", "0.9950", "0.9632", "0.0322"):
            assert value in shown
    row = text.splitlines()[1].split()
    assert row == ["0", "0.9976", "0.0024", "0.0000"]
    # values are never changed, and derived frames keep the rule
    assert np.array_equal(frame.to_numpy(), SOFTMAX)
    assert "0.9976" in repr(frame.head(1)) and "e-" not in repr(frame.head(1))


def test_other_outputs_keep_pandas_format() -> None:
    scores = nbinfer.InferOutput("logits", "FP32", [2, 2], np.array([[3.5, -1.0], [0.2, 7.25]]))
    frame = outputs_to_dataframe([scores])
    assert type(frame) is pd.DataFrame and probability_columns(frame) == []
    mixed = outputs_to_dataframe(
        [
            nbinfer.InferOutput("probabilities", "FP32", [3, 3], SOFTMAX),
            nbinfer.InferOutput("score", "FP64", [3], np.array([123.456789, 1e-9, 2.0])),
        ],
        labels=LABELS,
    )
    assert probability_columns(mixed) == [f"probabilities[{k}]" for k in LABELS["probabilities"]]
    for shown in (repr(mixed), mixed._repr_html_() or ""):  # pandas' own for the other column
        assert "1.000000e-09" in shown and "0.9976" in shown
    with pd.option_context("display.max_columns", 2):  # truncated: formats stay on their columns
        assert "1.000000e-09" in repr(mixed) and "0.9976" in repr(mixed)


def test_nan_probabilities_are_not_formatted_as_a_distribution() -> None:
    broken = SOFTMAX.copy()
    broken[0, 0] = np.nan
    out = nbinfer.InferOutput("probabilities", "FP32", [3, 3], broken)
    assert type(outputs_to_dataframe([out], labels=LABELS)) is pd.DataFrame
