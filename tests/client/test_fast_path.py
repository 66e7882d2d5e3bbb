"""The client's inference hot path: cached request templates and outputs decoded on access.

Pins that the fast path sends the same request and reads the same reply as the general codecs
(protocol.grpc / protocol.rest), that malformed replies still fail at once, and that the
clients take the fast path for plain arrays without changing results.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import nbinfer
from nbinfer.errors import InvalidInputError
from nbinfer.protocol import grpc as pgrpc
from nbinfer.protocol import grpc_reply, rest
from nbinfer.protocol.rest import ResponseReader as RestResponseReader
from nbinfer.protocol.types import InferInput, InferOutput, InferRequest, InferResponse

pb = pgrpc.pb


def _response() -> InferResponse:
    return InferResponse(
        "m",
        [
            InferOutput("A", "FP32", [2, 3], np.arange(6, dtype=np.float32).reshape(2, 3)),
            InferOutput("B", "INT64", [4], np.array([1, -2, 3, 2**40], dtype=np.int64)),
            InferOutput(
                "C", "BF16", [2], np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16), {"k": "v"}
            ),
        ],
        model_version="3",
        id="r1",
        parameters={"p": 1},
    )


def _same(a: InferResponse, b: InferResponse) -> None:
    assert (a.model_name, a.model_version, a.id, a.parameters) == (
        b.model_name,
        b.model_version,
        b.id,
        b.parameters,
    )
    assert [o.name for o in a.outputs] == [o.name for o in b.outputs]
    for x, y in zip(a.outputs, b.outputs, strict=True):
        assert (x.datatype, list(x.shape), x.parameters) == (
            y.datatype,
            list(y.shape),
            y.parameters,
        )
        assert x.data is not None and y.data is not None
        assert x.data.dtype == y.data.dtype
        np.testing.assert_array_equal(x.data, y.data)


def test_request_template_bytes_decode_to_the_same_request() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[1, 2]], dtype=np.int64)
    template = pgrpc.RequestTemplate(
        "m", "2", [("A", "FP32", [2, 3], a.nbytes), ("B", "INT64", [1, 2], b.nbytes)], ["Y"]
    )
    decoded = pgrpc.request_from_proto(pb.ModelInferRequest.FromString(template.encode([a, b])))
    assert (decoded.model_name, decoded.model_version, decoded.id) == ("m", "2", "")
    assert [o.name for o in decoded.outputs] == ["Y"]
    assert [(i.name, i.datatype, i.shape) for i in decoded.inputs] == [
        ("A", "FP32", [2, 3]),
        ("B", "INT64", [1, 2]),
    ]
    np.testing.assert_array_equal(decoded.inputs[0].data, a)
    np.testing.assert_array_equal(decoded.inputs[1].data, b)
    with_id = pb.ModelInferRequest.FromString(template.encode([a, b], request_id="r-é"))
    assert with_id.id == "r-é"


def test_grpc_response_reader_matches_response_from_proto() -> None:
    msg = pgrpc.response_to_proto(_response())
    reader = grpc_reply.ResponseReader(msg)
    assert reader.names == ["A", "B", "C"]
    arr = reader.array(0)
    assert arr is not None and arr.shape == (2, 3) and not arr.flags.writeable
    assert reader.output(2).parameters == {"k": "v"}
    _same(reader.response(), pgrpc.response_from_proto(msg))


def test_grpc_response_reader_decodes_bytes_and_typed_contents_eagerly() -> None:
    resp = InferResponse(
        "m",
        [
            InferOutput("S", "BYTES", [2], np.array([b"a", b"bc"], dtype=object)),
            InferOutput("F", "BOOL", [2], np.array([True, False])),
        ],
    )
    for raw in (True, False):
        msg = pgrpc.response_to_proto(resp, raw=raw)
        reader = grpc_reply.ResponseReader(msg)
        s = reader.array(0)
        assert s is not None and list(s) == [b"a", b"bc"]
        _same(reader.response(), pgrpc.response_from_proto(msg))


def test_grpc_response_reader_rejects_a_size_mismatch_at_once() -> None:
    msg = pgrpc.response_to_proto(_response())
    msg.raw_output_contents[0] = msg.raw_output_contents[0][:-4]
    with pytest.raises(InvalidInputError, match="'A'"):
        grpc_reply.ResponseReader(msg)


def test_rest_response_reader_matches_decode_response() -> None:
    body, header_length = rest.encode_response(_response(), binary_outputs=True)
    reader = RestResponseReader(body, header_length)
    assert reader.names == ["A", "B", "C"]
    arr = reader.array(1)
    assert arr is not None and arr.dtype == np.int64 and not arr.flags.writeable
    _same(reader.response(), rest.decode_response(body, header_length))


def test_rest_response_reader_takes_json_outputs_too() -> None:
    body, header_length = rest.encode_response(_response(), binary_outputs=["A"])
    reader = RestResponseReader(body, header_length)
    _same(reader.response(), rest.decode_response(body, header_length))


@pytest.mark.parametrize("cut", [4, -4])
def test_rest_response_reader_rejects_sizes_that_do_not_add_up(cut: int) -> None:
    body, header_length = rest.encode_response(_response(), binary_outputs=True)
    bad = body[:-4] if cut > 0 else body + b"\0" * 4
    with pytest.raises(InvalidInputError):
        RestResponseReader(bad, header_length)


@pytest.mark.parametrize("make", ["contiguous", "strided", "fortran"])
def test_plain_arrays_take_the_fast_path_with_exact_results(url: str, make: str) -> None:
    base = np.arange(64, dtype=np.float32).reshape(4, 16)
    x: Any = {"contiguous": base[:1], "strided": base[::4], "fortran": np.asfortranarray(base)}[
        make
    ]
    y = np.ones(x.shape, dtype=np.float32)
    with nbinfer.Client(url) as client:
        client.is_server_ready()
        client.get_server_metadata()  # HTTP: binary support known, so the first call is fast
        fast = client.infer("add_sub", {"INPUT0": x, "INPUT1": y}, outputs=["OUTPUT1"])
        assert len(client._binding._templates) == 1  # the request came from a cached template
        general = client.infer(
            "add_sub",
            [
                InferInput("INPUT0", "FP32", list(x.shape), x),
                InferInput("INPUT1", "FP32", [*y.shape], y),
            ],
            outputs=["OUTPUT1"],
        )
    assert fast.output_names == general.output_names == ["OUTPUT1"]
    np.testing.assert_array_equal(fast["OUTPUT1"], x - y)
    np.testing.assert_array_equal(general["OUTPUT1"], x - y)
    assert fast.get_output("OUTPUT1").shape == list(x.shape)


def test_fast_path_echoes_the_request_id_and_checks_the_model(url: str) -> None:
    x = np.ones((1, 16), dtype=np.float32)
    with nbinfer.Client(url) as client:
        result = client.infer("add_sub", {"INPUT0": x, "INPUT1": x}, request_id="abc")
        assert result.id == "abc"
        np.testing.assert_array_equal(result["OUTPUT0"], x + x)
        with pytest.raises(nbinfer.ModelNotFoundError):
            client.infer("no_such_model", {"INPUT0": x})


async def _async_infer(url: str, data: dict[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    async with nbinfer.AsyncClient(url) as client:
        await client.infer("add_sub", data)
        return (await client.infer("add_sub", data)).as_dict()


def test_async_fast_path_gives_exact_results(url: str) -> None:
    import asyncio

    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    out = asyncio.run(_async_infer(url, {"INPUT0": x, "INPUT1": x}))
    np.testing.assert_array_equal(out["OUTPUT0"], x + x)
    np.testing.assert_array_equal(out["OUTPUT1"], x - x)


def test_result_of_a_request_object_still_decodes_everything(url: str) -> None:
    x = np.ones((1, 16), dtype=np.float32)
    req = InferRequest(
        [InferInput("INPUT0", "FP32", [1, 16], x), InferInput("INPUT1", "FP32", [1, 16], x)]
    )
    with nbinfer.Client(url) as client:
        result = client.infer("add_sub", req)
    assert isinstance(result.response, InferResponse)
    assert [o.name for o in result.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert "OUTPUT0" in repr(result)
