"""The gRPC frontend's ModelInfer fast path agrees with the codec on every message shape."""

from __future__ import annotations

import numpy as np
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.protocol import grpc as gcodec
from nbinfer.protocol.grpc import pb
from nbinfer.protocol.types import InferInput, InferOutput, InferRequest, InferResponse
from nbinfer.server.grpc import _decode_infer, _encode_infer


def _request(**kw: object) -> pb.ModelInferRequest:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    req = InferRequest(
        inputs=[InferInput("INPUT0", "FP32", [1, 16], a), InferInput("INPUT1", "FP32", [1, 16], a)],
        model_name="add_sub",
        id="r1",
    )
    for key, value in kw.items():
        setattr(req, key, value)
    return gcodec.request_to_proto(req)


def _same_request(a: InferRequest, b: InferRequest) -> None:
    assert (a.model_name, a.model_version, a.id, a.parameters) == (
        b.model_name,
        b.model_version,
        b.id,
        b.parameters,
    )
    assert [(o.name, o.class_count, o.parameters) for o in a.outputs] == [
        (o.name, o.class_count, o.parameters) for o in b.outputs
    ]
    for x, y in zip(a.inputs, b.inputs, strict=True):
        assert (x.name, x.datatype, x.shape, x.parameters) == (
            y.name,
            y.datatype,
            y.shape,
            y.parameters,
        )
        assert x.data is not None and y.data is not None
        assert x.data.dtype == y.data.dtype
        np.testing.assert_array_equal(x.data, y.data)


def test_fast_decode_matches_codec_for_raw_inputs_and_outputs() -> None:
    msg = _request()
    msg.outputs.add(name="OUTPUT0")
    msg.parameters["custom"].string_param = "x"
    fast = _decode_infer(msg)
    _same_request(fast, gcodec.request_from_proto(msg))
    assert fast.inputs[0].data is not None and not fast.inputs[0].data.flags.writeable


def test_fast_decode_falls_back_for_typed_contents_and_classification() -> None:
    typed = gcodec.request_to_proto(
        InferRequest(
            inputs=[InferInput("X", "INT32", [3], np.array([1, 2, 3], dtype=np.int32))],
            model_name="m",
        ),
        raw=False,
    )
    _same_request(_decode_infer(typed), gcodec.request_from_proto(typed))
    msg = _request()
    msg.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 2
    decoded = _decode_infer(msg)
    assert decoded.outputs[0].class_count == 2


def test_fast_decode_rejects_wrong_raw_size_like_the_codec() -> None:
    msg = _request()
    msg.raw_input_contents[1] = b"\0" * 60
    with pytest.raises(InvalidInputError, match="INPUT1"):
        _decode_infer(msg)


def test_fast_decode_handles_bytes_and_bool_inputs() -> None:
    req = InferRequest(
        inputs=[
            InferInput("S", "BYTES", [2], np.array([b"ab", b""], dtype=object)),
            InferInput("B", "BOOL", [2], np.array([True, False])),
        ],
        model_name="m",
    )
    msg = gcodec.request_to_proto(req)
    _same_request(_decode_infer(msg), gcodec.request_from_proto(msg))


@pytest.mark.parametrize(
    ("datatype", "data", "params"),
    [
        ("FP32", np.arange(6, dtype=np.float32).reshape(2, 3), {}),
        ("INT64", np.arange(6, dtype=np.int64).reshape(2, 3), {"flag": True}),
        ("BYTES", np.array([[b"a", b"bc", b""]], dtype=object), {}),
        ("BOOL", np.array([[True, False, True]]), {}),
    ],
)
def test_fast_encode_matches_codec(datatype: str, data: np.ndarray, params: dict) -> None:
    resp = InferResponse(
        model_name="m",
        outputs=[InferOutput("OUT", datatype, list(data.shape), data)],
        model_version="1",
        id="abc",
        parameters=params,
    )
    fast = pb.ModelInferResponse.FromString(_encode_infer(resp))
    assert fast == gcodec.response_to_proto(resp)


@pytest.mark.parametrize("shape", [[0, -1], [-1, -1], [-2, 8]])
def test_fast_decode_rejects_negative_dims_like_the_codec(shape: list[int]) -> None:
    msg = _request()
    del msg.inputs[0].shape[:]
    msg.inputs[0].shape.extend(shape)
    msg.raw_input_contents[0] = b""
    with pytest.raises(InvalidInputError):
        gcodec.request_from_proto(msg)
    with pytest.raises(InvalidInputError, match="INPUT0"):
        _decode_infer(msg)
