"""The gRPC codec: InferRequest / InferResponse <-> protobuf, metadata, config and statistics."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nbinfer.errors import DataTypeError, InvalidInputError, UnsupportedError
from nbinfer.protocol.grpc import (
    RPCS,
    SERVICE_NAME,
    load_request_from_proto,
    load_request_to_proto,
    method_path,
    model_metadata_from_proto,
    model_metadata_to_proto,
    params_from_proto,
    params_to_proto,
    pb,
    repository_index_from_proto,
    repository_index_to_proto,
    request_from_proto,
    request_message,
    request_to_proto,
    response_from_proto,
    response_to_proto,
    server_metadata_from_proto,
    server_metadata_to_proto,
)
from nbinfer.protocol.grpc_json import (
    config_json_to_proto,
    config_proto_to_json,
    statistics_json_to_proto,
    statistics_proto_to_json,
)
from nbinfer.protocol.grpc_reply import ResponseReader
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

DATATYPES = [
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "BYTES",
]
SHAPES = [[], [0], [0, 3], [2, 3]]


def sample(datatype: str, shape: list[int], seed: int = 0) -> np.ndarray[Any, Any]:
    """Deterministic data of a datatype, with extreme values where the type has them."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if datatype == "BOOL":
        flat: np.ndarray[Any, Any] = rng.integers(0, 2, n).astype(bool)
    elif datatype == "BYTES":
        flat = np.empty(n, dtype=object)
        flat[:] = [bytes(rng.integers(0, 256, i % 7, dtype=np.uint8)) for i in range(n)]
    elif datatype in ("FP16", "FP32", "FP64", "BF16"):
        dt = {
            "FP16": np.float16,
            "FP32": np.float32,
            "FP64": np.float64,
            "BF16": ml_dtypes.bfloat16,
        }[datatype]
        flat = (rng.standard_normal(n) * 100).astype(dt)
        if n >= 3:
            flat[:3] = np.array([np.inf, -0.0, np.nan]).astype(dt)
    else:
        dt = np.dtype(datatype.lower())
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        if n >= 2:
            flat[:2] = [info.min, info.max]
    return flat.reshape(shape)


def assert_same(actual: np.ndarray[Any, Any] | None, expected: np.ndarray[Any, Any]) -> None:
    assert actual is not None
    assert actual.shape == expected.shape
    if expected.dtype == object:
        assert actual.dtype == object
        assert actual.tolist() == expected.tolist()
    else:
        assert actual.dtype == expected.dtype
        # Compare bit patterns so NaN / -0.0 must survive exactly.
        assert actual.tobytes() == np.ascontiguousarray(expected).tobytes()


def wire(msg: Any) -> Any:
    """Serialize and parse again, as a transport would."""
    return type(msg).FromString(msg.SerializeToString())


# ---------------------------------------------------------------------------------------------
# Tensor round trips


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("datatype", DATATYPES)
def test_request_round_trip_preserves_every_datatype_and_shape(
    datatype: str, shape: list[int], raw: bool
) -> None:
    data = sample(datatype, shape)
    req = InferRequest(
        inputs=[
            InferInput("x", datatype, shape, data),
            InferInput("y", "INT32", [1], sample("INT32", [1])),
        ],
        outputs=[RequestedOutput("out")],
        id="req-1",
        model_name="m",
        model_version="3",
    )
    back = request_from_proto(wire(request_to_proto(req, raw=raw)))
    assert back.model_name == "m"
    assert back.model_version == "3"
    assert back.id == "req-1"
    assert [(i.name, i.datatype, i.shape) for i in back.inputs] == [
        ("x", datatype, shape),
        ("y", "INT32", [1]),
    ]
    assert_same(back.inputs[0].data, data)
    assert [o.name for o in back.outputs] == ["out"]


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("datatype", DATATYPES)
def test_response_round_trip_preserves_every_datatype_and_shape(
    datatype: str, shape: list[int], raw: bool
) -> None:
    data = sample(datatype, shape, seed=1)
    resp = InferResponse(
        model_name="m",
        model_version="1",
        id="r",
        outputs=[InferOutput("z", datatype, shape, data, parameters={"note": "x"})],
        parameters={"p": 7},
    )
    back = response_from_proto(wire(response_to_proto(resp, raw=raw)))
    assert (back.model_name, back.model_version, back.id) == ("m", "1", "r")
    assert back.parameters == {"p": 7}
    (out,) = back.outputs
    assert (out.name, out.datatype, out.shape, out.parameters) == (
        "z",
        datatype,
        shape,
        {"note": "x"},
    )
    assert_same(out.data, data)


def test_raw_encoding_puts_one_entry_per_tensor_in_order() -> None:
    a, b = sample("FP32", [2, 2]), sample("INT64", [3])
    msg = request_to_proto(
        InferRequest([InferInput("a", "FP32", [2, 2], a), InferInput("b", "INT64", [3], b)])
    )
    assert list(msg.raw_input_contents) == [a.tobytes(), b.tobytes()]
    assert not any(t.HasField("contents") for t in msg.inputs)


def test_raw_encoding_of_bytes_uses_length_prefixed_elements() -> None:
    data = np.array([b"ab", b"", "é"], dtype=object)
    msg = request_to_proto(InferRequest([InferInput("s", "BYTES", [3], data)]))
    assert msg.raw_input_contents[0] == b"\x02\0\0\0ab\0\0\0\0\x02\0\0\0\xc3\xa9"


def test_large_tensor_round_trips_and_decodes_without_copy() -> None:
    data = np.arange(2 * 1024 * 1024, dtype=np.float32).reshape(1024, 2048)
    msg = wire(
        response_to_proto(InferResponse("m", [InferOutput("o", "FP32", [1024, 2048], data)]))
    )
    out = response_from_proto(msg).outputs[0].data
    assert out is not None
    assert np.array_equal(out, data)
    # The decoded array is a view on the message's bytes object, not a copy.
    assert not out.flags.owndata
    assert not out.flags.writeable
    base = out
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, bytes)
    assert len(base) == data.nbytes
    assert np.shares_memory(out, np.frombuffer(base, dtype=np.uint8))


def test_request_decode_of_raw_input_is_zero_copy() -> None:
    data = sample("INT16", [4, 5])
    back = request_from_proto(
        wire(request_to_proto(InferRequest([InferInput("a", "INT16", [4, 5], data)])))
    )
    arr = back.inputs[0].data
    assert arr is not None and not arr.flags.owndata
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, bytes)


def test_non_contiguous_and_big_endian_inputs_encode_as_little_endian_row_major() -> None:
    data = np.arange(12, dtype=">i4").reshape(3, 4).T  # big-endian, Fortran-ordered view
    msg = request_to_proto(InferRequest([InferInput("a", "INT32", [4, 3], data)]))
    assert msg.raw_input_contents[0] == np.ascontiguousarray(data, dtype="<i4").tobytes()
    back = request_from_proto(msg).inputs[0].data
    assert back is not None and back.tolist() == data.tolist()


_NUMERIC = st.sampled_from(
    [
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    arr=_NUMERIC.flatmap(
        lambda dt: hnp.arrays(
            np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)
        )
    ),
    raw=st.booleans(),
)
def test_any_numeric_array_round_trips_bit_exactly(arr: np.ndarray[Any, Any], raw: bool) -> None:
    from nbinfer.protocol.dtypes import datatype_of

    datatype = datatype_of(arr.dtype)
    req = InferRequest([InferInput("t", datatype, list(arr.shape), arr)])
    back = request_from_proto(wire(request_to_proto(req, raw=raw))).inputs[0].data
    assert_same(back, arr)


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.binary(max_size=20), max_size=10), raw=st.booleans())
def test_any_bytes_tensor_round_trips(items: list[bytes], raw: bool) -> None:
    data = np.empty(len(items), dtype=object)
    data[:] = items
    resp = InferResponse("m", [InferOutput("b", "BYTES", [len(items)], data)])
    back = response_from_proto(wire(response_to_proto(resp, raw=raw))).outputs[0].data
    assert back is not None and back.tolist() == items


# ---------------------------------------------------------------------------------------------
# Typed contents


@pytest.mark.parametrize(
    ("datatype", "field", "values", "dtype"),
    [
        ("BOOL", "bool_contents", [True, False, True, True], np.bool_),
        ("INT8", "int_contents", [-128, 127, 0, -1], np.int8),
        ("INT16", "int_contents", [-32768, 32767, 5, -1], np.int16),
        ("INT32", "int_contents", [-(2**31), 2**31 - 1, 5, -1], np.int32),
        ("INT64", "int64_contents", [-(2**63), 2**63 - 1, 5, -1], np.int64),
        ("UINT8", "uint_contents", [0, 255, 1, 2], np.uint8),
        ("UINT16", "uint_contents", [0, 65535, 1, 2], np.uint16),
        ("UINT32", "uint_contents", [0, 2**32 - 1, 1, 2], np.uint32),
        ("UINT64", "uint64_contents", [0, 2**64 - 1, 1, 2], np.uint64),
        ("FP32", "fp32_contents", [1.5, -2.25, 0.0, 2.0**100], np.float32),
        ("FP64", "fp64_contents", [1.5, -2.25, 0.0, 1e300], np.float64),
        ("BYTES", "bytes_contents", [b"a", b"", b"\xff\x00", b"xyz"], object),
    ],
)
def test_typed_contents_written_by_hand_decode_to_the_right_dtype(
    datatype: str, field: str, values: list[Any], dtype: Any
) -> None:
    msg = pb.ModelInferRequest(model_name="m")
    tensor = msg.inputs.add(name="t", datatype=datatype, shape=[2, 2])
    getattr(tensor.contents, field).extend(values)
    arr = request_from_proto(wire(msg)).inputs[0].data
    assert arr is not None
    assert arr.dtype == np.dtype(dtype)
    assert arr.shape == (2, 2)
    assert arr.reshape(-1).tolist() == values


def test_typed_encoding_fills_the_list_of_the_datatype() -> None:
    req = InferRequest(
        [
            InferInput("b", "BOOL", [3], np.array([True, False, True])),
            InferInput("i", "INT8", [2], np.array([-3, 4], dtype=np.int8)),
            InferInput("u", "UINT64", [1], np.array([2**64 - 1], dtype=np.uint64)),
            InferInput("f", "FP32", [2], np.array([0.5, -1], dtype=np.float32)),
            InferInput("s", "BYTES", [1], np.array(["hé"], dtype=object)),
        ]
    )
    msg = request_to_proto(req, raw=False)
    assert not msg.raw_input_contents
    c = [t.contents for t in msg.inputs]
    assert list(c[0].bool_contents) == [True, False, True]
    assert list(c[1].int_contents) == [-3, 4]
    assert list(c[2].uint64_contents) == [2**64 - 1]
    assert list(c[3].fp32_contents) == [0.5, -1.0]
    assert list(c[4].bytes_contents) == ["hé".encode()]


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_typed_encoding_falls_back_to_raw_for_half_precision(datatype: str) -> None:
    data = sample(datatype, [4])
    req = InferRequest(
        [InferInput("h", datatype, [4], data), InferInput("i", "INT32", [1], sample("INT32", [1]))]
    )
    msg = request_to_proto(req, raw=False)
    assert len(msg.raw_input_contents) == 2
    assert_same(request_from_proto(msg).inputs[0].data, data)


def test_half_precision_in_typed_contents_is_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="h", datatype="FP16", shape=[1]).contents.fp32_contents.append(1.0)
    with pytest.raises(InvalidInputError, match=r"'h'.*FP16 has no typed contents"):
        request_from_proto(msg)


def test_typed_contents_count_mismatch_names_tensor_and_counts() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="x", datatype="INT32", shape=[2, 3]).contents.int_contents.extend([1, 2])
    with pytest.raises(
        InvalidInputError, match=r"'x'.*needs 6 elements in contents.int_contents, got 2"
    ):
        request_from_proto(msg)


def test_typed_contents_in_the_wrong_list_say_where_the_data_is() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="x", datatype="INT64", shape=[2]).contents.int_contents.extend([1, 2])
    with pytest.raises(InvalidInputError, match="data found in int_contents"):
        request_from_proto(msg)


def test_typed_value_out_of_range_for_the_datatype_is_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="small", datatype="INT8", shape=[1]).contents.int_contents.append(300)
    with pytest.raises(InvalidInputError, match=r"'small'.*out of range for INT8"):
        request_from_proto(msg)


def test_typed_encoding_casts_data_to_the_declared_datatype() -> None:
    req = InferRequest(
        [
            InferInput("i", "INT32", [3], np.array([1, 2, 3], dtype=np.int64)),
            InferInput("s", "BYTES", [2], np.array(["a", "bc"])),
        ]
    )
    msg = request_to_proto(req, raw=False)
    assert list(msg.inputs[0].contents.int_contents) == [1, 2, 3]
    assert list(msg.inputs[1].contents.bytes_contents) == [b"a", b"bc"]


def test_unknown_datatype_in_typed_contents_is_a_datatype_error() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="x", datatype="FLOAT", shape=[1]).contents.fp32_contents.append(1)
    with pytest.raises(DataTypeError, match="FLOAT"):
        request_from_proto(msg)


# ---------------------------------------------------------------------------------------------
# Errors


def test_raw_size_mismatch_names_tensor_and_sizes() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="img", datatype="FP32", shape=[2, 3])
    msg.raw_input_contents.append(b"\0" * 20)
    with pytest.raises(InvalidInputError, match="img") as info:
        request_from_proto(msg)
    assert "24" in str(info.value) and "20" in str(info.value)


def test_raw_output_size_mismatch_names_tensor() -> None:
    msg = pb.ModelInferResponse(model_name="m")
    msg.outputs.add(name="probs", datatype="FP64", shape=[3])
    msg.raw_output_contents.append(b"\0" * 16)
    with pytest.raises(InvalidInputError, match="probs"):
        response_from_proto(msg)


def test_truncated_raw_bytes_tensor_is_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="s", datatype="BYTES", shape=[2])
    msg.raw_input_contents.append(b"\x05\0\0\0abc")
    with pytest.raises(InvalidInputError):
        request_from_proto(msg)


def test_encoding_data_that_does_not_fill_the_shape_is_rejected() -> None:
    req = InferRequest([InferInput("a", "FP32", [2, 3], np.zeros(5, dtype=np.float32))])
    with pytest.raises(InvalidInputError, match=r"'a'.*\[2, 3\] has 6 elements but the data has 5"):
        request_to_proto(req)


def test_missing_input_data_is_rejected_with_the_tensor_name() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="FP32", shape=[1])
    msg.inputs.add(name="b", datatype="FP32", shape=[1])
    msg.raw_input_contents.append(b"\0\0\0\0")
    with pytest.raises(InvalidInputError, match="'b' has no data"):
        request_from_proto(msg)


def test_extra_raw_entries_are_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="FP32", shape=[1])
    msg.inputs.add(name="b", datatype="FP32", shape=[1], parameters={})
    msg.inputs[1].parameters["shared_memory_region"].string_param = "r"
    msg.raw_input_contents.extend([b"\0\0\0\0", b"\0\0\0\0", b"\0\0\0\0"])
    with pytest.raises(InvalidInputError, match="3 raw_input_contents entries"):
        request_from_proto(msg)


def test_raw_entries_with_no_tensor_to_take_them_are_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="FP32", shape=[1])
    msg.inputs[0].parameters["shared_memory_region"].string_param = "r"
    msg.inputs.add(name="b", datatype="FP32", shape=[1])
    msg.inputs[1].parameters["shared_memory_region"].string_param = "r"
    msg.raw_input_contents.append(b"\0\0\0\0")
    with pytest.raises(InvalidInputError, match="only 0 inputs take raw data"):
        request_from_proto(msg)


def test_mixing_raw_and_typed_contents_is_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="INT32", shape=[1]).contents.int_contents.append(1)
    msg.inputs.add(name="b", datatype="INT32", shape=[1])
    msg.raw_input_contents.append(b"\0\0\0\0")
    with pytest.raises(InvalidInputError, match="cannot be mixed"):
        request_from_proto(msg)


def test_negative_dimension_is_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="INT32", shape=[-1]).contents.int_contents.append(1)
    with pytest.raises(InvalidInputError, match="negative"):
        request_from_proto(msg)


def test_empty_tensor_without_any_data_decodes_as_empty() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="FP32", shape=[0, 4])
    arr = request_from_proto(msg).inputs[0].data
    assert arr is not None and arr.shape == (0, 4) and arr.dtype == np.float32


# ---------------------------------------------------------------------------------------------
# Shared memory, classification, parameters


def test_shared_memory_inputs_take_no_raw_entry_and_the_others_keep_their_order() -> None:
    a, c = sample("FP32", [2]), sample("INT8", [3])
    req = InferRequest(
        [
            InferInput("a", "FP32", [2], a),
            InferInput(
                "b",
                "FP32",
                [4],
                None,
                {"shared_memory_region": "r0", "shared_memory_byte_size": 16},
            ),
            InferInput("c", "INT8", [3], c),
        ]
    )
    msg = wire(request_to_proto(req))
    assert len(msg.raw_input_contents) == 2
    back = request_from_proto(msg)
    assert_same(back.inputs[0].data, a)
    assert back.inputs[1].data is None
    assert back.inputs[1].parameters == {
        "shared_memory_region": "r0",
        "shared_memory_byte_size": 16,
    }
    assert_same(back.inputs[2].data, c)


def test_class_count_travels_as_the_classification_output_parameter() -> None:
    req = InferRequest(
        [InferInput("x", "FP32", [1], sample("FP32", [1]))],
        outputs=[RequestedOutput("probs", class_count=3, binary_data=True), RequestedOutput("raw")],
    )
    msg = wire(request_to_proto(req))
    assert msg.outputs[0].parameters["classification"].int64_param == 3
    assert "binary_data" not in msg.outputs[0].parameters
    assert not msg.outputs[1].parameters
    back = request_from_proto(msg)
    assert back.outputs == [RequestedOutput("probs", class_count=3), RequestedOutput("raw")]


def test_non_integer_classification_parameter_is_rejected() -> None:
    msg = pb.ModelInferRequest()
    msg.outputs.add(name="o").parameters["classification"].string_param = "three"
    with pytest.raises(InvalidInputError, match=r"'o'.*classification"):
        request_from_proto(msg)


def test_parameters_of_every_oneof_kind_round_trip() -> None:
    params = {"b": True, "i": -5, "u": 2**64 - 1, "d": 0.25, "s": "text", "zero": 0, "f": False}
    msg = pb.ModelInferRequest()
    params_to_proto(params, msg.parameters)
    kinds = {k: v.WhichOneof("parameter_choice") for k, v in wire(msg).parameters.items()}
    assert kinds == {
        "b": "bool_param",
        "i": "int64_param",
        "u": "uint64_param",
        "d": "double_param",
        "s": "string_param",
        "zero": "int64_param",
        "f": "bool_param",
    }
    back = params_from_proto(wire(msg).parameters)
    assert back == params
    assert type(back["b"]) is bool and type(back["i"]) is int and type(back["d"]) is float


def test_numpy_scalar_parameters_are_accepted() -> None:
    msg = pb.ModelInferRequest()
    params_to_proto({"i": np.int32(3), "f": np.float32(0.5), "b": np.bool_(True)}, msg.parameters)
    assert params_from_proto(msg.parameters) == {"i": 3, "f": 0.5, "b": True}


def test_uint64_parameter_from_a_peer_decodes_as_int() -> None:
    msg = pb.ModelInferRequest()
    msg.parameters["priority"].uint64_param = 2
    assert params_from_proto(msg.parameters) == {"priority": 2}


@pytest.mark.parametrize(
    ("value", "match"), [(2**64, "does not fit"), (-(2**63) - 1, "does not fit"), ([1], "list")]
)
def test_unrepresentable_parameters_are_rejected_by_name(value: Any, match: str) -> None:
    msg = pb.ModelInferRequest()
    with pytest.raises(InvalidInputError, match=f"'bad'.*{match}"):
        params_to_proto({"bad": value}, msg.parameters)


def test_request_and_tensor_parameters_round_trip() -> None:
    req = InferRequest(
        [InferInput("x", "INT32", [1], sample("INT32", [1]), parameters={"k": "v"})],
        outputs=[RequestedOutput("o", parameters={"shared_memory_region": "out"})],
        parameters={"sequence_id": 42, "sequence_start": True, "timeout": 1000},
    )
    back = request_from_proto(wire(request_to_proto(req)))
    assert back.parameters == req.parameters
    assert back.inputs[0].parameters == {"k": "v"}
    assert back.outputs[0].parameters == {"shared_memory_region": "out"}


# ---------------------------------------------------------------------------------------------
# Metadata, repository, config, statistics, service table


def test_server_metadata_round_trips() -> None:
    meta = ServerMetadata("nbinfer", "0.1.0", ["binary_tensor_data", "classification"])
    assert server_metadata_from_proto(wire(server_metadata_to_proto(meta))) == meta


def test_model_metadata_round_trips() -> None:
    meta = ModelMetadata(
        "resnet",
        versions=["1", "2"],
        platform="onnxruntime_onnx",
        inputs=[TensorSpec("image", "FP32", [-1, 3, 224, 224])],
        outputs=[TensorSpec("probs", "FP32", [-1, 1000]), TensorSpec("label", "BYTES", [-1])],
    )
    assert model_metadata_from_proto(wire(model_metadata_to_proto(meta))) == meta


def test_repository_index_round_trips() -> None:
    models = [
        RepositoryModel("a", "1", "READY"),
        RepositoryModel("b", "", "UNAVAILABLE", "unloaded"),
    ]
    assert repository_index_from_proto(wire(repository_index_to_proto(models))) == models


def test_load_request_carries_config_and_files() -> None:
    msg = wire(
        load_request_to_proto(
            "m", config='{"backend": "python"}', files={"1/model.onnx": b"\x00\x01"}
        )
    )
    assert msg.parameters["file:1/model.onnx"].bytes_param == b"\x00\x01"
    assert load_request_from_proto(msg) == (
        "m",
        '{"backend": "python"}',
        {"1/model.onnx": b"\x00\x01"},
    )


def test_load_request_with_non_string_config_is_rejected() -> None:
    msg = pb.RepositoryModelLoadRequest(model_name="m")
    msg.parameters["config"].bytes_param = b"{}"
    with pytest.raises(InvalidInputError, match="'config' must be a string"):
        load_request_from_proto(msg)


TRITON_CONFIG: dict[str, Any] = {
    "name": "densenet",
    "platform": "onnxruntime_onnx",
    "backend": "onnxruntime",
    "max_batch_size": 8,
    "version_policy": {"latest": {"num_versions": 1}},
    "input": [
        {
            "name": "data_0",
            "data_type": "TYPE_FP32",
            "format": "FORMAT_NCHW",
            "dims": [3, 224, 224],
        },
        {"name": "mask", "data_type": "TYPE_BOOL", "dims": [-1], "optional": True},
    ],
    "output": [
        {"name": "fc6_1", "data_type": "TYPE_FP32", "dims": [1000], "label_filename": "labels.txt"},
        {"name": "names", "data_type": "TYPE_STRING", "dims": [-1], "reshape": {"shape": [-1, 1]}},
    ],
    "instance_group": [{"name": "densenet_0", "kind": "KIND_CPU", "count": 2}],
    "dynamic_batching": {
        "preferred_batch_size": [4, 8],
        "max_queue_delay_microseconds": 100,
        "priority_queue_policy": {"1": {"timeout_action": "DELAY", "max_queue_size": 10}},
    },
    "parameters": {"threads": {"string_value": "4"}},
    "model_warmup": [
        {
            "name": "w",
            "batch_size": 1,
            "inputs": {
                "data_0": {"data_type": "TYPE_FP32", "dims": [3, 224, 224], "zero_data": True}
            },
        }
    ],
}


def test_triton_config_json_round_trips_through_proto() -> None:
    msg = wire(config_json_to_proto(TRITON_CONFIG))
    assert msg.max_batch_size == 8
    assert list(msg.input[0].dims) == [3, 224, 224]
    assert msg.input[0].data_type == pb.TYPE_FP32
    assert msg.output[1].data_type == pb.TYPE_STRING
    assert msg.instance_group[0].kind == pb.ModelInstanceGroup.KIND_CPU
    assert msg.dynamic_batching.max_queue_delay_microseconds == 100
    assert msg.parameters["threads"].string_value == "4"
    assert config_proto_to_json(msg, include_defaults=False) == TRITON_CONFIG


def test_config_json_writes_defaults_and_64_bit_integers_as_numbers_like_triton() -> None:
    doc = config_proto_to_json(
        config_json_to_proto(
            {"name": "m", "input": [{"name": "x", "data_type": "TYPE_INT64", "dims": ["-1", "4"]}]}
        )
    )
    assert doc["max_batch_size"] == 0
    assert doc["platform"] == ""
    assert doc["input"][0]["dims"] == [-1, 4]
    assert doc["input"][0]["format"] == "FORMAT_NONE"
    assert doc["input"][0]["optional"] is False


def test_config_json_with_an_unknown_field_is_rejected_unless_asked() -> None:
    with pytest.raises(InvalidInputError, match=r"model configuration.*max_batch"):
        config_json_to_proto({"name": "m", "max_batch": 4})
    assert (
        config_json_to_proto({"name": "m", "max_batch": 4}, ignore_unknown_fields=True).name == "m"
    )


def test_config_json_with_an_unknown_data_type_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="TYPE_FLOAT"):
        config_json_to_proto({"input": [{"name": "x", "data_type": "TYPE_FLOAT"}]})


TRITON_STATS: dict[str, Any] = {
    "model_stats": [
        {
            "name": "m",
            "version": "1",
            "last_inference": 1700000000123,
            "inference_count": 12,
            "execution_count": 5,
            "inference_stats": {
                "success": {"count": 5, "ns": 123456789012},
                "fail": {"count": 1, "ns": 10},
                "queue": {"count": 5, "ns": 1000},
                "compute_input": {"count": 5, "ns": 2000},
                "compute_infer": {"count": 5, "ns": 3000},
                "compute_output": {"count": 5, "ns": 4000},
            },
            "batch_stats": [
                {
                    "batch_size": 4,
                    "compute_input": {"count": 2, "ns": 5},
                    "compute_infer": {"count": 2, "ns": 6},
                    "compute_output": {"count": 2, "ns": 7},
                }
            ],
        }
    ]
}


def test_statistics_json_round_trips_with_integers_as_numbers() -> None:
    msg = wire(statistics_json_to_proto(TRITON_STATS))
    assert msg.model_stats[0].inference_stats.success.ns == 123456789012
    assert statistics_proto_to_json(msg, include_defaults=False) == TRITON_STATS
    full = statistics_proto_to_json(msg)
    assert full["model_stats"][0]["inference_stats"]["success"] == {"count": 5, "ns": 123456789012}
    assert full["model_stats"][0]["memory_usage"] == []


def test_statistics_json_with_an_unknown_field_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="statistics"):
        statistics_json_to_proto({"model_stats": [{"name": "m", "inferences": 3}]})


def test_rpc_table_matches_the_service_descriptor() -> None:
    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert service.full_name == SERVICE_NAME == "inference.GRPCInferenceService"
    assert [m.name for m in service.methods] == list(RPCS)
    for method in service.methods:
        rpc = RPCS[method.name]
        assert rpc.request.DESCRIPTOR is method.input_type
        assert rpc.response.DESCRIPTOR is method.output_type
        streaming = method.client_streaming or method.server_streaming
        assert rpc.kind == ("stream_stream" if streaming else "unary_unary")
        assert rpc.path == f"/inference.GRPCInferenceService/{method.name}"
    assert len(RPCS) == 20
    assert method_path("ModelInfer") == "/inference.GRPCInferenceService/ModelInfer"
    with pytest.raises(UnsupportedError, match="known: ServerLive") as caught:
        method_path("Infer")
    assert isinstance(caught.value.__cause__, KeyError)
    with pytest.raises(UnsupportedError, match="unknown RPC 'Infer'"):
        request_message("Infer")
    with pytest.raises(InvalidInputError, match="ModelReady request"):
        request_message("ModelReady", no_such_field=1)


# ---------------------------------------------------------------------------------------------
# Responses are read leniently (tritonclient's rules): peers such as Seldon MLServer send
# raw_output_contents next to (empty or filled) typed contents.


def test_response_with_raw_entries_and_typed_contents_reads_the_raw_entries() -> None:
    msg = pb.ModelInferResponse(model_name="m")
    out = msg.outputs.add(name="y", datatype="FP32", shape=[2])
    out.contents.fp32_contents.extend([9.0, 9.0])  # what a peer echoed; raw wins, as tritonclient
    msg.raw_output_contents.append(np.array([1.0, 2.0], np.float32).tobytes())
    resp = response_from_proto(wire(msg))
    np.testing.assert_array_equal(resp.outputs[0].data, [1.0, 2.0])


def test_response_mixing_typed_and_raw_outputs_pairs_raw_entries_with_the_rest() -> None:
    msg = pb.ModelInferResponse(model_name="m")
    msg.outputs.add(name="t", datatype="INT64", shape=[2]).contents.int64_contents.extend([7, 8])
    empty = msg.outputs.add(name="r", datatype="FP32", shape=[1])
    empty.contents.SetInParent()  # present but empty: takes the raw entry
    msg.outputs.add(name="s", datatype="INT32", shape=[1])
    msg.raw_output_contents.extend([np.float32(3).tobytes(), np.int32(4).tobytes()])
    outs = {o.name: o.data for o in response_from_proto(wire(msg)).outputs}
    np.testing.assert_array_equal(outs["t"], [7, 8])
    np.testing.assert_array_equal(outs["r"], [3.0])
    np.testing.assert_array_equal(outs["s"], [4])
    reader = ResponseReader(wire(msg))
    np.testing.assert_array_equal(reader.array(1), [3.0])


def test_requests_stay_strict_about_mixing() -> None:
    msg = pb.ModelInferRequest()
    msg.inputs.add(name="a", datatype="INT32", shape=[1]).contents.int_contents.append(1)
    msg.raw_input_contents.append(b"\0\0\0\0")
    with pytest.raises(InvalidInputError, match="cannot be mixed"):
        request_from_proto(msg)


def test_an_empty_tensor_with_an_absurd_dimension_is_a_typed_error() -> None:
    """Found by the fuzz run: this shape has no elements, and numpy refuses it (too big)."""
    msg = pb.ModelInferRequest()
    tensor = msg.inputs.add(name="INPUT0", datatype="BOOL")
    tensor.shape.extend([0, 0, 2**56 - 1, 84, 98])
    with pytest.raises(InvalidInputError, match=r"'INPUT0'.*too large"):
        request_from_proto(msg)
    tensor.shape[:] = [0, 3]
    assert request_from_proto(msg).inputs[0].shape == [0, 3]  # a plain empty tensor still works
