"""Pure-numpy forward passes of the demo models shipped with the embedded server.

The weights live next to this module in ``weights/<name>.npz`` (written by
``scripts/train_demo_models.py``; no downloads, no scikit-learn at runtime) and are read with
``allow_pickle=False``.

Models:

* ``iris``: multinomial logistic regression on standardised features. Input FP32 ``[-1, 4]``:
  sepal length, sepal width, petal length, petal width, in cm. Output FP32 ``[-1, 3]``
  probabilities for :data:`IRIS_LABELS`.
* ``digits``: MLP 64 -> 64 (ReLU) -> 10. Input FP32 ``[-1, 8, 8]`` grayscale images with values
  in 0..1, i.e. scikit-learn's ``load_digits().images / 16``; for real images, white (bright) ink
  on a black background, cropped to the ink and area-averaged to 8x8
  (:func:`nbinfer.protocol.inkfit.fit_ink`, which ``session.classify`` applies). Trained on
  ``load_digits`` plus font-rendered and drawn digits passed through that function. Output FP32
  ``[-1, 10]`` probabilities for :data:`DIGITS_LABELS`.

Example::

    w = load_weights("iris")
    probs = iris_predict(w, np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32))
    IRIS_LABELS[int(probs.argmax(axis=1)[0])]  # 'setosa'

Layer: server (demo); imports numpy and errors only, so the forward passes stay testable alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from nbinfer.errors import InvalidInputError, ModelNotFoundError

__all__ = [
    "DEMO_MODELS",
    "DIGITS_LABELS",
    "IRIS_LABELS",
    "WEIGHTS_DIR",
    "digits_predict",
    "iris_predict",
    "load_weights",
    "softmax",
]

#: Class labels of the ``iris`` model, in output order.
IRIS_LABELS: tuple[str, ...] = ("setosa", "versicolor", "virginica")
#: Class labels of the ``digits`` model, in output order.
DIGITS_LABELS: tuple[str, ...] = tuple(str(i) for i in range(10))
#: Names of the demo models whose weights ship with the package.
DEMO_MODELS: tuple[str, ...] = ("iris", "digits")
#: Directory holding ``<name>.npz``.
WEIGHTS_DIR: Path = Path(__file__).resolve().parent / "weights"

Weights = dict[str, npt.NDArray[Any]]
FloatArray = npt.NDArray[np.float32]


def load_weights(name: str) -> Weights:
    """Read the shipped weights of a demo model.

    Args:
        name: ``"iris"`` or ``"digits"``.

    Returns:
        A fresh dict of arrays (float32 parameters, ``labels`` as a unicode array, ``test_idx``
        held-out sample indices, ``test_accuracy`` recorded at training time).

    Raises:
        ModelNotFoundError: ``name`` is not a demo model.
    """
    if name not in DEMO_MODELS:
        raise ModelNotFoundError(
            f"unknown demo model {name!r}; known demo models: {', '.join(DEMO_MODELS)}",
            model=name,
        )
    path = WEIGHTS_DIR / f"{name}.npz"
    with np.load(path, allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


def softmax(logits: npt.ArrayLike) -> FloatArray:
    """Numerically stable softmax over the last axis, in float32.

    Args:
        logits: Array of shape ``(..., k)``.

    Returns:
        Float32 array of the same shape whose rows sum to 1.
    """
    return _softmax_in_place(np.array(logits, dtype=np.float32))


def _softmax_in_place(z: FloatArray) -> FloatArray:
    """Softmax over the last axis of a float32 array the caller owns, without temporaries."""
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def _as_float32(x: npt.ArrayLike, model: str, trailing: tuple[int, ...]) -> FloatArray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise InvalidInputError(
            f"model {model!r}: input must be numeric (expected FP32), got dtype {arr.dtype}",
            model=model,
        )
    if arr.ndim != 1 + len(trailing) or arr.shape[1:] != trailing:
        expected = "[-1, " + ", ".join(str(d) for d in trailing) + "]"
        raise InvalidInputError(
            f"model {model!r}: expected input shape {expected}, got {list(arr.shape)}",
            model=model,
        )
    out: FloatArray = arr.astype(np.float32, copy=False)
    return out


def iris_predict(weights: Weights, x: npt.ArrayLike) -> FloatArray:
    """Class probabilities of the ``iris`` model.

    Args:
        weights: ``load_weights("iris")``.
        x: Shape ``(n, 4)``: sepal length, sepal width, petal length, petal width (cm).

    Returns:
        Float32 array ``(n, 3)`` of probabilities in :data:`IRIS_LABELS` order.

    Raises:
        InvalidInputError: ``x`` is not numeric or not of shape ``(n, 4)``.
    """
    arr = _as_float32(x, "iris", (4,))
    # Standardising folded into the 4 x 3 weights: one pass over the rows instead of three.
    scale = weights["w"] / weights["std"][:, None]
    shift = weights["b"] - (weights["mean"] / weights["std"]) @ weights["w"]
    z = arr @ scale.astype(np.float32, copy=False)
    z += shift
    return _softmax_in_place(z)


def digits_predict(weights: Weights, x: npt.ArrayLike) -> FloatArray:
    """Class probabilities of the ``digits`` model.

    Args:
        weights: ``load_weights("digits")``.
        x: Shape ``(n, 8, 8)``, grayscale pixel values in 0..1 (bright ink on black).

    Returns:
        Float32 array ``(n, 10)`` of probabilities in :data:`DIGITS_LABELS` order.

    Raises:
        InvalidInputError: ``x`` is not numeric or not of shape ``(n, 8, 8)``.
    """
    arr = _as_float32(x, "digits", (8, 8)).reshape(-1, 64)
    hidden = np.maximum(arr @ weights["w1"] + weights["b1"], np.float32(0))
    return softmax(hidden @ weights["w2"] + weights["b2"])
