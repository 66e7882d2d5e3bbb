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
from nbinfer.protocol import rest
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
    wire = pgrpc.pb.ModelInferResponse.FromString(pgrpc.response_to_bytes(response))
    return [rest.ResponseReader(body, header_length), pgrpc.ResponseReader(wire)]


@pytest.mark.parametrize("index", [0, 1], ids=["rest", "grpc"])
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
