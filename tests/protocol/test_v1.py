"""KServe v1 codec: instances in, predictions out."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import bfloat16
from nbinfer.protocol.v1 import (
    decode_v1_request,
    decode_v1_response,
    encode_v1_request,
    encode_v1_response,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.lists(json_values, max_size=5))
def test_instances_round_trip(instances: list[object]) -> None:
    assert decode_v1_request(encode_v1_request(instances)) == instances


@given(json_values)
def test_predictions_round_trip(predictions: object) -> None:
    assert decode_v1_response(encode_v1_response(predictions)) == predictions


def test_numpy_arrays_become_nested_lists_whatever_their_layout() -> None:
    arr = np.arange(12, dtype=">f4").reshape(3, 4)[:, ::2]
    assert decode_v1_response(encode_v1_response(arr)) == arr.tolist()
    assert decode_v1_request(encode_v1_request(np.ones((2, 2), np.int8))) == [[1, 1], [1, 1]]
    assert decode_v1_response(encode_v1_response(np.array([1.5], bfloat16))) == [1.5]
    assert decode_v1_response(encode_v1_response({"score": np.float32(0.5), "n": np.int64(3)})) == {
        "score": 0.5,
        "n": 3,
    }
    assert decode_v1_response(encode_v1_response(np.array(["a", "b"]))) == ["a", "b"]


def test_bytes_are_text_or_b64_when_not_utf8() -> None:
    body = encode_v1_response([b"caf\xc3\xa9", b"\xff\x00"])
    assert orjson.loads(body) == {"predictions": ["café", {"b64": "/wA="}]}


def test_inputs_form_is_accepted_for_requests() -> None:
    assert decode_v1_request(b'{"inputs": {"a": [1, 2]}}') == {"a": [1, 2]}
    assert decode_v1_request(encode_v1_request([[1]], key="inputs")) == [[1]]
    assert decode_v1_response(b'{"outputs": [3]}') == [3]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{", "malformed v1 request JSON"),
        (b"[1]", "must be a JSON object"),
        (b'{"instances": 3}', "'instances' must be a list"),
        (b'{"data": []}', "needs 'instances'"),
    ],
)
def test_malformed_requests_are_invalid_input(body: bytes, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        decode_v1_request(body)


def test_error_and_empty_responses_raise() -> None:
    with pytest.raises(InvalidInputError, match="error: boom"):
        decode_v1_response(b'{"error": "boom"}')
    with pytest.raises(InvalidInputError, match="no 'predictions'"):
        decode_v1_response(b"{}")
    with pytest.raises(InvalidInputError, match="cannot encode"):
        encode_v1_response(object())
