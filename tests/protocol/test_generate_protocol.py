"""The generate extension's pure parts: JSON fields <-> tensors, SSE framing and parsing."""

from __future__ import annotations

import numpy as np
import pytest

from nbinfer.errors import InferenceError, InvalidInputError, RemoteInvalidInputError
from nbinfer.protocol.dtypes import bfloat16
from nbinfer.protocol.generate import (
    SseParser,
    error_event,
    error_of,
    generate_body,
    json_value,
    parse_generate_request,
    response_json,
    sse_event,
)
from nbinfer.protocol.types import InferOutput, InferResponse, TensorSpec


def _feed_all(parser: SseParser, chunks: list[bytes]) -> list[str]:
    return [e.data for chunk in chunks for e in parser.feed(chunk)]


def test_parser_reads_events_split_anywhere() -> None:
    stream = sse_event({"a": 1}) + b": keep-alive\n\n" + sse_event({"b": "x\ny"})
    for size in (1, 2, 3, 7, len(stream)):
        parser = SseParser()
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert _feed_all(parser, chunks) == ['{"a":1}', '{"b":"x\\ny"}']


def test_parser_handles_crlf_cr_multiline_data_fields_and_bom() -> None:
    parser = SseParser()
    raw = b"\xef\xbb\xbfevent: tok\r\nid: 7\r\ndata: one\r\ndata:two\r\n\r\nretry: 50\rdata: x\r\r"
    events = parser.feed(raw[:5]) + parser.feed(raw[5:31]) + parser.feed(raw[31:])
    assert [(e.event, e.id, e.data) for e in events] == [
        ("tok", "7", "one\ntwo"),
        ("message", "7", "x"),
    ]
    assert events[1].retry == 50
    # CR at a chunk end, LF at the next start: one line ending, not an empty line
    parser = SseParser()
    assert parser.feed(b"data: a\r") == [] and parser.feed(b"\ndata: b\n\n")[0].data == "a\nb"


def test_parser_never_dispatches_an_unterminated_event() -> None:
    parser = SseParser()
    assert parser.feed(b"data: half") == []
    parser.close()
    assert parser.feed(b"\n\n") == []


def test_error_objects_become_typed_errors() -> None:
    error = error_of(SseParser().feed(error_event("boom"))[0].json(), 3)
    assert isinstance(error, InferenceError) and error.chunks_received == 3
    error = error_of({"error": "bad", "status": 400}, 0)
    assert isinstance(error, RemoteInvalidInputError)
    assert error_of({"text_output": "x"}, 0) is None


SPECS = [
    TensorSpec("b", "BOOL", [1]),
    TensorSpec("u8", "UINT8", [-1]),
    TensorSpec("i64", "INT64", [-1, -1]),
    TensorSpec("h", "FP16", [-1]),
    TensorSpec("bf", "BF16", [-1]),
    TensorSpec("f", "FP64", [2, 2]),
    TensorSpec("s", "BYTES", [1]),
]


def test_fields_map_to_inputs_and_the_rest_to_parameters() -> None:
    body = {
        "b": True,
        "u8": [1, 2, 3],
        "i64": [-(2**63), 2**63 - 1],
        "h": 0.5,
        "bf": [1.5],
        "f": [[1, 2], [3, 4]],
        "s": "héllo",
        "temperature": 0.7,
        "parameters": {"stream": True, "k": 3},
    }
    tensors, params = parse_generate_request(body, SPECS, model="m")
    got = {t.name: (t.shape, t.data) for t in tensors}
    assert got["b"][0] == [1] and got["b"][1].dtype == np.bool_
    assert got["u8"][0] == [3] and got["u8"][1].dtype == np.uint8
    assert got["i64"][0] == [1, 2] and got["i64"][1].tolist() == [[-(2**63), 2**63 - 1]]
    assert got["h"][1].dtype == np.float16 and got["bf"][1].dtype == bfloat16
    assert got["f"][0] == [2, 2] and got["s"][1].tolist() == ["héllo".encode()]
    assert params == {"temperature": 0.7, "stream": True, "k": 3}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"b": 1}, "'b'"),
        ({"u8": 300}, "'u8'"),
        ({"u8": 1.5}, "'u8'"),
        ({"s": 5}, "'s'"),
        ({"x": [1]}, "'x'"),
        ({"x": None}, "'x'"),
        ({"parameters": [1]}, "parameters"),
        ({"u8": [[[1]]]}, "'u8'"),
    ],
)
def test_a_field_that_does_not_fit_is_refused_naming_it(body: dict, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        parse_generate_request(body, SPECS, model="m")


def test_outputs_are_scalars_for_one_element_else_flat_lists() -> None:
    response = InferResponse(
        "m",
        [
            InferOutput("t", "BYTES", [1], np.array([b"hi"], dtype=object)),
            InferOutput("v", "FP32", [2, 2], np.arange(4, dtype=np.float32).reshape(2, 2)),
            InferOutput("e", "INT32", [0], np.zeros(0, dtype=np.int32)),
            InferOutput("bf", "BF16", [1], np.array([1.5], dtype=bfloat16)),
        ],
        model_version="2",
    )
    assert response_json(response) == {
        "model_name": "m",
        "model_version": "2",
        "t": "hi",
        "v": [0.0, 1.0, 2.0, 3.0],
        "e": [],
        "bf": 1.5,
    }
    assert json_value(np.array([True]), "BOOL") is True


def test_generate_body_puts_fields_at_the_top_and_refuses_duplicates() -> None:
    assert generate_body({"a": 1}, {"p": 2}, {"b": 3}) == {"a": 1, "b": 3, "parameters": {"p": 2}}
    with pytest.raises(InvalidInputError, match="twice"):
        generate_body({"a": 1}, None, {"a": 2})
