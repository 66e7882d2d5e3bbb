"""A token stream's small responses: the reused-prefix gRPC encoder and the client's direct reader.

Both are fast paths of a general codec, so each is pinned against it: the server's bytes equal
those of the message built field by field, and the client's response object equals the one made
from the fully decoded response; what they do not cover falls back to the general path.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nbinfer.client.generate import _grpc_objects, _reply_object
from nbinfer.errors import DataTypeError, InferenceError, InvalidInputError
from nbinfer.protocol import grpc as g
from nbinfer.protocol.bytes_codec import _FEW_ELEMENTS, decode_bytes_tensor, encode_bytes_tensor
from nbinfer.protocol.generate import response_json
from nbinfer.protocol.grpc_binding import GrpcBinding
from nbinfer.protocol.types import InferOutput, InferResponse

STREAM = g.rpc_of("ModelStreamInfer").response


def _via_message(resp: InferResponse) -> bytes:
    """The general path: every field through the protobuf message."""
    msg = g.response_to_proto(resp, raw=True)
    body = msg.SerializeToString()
    return bytes(g._STREAM_RESPONSE_TAG + g.varint(len(body)) + body)


def _out(name: str, datatype: str, data: Any, shape: list[int] | None = None) -> InferOutput:
    arr = np.asarray(data, dtype=object if datatype == "BYTES" else None)
    return InferOutput(name, datatype, list(arr.shape) if shape is None else shape, arr)


TOKEN = [
    _out("text_output", "BYTES", [b"tok "]),
    _out("index", "INT64", np.array([7], dtype=np.int64)),
]
RESPONSES = {
    "token": InferResponse("gen", TOKEN, "1", parameters={"triton_final_response": False}),
    "every parameter type": InferResponse(
        "gen", TOKEN, "2", id="req-1", parameters={"b": True, "i": 1, "f": 0.5, "s": "x"}
    ),
    "empty final": InferResponse("gen", [], "1", parameters={"triton_final_response": True}),
    "numbers of each width": InferResponse(
        "m",
        [
            _out(dt, dt, np.arange(6, dtype=np.dtype(code)).reshape(2, 3))
            for dt, code in [("INT8", "i1"), ("UINT16", "u2"), ("INT32", "i4"), ("FP16", "f2")]
        ]
        + [_out("FP64", "FP64", np.array(2.5))],
    ),
    "BYTES: str, empty, unicode, scalar, none": InferResponse(
        "m",
        [
            _out("a", "BYTES", ["é", "", "abc"]),
            _out("b", "BYTES", np.array(b"one", dtype=object), shape=[]),
            _out("c", "BYTES", np.empty((0, 2), dtype=object)),
        ],
    ),
}


@pytest.mark.parametrize("name", list(RESPONSES))
def test_small_responses_encode_to_the_bytes_of_the_message(name: str) -> None:
    resp = RESPONSES[name]
    assert g._small_body(resp) is not None  # the fast path is taken
    expected = _via_message(resp)
    assert g.stream_response_to_bytes(resp) == expected
    assert g.stream_response_to_bytes(resp) == expected  # again, from the reused prefixes


def test_true_and_one_are_different_parameters_in_the_reused_prefixes() -> None:
    as_bool = InferResponse("m", TOKEN, parameters={"p": True})
    as_int = InferResponse("m", TOKEN, parameters={"p": 1})
    first, second = g.stream_response_to_bytes(as_bool), g.stream_response_to_bytes(as_int)
    params = [STREAM.FromString(b).infer_response.parameters["p"] for b in (first, second)]
    assert [p.WhichOneof("parameter_choice") for p in params] == ["bool_param", "int64_param"]


@pytest.mark.parametrize(
    "output",
    [
        _out("q", "BOOL", np.array([True, False])),
        _out("big", "FP32", np.zeros(1 << 15, dtype=np.float32)),
        InferOutput("p", "INT32", [1], np.array([1], dtype=np.int32), {"x": 1}),
    ],
    ids=["bool", "large", "parameters"],
)
def test_responses_the_fast_path_leaves_alone_encode_as_before(output: InferOutput) -> None:
    resp = InferResponse("m", [output])
    assert g._small_body(resp) is None
    assert g.stream_response_to_bytes(resp) == _via_message(resp)


def test_a_response_whose_data_disagrees_with_its_shape_is_refused() -> None:
    bad = InferResponse("m", [InferOutput("x", "INT32", [3], np.array([1, 2], dtype=np.int32))])
    with pytest.raises(InvalidInputError, match="shape"):
        g.stream_response_to_bytes(bad)


@pytest.mark.parametrize("count", [1, _FEW_ELEMENTS, _FEW_ELEMENTS + 1])
def test_few_bytes_elements_encode_as_many_do(count: int) -> None:
    items = [("x" * i).encode() for i in range(count)]
    items[0] = "ü"  # a str element
    wire = encode_bytes_tensor(np.array(items, dtype=object))
    assert decode_bytes_tensor(wire, count).tolist() == ["ü".encode(), *items[1:]]


def test_a_few_bytes_elements_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(DataTypeError, match="int"):
        encode_bytes_tensor(np.array([b"a", 3], dtype=object))


# -- the client's direct reader ---------------------------------------------------------------


def _reply(resp: InferResponse) -> Any:
    return STREAM.FromString(g.stream_response_to_bytes(resp))


@pytest.mark.parametrize("name", list(RESPONSES))
def test_the_client_reads_small_replies_as_the_general_decoder_does(name: str) -> None:
    resp = RESPONSES[name]
    reply = _reply(resp)
    general = response_json(GrpcBinding().stream_reply(reply))
    final = bool(resp.parameters.get("triton_final_response", False))
    if resp.outputs:
        assert _reply_object(reply) == general
        assert _grpc_objects(GrpcBinding(), reply) == (general, final)
    else:
        assert _grpc_objects(GrpcBinding(), reply) == (None, True)


def test_replies_the_reader_leaves_to_the_general_decoder_read_the_same() -> None:
    half = InferResponse("m", [_out("h", "BF16", np.array([1.5], dtype=ml_dtypes.bfloat16))])
    many = InferResponse("m", [_out("v", "INT32", np.arange(40, dtype=np.int32))])
    for resp in (half, many):
        reply = _reply(resp)
        assert _reply_object(reply) is None
        expected = response_json(GrpcBinding().stream_reply(reply))
        assert _grpc_objects(GrpcBinding(), reply) == (expected, False)


def test_a_reply_with_text_that_is_not_utf8_raises_the_general_error() -> None:
    reply = _reply(InferResponse("m", [_out("t", "BYTES", [b"\xff\xfe"])]))
    with pytest.raises(InvalidInputError, match="UTF-8"):
        _grpc_objects(GrpcBinding(), reply)


def test_a_reply_with_an_error_message_raises_it() -> None:
    reply = STREAM(error_message="model exploded")
    with pytest.raises(InferenceError, match="model exploded"):
        _grpc_objects(GrpcBinding(), reply)
