"""The image grid of a classification frame: one card per image with its top-k bars.

Layer: render (pure, duck-typed): numpy, Pillow for the thumbnails; imports nothing of nbinfer
outside :mod:`nbinfer.render`. Image files are opened with Pillow, imported lazily.

:meth:`nbinfer.Session.classify` returns a :class:`~nbinfer.interop.image_frame.ClassificationFrame`
whose ``_repr_html_`` calls :func:`classification_html`. Thumbnails are PNG data URIs (tiny
images are scaled up with crisp pixels by CSS). Each card offers the input the model saw (the
frame's ``inputs``: e.g. the 8x8 a digit became, scaled up nearest-neighbour so its pixels show)
in a ``<details>``, or beside the image when the frame asks (``show_input=True``). Every path
and label passes through
:func:`~nbinfer.render.html.escape`; colours come from JupyterLab's ``--jp-*`` variables
through the shared stylesheet, so dark themes work.

Example::

    from nbinfer.render.gallery import classification_html
    html = classification_html(session.classify("digits", "digits/*.png"))
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import numpy as np

from nbinfer.render.html import Html, bars, card, escape, png_data_uri

__all__ = [
    "GALLERY_CSS",
    "MAX_IMAGES",
    "THUMB",
    "classification_html",
    "input_uri",
    "thumbnail_uri",
]

#: At most this many images are drawn (the frame keeps all of them).
MAX_IMAGES = 48
#: Thumbnail bound in pixels.
THUMB = 96

#: Grid layout, scoped under ``.nbi-gallery`` (colours from the shared ``.nbi`` variables).
GALLERY_CSS = """
.nbi .nbi-gallery { display: grid; gap: 8px; margin: 6px 0 2px;
  grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); max-width: 100%; }
.nbi .nbi-gcell { margin: 0; padding: 6px; border: 1px solid var(--nbi-border);
  border-radius: 4px; background: var(--nbi-bg-alt); min-width: 0; }
.nbi .nbi-gcell img { display: block; margin: 0 auto 4px; width: 96px; height: 96px;
  object-fit: contain; image-rendering: pixelated; border-radius: 2px;
  background: var(--nbi-bg); }
.nbi .nbi-gcell figcaption { text-align: center; color: var(--nbi-fg-muted);
  font-size: 0.85em; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.nbi .nbi-gcell .nbi-bars { grid-template-columns: max-content minmax(30px, 1fr) max-content;
  font-size: 0.9em; gap: 1px 6px; }
.nbi .nbi-gcell .nbi-bars .nbi-label { max-width: 7em; }
.nbi .nbi-gcell .nbi-bars > .nbi-label:first-child { font-weight: 600; }
.nbi .nbi-gcell .nbi-missing { width: 96px; height: 96px; margin: 0 auto 4px;
  display: flex; align-items: center; justify-content: center; color: var(--nbi-fg-muted); }
.nbi .nbi-gcell .nbi-gpair { display: flex; gap: 6px; justify-content: center; }
.nbi .nbi-gcell .nbi-gpair > div { text-align: center; color: var(--nbi-fg-muted);
  font-size: 0.8em; min-width: 0; }
.nbi .nbi-gcell .nbi-gpair img, .nbi .nbi-gcell .nbi-gpair .nbi-missing { width: 80px;
  height: 80px; }
.nbi .nbi-gcell details.nbi-gseen { font-size: 0.85em; color: var(--nbi-fg-muted);
  margin-top: 2px; }
.nbi .nbi-gcell details.nbi-gseen summary { cursor: pointer; }
.nbi .nbi-gcell details.nbi-gseen img { width: 64px; height: 64px; margin: 4px auto 2px; }
.nbi .nbi-gcell .nbi-gnote { text-align: center; font-size: 0.9em; }
"""


def _open_image(source: Any) -> Any:
    """A PIL image of a path, encoded bytes or a PIL image (Pillow imported here, lazily)."""
    if hasattr(source, "mode") and hasattr(source, "convert"):  # already a PIL image
        return source
    from PIL import Image

    if isinstance(source, str):
        with Image.open(source) as opened:
            opened.load()
            return opened.copy()
    if isinstance(source, bytes | bytearray | memoryview):
        image = Image.open(io.BytesIO(bytes(source)))
        image.load()
        return image
    raise ValueError(f"cannot draw a {type(source).__name__} as an image")


def thumbnail_uri(source: Any, size: int = THUMB) -> str:
    """A PNG data URI of one image source (path, bytes, PIL image or array), at most ``size``.

    Raises:
        ValueError: A source that is none of those.
        OSError: A file that is gone or not an image Pillow reads.
    """
    if isinstance(source, np.ndarray):
        return png_data_uri(source, size)
    image = _open_image(source)
    if image.mode not in ("L", "RGB", "RGBA"):
        image = image.convert("RGB")
    return png_data_uri(np.asarray(image), size)


def input_uri(picture: Any, size: int = THUMB) -> str:
    """A PNG data URI of a model input picture, small ones scaled up nearest-neighbour.

    An 8x8 input becomes 96x96 with each pixel a 12x12 block, so the pixels stay visible
    wherever the HTML is shown (no CSS needed).
    """
    arr = np.asarray(picture)
    side = max(arr.shape[:2], default=1) or 1
    factor = max(1, size // side)
    if factor > 1:
        arr = np.repeat(np.repeat(arr, factor, axis=0), factor, axis=1)
    return png_data_uri(arr, size)


def _input_html(key: Any, seen: Any, note: str, *, show: bool) -> tuple[str, str]:
    """``(picture, details)``: the input's ``<img>`` and the card's "input the model saw"."""
    if seen is None:
        if not note:
            return "", ""
        return "", (
            '<details class="nbi-gseen"><summary>input the model saw</summary>'
            f'<div class="nbi-gnote">{escape(note)}</div></details>'
        )
    try:
        uri = input_uri(seen)
    except (ValueError, TypeError, OSError):  # not a picture after all: say so, keep the card
        return "", ""
    img = f'<img src="{escape(uri)}" alt="{escape(f"model input of {key}")}">'
    text = f'<div class="nbi-gnote">{escape(note)}</div>' if note else ""
    if show:
        return img, (
            f'<details class="nbi-gseen"><summary>how it was made</summary>{text}</details>'
            if text
            else ""
        )
    return "", (
        f'<details class="nbi-gseen"><summary>input the model saw</summary>{img}{text}</details>'
    )


def _caption(key: Any) -> str:
    return os.path.basename(key) if isinstance(key, str) else f"#{key}"


def _cell(
    key: Any,
    source: Any,
    rows: Any,
    seen: Any = None,
    note: str = "",
    show: bool = False,
) -> str:
    img = '<div class="nbi-missing">no preview</div>'
    if source is not None:
        # A file changed, gone or unreadable since classify keeps its bars, without a picture.
        with contextlib.suppress(OSError, ValueError):
            uri = thumbnail_uri(source)
            img = f'<img src="{escape(uri)}" alt="{escape(key)}">'
    beside, details = _input_html(key, seen, note, show=show)
    if beside:
        img = (
            f'<div class="nbi-gpair"><div>{img}image</div>'
            f'<div class="nbi-ginput">{beside}model input</div></div>'
        )
    scores = [float(s) for s in rows["score"]]
    scale = 1.0 if all(0.0 <= s <= 1.0 for s in scores) else max(map(abs, scores), default=1.0)
    chart = bars(
        list(zip(rows["label"].astype(str), [[s] for s in scores], strict=True)),
        scale=scale or 1.0,
        value=lambda segs: f"{segs[0]:.3f}",
    )
    title = escape(key)
    return (
        f'<figure class="nbi-gcell">{img}'
        f'<figcaption title="{title}">{escape(_caption(key))}</figcaption>{chart}{details}'
        "</figure>"
    )


def classification_html(frame: Any, *, max_images: int = MAX_IMAGES) -> Html:
    """The grid of a classification frame (columns ``image``, ``rank``, ``label``, ``score``).

    Args:
        frame: A frame from :meth:`~nbinfer.Session.classify` (or any frame with those columns;
            images come from its ``images`` mapping when it has one).
        max_images: Draw at most this many images.
    """
    images = dict(getattr(frame, "images", None) or {})
    inputs = dict(getattr(frame, "inputs", None) or {})
    note = str(getattr(frame, "input_note", "") or "")
    show = bool(getattr(frame, "show_input", False))
    ordered = frame.sort_values(["rank"], kind="stable") if len(frame) else frame
    keys = list(dict.fromkeys(frame["image"].tolist()))
    groups = dict(tuple(ordered.groupby("image", sort=False)))
    cells = [
        _cell(key, images.get(key), groups[key], inputs.get(key), note, show)
        for key in keys[:max_images]
    ]
    k = int(frame["rank"].max()) if len(frame) else 0
    shown = min(len(keys), max_images)
    more = (
        f'<div class="nbi-muted">{shown} of {len(keys)} images shown; the frame has all '
        f"{len(frame)} rows</div>"
        if len(keys) > max_images
        else ""
    )
    body = Html(
        f'<style>{GALLERY_CSS}</style><div class="nbi-gallery">{"".join(cells)}</div>{more}'
    )
    text = frame.head(4 * max(k, 1)).to_string() if len(frame) else "empty classification"
    return card(
        "Classification", f"{len(keys)} images", body, text=text, sub=f"top-{k}" if k else ""
    )
