"""The demo models shipped with the embedded server (deterministic, no downloads).

* ``add_sub``: FP32 ``INPUT0``, ``INPUT1`` ``[-1, 16]`` -> ``OUTPUT0`` = sum, ``OUTPUT1`` =
  difference (Triton's classic example).
* ``echo``: BYTES ``INPUT0`` ``[-1, -1]`` -> ``OUTPUT0``, identical.
* ``iris``: FP32 ``input`` ``[-1, 4]`` (cm) -> ``probabilities`` ``[-1, 3]``, labelled
  setosa / versicolor / virginica.
* ``digits``: FP32 ``input`` ``[-1, 8, 8]`` in 0..1 -> ``probabilities`` ``[-1, 10]``, labelled
  "0".."9".
* ``digits_encoded``: BYTES ``image`` ``[-1]`` (JPEG / PNG bytes, decoded server-side) ->
  ``probabilities`` ``[-1, 10]``; see :mod:`nbinfer.server.demo.encoded`.
* ``accumulate`` (stateful, sequence extension): INT32 ``INPUT`` ``[-1]`` -> INT32 ``OUTPUT``
  ``[1]``, the running sum of every value sent so far in the sequence.
* ``repeat`` (decoupled, gRPC stream only): INT32 ``INPUT`` ``[-1]`` and ``COUNT`` ``[1]`` ->
  ``COUNT`` responses, the i-th with ``OUTPUT`` = ``INPUT`` and ``INDEX`` = ``[i]``.
* ``story`` (decoupled, generative): BYTES ``text_input`` -> ``text_output``, one word per
  response, as Triton's LLM models take them; see :mod:`nbinfer.server.demo.story`.

Layer: server (demo); imports server.model and the demo nets, nothing above the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from nbinfer.server.demo.encoded import DigitsEncoded
from nbinfer.server.demo.nets import (
    DIGITS_LABELS,
    IRIS_LABELS,
    digits_predict,
    iris_predict,
    load_weights,
)
from nbinfer.server.demo.story import Story
from nbinfer.server.model import InferContext, Model, TensorDef

__all__ = ["Accumulate", "AddSub", "Digits", "Echo", "Iris", "Repeat", "demo_models"]


class AddSub(Model):
    """Element-wise sum and difference of two FP32 vectors of 16."""

    name = "add_sub"
    inputs = (TensorDef("INPUT0", "FP32", [-1, 16]), TensorDef("INPUT1", "FP32", [-1, 16]))
    outputs = (TensorDef("OUTPUT0", "FP32", [-1, 16]), TensorDef("OUTPUT1", "FP32", [-1, 16]))
    device = "cpu"
    run_in_thread = False  # two vector ops: cheaper than a thread hop

    def predict(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """Return ``INPUT0 + INPUT1`` and ``INPUT0 - INPUT1``.

        Computed into :meth:`~InferContext.output_array`: on the local zero-copy path that is
        the client's own output region, so the outputs travel without a copy.
        """
        a = inputs["INPUT0"]
        b = inputs["INPUT1"]
        shape = np.broadcast_shapes(a.shape, b.shape)
        total = np.add(a, b, out=context.output_array("OUTPUT0", shape, np.float32))
        difference = np.subtract(a, b, out=context.output_array("OUTPUT1", shape, np.float32))
        return {"OUTPUT0": total, "OUTPUT1": difference}


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
    #: Two CPU instances on the server's threads (``instance_group`` count 2, Triton's default
    #: for an ONNX Runtime model on CPU): a DataFrame's chunks run two at a time (NumPy lets
    #: go of the GIL) while the event loop takes in the next ones; inline on the loop, the
    #: server would run one chunk at a time and read nothing meanwhile (docs/performance.md,
    #: "DataFrames").
    run_in_thread = True
    max_concurrency = 2
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
    #: Tells image clients (``session.classify``) to fit the ink of an image into the 8x8 box
    #: as scikit-learn's digits were made (:mod:`nbinfer.protocol.inkfit`), then scale 0..255
    #: pixels to 0..1.
    parameters = {  # noqa: RUF012 - read-only class default
        "nbinfer.image.scaling": "unit",
        "nbinfer.image.fit": "ink",
    }

    labels = DIGITS_LABELS

    def load(self) -> None:
        """Read the shipped weights."""
        self._weights = load_weights("digits")

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Class probabilities for 8x8 images with values in 0..1."""
        assert self._weights is not None
        return digits_predict(self._weights, inputs["input"])


class Accumulate(Model):
    """Stateful: the running sum of the INT32 values of a sequence (``sequence_id`` needed)."""

    name = "accumulate"
    inputs = (TensorDef("INPUT", "INT32", [-1]),)
    outputs = (TensorDef("OUTPUT", "INT32", [1]),)
    device = "cpu"
    run_in_thread = False
    stateful = True

    def predict(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """Add the input's values to the sequence's total and return the total."""
        total = int(context.state.get("total", 0)) + int(inputs["INPUT"].sum(dtype=np.int64))
        context.state["total"] = total
        return {"OUTPUT": np.array([total], dtype=np.int32)}


class Repeat(Model):
    """Decoupled: ``COUNT`` responses per request, each echoing ``INPUT`` with its ``INDEX``."""

    name = "repeat"
    inputs = (TensorDef("INPUT", "INT32", [-1]), TensorDef("COUNT", "INT32", [1]))
    outputs = (TensorDef("OUTPUT", "INT32", [-1]), TensorDef("INDEX", "INT32", [1]))
    device = "cpu"
    run_in_thread = False
    #: Largest COUNT accepted (a guard against runaway streams).
    max_count = 1000

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Iterator[dict[str, Any]]:
        """Yield ``COUNT`` responses."""
        count = int(inputs["COUNT"][0])
        if not 0 <= count <= self.max_count:
            raise ValueError(f"COUNT must be in 0..{self.max_count}, got {count}")
        for i in range(count):
            yield {"OUTPUT": inputs["INPUT"], "INDEX": np.array([i], dtype=np.int32)}


def demo_models() -> list[Model]:
    """Fresh instances of the demo models: add_sub, echo, iris, digits(_encoded), accumulate, ..."""
    return [AddSub(), Echo(), Iris(), Digits(), DigitsEncoded(), Accumulate(), Repeat(), Story()]
