"""The v2 REST codec: JSON and binary tensors, both directions, and its errors."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.protocol import jsonvalues, rest, rest_metadata
from nbinfer.protocol.dtypes import DATATYPES, bfloat16, numpy_dtype
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RepositoryModel,
    RequestedOutput,
    ServerMetadata,
    TensorSpec,
)

shapes = st.one_of(
    st.sampled_from([(), (0,), (0, 3), (3, 0), (1,), (2, 3)]),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
)


@st.composite
def tensors(draw, datatype: str, *, json_safe: bool):
    shape = draw(shapes)
    size = int(np.prod(shape))
    if datatype == "BYTES":
        elements = st.text(max_size=8).map(str.encode) if json_safe else st.binary(max_size=8)
        items = draw(st.lists(elements, min_size=size, max_size=size))
        arr = np.empty(size, dtype=object)
        arr[:] = items
        return arr.reshape(shape)
    if datatype == "BF16":
        values = draw(
            hnp.arrays(np.float32, shape, elements=st.floats(-(2.0**100), 2.0**100, width=32))
        )
        return values.astype(bfloat16)
    dtype = numpy_dtype(datatype)
    if dtype.kind == "f":  # JSON has no NaN / infinity
        elements = st.floats(
            allow_nan=not json_safe, allow_infinity=not json_safe, width=8 * dtype.itemsize
        )
        return draw(hnp.arrays(dtype, shape, elements=elements))
    return draw(hnp.arrays(dtype, shape))


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object:
        return a.shape == b.shape and a.tolist() == b.tolist()
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and a.tobytes() == np.ascontiguousarray(b).tobytes()
    )


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("binary", [True, False])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_request_round_trips_every_datatype(datatype: str, binary: bool, data) -> None:
    arr = data.draw(tensors(datatype, json_safe=not binary))
    req = InferRequest(
        inputs=[InferInput("x", datatype, list(arr.shape), arr, {"custom": "p"})],
        outputs=[RequestedOutput("y", class_count=2, parameters={"k": 1})],
        id="req-1",
        parameters={"sequence_id": 7, "flag": True, "ratio": 0.5},
    )
    body, header_length = rest.encode_request(req, binary=binary)
    assert (header_length is not None) == binary
    back = rest.decode_request(body, header_length)
    (inp,) = back.inputs
    assert (inp.name, inp.datatype, inp.shape, inp.parameters) == (
        "x",
        datatype,
        list(arr.shape),
        {"custom": "p"},
    )
    assert same(arr, inp.data)
    assert back.outputs == [
        RequestedOutput("y", binary_data=None, class_count=2, parameters={"k": 1})
    ]
    assert back.id == "req-1"
    assert back.parameters == {"sequence_id": 7, "flag": True, "ratio": 0.5}


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("binary", [True, False])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_response_round_trips_every_datatype(datatype: str, binary: bool, data) -> None:
    arr = data.draw(tensors(datatype, json_safe=not binary))
    resp = InferResponse(
        model_name="m",
        model_version="3",
        id="r",
        outputs=[InferOutput("y", datatype, list(arr.shape), arr)],
        parameters={"p": "v"},
    )
    body, header_length = rest.encode_response(resp, binary_outputs=binary)
    back = rest.decode_response(body, header_length)
    assert (back.model_name, back.model_version, back.id, back.parameters) == (
        "m",
        "3",
        "r",
        {"p": "v"},
    )
    (out,) = back.outputs
    assert (out.name, out.datatype, out.shape) == ("y", datatype, list(arr.shape))
    assert same(arr, out.data)


def test_large_tensors_round_trip_and_decode_as_zero_copy_views() -> None:
    big = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    req = InferRequest(inputs=[InferInput("a", "FP32", [1024, 1024], big)])
    parts, header_length = rest.encode_request_parts(req)
    assert np.shares_memory(np.frombuffer(parts[1], np.uint8), big)  # no copy before the join
    body, header_length = rest.encode_request(req)
    decoded = rest.decode_request(body, header_length).inputs[0].data
    assert np.shares_memory(decoded, np.frombuffer(body, np.uint8))
    assert not decoded.flags.writeable
    np.testing.assert_array_equal(decoded, big)
    resp = InferResponse("m", [InferOutput("b", "FP32", [1024, 1024], big)])
    body, header_length = rest.encode_response(resp, binary_outputs=True)
    out = rest.decode_response(memoryview(body), header_length).outputs[0].data
    assert np.shares_memory(out, np.frombuffer(body, np.uint8))


def test_mixed_json_and_binary_inputs_in_one_message() -> None:
    a = np.arange(4, dtype=np.int32)
    header = {
        "inputs": [
            {"name": "j", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
            {
                "name": "b",
                "datatype": "INT32",
                "shape": [4],
                "parameters": {"binary_data_size": 16},
            },
            {"name": "s", "datatype": "BYTES", "shape": [2], "data": ["hé", ""]},
            {"name": "t", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 6}},
        ]
    }
    head = orjson.dumps(header)
    body = head + a.tobytes() + b"\x02\x00\x00\x00\xff\x00"
    req = rest.decode_request(body, len(head))
    by_name = {i.name: i for i in req.inputs}
    np.testing.assert_array_equal(by_name["j"].data, [[1, 2], [3, 4]])
    assert by_name["j"].data.dtype == np.float32
    np.testing.assert_array_equal(by_name["b"].data, a)
    assert by_name["s"].data.tolist() == ["hé".encode(), b""]
    assert by_name["t"].data.tolist() == [b"\xff\x00"]
    assert all(i.parameters == {} for i in req.inputs)  # binary_data_size is transport detail


def test_response_sends_only_the_requested_outputs_as_binary() -> None:
    resp = InferResponse(
        "m",
        [
            InferOutput("a", "FP32", [2], np.ones(2, np.float32)),
            InferOutput("b", "INT64", [1], np.array([5])),
        ],
    )
    body, header_length = rest.encode_response(resp, binary_outputs={"b"})
    header = orjson.loads(body[:header_length])
    assert header["outputs"][0]["data"] == [1.0, 1.0]
    assert header["outputs"][1]["parameters"] == {"binary_data_size": 8}
    body, header_length = rest.encode_response(resp)
    assert header_length is None
    assert "parameters" not in orjson.loads(body)["outputs"][1]


def test_binary_outputs_request_flags() -> None:
    x = InferInput("x", "FP32", [1], np.ones(1, np.float32))
    body, _ = rest.encode_request(InferRequest([x]), binary=False, binary_outputs=True)
    assert orjson.loads(body)["parameters"] == {"binary_data_output": True}
    req = InferRequest([x], outputs=[RequestedOutput("a"), RequestedOutput("b", binary_data=False)])
    body, _ = rest.encode_request(req, binary=False, binary_outputs=True)
    outs = orjson.loads(body)["outputs"]
    assert outs == [
        {"name": "a", "parameters": {"binary_data": True}},
        {"name": "b", "parameters": {"binary_data": False}},
    ]
    back = rest.decode_request(body, None)
    assert [o.binary_data for o in back.outputs] == [True, False]


def test_class_count_travels_as_the_classification_parameter() -> None:
    x = InferInput("x", "FP32", [1], np.ones(1, np.float32))
    body, hl = rest.encode_request(InferRequest([x], outputs=[RequestedOutput("p", class_count=3)]))
    assert b'"classification":3' in body[:hl]
    assert rest.decode_request(body, hl).outputs[0].class_count == 3


def test_json_data_may_be_nested_and_is_written_flat() -> None:
    body = b'{"inputs":[{"name":"x","datatype":"INT16","shape":[2,2],"data":[[1,2],[3,4]]}]}'
    req = rest.decode_request(body, None)
    assert req.inputs[0].data.dtype == np.int16 and req.inputs[0].data.shape == (2, 2)
    out, _ = rest.encode_request(req, binary=False)
    assert b'"data":[1,2,3,4]' in out


def test_json_bool_fp16_bf16_and_nan_conventions() -> None:
    resp = InferResponse(
        "m",
        [
            InferOutput("b", "BOOL", [2], np.array([True, False])),
            InferOutput("h", "FP16", [2], np.array([0.5, np.nan], np.float16)),
            InferOutput("z", "BF16", [1], np.array([1.5], bfloat16)),
        ],
    )
    body, _ = rest.encode_response(resp)
    assert b'"data":[0.5,NaN]' in body  # the token tritonclient reads, never null
    outputs = jsonvalues.loads(body)["outputs"]
    assert outputs[0]["data"] == [True, False] and outputs[2]["data"] == [1.5]
    back = rest.decode_response(body, None).outputs
    assert back[0].data.dtype == np.bool_
    assert back[1].data.dtype == np.float16 and np.isnan(back[1].data[1])
    assert back[2].data.dtype == bfloat16


@pytest.mark.parametrize("kind", [bytes, memoryview, str])
def test_non_finite_tokens_parse_wherever_they_stand_and_nothing_else_is_forgiven(
    kind: type,
) -> None:
    def as_kind(text: str) -> Any:
        return text if kind is str else kind(text.encode())

    doc = '{"é": "ü", "data": [1.5, NaN, -Infinity, Infinity]}'  # non-ASCII before the tokens
    values = jsonvalues.loads(as_kind(doc))["data"]
    assert values[0] == 1.5 and math.isnan(values[1]) and values[2:] == [-math.inf, math.inf]
    # malformed where orjson stops, whatever tokens stand elsewhere: orjson's own message
    for bad in ('{"a": Nab, "b": NaN}', '{"a": [NaN, }', "x" * 1000 + "NaN"):
        with pytest.raises(InvalidInputError, match="malformed request JSON"):
            jsonvalues.loads(as_kind(bad), what="request JSON")
    with pytest.raises(InvalidInputError, match="does not fit a 64-bit float"):
        jsonvalues.loads(as_kind('{"a": [NaN, 1e999]}'))


def test_raw_single_input_body_with_header_length_zero() -> None:
    raw = np.arange(6, dtype=np.float32).tobytes()
    req = rest.decode_request(raw, 0, raw_input_spec=("x", "FP32", [-1, 3]))
    assert req.inputs[0].shape == [2, 3]
    assert np.shares_memory(req.inputs[0].data, np.frombuffer(raw, np.uint8))
    words = b"\x01\x00\x00\x00a\x02\x00\x00\x00bc"
    req = rest.decode_request(words, 0, raw_input_spec=("w", "BYTES", [-1]))
    assert req.inputs[0].data.tolist() == [b"a", b"bc"] and req.inputs[0].shape == [2]
    with pytest.raises(InvalidInputError, match="exactly one input; this model has 2"):
        rest.decode_request(raw, 0, input_names=["a", "b"])
    with pytest.raises(InvalidInputError, match="needs 28 bytes, got 24"):
        rest.decode_request(raw, 0, raw_input_spec=("x", "FP32", [7]))
    with pytest.raises(InvalidInputError, match="not a multiple of 4"):
        rest.decode_request(raw[:5], 0, raw_input_spec=("x", "FP32", [-1]))


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{", "malformed request JSON"),
        (b"[]", "must be an object"),
        (b"{}", "missing field 'inputs'"),
        (
            b'{"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]}',
            "input 0: missing field 'name'",
        ),
        (
            b'{"inputs":[{"name":"x","shape":[1],"data":[1]}]}',
            "input 'x': missing field 'datatype'",
        ),
        (b'{"inputs":[{"name":"x","datatype":"FP32","data":[1]}]}', "missing field 'shape'"),
        (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]}', "invalid shape"),
        (
            b'{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]}',
            "tensor 'x' has 2 elements but shape \\[3\\] needs 3",
        ),
        (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[2]}]}', "input 'x' has no data"),
        (
            b'{"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1.5]}]}',
            "INT8.*wrong type",
        ),
        (
            b'{"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]}',
            "element 0 is 300: out of range, does not fit INT8",
        ),
        (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["a"]}]}', "wrong type"),
        (b'{"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":[1]}]}', "must be strings"),
        (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[[1],[2,3]]}]}', "ragged"),
        (
            b'{"inputs":[],"outputs":[{"name":"y","parameters":{"classification":-1}}]}',
            "classification must be",
        ),
    ],
)
def test_malformed_requests_raise_precise_errors(body: bytes, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        rest.decode_request(body, None)


def test_unknown_datatype_is_a_datatype_error() -> None:
    body = b'{"inputs":[{"name":"x","datatype":"FP8","shape":[1],"data":[1]}]}'
    with pytest.raises(DataTypeError, match="unknown datatype 'FP8'"):
        rest.decode_request(body, None)


def test_binary_size_mismatches_and_truncation_are_reported() -> None:
    head = (
        b'{"inputs":[{"name":"x","datatype":"FP32","shape":[2],'
        b'"parameters":{"binary_data_size":8}}]}'
    )
    with pytest.raises(InvalidInputError, match="binary_data_size is 8 but only 4 bytes"):
        rest.decode_request(head + b"\x00" * 4, len(head))
    with pytest.raises(InvalidInputError, match=r"4 bytes of binary data .* not claimed"):
        rest.decode_request(head + b"\x00" * 12, len(head))
    with pytest.raises(InvalidInputError, match="Inference-Header-Content-Length is 200"):
        rest.decode_request(head, 200)
    wrong = head.replace(b'"shape":[2]', b'"shape":[3]')
    with pytest.raises(
        InvalidInputError, match=r"tensor 'x' \(FP32, shape \[3\]\) needs 12 bytes, got 8"
    ):
        rest.decode_request(wrong + b"\x00" * 8, len(wrong))
    both = head.replace(b'"shape":[2]', b'"shape":[2],"data":[1,2]')
    with pytest.raises(InvalidInputError, match="both JSON 'data' and binary_data_size"):
        rest.decode_request(both + b"\x00" * 8, len(both))


def test_truncated_response_body_is_reported() -> None:
    resp = InferResponse("m", [InferOutput("y", "INT64", [4], np.arange(4))])
    body, hl = rest.encode_response(resp, binary_outputs=True)
    with pytest.raises(InvalidInputError, match=r"tensor 'y'.*truncated"):
        rest.decode_response(body[:-3], hl)


def test_non_utf8_bytes_cannot_go_in_json_and_the_error_suggests_binary() -> None:
    arr = np.array([b"ok", b"\xff"], dtype=object)
    req = InferRequest([InferInput("s", "BYTES", [2], arr)])
    with pytest.raises(
        InvalidInputError, match=r"tensor 's' .*element 1 is not valid UTF-8.*binary"
    ):
        rest.encode_request(req, binary=False)
    body, hl = rest.encode_request(req, binary=True)
    assert rest.decode_request(body, hl).inputs[0].data.tolist() == [b"ok", b"\xff"]


def test_encoding_checks_data_against_shape() -> None:
    req = InferRequest([InferInput("x", "FP32", [3], np.ones(2, np.float32))])
    with pytest.raises(InvalidInputError, match="tensor 'x' has 2 elements but shape \\[3\\]"):
        rest.encode_request(req)


def test_shared_memory_inputs_carry_no_data() -> None:
    params = {"shared_memory_region": "r", "shared_memory_byte_size": 16}
    req = InferRequest([InferInput("x", "FP32", [4], None, params)])
    body, hl = rest.encode_request(req)
    assert hl is None
    back = rest.decode_request(body, hl).inputs[0]
    assert back.data is None and back.parameters == params


def test_big_json_response_is_fast() -> None:
    big = np.random.default_rng(0).standard_normal(4_000_000).astype(np.float32)
    resp = InferResponse("m", [InferOutput("y", "FP32", [4_000_000], big)])
    start = time.perf_counter()
    body, _ = rest.encode_response(resp)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, elapsed  # tolist() + json would take several seconds
    np.testing.assert_array_equal(rest.decode_response(body, None).outputs[0].data, big)


def test_error_bodies() -> None:
    assert rest.decode_error(rest.encode_error("model 'x' not found")) == "model 'x' not found"
    assert rest.decode_error(b'{"detail":"nope"}') == "nope"
    assert rest.decode_error(b"plain text") == "plain text"
    assert rest.decode_error(b"") == "empty error body"
    with pytest.raises(InvalidInputError, match="response is an error: boom"):
        rest.decode_response(rest.encode_error("boom"), None)


def test_metadata_json_round_trips() -> None:
    server = ServerMetadata("nbinfer", "0.1", ["binary_tensor_data", "classification"])
    assert (
        rest_metadata.server_metadata_from_json(rest_metadata.server_metadata_to_json(server))
        == server
    )
    model = ModelMetadata(
        "m",
        versions=["1", "2"],
        platform="python",
        inputs=[TensorSpec("x", "FP32", [-1, 3])],
        outputs=[TensorSpec("y", "BYTES", [-1], {"labels": "l.txt"})],
    )
    assert (
        rest_metadata.model_metadata_from_json(
            orjson.loads(jsonvalues.dumps(rest_metadata.model_metadata_to_json(model)))
        )
        == model
    )
    index = [
        RepositoryModel("a", "1", "READY"),
        RepositoryModel("b", state="UNAVAILABLE", reason="unloaded"),
    ]
    as_json = rest_metadata.repository_index_to_json(index)
    assert as_json[1] == {"name": "b", "state": "UNAVAILABLE", "reason": "unloaded"}
    assert rest_metadata.repository_index_from_json(as_json) == index
    with pytest.raises(InvalidInputError, match="missing field 'name'"):
        rest_metadata.model_metadata_from_json({"inputs": []})
    with pytest.raises(InvalidInputError, match="must be a list"):
        rest_metadata.repository_index_from_json({})


@pytest.mark.parametrize("datatype", DATATYPES)
def test_large_tensors_of_every_datatype_round_trip_in_json_and_binary(datatype: str) -> None:
    rng = np.random.default_rng(7)
    shape = (128, 512)
    if datatype == "BYTES":
        arr = np.array([f"w{i}".encode() for i in range(shape[0] * shape[1])], dtype=object)
        arr = arr.reshape(shape)
    elif datatype == "BOOL":
        arr = rng.integers(0, 2, shape).astype(bool)
    elif datatype == "BF16":
        arr = rng.standard_normal(shape).astype(bfloat16)
    else:
        dtype = numpy_dtype(datatype)
        arr = (rng.standard_normal(shape) * 100).astype(dtype)
    for binary in (True, False):
        req = InferRequest([InferInput("x", datatype, list(shape), arr)])
        body, hl = rest.encode_request(req, binary=binary)
        assert same(arr, rest.decode_request(body, hl).inputs[0].data)


def test_big_endian_and_non_contiguous_inputs_encode_correctly() -> None:
    base = np.arange(24, dtype=">f8").reshape(4, 6)
    view = base[::2, 1::2]  # non-contiguous, big-endian
    for binary in (True, False):
        req = InferRequest([InferInput("x", "FP64", [2, 3], view)])
        body, hl = rest.encode_request(req, binary=binary)
        decoded = rest.decode_request(body, hl).inputs[0].data
        np.testing.assert_array_equal(decoded, view)
        assert decoded.dtype == np.dtype("<f8")
