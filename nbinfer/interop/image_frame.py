"""The answer of image classification: a top-k DataFrame that draws itself as an image grid.

Layer: interop (pandas and numpy only); its renderer (``nbinfer.render.gallery``) lazily, inside
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
    (``nbinfer.render.gallery``), each card offering the input the model saw (beside the
    image with ``show_input=True``). Filtering and copying keep the images and inputs.
    """

    _metadata = [  # noqa: RUF012 - pandas' own convention
        "_nbinfer_images",
        "_nbinfer_inputs",
        "_nbinfer_input_note",
        "_nbinfer_show_input",
    ]

    @property
    def _constructor(self) -> Callable[..., ClassificationFrame]:
        return ClassificationFrame

    @property
    def images(self) -> dict[Any, ImageSource]:
        """The image behind each ``image`` key (paths are reopened when displayed)."""
        return dict(getattr(self, "_nbinfer_images", None) or {})

    @property
    def inputs(self) -> dict[Any, np.ndarray[Any, Any]]:
        """What the model received for each image, as a picture before scaling, by ``image`` key.

        ``uint8`` ``H x W`` or ``H x W x C`` arrays (large ones shrunk to 96 px; a
        ``preprocess`` function's floats stretched to 0..255), for the first 48 images; empty
        when the server decoded the images (encoded inputs).
        """
        return dict(getattr(self, "_nbinfer_inputs", None) or {})

    @property
    def input_note(self) -> str:
        """How the inputs were made (size, channels, fit, scaling), as the grid says it."""
        return str(getattr(self, "_nbinfer_input_note", None) or "")

    @property
    def show_input(self) -> bool:
        """The grid draws each input beside its image (``classify(..., show_input=True)``)."""
        return bool(getattr(self, "_nbinfer_show_input", False))

    def _repr_html_(self) -> str | None:
        from nbinfer.render.gallery import classification_html

        return classification_html(self)


def classification_frame(
    keys: Sequence[Any],
    indices: np.ndarray[Any, Any],
    scores: np.ndarray[Any, Any],
    labels: Sequence[str | None],
    images: Mapping[Any, ImageSource] | None = None,
    *,
    inputs: Mapping[Any, np.ndarray[Any, Any]] | None = None,
    input_note: str = "",
    show_input: bool = False,
) -> ClassificationFrame:
    """Long-format top-k frame: one row per (image, rank), best first.

    Args:
        keys: One key per image (its path or position).
        indices: Class indices ``[n, k]``.
        scores: Scores ``[n, k]``.
        labels: Label per row-major cell of ``indices`` (``None``: the index as text).
        images: The sources by key, for the grid display.
        inputs: What the model received for each image (a picture per key), for the grid.
        input_note: How those inputs were made, in a few words.
        show_input: Draw each input beside its image (else in the card's details).
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
    frame._nbinfer_inputs = dict(inputs or {})
    frame._nbinfer_input_note = input_note
    frame._nbinfer_show_input = show_input
    return frame
