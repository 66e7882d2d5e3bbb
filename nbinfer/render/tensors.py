"""Tensors and inference results: previews, thumbnails, top-k bars, the ``InferResult`` card.

Layer: render (pure, duck-typed): numpy, Pillow for thumbnails (inside
:func:`~nbinfer.render.html.png_data_uri`); imports nothing of nbinfer outside
:mod:`nbinfer.render`. A result is anything with ``model_name``, ``model_version``, ``id``,
``outputs`` (each with ``name``, ``datatype``, ``shape``, ``data``, ``parameters``), ``labels``
and ``notes``; a classification row is anything with ``score``, ``index`` and ``label``.

Example::

    from nbinfer.render.tensors import render_result
    html = render_result(session.infer("add_sub", inputs))
"""

from __future__ import annotations

import base64
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nbinfer.render.html import (
    MAX_ITEMS,
    Html,
    bars,
    card,
    escape,
    facts,
    png_data_uri,
    section,
    thumbnails,
)

__all__ = [
    "FULL_PREVIEW",
    "Classify",
    "classification_bundle",
    "preview",
    "render_classification",
    "render_result",
    "result_bundle",
]

#: Tensors with at most this many elements are shown in full.
FULL_PREVIEW = 200

#: Reads a BYTES tensor as classification-extension rows (``"score:index[:label]"``); the
#: protocol layer's decoder, passed in by the result's repr hook (render imports no protocol).
Classify = Callable[[np.ndarray[Any, Any]], Sequence[Sequence[Any]]]


@dataclasses.dataclass(frozen=True, slots=True)
class _Scored:
    """One class of a top-k row drawn from scores over the model's labels."""

    score: float
    index: int
    label: str | None


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


def _images_of(arr: np.ndarray[Any, Any]) -> list[str]:
    if arr.dtype.kind == "O":
        return _encoded_images(arr)
    return [png_data_uri(f) for f in _image_frames(arr)]


def _classification_of(arr: np.ndarray[Any, Any], classify: Classify | None) -> Any:
    """Rows of a classification-extension output (``"score:index[:label]"``), else ``None``."""
    if classify is None or arr.dtype.kind != "O" or arr.size == 0 or arr.size > 100_000:
        return None
    try:
        return classify(arr)
    except Exception:  # not a classification output after all: shown as values instead
        return None


def render_classification(
    rows: Sequence[Sequence[Any]] | Sequence[Any],
) -> Html:
    """Top-k bars for classification rows (best first); one block per row, at most 8.

    Each item has ``score``, ``index`` and ``label`` (``None``: drawn as ``#index``).
    """
    nested: list[Any] = list(rows)
    if nested and not isinstance(nested[0], Sequence):
        nested = [nested]
    rows = nested
    blocks = []
    for r, row in enumerate(nested[:MAX_ITEMS]):
        items: list[Any] = list(row)
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
    top = [
        [_Scored(float(row[i]), int(i), str(labels[i])) for i in np.argsort(-row)[:3]]
        for row in rows[:MAX_ITEMS]
    ]
    return render_classification(top if arr.ndim == 2 else top[0])


def _output_html(out: Any, labels: Sequence[str] = (), classify: Classify | None = None) -> Html:
    title = Html(
        f"<code>{escape(out.name)}</code> "
        f'<span class="nbi-muted">{escape(out.datatype)} {escape(list(out.shape))}</span>'
    )
    if out.data is None:
        region = out.parameters.get("shared_memory_region", "?")
        return section(title, escape(f"written to shared-memory region {region!r}"))
    arr = np.asarray(out.data)
    parts = [facts(_summary(arr))]
    classified = _classification_of(arr, classify)
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


def render_result(result: Any, *, classify: Classify | None = None) -> Html:
    """An inference result: model, id, and per output its datatype, shape and a preview.

    Small tensors are shown in full, image-like ones as thumbnails and classification
    outputs (``class_count``), or scores over the model's class labels, as top-k bars;
    ``result.notes`` (e.g. NaN inputs) come first. ``classify`` reads classification-extension
    outputs (none: they show as values).
    """
    outs = result.outputs
    labels = getattr(result, "labels", None) or {}
    body = "".join(_output_html(o, labels.get(o.name, ()), classify) for o in outs)
    sub = f"version {result.model_version}" if result.model_version else ""
    info = facts({"id": result.id, "outputs": len(outs)})
    notes = "".join(
        f'<div class="nbi-message nbi-warn">&#9888; {escape(n)}</div>'
        for n in getattr(result, "notes", ())
    )
    return card("InferResult", result.model_name, notes + info + body, text=repr(result), sub=sub)


def result_bundle(result: Any, *, classify: Classify | None = None) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of an inference result (its ``_repr_mimebundle_``)."""
    return {"text/plain": repr(result), "text/html": render_result(result, classify=classify)}


def classification_bundle(item: Any) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of one class (``score``, ``index``, ``label``)."""
    label = item.label if item.label is not None else f"#{item.index}"
    html = card("ClassificationResult", label, render_classification([[item]]), text=repr(item))
    return {"text/plain": repr(item), "text/html": html}
