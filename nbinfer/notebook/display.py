"""Rich HTML reprs for nbinfer objects: stdlib + numpy, Pillow only for image thumbnails.

Layer: the notebook floor, but light: stdlib, numpy and Pillow (thumbnails) only, never IPython,
ipywidgets or matplotlib, because every lower layer's repr hook imports this module (the one
allowed lazy edge into the notebook layer).

Every nbinfer object that Jupyter displays (``Session``, ``ModelHandle``, ``ModelMetadata``,
``ServerMetadata``, ``InferResult``, statistics frames, ``ClassificationResult`` and every
:class:`~nbinfer.NbinferError`) has a three-line ``_repr_mimebundle_`` that imports this module
lazily and calls :func:`mimebundle`; the bundle always carries ``text/plain``.

The building blocks are public so the widgets and gallery reuse them: :func:`escape` and
:class:`Html` (markup that is already safe), :func:`table`, :func:`section`, :func:`card`,
:func:`bars`, :func:`thumbnails`, :func:`css`, and one ``render_*`` function per object.
For an uncaught error, :func:`error_report` gives what the notebook shows: a short traceback of
the user's frames (:func:`library_frames` tells them from nbinfer's) and the card, with the
library frames collapsed (the IPython handler in :mod:`nbinfer.notebook` sends both).
Every value from a server (model names, labels, messages) passes through :func:`escape`;
colours come from JupyterLab's ``--jp-*`` theme variables, so light and dark themes both work.

Example::

    from nbinfer.notebook import display
    html = display.render_result(session.infer("add_sub", inputs))
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import io
import json
import math
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import numpy as np

import nbinfer.errors as errors

if TYPE_CHECKING:
    from nbinfer.client import InferResult
    from nbinfer.protocol.types import (
        ClassificationResult,
        InferOutput,
        ModelMetadata,
        ServerMetadata,
        TensorSpec,
    )
    from nbinfer.session import ModelHandle, Session

__all__ = [
    "ErrorReport",
    "Html",
    "bars",
    "card",
    "css",
    "error_report",
    "escape",
    "full_traceback",
    "hints",
    "hints_text",
    "library_frames",
    "mimebundle",
    "render_classification",
    "render_error",
    "render_metadata",
    "render_model",
    "render_result",
    "render_server_metadata",
    "render_session",
    "render_stats",
    "section",
    "short_traceback",
    "table",
    "thumbnails",
]

#: Tensors with at most this many elements are shown in full.
FULL_PREVIEW = 200
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
    """A stylesheet from ``static/``, read once.

    ``style.css`` holds the one colour palette and every repr inlines it; ``browser.css`` is the
    model browser's layout over that palette.
    """
    return files("nbinfer.notebook").joinpath("static", sheet).read_text(encoding="utf-8")


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


# -- tensors -------------------------------------------------------------------------------


def _format_bytes(item: Any) -> str:
    if isinstance(item, (bytes, bytearray)):
        try:
            text = bytes(item).decode("utf-8")
        except UnicodeDecodeError:
            return repr(bytes(item[:40])) + ("…" if len(item) > 40 else "")
        return repr(text if len(text) <= 60 else text[:60] + "…")
    return repr(item)


def preview(data: np.ndarray[Any, Any]) -> str:
    """Text of a tensor: in full up to :data:`FULL_PREVIEW` elements, else summarised."""
    arr = np.asarray(data)
    if arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)
    threshold = sys.maxsize if arr.size <= FULL_PREVIEW else 0
    formatter: dict[str, Callable[[Any], str]] | None = (
        {"object": _format_bytes} if arr.dtype.kind == "O" else None
    )
    return np.array2string(
        arr,
        threshold=threshold,
        edgeitems=3,
        precision=4,
        suppress_small=True,
        max_line_width=100,
        separator=", ",
        formatter=formatter,  # type: ignore[arg-type]
    )


def _summary(arr: np.ndarray[Any, Any]) -> dict[str, str]:
    if arr.size < 2 or (arr.dtype.kind not in "iuf" and arr.dtype.name != "bfloat16"):
        return {}
    values = arr.astype(np.float64, copy=False)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return {}
    return {
        "min": f"{finite.min():.4g}",
        "max": f"{finite.max():.4g}",
        "mean": f"{finite.mean():.4g}",
    }


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
)


def _encoded_images(arr: np.ndarray[Any, Any]) -> list[str]:
    """Data URIs of encoded images (PNG / JPEG / GIF) in a BYTES tensor, else ``[]``."""
    uris = []
    for item in arr.reshape(-1)[:MAX_ITEMS].tolist():
        if not isinstance(item, (bytes, bytearray)):
            return []
        mime = next((m for magic, m in _MAGIC if bytes(item[: len(magic)]) == magic), None)
        if mime is None:
            return []
        uris.append(f"data:{mime};base64,{base64.b64encode(bytes(item)).decode('ascii')}")
    return uris


def _image_frames(arr: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
    """Split an image-like numeric tensor into HxW or HxWxC frames (``[]`` when not image-like).

    Image-like: ``[..., H, W, C]`` or ``[..., C, H, W]`` with C in 1/3/4 (1/3 channels first)
    and H, W >= 8; or ``uint8`` ``[..., H, W]`` with H, W >= 8.
    """
    if arr.dtype.kind not in "uifb" or arr.ndim < 2 or arr.size == 0:
        return []

    def side(n: int) -> bool:
        return 8 <= n <= 4096

    shape = arr.shape
    if arr.ndim >= 3 and shape[-1] in (1, 3, 4) and side(shape[-3]) and side(shape[-2]):
        frames = arr.reshape(-1, *shape[-3:])
    elif arr.ndim >= 3 and shape[-3] in (1, 3) and side(shape[-2]) and side(shape[-1]):
        frames = np.moveaxis(arr.reshape(-1, *shape[-3:]), 1, -1)
    elif arr.dtype == np.uint8 and side(shape[-2]) and side(shape[-1]):
        frames = arr.reshape(-1, *shape[-2:])
    else:
        return []
    return [f[..., 0] if f.ndim == 3 and f.shape[-1] == 1 else f for f in frames[:MAX_ITEMS]]


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


def _images_of(arr: np.ndarray[Any, Any]) -> list[str]:
    if arr.dtype.kind == "O":
        return _encoded_images(arr)
    return [png_data_uri(f) for f in _image_frames(arr)]


def _classification_of(arr: np.ndarray[Any, Any]) -> list[list[ClassificationResult]] | None:
    """Rows of a classification-extension output (``"score:index[:label]"``), else ``None``."""
    if arr.dtype.kind != "O" or arr.size == 0 or arr.size > 100_000:
        return None
    from nbinfer.protocol.classification import decode_classification

    try:
        return decode_classification(arr)
    except (errors.InvalidInputError, UnicodeDecodeError):
        return None


def render_classification(
    rows: Sequence[Sequence[ClassificationResult]] | Sequence[ClassificationResult],
) -> Html:
    """Top-k bars for classification rows (best first); one block per row, at most 8."""
    nested: list[Any] = list(rows)
    if nested and not isinstance(nested[0], Sequence):
        nested = [nested]
    rows = nested
    blocks = []
    for r, row in enumerate(nested[:MAX_ITEMS]):
        items: list[ClassificationResult] = list(row)
        scores = [c.score for c in items]
        probabilities = all(0.0 <= s <= 1.0 for s in scores)
        scale = 1.0 if probabilities else max((abs(s) for s in scores), default=1.0)
        chart = bars(
            [(c.label if c.label is not None else f"#{c.index}", [c.score]) for c in items],
            scale=scale,
            value=lambda segs: f"{segs[0]:.4g}",
        )
        head = f'<div class="nbi-topk-head">row {r}</div>' if len(rows) > 1 else ""
        blocks.append(f'<div class="nbi-topk">{head}{chart}</div>')
    more = len(rows) - MAX_ITEMS
    tail = f'<div class="nbi-muted">… {more} more rows</div>' if more > 0 else ""
    return Html("".join(blocks) + tail)


def _labelled_top(arr: np.ndarray[Any, Any], labels: Sequence[str]) -> Html | None:
    """Top-3 bars of scores over named classes (``[k]`` or ``[n, k]``, k = len(labels))."""
    if arr.dtype.kind != "f" or arr.ndim not in (1, 2) or arr.shape[-1] != len(labels):
        return None
    rows = np.atleast_2d(arr)
    if not len(labels) or not np.isfinite(rows).all():
        return None
    from nbinfer.protocol.types import ClassificationResult

    top = [
        [ClassificationResult(float(row[i]), int(i), str(labels[i])) for i in np.argsort(-row)[:3]]
        for row in rows[:MAX_ITEMS]
    ]
    return render_classification(top if arr.ndim == 2 else top[0])


def _output_html(out: InferOutput, labels: Sequence[str] = ()) -> Html:
    title = Html(
        f"<code>{escape(out.name)}</code> "
        f'<span class="nbi-muted">{escape(out.datatype)} {escape(list(out.shape))}</span>'
    )
    if out.data is None:
        region = out.parameters.get("shared_memory_region", "?")
        return section(title, escape(f"written to shared-memory region {region!r}"))
    arr = np.asarray(out.data)
    parts = [facts(_summary(arr))]
    classified = _classification_of(arr)
    if classified is not None:
        parts.append(render_classification(classified))
    elif labels:
        top = _labelled_top(arr, labels)  # the model's class names: "setosa 0.9976"
        if top is not None:
            parts.append(top)
            classified = []
    images = _images_of(arr)
    if images:
        parts.append(thumbnails(images))
    values = Html(f'<pre class="nbi-pre">{escape(preview(arr))}</pre>')
    if classified is not None or images:  # the picture first, the numbers on demand
        values = section("values", values, open=False)
    parts.append(values)
    return section(title, "".join(parts))


def render_result(result: InferResult) -> Html:
    """An inference result: model, id, and per output its datatype, shape and a preview.

    Small tensors are shown in full, image-like ones as thumbnails and classification
    outputs (``class_count``), or scores over the model's class labels, as top-k bars;
    ``result.notes`` (e.g. NaN inputs) come first.
    """
    outs = result.outputs
    body = "".join(_output_html(o, result.labels.get(o.name, ())) for o in outs)
    sub = f"version {result.model_version}" if result.model_version else ""
    info = facts({"id": result.id, "outputs": len(outs)})
    notes = "".join(
        f'<div class="nbi-message nbi-warn">&#9888; {escape(n)}</div>' for n in result.notes
    )
    return card("InferResult", result.model_name, notes + info + body, text=repr(result), sub=sub)


# -- metadata, models, sessions ------------------------------------------------------------


def _spec_rows(specs: Sequence[TensorSpec], labels: Mapping[str, Sequence[str]]) -> Html:
    rows = [
        (
            Html(f"<code>{escape(s.name)}</code>"),
            s.datatype,
            s.shape,
            f"{len(labels[s.name])} labels" if s.name in labels else "",
        )
        for s in specs
    ]
    header = ("name", "datatype", "shape", "labels" if labels else "")
    return table(header, rows)


def _tensor_sections(meta: ModelMetadata, labels: Mapping[str, Sequence[str]] = {}) -> Html:
    return Html(
        section("Inputs", _spec_rows(meta.inputs, {}), count=len(meta.inputs))
        + section("Outputs", _spec_rows(meta.outputs, labels), count=len(meta.outputs))
    )


def render_metadata(meta: ModelMetadata) -> Html:
    """Model metadata: platform, versions, parameters and the inputs / outputs tables."""
    info = facts(
        {
            "platform": meta.platform,
            "versions": ", ".join(meta.versions),
            **{k: v for k, v in meta.parameters.items()},
        }
    )
    return card("ModelMetadata", meta.name, info + _tensor_sections(meta), text=repr(meta))


def render_server_metadata(meta: ServerMetadata) -> Html:
    """Server metadata: name, version and protocol extensions."""
    body = section("Extensions", chips(meta.extensions), count=len(meta.extensions))
    return card("ServerMetadata", meta.name, body, text=repr(meta), sub=meta.version)


def _batching(config: Mapping[str, Any]) -> dict[str, Any]:
    """Batching and instance facts from a Triton-shaped model config."""
    out: dict[str, Any] = {}
    if "max_batch_size" in config:
        out["max batch"] = config["max_batch_size"] or "no batching"
    dynamic = config.get("dynamic_batching")
    if isinstance(dynamic, Mapping):
        preferred = dynamic.get("preferred_batch_size") or []
        delay = dynamic.get("max_queue_delay_microseconds")
        out["dynamic batching"] = ", ".join(
            p
            for p in (
                f"preferred {preferred}" if preferred else "on",
                f"max delay {delay} µs" if delay else "",
            )
            if p
        )
    groups = config.get("instance_group") or []
    if groups:
        out["instances"] = ", ".join(
            f"{g.get('count', 1)} x {str(g.get('kind', 'KIND_AUTO')).removeprefix('KIND_')}"
            for g in groups
            if isinstance(g, Mapping)
        )
    if config.get("backend"):
        out["backend"] = config["backend"]
    return out


def _state_badge(state: str) -> Html:
    tone = {"READY": "ok", "UNAVAILABLE": "err", "LOADING": "warn", "UNLOADING": "warn"}
    return badge(state or "unknown", tone.get(state.upper(), "muted"))


def _error_line(exc: errors.NbinferError) -> Html:
    return Html(f'<div class="nbi-err">{escape(type(exc).__name__)}: {escape(exc)}</div>')


def _refresh_line(what: str) -> Html:
    return Html(f'<div class="nbi-muted">{_code_spans(what)}</div>')


def render_model(handle: ModelHandle) -> Html:
    """A model handle: readiness, platform, batching, inputs / outputs, labels, config.

    Drawn from what the handle holds (its last read): no call to the server.
    """
    text = repr(handle)
    held: Mapping[str, Any] = getattr(handle, "_held", {})
    error = held.get("error")
    if error is not None:
        return card("Model", handle.name, _error_line(error), text=text)
    meta: ModelMetadata | None = held.get("metadata")
    if meta is None:
        hint = _refresh_line("Not read yet: `handle.refresh()` reads its metadata and config.")
        return card("Model", handle.name, hint, text=text)
    config: Mapping[str, Any] = held.get("config") or {}
    labels: Mapping[str, Sequence[str]] = held.get("labels") or {}
    info = facts(
        {
            "platform": meta.platform,
            "versions": ", ".join(meta.versions),
            **_batching(config),
        }
    )
    body = [info, _tensor_sections(meta, labels)]
    for output, names in labels.items():
        shown = ", ".join(names[:50]) + (" …" if len(names) > 50 else "")
        body.append(section(f"Labels of {output}", escape(shown), count=len(names), open=False))
    if config:
        dump = json.dumps(config, indent=2, default=str)
        body.append(
            section("Config", Html(f'<pre class="nbi-pre">{escape(dump)}</pre>'), open=False)
        )
    ready = held.get("ready")
    state = "" if ready is None else _state_badge("READY" if ready else "UNAVAILABLE")
    sub = Html((f"version {escape(handle.version)} " if handle.version else "") + state)
    return card("Model", handle.name, "".join(body), text=text, sub=sub)


def render_session(session: Session) -> Html:
    """A session: where it points, the server's name / version / extensions, the models.

    Drawn from what the session holds (its last reads): no call to the server.
    """
    text = repr(session)
    where = "local server" if session.server is not None else "remote server"
    if getattr(session, "_closed", False):
        state = "closed"
        if getattr(session, "_replaced_by", None):  # a newer local Session() closed it
            state = f"replaced by a newer Session ({session._replaced_by}): closed, server stopped"
        return card("Session", session.url, facts({"state": state}), text=text, sub=where)
    parts: list[str] = []
    caps = getattr(session, "_capabilities", None) or getattr(session, "_caps_seen", None)
    if caps is None:
        parts.append(facts({"protocol": session.protocol}))
        parts.append(
            _refresh_line("Nothing read from the server yet: `session.refresh()` reads it.")
        )
        return card("Session", session.url, "".join(parts), text=text, sub=where)
    if caps.error is not None:
        body = _error_line(caps.error) + _refresh_line("`session.refresh()` reads it again.")
        return card("Session", session.url, body, text=text, sub=where)
    parts.append(facts({"server": f"{caps.name} {caps.version}", "protocol": session.protocol}))
    parts.append(
        section("Extensions", chips(caps.extensions), count=len(caps.extensions), open=False)
    )
    listed = getattr(session, "_listing", None)  # the last session.models read
    if isinstance(listed, errors.NbinferError):
        parts.append(section("Models", _error_line(listed)))
    elif listed is None:
        hint = "Not listed yet: `session.models` (or `session.refresh()`) lists them."
        parts.append(section("Models", _refresh_line(hint)))
    else:
        columns = tuple(str(c) for c in listed.columns)
        rows = [
            tuple(
                Html(f"<code>{escape(str(v))}</code>")
                if c == "name"
                else _state_badge(str(v))
                if c == "state"
                else v
                for c, v in zip(columns, row, strict=True)
            )
            for row in listed.itertuples(index=False)
        ]
        models = table(columns, rows)
        note = listed.attrs.get("note")  # a partial listing says why, and how to list them all
        if note:
            models = Html(f'<div class="nbi-warn">{escape(note)}</div>{models}')
        parts.append(section("Models", models, count=len(rows), open=len(rows) <= COLLAPSE_AFTER))
    if session.server is not None and session.server.running:  # a dead one has no ports
        snippet = connect_snippet(session)
        parts.append(section("Connect", Html(f'<pre class="nbi-pre">{escape(snippet)}</pre>')))
    return card("Session", session.url, "".join(parts), text=text, sub=where)


def connect_snippet(session: Session) -> str:
    """How tritonclient / curl / nbinfer reach a session's local server, token included.

    The token's value is never written out: the snippet reads ``session.token`` (the way
    Jupyter keeps its own token out of notebook outputs), so a saved or shared notebook does
    not carry a live credential.
    """
    server = session.server
    if server is None or not server.running:
        return ""
    http_url, grpc_address = server.http_url, server.grpc_address
    http_hostport = http_url.split("://", 1)[-1]
    if session.token is None:
        return (
            "# no token (auth_token=None): any local user can call this server\n"
            f"curl {http_url}/v2/models/add_sub\n"
            f'httpclient.InferenceServerClient("{http_hostport}")  # tritonclient.http\n'
            f'grpcclient.InferenceServerClient("{grpc_address}")  # tritonclient.grpc'
        )
    return (
        "# the server requires its token; read it from session.token (not printed here)\n"
        "auth = {'authorization': f'Bearer {session.token}'}  # lower case for gRPC\n"
        f'httpclient.InferenceServerClient("{http_hostport}").infer(..., headers=auth)\n'
        f'grpcclient.InferenceServerClient("{grpc_address}").infer(..., headers=auth)\n'
        f'nbinfer.Client("{http_url}", auth=session.token)\n'
        "# curl from a notebook cell (IPython puts the value of {session.token} in):\n"
        f'!curl -H "Authorization: Bearer {{session.token}}" {http_url}/v2/models/add_sub'
    )


# -- statistics ----------------------------------------------------------------------------

#: The latency breakdown: label and statistics-frame column (mean ms per request).
LATENCY_PARTS = (
    ("queue", "queue_ms"),
    ("compute input", "compute_input_ms"),
    ("infer", "compute_infer_ms"),
    ("output", "compute_output_ms"),
)


#: What the counts mean, for the card's footnote and the plain-text twin.
STATS_NOTE = (
    "requests: answered; executions: model runs (a dynamic batch is one); inferences: batch "
    "elements, as Triton counts them. A model that does not batch (`max_batch_size` 0, like "
    "`iris`) counts one inference per request whatever rows it carries: the statistics "
    "extension does not count rows then. —: not used yet."
)


def _used(row: Mapping[str, Any]) -> bool:
    return int(row.get("success", 0) or 0) > 0


def _mean_ms(row: Mapping[str, Any], column: str = "success_ms") -> str:
    """Mean milliseconds with 3 decimals, or — for a model with no successful request yet."""
    if not _used(row):
        return "—"
    value = float(row.get(column, 0.0) or 0.0)
    return f"{value:.3f}" if math.isfinite(value) else "—"


def stats_text(frame: Any) -> str:
    """The plain-text twin of :func:`render_stats`: the table (— for unused models) and note."""
    if not hasattr(frame, "copy") or not hasattr(frame, "to_string"):
        return repr(frame)
    shown = frame.copy()
    records = frame.to_dict("records")
    for column in shown.columns:
        if str(column).endswith("_ms"):
            shown[column] = [_mean_ms(r, column) for r in records]
    return f"{shown.to_string()}\n{STATS_NOTE.replace('`', '')}"


def render_stats(frame: Any) -> Html:
    """Inference statistics (``session.stats()``): a table plus a latency breakdown chart.

    ``frame`` is the statistics DataFrame (or any object with ``to_dict("records")``).
    """
    records: list[dict[str, Any]] = frame.to_dict("records")
    # requests their clients gave up: a column only when there are some
    cancel = any(int(r.get("cancel", 0) or 0) for r in records)
    rows = [
        (
            Html(f"<code>{escape(r.get('name', ''))}</code>"),
            r.get("version", ""),
            r.get("success", 0),
            r.get("execution_count", 0),
            r.get("inference_count", 0),
            r.get("fail", 0),
            *((r.get("cancel", 0),) if cancel else ()),
            _mean_ms(r),
        )
        for r in records
    ]
    header = (
        "model",
        "version",
        "requests",
        "executions",
        "inferences",
        "fail",
        *(("cancelled",) if cancel else ()),
        "mean ms",
    )
    body = [
        table(header, rows, numeric=tuple(range(2, len(header)))),
        Html(f'<div class="nbi-muted nbi-note">{_code_spans(STATS_NOTE)}</div>'),
    ]
    timed = [r for r in records if _used(r)]
    if timed:
        items = [
            (
                f"{r.get('name', '')} v{r.get('version', '')}",
                [float(r.get(col, 0.0) or 0.0) for _, col in LATENCY_PARTS],
            )
            for r in timed
        ]
        chart = bars(items, value=lambda segs: f"{sum(segs):.3f} ms")
        body.append(
            section(
                "Latency per request (mean, ms)",
                legend([name for name, _ in LATENCY_PARTS]) + chart,
                open=len(items) <= COLLAPSE_AFTER,
            )
        )
    return card(
        "Statistics", f"{len(records)} model versions", "".join(body), text=stats_text(frame)
    )


# -- errors --------------------------------------------------------------------------------


def hints(exc: BaseException) -> list[str]:
    """What to try: an nbinfer error's ``hints`` (its own or its class's), else ``[]``."""
    found = getattr(exc, "hints", ()) if isinstance(exc, errors.NbinferError) else ()
    return [str(h) for h in found]


def _error_facts(exc: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(exc, errors.ServerError):
        out["status"] = exc.status
        out["request id"] = exc.request_id
    if isinstance(exc, errors.NbinferError):
        out.update({k.replace("_", " "): v for k, v in exc.context.items()})
    return out


def _model_traceback(exc: BaseException) -> str | None:
    return getattr(exc, "model_traceback", None) if isinstance(exc, errors.ServerError) else None


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, errors.NbinferError) else str(exc)


#: The nbinfer package's directory (its frames are library frames).
_PACKAGE_DIR = os.path.dirname(os.path.abspath(errors.__file__)) + os.sep


@functools.cache
def _installed_dirs() -> tuple[str, ...]:
    """Where installed code lives: the stdlib and site-packages (asyncio, httpx, ...)."""
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(sorted({os.path.abspath(paths[k]) + os.sep for k in keys if k in paths}))


def library_frames(frames: Sequence[traceback.FrameSummary]) -> list[bool]:
    """Which of ``frames`` (outermost first) are library frames, not the user's.

    A library frame is nbinfer's own (under its package), or installed code (asyncio,
    ``concurrent.futures``, an HTTP engine) reached from it. The caller's frames before the
    first nbinfer frame, and user code that nbinfer calls back (a model defined in the
    notebook), are the user's.
    """
    flags: list[bool] = []
    inside = False
    for frame in frames:
        path = frame.filename if frame.filename.startswith("<") else os.path.abspath(frame.filename)
        if path.startswith(_PACKAGE_DIR):
            inside = True
        elif not (path.startswith("<frozen ") or path.startswith(_installed_dirs())):
            inside = False  # a user file (a notebook cell, a script): the user's again
        flags.append(inside)
    return flags


def _cause(exc: BaseException) -> BaseException | None:
    """The exception ``exc`` was raised from or during (as Python's traceback prints it)."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__


def _frame_text(frame: traceback.FrameSummary, name_of: Callable[[str], str | None] | None) -> str:
    label = name_of(frame.filename) if name_of is not None else None
    if label:
        where = f"  {label}, line {frame.lineno}"
        where += "" if frame.name == "<module>" else f", in {frame.name}"
    else:
        where = f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}'
    source = (frame.line or "").strip()
    return f"{where}\n    {source}" if source else where


def _frames_text(
    frames: Sequence[traceback.FrameSummary],
    name_of: Callable[[str], str | None] | None = None,
) -> str:
    return "\n".join(_frame_text(f, name_of) for f in frames)


def _folded(count: int) -> str:
    noun = "frame" if count == 1 else "frames"
    return f"  [... {count} library {noun}: under 'Library frames' in the error card ...]"


def short_traceback(
    exc: BaseException,
    frames: Sequence[traceback.FrameSummary],
    *,
    name_of: Callable[[str], str | None] | None = None,
    color: bool = False,
) -> str:
    """The user's frames of ``exc``, then its message; each run of library frames folds to a line.

    ``name_of`` maps a file name to a label (IPython's ``Cell In[3]``); ``color`` adds ANSI
    colours, as IPython's tracebacks have. Chained exceptions are left out (the card has them).
    """
    red, green, off = ("\x1b[1;31m", "\x1b[32m", "\x1b[0m") if color else ("", "", "")
    lines = [f"{red}{type(exc).__name__}{off}  Traceback (most recent call last)"]
    folded = 0
    for frame, library in zip(frames, library_frames(frames), strict=True):
        if library:
            folded += 1
            continue
        if folded:
            lines.append(_folded(folded))
            folded = 0
        head, _, source = _frame_text(frame, name_of).partition("\n")
        lines.append(f"{green}{head}{off}" + (f"\n{source}" if source else ""))
    if folded:
        lines.append(_folded(folded))
    lines.append(f"{red}{type(exc).__name__}{off}: {_message(exc)}")
    return "\n".join(lines)


def full_traceback(exc: BaseException) -> str:
    """Every frame of ``exc`` and of the exceptions it chains to, as Python prints them."""
    return "".join(traceback.format_exception(exc)).rstrip("\n")


def hints_text(exc: BaseException) -> str:
    """``What to try:`` and the error's hints as a list, ``""`` when it has none."""
    tips = hints(exc)
    return "\n".join(["What to try:", *(f"  - {t}" for t in tips)]) if tips else ""


def error_text(exc: BaseException) -> str:
    """Plain-text summary of an error: the model's traceback (if any), class, message, tips."""
    model_tb = _model_traceback(exc)
    lines = [model_tb, ""] if model_tb else []
    lines.append(f"{type(exc).__name__}: {_message(exc)}")
    tips = hints_text(exc)
    return "\n".join([*lines, tips] if tips else lines)


def _library_section(exc: BaseException, frames: Sequence[traceback.FrameSummary]) -> Html:
    """The collapsed "Library frames" of ``exc``: nbinfer's frames, then what it was raised from."""
    library = [f for f, lib in zip(frames, library_frames(frames), strict=True) if lib]
    cause = _cause(exc)
    if not library and cause is None:
        return Html("")
    parts = []
    if library:
        parts.append(
            Html(f'<pre class="nbi-pre nbi-traceback">{escape(_frames_text(library))}</pre>')
        )
    if cause is not None:
        how = "raised from" if exc.__cause__ is not None else "raised while handling"
        parts.append(Html(f'<div class="nbi-caption">{how}:</div>'))
        pre = escape(full_traceback(cause))
        parts.append(Html(f'<pre class="nbi-pre nbi-traceback">{pre}</pre>'))
    return Html(
        '<div class="nbi-library">'
        + section("Library frames", "".join(parts), count=len(library), open=False)
        + "</div>"
    )


def render_error(
    exc: BaseException, *, frames: Sequence[traceback.FrameSummary] | None = None
) -> Html:
    """An nbinfer error: the model's traceback first (your code), what failed, what to try.

    Then, collapsed, the library frames of ``frames`` (default: the error's own traceback)
    and the exception it was raised from, if any.
    """
    tips = hints(exc)
    body = []
    model_tb = _model_traceback(exc)
    if model_tb:
        pre = Html(f'<pre class="nbi-pre nbi-traceback">{escape(model_tb)}</pre>')
        body.append(section("Model traceback (your code)", pre))
    message = Html(f'<div class="nbi-message">{escape(_message(exc))}</div>')
    body += [facts(_error_facts(exc)), message]
    if tips:
        items = "".join(f"<li>{_code_spans(t)}</li>" for t in tips)
        body.append(section("What to try", Html(f'<ul class="nbi-hints">{items}</ul>')))
    if frames is None:
        frames = traceback.extract_tb(exc.__traceback__)
    body.append(_library_section(exc, frames))
    doc = (type(exc).__doc__ or "").strip().splitlines()
    return card(
        "Error",
        type(exc).__name__,
        "".join(body),
        text=error_text(exc),
        sub=doc[0] if doc else "",
        error=True,
    )


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """What a notebook shows for an uncaught nbinfer error (see :func:`error_report`).

    Attributes:
        traceback: The error output's text (ANSI colours): the user's frames, the library
            frames folded to one line, the message.
        bundle: The card that follows it: ``text/html`` (the card, library frames collapsed)
            and ``text/plain`` (every frame, chained exceptions too, then what to try).
    """

    traceback: str
    bundle: dict[str, str]


def error_report(
    exc: BaseException,
    *,
    skip: int = 0,
    name_of: Callable[[str], str | None] | None = None,
) -> ErrorReport:
    """The short traceback and the error card for an uncaught ``exc``.

    Args:
        exc: The error (its ``__traceback__`` is read).
        skip: Outermost frames to leave out (the shell's own, e.g. IPython's ``run_code``).
        name_of: File name -> label (IPython's ``Cell In[3]``), None to keep the file name.
    """
    frames = traceback.extract_tb(exc.__traceback__)[skip:]
    tips = hints_text(exc)
    text = f"{full_traceback(exc)}\n\n{tips}" if tips else full_traceback(exc)
    return ErrorReport(
        traceback=short_traceback(exc, frames, name_of=name_of, color=True),
        bundle={"text/plain": text, "text/html": render_error(exc, frames=frames)},
    )


def _code_spans(text: str) -> Html:
    """Escape ``text`` and turn `backticked` parts into ``<code>``."""
    parts = escape(text).split("`")
    return Html("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


# -- dispatch ------------------------------------------------------------------------------


def _renderers() -> list[tuple[type, Callable[[Any], Html], Callable[[Any], str]]]:
    from nbinfer.client import InferResult
    from nbinfer.protocol.types import ClassificationResult, ModelMetadata, ServerMetadata
    from nbinfer.session import ModelHandle, Session

    return [
        (InferResult, render_result, repr),
        (ModelMetadata, render_metadata, repr),
        (ServerMetadata, render_server_metadata, repr),
        (ModelHandle, render_model, repr),
        (Session, render_session, repr),
        (ClassificationResult, _single_classification, repr),
        (errors.NbinferError, render_error, error_text),
    ]


def mimebundle(obj: Any) -> dict[str, str]:
    """``{"text/plain": ..., "text/html": ...}`` for any nbinfer object with a renderer.

    Statistics frames go through :func:`render_stats`; an object without a renderer gets
    ``text/plain`` only.
    """
    for cls, render, text in _renderers():
        if isinstance(obj, cls):
            return {"text/plain": text(obj), "text/html": render(obj)}
    if hasattr(obj, "to_dict") and "queue_ms" in getattr(obj, "columns", ()):
        return {"text/plain": stats_text(obj), "text/html": render_stats(obj)}
    return {"text/plain": repr(obj)}


def _single_classification(item: ClassificationResult) -> Html:
    label = item.label if item.label is not None else f"#{item.index}"
    return card("ClassificationResult", label, render_classification([[item]]), text=repr(item))
