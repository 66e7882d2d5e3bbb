"""``digits_encoded``: the digits classifier behind an encoded-image input (OVMS style).

OpenVINO Model Server lets a client send JPEG / PNG bytes as a BYTES input and decodes them
server-side; this demo model does the same so that path is tested end to end. Input BYTES
``image`` ``[-1]`` (one encoded image per element, any size, any mode); each image is decoded
with Pillow and prepared exactly as ``session.classify("digits", ...)`` prepares it on the
client (:func:`nbinfer.protocol.inkfit.fit_ink_image`: polarity, crop to the ink, pad, area
resize to 8x8), scaled to 0..1, then run through the ``digits`` MLP. Output FP32
``probabilities`` ``[-1, 10]``, labelled "0".."9".

Layer: server (demo); imports errors, protocol.inkfit, server.model and the demo nets; Pillow
lazily.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.inkfit import fit_ink_image
from nbinfer.server.demo.nets import DIGITS_LABELS, digits_predict, load_weights
from nbinfer.server.model import InferContext, Model, TensorDef

__all__ = ["DigitsEncoded", "decode_digit"]


def decode_digit(data: bytes) -> np.ndarray[Any, Any]:
    """One encoded image as the ``digits`` model's 8x8 float32 input in 0..1.

    Raises:
        InvalidInputError: The bytes are not an image Pillow can read.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            fitted = fit_ink_image(im, (8, 8))
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise InvalidInputError(f"digits_encoded: cannot decode image: {exc}") from exc
    out: np.ndarray[Any, Any] = fitted.astype(np.float32) / np.float32(255)
    return out


class DigitsEncoded(Model):
    """The ``digits`` classifier taking JPEG / PNG bytes (decoded on the server)."""

    name = "digits_encoded"
    inputs = (TensorDef("image", "BYTES", [-1]),)
    outputs = (TensorDef("probabilities", "FP32", [-1, 10]),)
    device = "cpu"
    _weights: dict[str, Any] | None = None

    labels = DIGITS_LABELS

    def load(self) -> None:
        """Read the shipped ``digits`` weights."""
        self._weights = load_weights("digits")

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Class probabilities for a batch of encoded images."""
        assert self._weights is not None
        images = [decode_digit(bytes(item)) for item in inputs["image"].reshape(-1)]
        batch = np.stack(images) if images else np.zeros((0, 8, 8), dtype=np.float32)
        return digits_predict(self._weights, batch)
