"""The one value-safe conversion rule (``protocol.tensors.conform``), row by row of its table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol.dtypes import bfloat16
from nbinfer.protocol.tensors import Destination, as_array, conform

IRIS = Destination("iris", "input")


@pytest.mark.parametrize(
    ("data", "datatype", "expected"),
    [
        (np.array([5.1, 3.5, 1.4, 0.2]), "FP32", np.array([5.1, 3.5, 1.4, 0.2], np.float32)),
        (np.array([1.0, np.nan, np.inf, -np.inf]), "FP32", None),  # NaN / inf pass
        (np.array([65504.0, -0.5]), "FP16", None),
        (np.array([2**24, -(2**24), 7]), "FP32", None),
        (np.array([2**53, 3], np.int64), "FP64", None),
        (np.array([255, 0], np.uint8), "FP16", None),
        (np.array([300, -5]), "INT16", None),
        (np.array([2.0, -3.0]), "INT8", None),
        (np.array([True, False]), "FP32", None),
        (np.array([1, 0]), "BOOL", None),
        (np.array([2**63 - 1], np.int64), "UINT64", None),
        (np.array([1.0, 2.0], np.float32), "BF16", None),
    ],
)
def test_values_that_survive_are_converted(data: Any, datatype: str, expected: Any) -> None:
    out = conform(data, datatype, IRIS)
    assert as_array(out)[1] == datatype
    back = out.astype(np.float64) if out.dtype == bfloat16 else out
    np.testing.assert_array_equal(back, data if expected is None else expected)


@pytest.mark.parametrize(
    ("data", "datatype", "value", "fix"),
    [
        (np.array([1.0, 1e39]), "FP32", "1e+39 is outside FP32", "astype(np.float32)"),
        (np.array([70000.0]), "FP16", "70000.0 is outside FP16", "np.clip(x"),
        (np.array([-1e39]), "BF16", "-1e+39 is outside BF16", "ml_dtypes.bfloat16"),
        (np.array([1.0, np.nan]), "INT64", "holds nan", "np.nan_to_num(x)"),
        (np.array([np.inf]), "UINT8", "holds inf", "astype(np.uint8)"),
        (np.array([2.5]), "INT32", "2.5 is not a whole number", "np.rint(x)"),
        (np.array([2**24 + 1]), "FP32", "16777217 is not exactly representable", "np.float32"),
        (np.array([2**53 + 1]), "FP64", "9007199254740993 is not exactly", "np.float64"),
        (np.array([300]), "UINT8", "300 is outside UINT8's range [0, 255]", "np.clip(x, 0, 255)"),
        (np.array([-1]), "UINT32", "-1 is outside UINT32", "np.clip"),
        (np.array([2]), "BOOL", "2 is not 0 or 1", "x != 0"),
        (np.array([257], np.int64), "BF16", "257 is not exactly representable in BF16", "x.astype"),
    ],
)
def test_values_that_would_change_are_refused_with_the_cast(
    data: Any, datatype: str, value: str, fix: str
) -> None:
    with pytest.raises(DataTypeError) as caught:
        conform(data, datatype, IRIS)
    message = str(caught.value)
    assert message.startswith(f"model 'iris', input 'input': {data.dtype} data cannot be sent as")
    assert value in message and fix in message and fix in caught.value.hints[0]
    context = caught.value.context
    assert context["model"] == "iris" and context["tensor"] == "input"
    assert context["dtype"] == str(data.dtype) and context["datatype"] == datatype


def test_a_matching_array_is_returned_as_is() -> None:
    x = np.ones(3, np.float32)
    assert conform(x, "FP32") is x


def test_lists_follow_the_same_rule() -> None:
    assert as_array([1, 2], "FP32")[0].dtype == np.float32
    assert as_array([3.0], "INT8")[0].tolist() == [3]
    with pytest.raises(DataTypeError, match=r"3\.7 is not a whole number"):
        as_array([3.7], "INT32")
    with pytest.raises(InvalidInputError, match="300 is outside INT8"):
        as_array([300], "INT8")


def test_a_column_is_named_in_the_message_and_the_cast() -> None:
    to = Destination("iris", "input", "df['petal_width']", "petal_width")
    with pytest.raises(DataTypeError, match="column 'petal_width'") as caught:
        conform(np.array([1e40]), "FP32", to)
    assert "np.clip(df['petal_width']" in caught.value.hints[0]
    assert caught.value.context["column"] == "petal_width"
