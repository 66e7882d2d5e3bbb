from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.interop.pandas import dataframe_to_inputs, outputs_to_dataframe
from nbinfer.protocol.types import InferOutput, ModelMetadata, TensorSpec

IRIS = ModelMetadata(
    "iris",
    inputs=[TensorSpec("INPUT", "FP32", [-1, 4])],
    outputs=[TensorSpec("probabilities", "FP32", [-1, 3])],
)
TWO = ModelMetadata(
    "two",
    inputs=[TensorSpec("x", "INT64", [-1]), TensorSpec("text", "BYTES", [-1, 1])],
)


def test_feature_columns_become_single_matrix_input_in_model_dtype() -> None:
    df = pd.DataFrame({"a": [1.0, 2.0], "b": [3, 4], "c": [5, 6], "d": [7, 8]})
    (inp,) = dataframe_to_inputs(df, IRIS)
    assert inp.name == "INPUT" and inp.datatype == "FP32" and inp.shape == [2, 4]
    assert inp.data is not None and inp.data.dtype == np.float32
    np.testing.assert_array_equal(inp.data[1], [2, 4, 6, 8])


def test_columns_named_after_inputs_map_one_to_one() -> None:
    df = pd.DataFrame({"text": ["a", "bé"], "x": [1, 2]})
    x, text = dataframe_to_inputs(df, TWO)
    assert (x.name, x.shape, x.data.dtype) == ("x", [2], np.int64)  # type: ignore[union-attr]
    assert text.shape == [2, 1] and text.data is not None
    assert text.data[1, 0] == "bé".encode()


def test_unmappable_frame_names_model_and_expected_inputs() -> None:
    with pytest.raises(InvalidInputError, match=r"iris.*INPUT FP32 \[-1, 4\]"):
        dataframe_to_inputs(pd.DataFrame({"a": [1.0], "b": [2.0]}), IRIS)


def test_outputs_become_labelled_columns_and_text() -> None:
    probs = np.array([[0.1, 0.7, 0.2], [0.8, 0.1, 0.1]], dtype=np.float32)
    words = np.array([b"x", b"\xff"], dtype=object)
    frame = outputs_to_dataframe(
        [InferOutput("p", "FP32", [2, 3], probs), InferOutput("w", "BYTES", [2], words)],
        labels={"p": ["setosa", "versicolor", "virginica"]},
        index=pd.Index([10, 11]),
    )
    assert list(frame.columns) == ["p[setosa]", "p[versicolor]", "p[virginica]", "w"]
    assert frame.loc[11, "p[setosa]"] == pytest.approx(0.8)
    assert frame.loc[10, "w"] == "x" and frame.loc[11, "w"] == b"\xff"
