"""The lazy response reader: one base, the same answers from the REST and gRPC ends.

Pins that both codecs' readers agree with each other and with the eager decoders, that the
plain layout gives read-only views of the received bytes, and that a malformed REST body fails
with exactly the error :func:`nbinfer.protocol.rest.decode_response` gives (the reader checks
the header once, through the same code).
"""

from __future__ import annotations

import numpy as np
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.protocol import grpc as pgrpc
from nbinfer.protocol import grpc_reply, rest
from nbinfer.protocol.reader import ResponseReader
from nbinfer.protocol.types import InferOutput, InferResponse


def _response(*extra: InferOutput) -> InferResponse:
    return InferResponse(
        "m",
        [
            InferOutput("A", "FP32", [2, 2], np.arange(4, dtype=np.float32).reshape(2, 2)),
            InferOutput("B", "UINT8", [3], np.array([0, 7, 255], np.uint8), {"k": "v"}),
            *extra,
        ],
        model_version="2",
        id="req-9",
        parameters={"sequence_id": 4},
    )


def _readers(response: InferResponse) -> list[ResponseReader]:
    body, header_length = rest.encode_response(response, binary_outputs=True)
    data = pgrpc.response_to_bytes(response)
    wire = pgrpc.pb.ModelInferResponse.FromString(data)
    return [
        rest.ResponseReader(body, header_length),
        grpc_reply.ResponseReader(wire),
        grpc_reply.ResponseReader(data),  # as the client's engines hand replies over
    ]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["rest", "grpc", "grpc-bytes"])
def test_plain_replies_are_read_lazily_as_read_only_views(index: int) -> None:
    reader = _readers(_response())[index]
    assert reader.names == ["A", "B"]
    assert (reader.model_name, reader.model_version, reader.id) == ("m", "2", "req-9")
    assert reader.parameters == {"sequence_id": 4}
    a = reader.array(0)
    assert a is not None and a.shape == (2, 2) and not a.flags.writeable
    assert reader.array(0) is a  # decoded once
    assert reader.output(1).parameters == {"k": "v"}


@pytest.mark.parametrize(
    "extra",
    [
        InferOutput("S", "BYTES", [2], np.array([b"x", b""], dtype=object)),
        InferOutput("F", "BOOL", [2], np.array([True, False])),
    ],
    ids=["bytes", "bool"],
)
def test_both_ends_agree_with_the_eager_decoders(extra: InferOutput) -> None:
    response = _response(extra)
    for reader in _readers(response):
        got = reader.response()
        assert [o.name for o in got.outputs] == ["A", "B", extra.name]
        for out, want in zip(got.outputs, response.outputs, strict=True):
            assert (out.datatype, list(out.shape), out.parameters) == (
                want.datatype,
                want.shape,
                want.parameters,
            )
            np.testing.assert_array_equal(out.data, want.data)


def test_a_decoded_response_needs_no_codec() -> None:
    flat = InferOutput("y", "INT32", [2, 2], np.arange(4, dtype=np.int32))  # a peer's flat data
    reader = ResponseReader(InferResponse("m", [flat]))
    assert reader.names == ["y"]
    arr = reader.array(0)
    assert arr is not None and arr.shape == (2, 2)
    assert reader.output(0) is flat


def _bodies() -> dict[str, tuple[bytes, int | None]]:
    body, length = rest.encode_response(_response(), binary_outputs=True)
    assert length is not None
    return {
        "truncated": (body[:-3], length),
        "extra bytes": (body + b"\0", length),
        "header longer than body": (body, len(body) + 1),
        "broken JSON": (b"[" + body[1:], length),
        "error body": (b'{"error": "boom"}', None),
        "not an object": (b"[1]", None),
    }


@pytest.mark.parametrize("case", list(_bodies()))
def test_a_malformed_rest_body_fails_as_decode_response_fails(case: str) -> None:
    body, length = _bodies()[case]
    with pytest.raises(InvalidInputError) as eager:
        rest.decode_response(body, length)
    with pytest.raises(InvalidInputError) as lazy:
        rest.ResponseReader(body, length)
    assert str(lazy.value) == str(eager.value)


def test_rest_answers_repeating_a_header_read_their_own_bytes() -> None:
    """Answers of one model and shape share their JSON header byte for byte: the layout read
    from the first is reused, each reader viewing its own body and handing out its own dicts."""
    first, second = _response(), _response()
    second.outputs[0].data = np.full((2, 2), 9, np.float32)
    (a, length), (b, length_b) = (
        rest.encode_response(r, binary_outputs=True) for r in (first, second)
    )
    assert length == length_b and a[:length] == b[:length] and a != b
    readers = [rest.ResponseReader(a, length), rest.ResponseReader(b, length)]
    assert readers[1].array(0).tolist() == [[9, 9], [9, 9]]
    assert readers[0].array(0).tolist() == [[0, 1], [2, 3]]
    assert not readers[1].array(0).flags.writeable
    readers[0].parameters["sequence_id"] = 5
    readers[0].output(1).parameters["k"] = "changed"
    assert readers[1].parameters == {"sequence_id": 4}
    assert readers[1].output(1).parameters == {"k": "v"}
    # the same header over a body of another length is read afresh (and refused when wrong)
    with pytest.raises(InvalidInputError):
        rest.ResponseReader(b + b"\0", length)


def _reply_bytes(model: str, fill: float, request_id: str = "") -> bytes:
    response = _response()
    response.model_name, response.id, response.outputs[0].data = (
        model,
        request_id,
        np.full((2, 2), fill, np.float32),
    )
    return pgrpc.response_to_bytes(response)


def test_grpc_replies_are_viewed_where_they_arrived_and_a_repeated_layout_is_reused() -> None:
    """The bytes an engine hands over are never copied: each array views its own reply, and a
    reply laid out like an earlier one (same fields before the contents, same length) reads
    that one's layout, its own model name and parameters still its own."""
    grpc_reply._LAYOUTS.clear()
    first, second, other = _reply_bytes("m", 1.0), _reply_bytes("m", 9.0), _reply_bytes("n", 5.0)
    assert len(first) == len(second) == len(other) and first != second
    readers = [grpc_reply.ResponseReader(data) for data in (first, second, other)]
    assert len(grpc_reply._LAYOUTS[len(first)]) == 2  # "m" once (the second reused it), "n" once
    for reader, data, fill, model in zip(
        readers, (first, second, other), (1, 9, 5), "mmn", strict=True
    ):
        a = reader.array(0)
        assert a.base is data and not a.flags.writeable
        assert a.tolist() == [[fill, fill], [fill, fill]] and reader.model_name == model
        assert reader.array(1).tolist() == [0, 7, 255]
        assert reader.output(1).parameters == {"k": "v"}
    readers[1].parameters["sequence_id"] = 5  # a reader's dicts are its own
    assert readers[0].parameters == {"sequence_id": 4}


def test_grpc_replies_echoing_a_request_id_are_read_but_not_kept() -> None:
    grpc_reply._LAYOUTS.clear()
    reader = grpc_reply.ResponseReader(_reply_bytes("m", 2.0, request_id="req-1"))
    assert reader.id == "req-1" and reader.array(0).tolist() == [[2, 2], [2, 2]]
    assert not grpc_reply._LAYOUTS


def test_grpc_replies_with_the_contents_before_other_fields_are_read_in_full() -> None:
    """Protobuf writes fields in any order it likes: contents first, then the rest."""
    data = _reply_bytes("m", 3.0)
    msg = pgrpc.pb.ModelInferResponse.FromString(data)
    raw = list(msg.raw_output_contents)
    del msg.raw_output_contents[:]
    reordered = pgrpc.pb.ModelInferResponse(raw_output_contents=raw).SerializeToString()
    reordered += msg.SerializeToString()
    assert reordered != data and len(reordered) == len(data)
    grpc_reply._LAYOUTS.clear()
    reader = grpc_reply.ResponseReader(reordered)
    assert reader.array(0).tolist() == [[3, 3], [3, 3]] and reader.model_name == "m"
    assert not grpc_reply._LAYOUTS  # read through the message, not kept
    grpc_reply.ResponseReader(data)  # the usual order is kept; the reordered one still reads right
    assert grpc_reply.ResponseReader(reordered).array(1).tolist() == [0, 7, 255]


@pytest.mark.parametrize("case", ["cut by 1", "cut by 20", "unfinished tag"])
def test_a_malformed_grpc_reply_fails_with_a_clear_error(case: str) -> None:
    data = _reply_bytes("m", 1.0)
    bad = {"cut by 1": data[:-1], "cut by 20": data[:-20], "unfinished tag": data + b"\xff"}
    with pytest.raises(InvalidInputError, match="malformed ModelInferResponse from the server"):
        grpc_reply.ResponseReader(bad[case])
