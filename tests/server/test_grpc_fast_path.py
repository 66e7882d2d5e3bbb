"""The codec's ModelInfer fast path (what the gRPC frontend runs) agrees with the general path.

The server's ModelInfer calls :func:`request_from_proto` and :func:`response_to_bytes`; the
common message (one raw entry per tensor, no parameters) takes a shortcut in both, which must
give the same requests, the same bytes on the wire and the same errors as the general path.
"""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError

from nbinfer.errors import InvalidInputError
from nbinfer.protocol import grpc as gcodec
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.grpc import pb
from nbinfer.protocol.grpc_tensors import VIEW_MIN_BYTES
from nbinfer.protocol.tensors import tensor_to_bytes
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    RequestedOutput,
)

_A = np.arange(16, dtype=np.float32).reshape(1, 16)
_LARGE = np.arange(2 * VIEW_MIN_BYTES // 4, dtype=np.float32).reshape(-1, 64)


def _request(**kw: object) -> pb.ModelInferRequest:
    req = InferRequest(
        inputs=[
            InferInput("INPUT0", "FP32", [1, 16], _A),
            InferInput("INPUT1", "FP32", [1, 16], _A + 1),
        ],
        model_name="add_sub",
        id="r1",
    )
    for key, value in kw.items():
        setattr(req, key, value)
    return gcodec.request_to_proto(req)


def test_raw_inputs_decode_to_read_only_views_with_plain_outputs() -> None:
    msg = _request()
    msg.outputs.add(name="OUTPUT0")
    msg.parameters["custom"].string_param = "x"
    req = gcodec.request_from_proto(msg)
    assert (req.model_name, req.id, req.parameters) == ("add_sub", "r1", {"custom": "x"})
    assert [(o.name, o.class_count, o.parameters) for o in req.outputs] == [("OUTPUT0", 0, {})]
    for inp, expected in zip(req.inputs, (_A, _A + 1), strict=True):
        assert (inp.datatype, inp.shape, inp.parameters) == ("FP32", [1, 16], {})
        assert inp.data is not None and inp.data.dtype == np.float32
        assert not inp.data.flags.writeable
        np.testing.assert_array_equal(inp.data, expected)


def test_input_parameters_and_classification_take_the_general_path() -> None:
    msg = _request()
    msg.inputs[0].parameters["note"].string_param = "n"
    msg.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 2
    req = gcodec.request_from_proto(msg)
    assert req.inputs[0].parameters == {"note": "n"}
    assert req.inputs[1].parameters == {}
    assert req.outputs[0].class_count == 2
    np.testing.assert_array_equal(req.inputs[1].data, _A + 1)


def test_typed_contents_decode() -> None:
    typed = gcodec.request_to_proto(
        InferRequest(
            inputs=[InferInput("X", "INT32", [3], np.array([1, 2, 3], dtype=np.int32))],
            model_name="m",
        ),
        raw=False,
    )
    req = gcodec.request_from_proto(typed)
    np.testing.assert_array_equal(req.inputs[0].data, [1, 2, 3])


def test_one_raw_entry_per_input_plus_typed_contents_is_refused() -> None:
    msg = _request()
    msg.inputs[0].contents.fp32_contents.extend([0.0] * 16)
    with pytest.raises(InvalidInputError, match="cannot be mixed"):
        gcodec.request_from_proto(msg)


def test_wrong_raw_size_names_tensor_expected_and_actual() -> None:
    msg = _request()
    msg.raw_input_contents[1] = b"\0" * 60
    with pytest.raises(InvalidInputError, match=r"INPUT1.*64.*60") as info:
        gcodec.request_from_proto(msg)
    assert (info.value.context["expected"], info.value.context["actual"]) == (64, 60)


def test_bytes_and_bool_inputs_decode() -> None:
    req = InferRequest(
        inputs=[
            InferInput("S", "BYTES", [2], np.array([b"ab", b""], dtype=object)),
            InferInput("B", "BOOL", [2], np.array([True, False])),
        ],
        model_name="m",
    )
    decoded = gcodec.request_from_proto(gcodec.request_to_proto(req))
    assert list(decoded.inputs[0].data) == [b"ab", b""]  # type: ignore[arg-type]
    assert decoded.inputs[1].data is not None and decoded.inputs[1].data.dtype == np.bool_
    np.testing.assert_array_equal(decoded.inputs[1].data, [True, False])


@pytest.mark.parametrize("shape", [[0, -1], [-1, -1], [-2, 8]])
def test_negative_dims_are_refused(shape: list[int]) -> None:
    msg = _request()
    del msg.inputs[0].shape[:]
    msg.inputs[0].shape.extend(shape)
    msg.raw_input_contents[0] = b"\0" * 4 if shape == [-1, -1] else b""
    with pytest.raises(InvalidInputError, match="INPUT0"):
        gcodec.request_from_proto(msg)


# -- request_from_bytes: large messages keep their raw inputs as views of the received bytes


def _large_request() -> pb.ModelInferRequest:
    req = InferRequest(
        inputs=[
            InferInput("BIG", "FP32", list(_LARGE.shape), _LARGE),
            InferInput("S", "BYTES", [2], np.array([b"ab", b""], dtype=object)),
            InferInput("B", "BOOL", [3], np.array([True, False, True])),
        ],
        outputs=[RequestedOutput("OUT", class_count=2)],
        model_name="m",
        model_version="3",
        id="big",
        parameters={"p": 1.5},
    )
    return gcodec.request_to_proto(req)


def _same_request(a: InferRequest, b: InferRequest) -> None:
    heads = ("model_name", "model_version", "id", "parameters", "outputs")
    assert [getattr(a, k) for k in heads] == [getattr(b, k) for k in heads]
    assert len(a.inputs) == len(b.inputs)
    for x, y in zip(a.inputs, b.inputs, strict=True):
        assert (x.name, x.datatype, x.shape, x.parameters) == (
            y.name,
            y.datatype,
            y.shape,
            y.parameters,
        )
        np.testing.assert_array_equal(x.data, y.data)
        assert x.data is not None and x.data.dtype == y.data.dtype  # type: ignore[union-attr]


def test_a_large_request_decodes_as_protobuf_does_with_views_of_the_bytes() -> None:
    wire = _large_request().SerializeToString()
    assert len(wire) >= VIEW_MIN_BYTES
    req = gcodec.request_from_bytes(wire)
    _same_request(req, gcodec.request_from_proto(pb.ModelInferRequest.FromString(wire)))
    big = req.inputs[0].data
    assert big is not None and not big.flags.writeable
    assert np.shares_memory(big, np.frombuffer(wire, dtype=np.uint8))


def test_raw_records_may_come_first_or_between_other_fields() -> None:
    msg = _large_request()
    raw = list(msg.raw_input_contents)
    del msg.raw_input_contents[:]
    rest = msg.SerializeToString()
    records = [pb.ModelInferRequest(raw_input_contents=[r]).SerializeToString() for r in raw]
    wire = records[0] + records[1] + rest + records[2]
    expected = gcodec.request_from_proto(pb.ModelInferRequest.FromString(wire))
    _same_request(gcodec.request_from_bytes(wire), expected)


def _tail_cases() -> list[bytes]:
    wire = _large_request().SerializeToString()
    return [
        wire[: len(wire) // 2],  # cut inside the large raw record
        wire[:-1],
        wire + b"\x80",  # a truncated varint tag
        wire + b"\x3b",  # field 7 as a group start (wire type 3)
        wire + b"\x07",  # field 0
        wire + b"\x3f\x00",  # wire type 7
        wire + b"\x38\x05",  # field 7 as a varint: the wrong wire type
        wire + b"\x91\x01\x01\x02",  # an unknown 64-bit field, truncated
        wire + b"\xfa\x07\x02hi",  # an unknown length-delimited field
    ]


def _mutations(count: int) -> list[bytes]:
    """Large requests with bytes changed in their headers (where the structure is)."""
    msg = _large_request()
    raw = list(msg.raw_input_contents)
    del msg.raw_input_contents[:]
    head = msg.SerializeToString()
    tail = pb.ModelInferRequest(raw_input_contents=raw).SerializeToString()
    rng = np.random.default_rng(7)
    out = []
    for _ in range(count):
        wire = bytearray(head + tail)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(head) + 8))
            wire[at] = int(rng.integers(0, 256))
        out.append(bytes(wire))
    return out


@pytest.mark.parametrize(
    "wire",
    [
        *_tail_cases(),
        *_mutations(150),
        # small messages: protobuf parses them whole
        b"\xff",
        b"\x0a\x05ab",
        _request().SerializeToString(),
    ],
)
def test_request_from_bytes_decodes_and_fails_as_protobuf_does(wire: bytes) -> None:
    try:
        expected = gcodec.request_from_proto(pb.ModelInferRequest.FromString(wire))
    except DecodeError:
        with pytest.raises(InvalidInputError, match="malformed ModelInferRequest"):
            gcodec.request_from_bytes(wire)
    except InvalidInputError as exc:
        with pytest.raises(InvalidInputError) as info:
            gcodec.request_from_bytes(wire)
        assert info.value.message == exc.message
    else:
        _same_request(gcodec.request_from_bytes(wire), expected)


def _reference_bytes(resp: InferResponse) -> bytes:
    """The response built field by field, as the general path writes it."""
    msg = pb.ModelInferResponse(model_name=resp.model_name, model_version=resp.model_version)
    msg.id = resp.id
    gcodec.params_to_proto(resp.parameters, msg.parameters)
    for out in resp.outputs:
        tensor = msg.outputs.add()
        tensor.name, tensor.datatype = out.name, out.datatype
        tensor.shape.extend(out.shape)
        gcodec.params_to_proto(out.parameters, tensor.parameters)
        assert out.data is not None
        msg.raw_output_contents.append(bytes(tensor_to_bytes(out.data, out.datatype)))
    return bytes(msg.SerializeToString(deterministic=True))


@pytest.mark.parametrize(
    ("datatype", "data", "params"),
    [
        ("FP32", np.arange(6, dtype=np.float32).reshape(2, 3), {}),
        ("INT64", np.arange(6, dtype=np.int64).reshape(2, 3), {"flag": True}),
        ("FP32", np.arange(6, dtype=np.float32).reshape(3, 2).T, {}),  # not contiguous
        ("FP32", np.arange(6, dtype=">f4").reshape(2, 3), {}),  # big endian
        ("FP32", np.arange(6, dtype=np.float64).reshape(2, 3), {}),  # cast
        ("BYTES", np.array([[b"a", b"bc", b""]], dtype=object), {}),
        ("BOOL", np.array([[True, False, True]]), {}),
        ("BF16", np.arange(6, dtype=numpy_dtype("BF16")).reshape(2, 3), {}),  # no buffer export
        ("FP32", np.zeros((0, 3), dtype=np.float32), {}),  # empty
        ("INT8", np.array(7, dtype=np.int8), {}),  # 0-d
        # from VIEW_MIN_BYTES up, the records are written from the arrays' own buffers
        ("FP32", _LARGE, {}),
        ("FP32", _LARGE.T, {}),  # not contiguous
        ("BF16", _LARGE.astype(numpy_dtype("BF16")), {}),
        ("UINT8", np.zeros(VIEW_MIN_BYTES, dtype=np.uint8), {}),  # exactly the threshold
    ],
)
def test_response_bytes_match_the_general_encoding(
    datatype: str, data: np.ndarray, params: dict
) -> None:
    resp = InferResponse(
        model_name="m",
        outputs=[InferOutput("OUT", datatype, list(data.shape), data, {"p": 1})],
        model_version="1",
        id="abc",
        parameters=params,
    )
    wire = gcodec.response_to_bytes(resp)
    assert pb.ModelInferResponse.FromString(wire) == pb.ModelInferResponse.FromString(
        _reference_bytes(resp)
    )
    assert wire == _reference_bytes(resp)  # the same bytes, not only the same message
    back = gcodec.response_from_proto(pb.ModelInferResponse.FromString(wire))
    assert (back.id, back.parameters, back.outputs[0].parameters) == ("abc", params, {"p": 1})
    np.testing.assert_array_equal(back.outputs[0].data, data)


def test_a_response_mixing_large_and_small_outputs_has_protobufs_bytes() -> None:
    resp = InferResponse(
        model_name="m",
        outputs=[
            InferOutput("SMALL", "INT32", [2], np.array([1, 2], dtype=np.int32)),
            InferOutput("LARGE", "FP32", list(_LARGE.shape), _LARGE),
            InferOutput("EMPTY", "FP32", [0], np.zeros(0, dtype=np.float32)),
        ],
        id="x",
    )
    assert gcodec.response_to_bytes(resp) == _reference_bytes(resp)


@pytest.mark.parametrize("data", [np.arange(6, dtype=np.float32), _LARGE], ids=["small", "large"])
def test_a_stream_response_has_protobufs_bytes(data: np.ndarray) -> None:
    resp = InferResponse(
        "m", [InferOutput("OUT", "FP32", list(data.shape), data)], id="s", parameters={"f": True}
    )
    reference = pb.ModelStreamInferResponse(
        infer_response=pb.ModelInferResponse.FromString(_reference_bytes(resp))
    )
    assert gcodec.stream_response_to_bytes(resp) == reference.SerializeToString(deterministic=True)


def test_response_data_of_another_shape_but_the_same_size_is_reshaped() -> None:
    data = np.arange(6, dtype=np.float32)
    resp = InferResponse("m", [InferOutput("OUT", "FP32", [2, 3], data)])
    back = gcodec.response_from_proto(gcodec.response_to_proto(resp))
    assert back.outputs[0].shape == [2, 3]
    np.testing.assert_array_equal(back.outputs[0].data, data.reshape(2, 3))


def test_response_data_of_the_wrong_size_is_refused() -> None:
    resp = InferResponse("m", [InferOutput("OUT", "FP32", [2, 3], np.zeros(5, np.float32))])
    with pytest.raises(InvalidInputError, match="OUT"):
        gcodec.response_to_bytes(resp)
