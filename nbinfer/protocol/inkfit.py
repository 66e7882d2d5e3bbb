"""Fit the ink of a drawn or printed glyph into a small model's box, as its training data was.

Small grayscale models (the demo ``digits``, MNIST-like models) were trained on glyphs drawn
bright on a dark background, cropped to the ink and scaled to fill the box. A newcomer's image is
usually none of that: dark ink on white paper, a digit in the middle of a large canvas, thin
strokes. :func:`fit_ink` prepares such an image the way the data was made:

1. **grayscale**: RGB by luma (Pillow's ``L`` weights); an alpha channel composites the image
   over the background that contrasts with its strokes (a sketch pad's strokes on a transparent
   canvas are ink whatever their colour);
2. **polarity**: the background is the median of the border pixels; a light background is
   inverted, so ink is bright on black;
3. **contrast**: the background level goes to 0 and the strongest ink to 1;
4. **crop** to the bounding box of the ink (pixels above :data:`INK_LEVEL`);
5. **pad** to the box's aspect keeping the glyph's own, centred, with ``margin`` (a fraction of
   the box on each side; 0: the glyph's longer side fills the box, as in scikit-learn's digits);
6. **resize** by area averaging (each output pixel is the mean of the input it covers: an
   antialiased resize, exactly how ``load_digits`` made its 8x8 images from 32x32 bitmaps);
7. **stretch** so the brightest output pixel is 255 (``load_digits`` images peak at 16 of 16).

An image already at the box's size is taken as prepared (the model's own data, e.g.
``load_digits().images``) and returned unchanged; an image without ink (flat, contrast below
:data:`MIN_CONTRAST`) is plainly resized.

The one implementation behind ``session.classify(..., fit="ink")`` on the client and the server's
``digits_encoded`` demo model, so both prepare an image identically. Model configs ask for it with
the parameter :data:`FIT_PARAMETER` = ``"ink"``.

Example:
    >>> page = np.full((40, 30), 255, np.uint8)
    >>> page[10:30, 12:16] = 0  # a dark bar on white paper
    >>> fit_ink(page, (8, 8))[:, 3].tolist()  # bright, and filling the box's height
    [255, 255, 255, 255, 255, 255, 255, 255]

Layer: protocol (pure): numpy and errors only; PIL images are handled duck-typed (no import).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError

__all__ = [
    "FITS",
    "FIT_PARAMETER",
    "INK_LEVEL",
    "MIN_CONTRAST",
    "area_resize",
    "fit_ink",
    "fit_ink_image",
    "gray_pixels",
]

#: Model config parameter naming how images are fitted into the input box.
FIT_PARAMETER = "nbinfer.image.fit"
#: ``"resize"``: the whole image resized to the box (ImageNet-style models);
#: ``"ink"``: :func:`fit_ink` (small grayscale glyph models like ``digits``).
FITS = ("resize", "ink")
#: Ink above this fraction of the strongest ink counts for the bounding box.
INK_LEVEL = 0.2
#: Below this spread of gray levels (0..255) an image has no ink: it is plainly resized.
MIN_CONTRAST = 16.0

_LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # ITU-R 601-2, Pillow's "L"


def gray_pixels(pixels: Any) -> np.ndarray[Any, Any]:
    """An image array (``H x W``, or ``H x W x C`` with C 1..4) as float32 gray levels 0..255.

    Alpha (C 2 or 4) composites the image over white when its visible strokes are dark, over
    black when they are light.

    Raises:
        InvalidInputError: The array is not one image.
    """
    arr = np.asarray(pixels)
    if arr.ndim == 3 and arr.shape[-1] in (1, 2, 3, 4):
        channels = arr.shape[-1]
    elif arr.ndim == 2:
        channels = 0
    else:
        raise InvalidInputError(
            f"an image to fit must be H x W or H x W x C (C 1 to 4), got shape {list(arr.shape)}"
        )
    if arr.dtype.kind not in "uif" or arr.size == 0:
        raise InvalidInputError(f"an image to fit must be non-empty numbers, got {arr.dtype}")
    x = arr.astype(np.float32)
    if channels == 0:
        return x
    color = x[..., :3] @ _LUMA if channels >= 3 else x[..., 0]
    if channels in (2, 4):
        alpha = x[..., -1] / 255.0
        seen = alpha > 0.5
        stroke = float(color[seen].mean()) if seen.any() else 0.0
        back = 255.0 if stroke < 127.5 else 0.0
        color = alpha * color + (1.0 - alpha) * back
    out: np.ndarray[Any, Any] = color
    return out


def _area_weights(n_in: int, n_out: int, origin: float, step: float) -> np.ndarray[Any, Any]:
    """``[n_out, n_in]``: output pixel ``i`` is the mean of input ``[origin + i*step, +step)``.

    Input outside ``0..n_in`` is background (0), so the glyph may sit inside a larger box.
    """
    edges = origin + step * np.arange(n_out + 1, dtype=np.float64)
    starts = np.arange(n_in, dtype=np.float64)
    lo = np.maximum(edges[:-1, None], starts[None, :])
    hi = np.minimum(edges[1:, None], starts[None, :] + 1.0)
    weights: np.ndarray[Any, Any] = (np.clip(hi - lo, 0.0, None) / step).astype(np.float32)
    return weights


def area_resize(gray: Any, size: tuple[int, int]) -> np.ndarray[Any, Any]:
    """A 2-D float array resized to ``size = (height, width)`` by area averaging (float32)."""
    arr = np.asarray(gray, dtype=np.float32)
    h, w = size
    rows = _area_weights(arr.shape[0], h, 0.0, arr.shape[0] / h)
    cols = _area_weights(arr.shape[1], w, 0.0, arr.shape[1] / w)
    out: np.ndarray[Any, Any] = rows @ arr @ cols.T
    return out


def _to_uint8(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out: np.ndarray[Any, Any] = np.clip(np.rint(x), 0, 255).astype(np.uint8)
    return out


def fit_ink(pixels: Any, size: tuple[int, int], *, margin: float = 0.0) -> np.ndarray[Any, Any]:
    """One image as a ``uint8`` ``height x width`` glyph: bright ink on black, filling the box.

    Args:
        pixels: The image: ``H x W`` gray levels, or ``H x W x C`` (1: gray, 2: gray + alpha,
            3: RGB, 4: RGBA); ``uint8`` or numbers on the same 0..255 scale.
        size: The box, ``(height, width)``.
        margin: Empty border on each side, as a fraction of the box (0 <= margin < 0.5).

    Returns:
        ``uint8`` array of shape ``size`` (see the module's steps).

    Raises:
        InvalidInputError: Not one image, an empty box, or a margin out of range.
    """
    h, w = int(size[0]), int(size[1])
    if h <= 0 or w <= 0:
        raise InvalidInputError(f"the box to fit ink into must be positive, got {size}")
    if not 0.0 <= margin < 0.5:
        raise InvalidInputError(f"margin must be in [0, 0.5), got {margin}")
    gray = gray_pixels(pixels)
    if gray.shape == (h, w):
        return _to_uint8(gray)  # already at the model's size: the model's own kind of data
    if float(gray.max() - gray.min()) < MIN_CONTRAST:
        return _to_uint8(area_resize(gray, (h, w)))
    border = np.concatenate([gray[0], gray[-1], gray[1:-1, 0], gray[1:-1, -1]])
    back = float(np.median(border))
    # ink = how far a pixel is from the background, towards the side the ink is on
    ink = (back - gray) if back > 127.5 else (gray - back)  # light ground: dark ink on paper
    peak = float(ink.max())
    if peak < MIN_CONTRAST:  # nothing stands out of the background: a flat image
        flat = (255.0 - gray) if back > 127.5 else gray
        return _to_uint8(area_resize(flat, (h, w)))
    mask = ink > INK_LEVEL * peak
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    crop = ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    crop = np.clip(crop, 0.0, None)
    ch, cw = crop.shape
    inner = 1.0 - 2.0 * margin
    step = max(ch / (h * inner), cw / (w * inner))  # input pixels per output pixel
    top = (ch - step * h) / 2.0  # centre the crop in the box
    left = (cw - step * w) / 2.0
    out = _area_weights(ch, h, top, step) @ crop @ _area_weights(cw, w, left, step).T
    high = float(out.max())
    return _to_uint8(out * (255.0 / high)) if high > 0 else _to_uint8(out)


def fit_ink_image(image: Any, size: tuple[int, int], *, margin: float = 0.0) -> Any:
    """:func:`fit_ink` of a PIL image (any mode; duck-typed: this module does not import PIL)."""
    mode = str(image.mode)
    if mode in ("P", "PA") or mode.endswith("A") or "transparency" in image.info:
        image = image.convert("RGBA")
    elif mode not in ("L", "RGB"):
        image = image.convert("L" if mode in ("1", "I", "I;16", "F") else "RGB")
    return fit_ink(np.asarray(image), size, margin=margin)
