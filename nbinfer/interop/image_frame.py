"""The answer of image classification: a top-k DataFrame that draws itself as an image grid.

Layer: interop (pandas and numpy only); the notebook's gallery only lazily, inside
:meth:`ClassificationFrame._repr_html_`. Never the client, transports, session or server.
:func:`nbinfer.interop.images.classify_images` builds it with :func:`classification_frame`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ClassificationFrame", "classification_frame"]

#: An image source as :func:`nbinfer.interop.images.expand_images` yields it.
ImageSource = Any


class ClassificationFrame(pd.DataFrame):  # type: ignore[misc]
    """A DataFrame of top-k classes (image, rank, label, score, class) that displays as a grid.

    It is a real DataFrame; in a notebook it renders as an image grid with top-k bars
    (``nbinfer.notebook.gallery``). Filtering and copying keep the images.
    """

    _metadata = ["_nbinfer_images"]  # noqa: RUF012 - pandas' own convention

    @property
    def _constructor(self) -> Callable[..., ClassificationFrame]:
        return ClassificationFrame

    @property
    def images(self) -> dict[Any, ImageSource]:
        """The image behind each ``image`` key (paths are reopened when displayed)."""
        return dict(getattr(self, "_nbinfer_images", None) or {})

    def _repr_html_(self) -> str | None:
        from nbinfer.notebook.gallery import classification_html

        return classification_html(self)


def classification_frame(
    keys: Sequence[Any],
    indices: np.ndarray[Any, Any],
    scores: np.ndarray[Any, Any],
    labels: Sequence[str | None],
    images: Mapping[Any, ImageSource] | None = None,
) -> ClassificationFrame:
    """Long-format top-k frame: one row per (image, rank), best first.

    Args:
        keys: One key per image (its path or position).
        indices: Class indices ``[n, k]``.
        scores: Scores ``[n, k]``.
        labels: Label per row-major cell of ``indices`` (``None``: the index as text).
        images: The sources by key, for the grid display.
    """
    n, k = indices.shape
    flat_idx = indices.reshape(-1)
    frame = ClassificationFrame(
        {
            "image": np.repeat(np.asarray(keys, dtype=object), k),
            "rank": np.tile(np.arange(1, k + 1), n),
            "label": [
                lab if lab is not None else str(i)
                for lab, i in zip(labels, flat_idx.tolist(), strict=True)
            ],
            "score": scores.reshape(-1).astype(np.float32, copy=False),
            "class": flat_idx.astype(np.int64, copy=False),
        }
    )
    frame._nbinfer_images = dict(images or {})
    return frame
