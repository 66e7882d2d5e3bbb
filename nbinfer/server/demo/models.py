"""The demo models shipped with the embedded server (deterministic, no downloads).

* ``add_sub``: FP32 ``INPUT0``, ``INPUT1`` ``[-1, 16]`` -> ``OUTPUT0`` = sum, ``OUTPUT1`` =
  difference (Triton's classic example).
* ``echo``: BYTES ``INPUT0`` ``[-1, -1]`` -> ``OUTPUT0``, identical.
* ``iris``: FP32 ``input`` ``[-1, 4]`` (cm) -> ``probabilities`` ``[-1, 3]``, labelled
  setosa / versicolor / virginica.
* ``digits``: FP32 ``input`` ``[-1, 8, 8]`` in 0..1 -> ``probabilities`` ``[-1, 10]``, labelled
  "0".."9".
"""

from __future__ import annotations

from typing import Any

from nbinfer.server.demo.nets import (
    DIGITS_LABELS,
    IRIS_LABELS,
    digits_predict,
    iris_predict,
    load_weights,
)
from nbinfer.server.model import InferContext, Model, TensorDef

__all__ = ["AddSub", "Digits", "Echo", "Iris", "demo_models"]


class AddSub(Model):
    """Element-wise sum and difference of two FP32 vectors of 16."""

    name = "add_sub"
    inputs = (TensorDef("INPUT0", "FP32", [-1, 16]), TensorDef("INPUT1", "FP32", [-1, 16]))
    outputs = (TensorDef("OUTPUT0", "FP32", [-1, 16]), TensorDef("OUTPUT1", "FP32", [-1, 16]))
    device = "cpu"
    run_in_thread = False  # two vector ops: cheaper than a thread hop

    def predict(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """Return ``INPUT0 + INPUT1`` and ``INPUT0 - INPUT1``."""
        a = inputs["INPUT0"]
        b = inputs["INPUT1"]
        return {"OUTPUT0": a + b, "OUTPUT1": a - b}


class Echo(Model):
    """Return the BYTES input unchanged."""

    name = "echo"
    inputs = (TensorDef("INPUT0", "BYTES", [-1, -1]),)
    outputs = (TensorDef("OUTPUT0", "BYTES", [-1, -1]),)
    device = "cpu"
    run_in_thread = False

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Return ``INPUT0``."""
        return inputs["INPUT0"]


class Iris(Model):
    """Iris species classifier (multinomial logistic regression, numpy)."""

    name = "iris"
    inputs = (TensorDef("input", "FP32", [-1, 4]),)
    outputs = (TensorDef("probabilities", "FP32", [-1, 3]),)
    device = "cpu"
    run_in_thread = False
    _weights: dict[str, Any] | None = None

    labels = IRIS_LABELS  # of the (only) output "probabilities"

    def load(self) -> None:
        """Read the shipped weights."""
        self._weights = load_weights("iris")

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Class probabilities for rows of (sepal length, sepal width, petal length, width)."""
        assert self._weights is not None
        return iris_predict(self._weights, inputs["input"])


class Digits(Model):
    """8x8 handwritten digit classifier (small MLP, numpy)."""

    name = "digits"
    inputs = (TensorDef("input", "FP32", [-1, 8, 8]),)
    outputs = (TensorDef("probabilities", "FP32", [-1, 10]),)
    device = "cpu"
    run_in_thread = False
    _weights: dict[str, Any] | None = None

    labels = DIGITS_LABELS

    def load(self) -> None:
        """Read the shipped weights."""
        self._weights = load_weights("digits")

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Class probabilities for 8x8 images with values in 0..1."""
        assert self._weights is not None
        return digits_predict(self._weights, inputs["input"])


def demo_models() -> list[Model]:
    """Fresh instances of the demo models: add_sub, echo, iris, digits."""
    return [AddSub(), Echo(), Iris(), Digits()]
