"""The charts of a stream profile: TTFT, inter-token latency and output tokens/s per concurrency.

Pure functions from plain rows (dicts with the columns of
:data:`nbinfer.profiling.streaming.STREAM_COLUMNS`) to HTML with inline SVG: no matplotlib, no
I/O; colours from JupyterLab's theme variables (light and dark themes), values escaped.

Layer: render; imports only the standard library.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

__all__ = ["line_chart_svg", "stream_profile_html"]

_W, _H, _PAD = 250, 150, 34


def _finite(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(float(v)) else None


def line_chart_svg(
    title: str, xs: Sequence[float], series: Sequence[tuple[str, Sequence[object], str]]
) -> str:
    """A small line chart: ``series`` of ``(label, values, css colour)`` over ``xs``."""
    points = [_finite(v) for _, values, _ in series for v in values]
    top = max([p for p in points if p is not None] or [1.0]) * 1.1 or 1.0
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return _PAD + (v - lo) / span * (_W - _PAD - 10)

    def y(v: float) -> float:
        return _H - 22 - v / top * (_H - 44)

    parts = [
        f'<svg class="g-chart" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" role="img">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="{_PAD}" y="13" class="g-t">{html.escape(title)}</text>',
        f'<line x1="{_PAD}" y1="{_H - 22}" x2="{_W - 6}" y2="{_H - 22}" class="g-axis"/>',
        f'<text x="2" y="{y(top / 1.1) + 4:.1f}" class="g-l">{top / 1.1:.3g}</text>',
    ]
    for v in xs:
        parts.append(f'<text x="{x(v) - 3:.1f}" y="{_H - 8}" class="g-l">{v:g}</text>')
    for i, (label, values, colour) in enumerate(series):
        pts = [
            (x(a), y(b)) for a, b in zip(xs, map(_finite, values), strict=False) if b is not None
        ]
        if pts:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
            parts.append(
                f'<polyline points="{path}" fill="none" style="stroke:{colour}" stroke-width="2"/>'
            )
            parts.extend(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" style="fill:{colour}"/>'
                for px, py in pts
            )
        parts.append(
            f'<text x="{_W - 70}" y="{28 + 12 * i}" class="g-l" style="fill:{colour}">'
            f"{html.escape(label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


_CSS = """<style>
.nbi-sprof{color:var(--jp-content-font-color0,inherit);font-family:var(--jp-content-font-family,
system-ui,sans-serif);font-size:12px}
.nbi-sprof .g-charts{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:6px}
.nbi-sprof .g-chart{border:1px solid var(--jp-border-color2,rgba(127,127,127,.35));
border-radius:4px}
.nbi-sprof .g-t{font-size:11px;font-weight:600;fill:var(--jp-content-font-color0,currentColor)}
.nbi-sprof .g-l{font-size:10px;fill:var(--jp-content-font-color2,currentColor)}
.nbi-sprof .g-axis{stroke:var(--jp-border-color2,rgba(127,127,127,.5))}
.nbi-sprof table{border-collapse:collapse;font-size:11px}
.nbi-sprof td,.nbi-sprof th{padding:1px 6px;text-align:right}
</style>"""

_C1 = "var(--jp-brand-color1, #3b82f6)"
_C2 = "var(--jp-warn-color1, #d98a00)"


def stream_profile_html(rows: Sequence[Mapping[str, object]], *, table_html: str = "") -> str:
    """Three charts over concurrency, then ``table_html`` (the frame's table, the caller's).

    The charts: TTFT p50 / p99, ITL avg / p99, output tokens/s.
    """
    xs = [float(r["concurrency"]) for r in rows]  # type: ignore[arg-type]

    def col(name: str) -> list[object]:
        return [r.get(name) for r in rows]

    charts = [
        line_chart_svg(
            "time to first token (ms)",
            xs,
            [("p50", col("ttft_p50_ms"), _C1), ("p99", col("ttft_p99_ms"), _C2)],
        ),
        line_chart_svg(
            "inter-token latency (ms)",
            xs,
            [("avg", col("itl_avg_ms"), _C1), ("p99", col("itl_p99_ms"), _C2)],
        ),
        line_chart_svg("output tokens/s", xs, [("all", col("output_tokens_per_s"), _C1)]),
    ]
    return (
        f'{_CSS}<div class="nbi-sprof"><div class="g-charts">{"".join(charts)}</div>'
        f'<div style="overflow-x:auto">{table_html}</div></div>'
    )
