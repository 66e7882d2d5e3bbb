"""The building blocks of every nbinfer repr: safe markup, the stylesheet, tables, cards, bars.

Layer: render (pure, duck-typed): stdlib and numpy, Pillow only inside :func:`png_data_uri`;
imports nothing of nbinfer outside :mod:`nbinfer.render`, so every layer may import it and each
class's ``_repr_*_`` names its renderer here (xarray's ``formatting_html`` is the model).

Every value passes through :func:`escape` (:class:`Html` is markup that is already safe);
colours come from JupyterLab's ``--jp-*`` theme variables through ``static/style.css`` (with
fallbacks), so light and dark themes both work; :func:`card` carries a ``text/plain`` twin that
shows where a sanitizer strips the styles.

Example::

    from nbinfer.render.html import card, table
    html = card("Table", "two rows", table(["a", "b"], [[1, 2], [3, "<x>"]]), text="a b")
"""

from __future__ import annotations

import base64
import functools
import html
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.resources import files
from typing import Any

import numpy as np

__all__ = [
    "COLLAPSE_AFTER",
    "MAX_ITEMS",
    "THUMB_SIZE",
    "Html",
    "badge",
    "bars",
    "card",
    "chips",
    "code_spans",
    "css",
    "escape",
    "facts",
    "legend",
    "png_data_uri",
    "section",
    "table",
    "thumbnails",
]

#: At most this many images (thumbnails) or classification rows per output.
MAX_ITEMS = 8
#: Thumbnail size bound in pixels.
THUMB_SIZE = 128
#: Sections with more rows than this start collapsed.
COLLAPSE_AFTER = 12


class Html(str):
    """A string of markup that is already safe; :func:`escape` passes it through unchanged."""

    __slots__ = ()


def escape(value: Any) -> Html:
    """Escape ``value`` (its ``str``) for HTML text and attributes; :class:`Html` passes through."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


@functools.cache
def css(sheet: str = "style.css") -> str:
    """A stylesheet from ``nbinfer/render/static/``, read once.

    ``style.css`` holds the one colour palette and every repr inlines it; ``browser.css`` is the
    model browser's layout over that palette.
    """
    return files("nbinfer.render").joinpath("static", sheet).read_text(encoding="utf-8")


def table(
    header: Sequence[Any], rows: Iterable[Sequence[Any]], *, numeric: Sequence[int] = ()
) -> Html:
    """An HTML table; every cell is escaped unless it is :class:`Html`.

    Args:
        header: Column titles.
        rows: Cell values per row.
        numeric: Column positions to right-align (numbers).
    """
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="nbi-num">{escape(v)}</td>' if i in numeric else f"<td>{escape(v)}</td>"
            for i, v in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return Html(f'<table class="nbi-table"><tr>{head}</tr>{"".join(body)}</table>')


def section(title: Any, body: str, *, count: int | None = None, open: bool = True) -> Html:
    """A collapsible section (``<details>``); ``body`` must already be safe markup."""
    extra = f' <span class="nbi-count">({count})</span>' if count is not None else ""
    flag = " open" if open else ""
    return Html(
        f"<details{flag}><summary>{escape(title)}{extra}</summary>"
        f'<div class="nbi-body">{body}</div></details>'
    )


def facts(items: Mapping[str, Any]) -> Html:
    """A row of ``label: value`` facts; empty values are left out."""
    spans = "".join(
        f"<span><b>{escape(k)}</b>{escape(v)}</span>"
        for k, v in items.items()
        if v not in (None, "", [])
    )
    return Html(f'<div class="nbi-facts">{spans}</div>')


def badge(text: Any, tone: str = "") -> Html:
    """A small outlined label; ``tone`` is ``ok``, ``warn``, ``err``, ``muted`` or empty."""
    cls = f" nbi-{tone}" if tone else ""
    return Html(f'<span class="nbi-badge{cls}">{escape(text)}</span>')


def chips(values: Iterable[Any]) -> Html:
    """Values as small chips (e.g. protocol extensions)."""
    return Html("".join(f'<span class="nbi-chip">{escape(v)}</span>' for v in values))


def card(
    kind: str, title: Any, body: str, *, text: str, sub: Any = "", error: bool = False
) -> Html:
    """The frame of every repr: inline CSS, a plain-text fallback, a header and ``body``.

    The HTML part is hidden by an inline style that the stylesheet overrides, so where a
    notebook's sanitizer strips ``<style>`` (untrusted notebooks) the ``text`` fallback shows.
    """
    cls = "nbi nbi-error" if error else "nbi"
    sub_html = f'<span class="nbi-sub">{escape(sub)}</span>' if sub != "" else ""
    return Html(
        f"<style>{css()}</style>"
        f'<div class="{cls}"><pre class="nbi-fallback">{escape(text)}</pre>'
        f'<div class="nbi-wrap" style="display:none">'
        f'<div class="nbi-head"><span class="nbi-kind">{escape(kind)}</span>'
        f'<span class="nbi-title">{escape(title)}</span>{sub_html}</div>{body}</div></div>'
    )


def bars(
    items: Sequence[tuple[Any, Sequence[float]]],
    *,
    scale: float | None = None,
    value: Callable[[Sequence[float]], str] | None = None,
) -> Html:
    """Horizontal (stacked) bars: one row per ``(label, segments)``.

    Args:
        items: Label and segment lengths per row (one segment: a plain bar; up to four
            segments take the series colours ``nbi-s1`` .. ``nbi-s4``).
        scale: The length of a full bar (default: the longest row).
        value: Formats the text after each bar (default: the row total, 3 significant digits).
    """
    totals = [sum(max(float(s), 0.0) for s in segs) for _, segs in items]
    full = scale if scale is not None else max(totals, default=0.0)
    fmt = value or (lambda segs: f"{sum(segs):.3g}")
    rows = []
    for (label, segs), _total in zip(items, totals, strict=True):
        series = len(segs) > 1  # one segment: the accent colour; several: the series colours
        fills = "".join(
            f'<div class="nbi-fill{f" nbi-s{i % 4 + 1}" if series else ""}" '
            f'style="width:{_percent(s, full)}"></div>'
            for i, s in enumerate(segs)
        )
        rows.append(
            f'<span class="nbi-label" title="{escape(label)}">{escape(label)}</span>'
            f'<div class="nbi-track">{fills}</div>'
            f'<span class="nbi-value">{escape(fmt(segs))}</span>'
        )
    return Html(f'<div class="nbi-bars">{"".join(rows)}</div>')


def _percent(part: float, whole: float) -> str:
    if not whole or not math.isfinite(part) or part <= 0:
        return "0%"
    return f"{min(100.0, 100.0 * part / whole):.2f}%"


def legend(names: Sequence[str]) -> Html:
    """The colour legend matching :func:`bars` segments."""
    keys = "".join(
        f'<span><i class="nbi-fill nbi-s{i % 4 + 1}"></i>{escape(n)}</span>'
        for i, n in enumerate(names)
    )
    return Html(f'<div class="nbi-legend">{keys}</div>')


def code_spans(text: str) -> Html:
    """Escape ``text`` and turn `backticked` parts into ``<code>``."""
    parts = escape(text).split("`")
    return Html("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


def _to_uint8(frame: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if frame.dtype == np.uint8:
        return frame
    values = frame.astype(np.float64)
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    if lo >= 0.0 and hi <= 1.0:
        values = values * 255.0
    elif not (lo >= 0.0 and hi <= 255.0):
        values = (values - lo) / ((hi - lo) or 1.0) * 255.0
    out: np.ndarray[Any, Any] = np.nan_to_num(values).clip(0, 255).astype(np.uint8)
    return out


def png_data_uri(frame: np.ndarray[Any, Any], size: int = THUMB_SIZE) -> str:
    """A ``data:image/png`` URI of an HxW or HxWxC array, shrunk to fit ``size`` pixels."""
    from PIL import Image

    image = Image.fromarray(_to_uint8(np.ascontiguousarray(frame)))
    image.thumbnail((size, size))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def thumbnails(uris: Sequence[str], captions: Sequence[Any] | None = None) -> Html:
    """A row of images from data URIs, with optional captions."""
    caps = captions if captions is not None else [""] * len(uris)
    figures = "".join(
        f'<figure><img src="{escape(uri)}" alt="{escape(cap)}">'
        + (f"<figcaption>{escape(cap)}</figcaption>" if cap != "" else "")
        + "</figure>"
        for uri, cap in zip(uris, caps, strict=True)
    )
    return Html(f'<div class="nbi-thumbs">{figures}</div>')
