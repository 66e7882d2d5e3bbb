"""Wire parity with tritonclient: same bytes, and messages each side parses the other's way."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

tritonclient_utils = pytest.importorskip("tritonclient.utils")
tritonhttp = pytest.importorskip("tritonclient.http")

from nbinfer.protocol import rest  # noqa: E402
from nbinfer.protocol.dtypes import bfloat16  # noqa: E402
from nbinfer.protocol.tensors import (  # noqa: E402
    decode_bytes_tensor,
    encode_bytes_tensor,
    tensor_to_bytes,
    to_bfloat16,
)
from nbinfer.protocol.types import InferOutput, InferResponse  # noqa: E402


def obj(items: list[object]) -> np.ndarray:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30))
def test_bytes_encoding_is_identical_to_tritonclient(items: list[bytes]) -> None:
    arr = obj(items)
    theirs = tritonclient_utils.serialize_byte_tensor(arr).item()
    assert encode_bytes_tensor(arr) == theirs
    assert decode_bytes_tensor(theirs, len(items)).tolist() == items
    assert tritonclient_utils.deserialize_bytes_tensor(encode_bytes_tensor(arr)).tolist() == items


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=10), min_size=1, max_size=30))
def test_str_encoding_is_identical_to_tritonclient(items: list[str]) -> None:
    arr = obj(items)
    assert encode_bytes_tensor(arr) == tritonclient_utils.serialize_byte_tensor(arr).item()


# bfloat16 values (exactly representable): truncation and rounding agree on them
bf16_exact = (
    st.integers(0, 0xFFFF)
    .map(lambda bits: np.array([bits << 16], np.uint32).view(np.float32)[0])
    .filter(lambda v: not np.isnan(v))
)


@settings(max_examples=100, deadline=None)
@given(st.lists(bf16_exact, min_size=1, max_size=64))
def test_bf16_bytes_are_identical_to_tritonclient(values: list[np.float32]) -> None:
    f32 = np.array(values, np.float32)
    ours = bytes(tensor_to_bytes(to_bfloat16(f32), "BF16"))
    assert ours == bytes(tensor_to_bytes(f32, "BF16"))  # float32 input is rounded the same way
    serialize_bf16 = getattr(tritonclient_utils, "serialize_bf16_tensor", None)
    if serialize_bf16 is not None:  # tritonclient < 2.6x: float32 truncation helper
        assert ours == serialize_bf16(f32).item()
    # current tritonclient: ml_dtypes.bfloat16 arrays straight from the InferInput
    inp = tritonhttp.InferInput("b", [len(values)], "BF16")
    inp.set_data_from_numpy(f32.astype(ml_dtypes.bfloat16))
    assert ours == inp._get_binary_data()


def _tritonclient_request(binary: bool) -> tuple[bytes, int | None, dict[str, np.ndarray]]:
    data = {
        "fp32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "int64": np.array([[-1, 2**40]], dtype=np.int64),
        "fp16": np.array([0.5, -2.0], dtype=np.float16),
        "bool": np.array([True, False, True]),
        "uint8": np.array([0, 255], dtype=np.uint8),
        "text": obj([b"hello", b"", "wörld".encode()]).reshape(1, 3),
    }
    if binary:
        data["bf16"] = np.array([1.5, -3.0], dtype=ml_dtypes.bfloat16)
        data["blob"] = obj([b"\xff\x00\x00", b"\x00"])
    types = {
        "fp32": "FP32",
        "int64": "INT64",
        "fp16": "FP16",
        "bool": "BOOL",
        "uint8": "UINT8",
        "text": "BYTES",
        "bf16": "BF16",
        "blob": "BYTES",
    }
    inputs = []
    for name, arr in data.items():
        inp = tritonhttp.InferInput(name, list(arr.shape), types[name])
        inp.set_data_from_numpy(arr, binary_data=binary)
        inputs.append(inp)
    outputs = [
        tritonhttp.InferRequestedOutput("probs", binary_data=True, class_count=3),
        tritonhttp.InferRequestedOutput("raw", binary_data=False),
    ]
    body, header_length = tritonhttp.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="abc", parameters={"custom": 7}
    )
    return body, header_length, data


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_requests_decode_as_sent(binary: bool) -> None:
    body, header_length, data = _tritonclient_request(binary)
    assert (header_length is not None) == binary
    req = rest.decode_request(body, header_length)
    assert req.id == "abc" and req.parameters == {"custom": 7}
    got = {i.name: i for i in req.inputs}
    assert list(got) == list(data)
    for name, arr in data.items():
        inp = got[name]
        assert inp.shape == list(arr.shape)
        if arr.dtype == object:
            assert inp.data.tolist() == arr.tolist()
        else:
            assert inp.data.dtype == arr.dtype
            np.testing.assert_array_equal(inp.data, arr)
        if binary:
            assert (
                np.shares_memory(inp.data, np.frombuffer(body, np.uint8)) or inp.datatype == "BYTES"
            )
    probs, raw = req.outputs
    assert (probs.name, probs.binary_data, probs.class_count) == ("probs", True, 3)
    assert (raw.name, raw.binary_data, raw.class_count) == ("raw", False, 0)


def test_tritonclient_request_without_outputs_asks_for_binary_outputs() -> None:
    inp = tritonhttp.InferInput("x", [1], "INT32")
    inp.set_data_from_numpy(np.array([1], np.int32))
    body, header_length = tritonhttp.InferenceServerClient.generate_request_body([inp])
    req = rest.decode_request(body, header_length)
    assert req.parameters == {"binary_data_output": True}


@pytest.mark.parametrize("binary", [True, False, {"scores"}])
def test_our_responses_parse_in_tritonclient(binary) -> None:
    arrays = {
        "scores": ("FP32", np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)),
        "ids": ("INT64", np.array([[1, 2, 3]])),
        "mask": ("BOOL", np.array([True, False])),
        "half": ("FP16", np.array([1.5, 0.25], np.float16)),
        "labels": ("BYTES", obj([b"cat", "dög".encode()])),
        "empty": ("FP32", np.zeros((0, 3), np.float32)),
    }
    if binary is True:
        arrays["brain"] = ("BF16", np.array([1.5, -2.0], bfloat16))
        arrays["blob"] = ("BYTES", obj([b"\xff\x00"]))
    resp = InferResponse(
        model_name="m",
        model_version="1",
        id="r-9",
        outputs=[InferOutput(n, dt, list(a.shape), a) for n, (dt, a) in arrays.items()],
    )
    body, header_length = rest.encode_response(resp, binary_outputs=binary)
    result = tritonhttp.InferenceServerClient.parse_response_body(body, header_length=header_length)
    meta = result.get_response()
    assert (meta["model_name"], meta["model_version"], meta["id"]) == ("m", "1", "r-9")
    for name, (_, arr) in arrays.items():
        theirs = result.as_numpy(name)
        if arr.dtype == object:
            assert [x if isinstance(x, bytes) else x.encode() for x in theirs.ravel()] == list(arr)
        else:
            assert theirs.dtype == arr.dtype
            np.testing.assert_array_equal(theirs.reshape(arr.shape), arr)


def test_triton_style_responses_decode() -> None:
    # the shape of what Triton sends: JSON outputs, binary outputs after the header
    scores = np.array([0.25, 0.75], np.float32)
    words = tritonclient_utils.serialize_byte_tensor(
        obj([b"0.750000:1:dog", b"0.250000:0:cat"])
    ).item()
    header = (
        b'{"id":"42","model_name":"simple","model_version":"1","outputs":['
        b'{"name":"OUTPUT0","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},'
        b'{"name":"OUTPUT1","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":'
        + str(len(words)).encode()
        + b"}},"
        b'{"name":"OUTPUT2","datatype":"INT32","shape":[2],"data":[1,2]}]}'
    )
    resp = rest.decode_response(header + scores.tobytes() + words, len(header))
    assert (resp.id, resp.model_name, resp.model_version) == ("42", "simple", "1")
    out0, out1, out2 = resp.outputs
    np.testing.assert_array_equal(out0.data, scores.reshape(1, 2))
    assert out1.data.tolist() == [[b"0.750000:1:dog", b"0.250000:0:cat"]]
    np.testing.assert_array_equal(out2.data, [1, 2])
