"""Property-based fuzzing of the three request decoders and of the live server.

Each decoder must either return a request or raise :class:`nbinfer.errors.NbinferError` (which the
server answers with a 4xx / INVALID_ARGUMENT): never another exception (a 500), never a hang.

Budget: ``NBINFER_FUZZ_EXAMPLES`` examples per property (default 1000, about 15 s for the module
on two cores). A longer run, e.g. before a release::

    NBINFER_FUZZ_EXAMPLES=20000 python -m pytest -p no:cacheprovider tests/reliability/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import struct
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbinfer.errors import NbinferError
from nbinfer.protocol import grpc as grpc_codec
from nbinfer.protocol import rest
from nbinfer.protocol._generated import grpc_service_pb2 as pb
from nbinfer.protocol.dtypes import DATATYPES
from nbinfer.protocol.tensors import decode_bytes_tensor, encode_bytes_tensor
from nbinfer.server.launcher import LocalServer

EXAMPLES = int(os.environ.get("NBINFER_FUZZ_EXAMPLES", "1000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# JSON values of every kind, the tensors' fields among them
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
shapes = st.lists(st.integers(min_value=-2, max_value=5), max_size=3) | values
datatypes = st.sampled_from([*DATATYPES, "FP8", ""]) | values


@st.composite
def tensors(draw: st.DrawFn) -> dict[str, Any]:
    tensor: dict[str, Any] = {}
    for key, strategy in (
        ("name", st.sampled_from(["INPUT0", "INPUT1", "X"]) | values),
        ("datatype", datatypes),
        ("shape", shapes),
        ("data", values),
        (
            "parameters",
            st.fixed_dictionaries({}, optional={"binary_data_size": st.integers(-3, 40) | values})
            | values,
        ),
    ):
        if draw(st.booleans()) or key in ("name", "datatype", "shape"):
            tensor[key] = draw(strategy)
    return tensor


@st.composite
def rest_bodies(draw: st.DrawFn) -> tuple[bytes, int | None]:
    header: Any = {"inputs": draw(st.lists(tensors(), max_size=3))}
    if draw(st.booleans()):
        header["outputs"] = draw(
            st.lists(
                st.fixed_dictionaries(
                    {"name": st.text(max_size=4)}, optional={"parameters": values}
                ),
                max_size=2,
            )
        )
    if draw(st.booleans()):
        header["parameters"] = draw(values)
    if draw(st.integers(0, 9)) == 0:
        header = draw(values)  # not even an object
    text = json.dumps(header).encode()
    binary = draw(st.binary(max_size=64))
    mode = draw(st.sampled_from(["json", "binary", "lying"]))
    if mode == "json":
        return text, None
    length = len(text) if mode == "binary" else draw(st.integers(-2, len(text) + 70))
    return text + binary, length


def _decodes_or_refuses(decode: Any, *args: Any) -> None:
    with contextlib.suppress(NbinferError):
        decode(*args)


@FUZZ
@given(rest_bodies())
def test_rest_decoder_returns_a_request_or_a_typed_error(body: tuple[bytes, int | None]) -> None:
    _decodes_or_refuses(rest.decode_request, *body)
    _decodes_or_refuses(rest.decode_response, *body)


@FUZZ
@given(st.binary(max_size=300), st.none() | st.integers(-1, 310))
def test_rest_decoder_survives_arbitrary_bytes(body: bytes, header_length: int | None) -> None:
    _decodes_or_refuses(rest.decode_request, body, header_length)


@FUZZ
@given(
    st.lists(st.binary(max_size=12), max_size=10),
    st.binary(max_size=8),
    st.none() | st.integers(-1, 12),
)
def test_bytes_decoder_round_trips_and_refuses_garbage(
    items: list[bytes], junk: bytes, count: int | None
) -> None:
    wire = encode_bytes_tensor(items)
    assert decode_bytes_tensor(wire, len(items)).tolist() == items
    for data in (wire + junk, wire[: len(wire) // 2], junk):
        try:
            decoded = decode_bytes_tensor(data, count)
        except NbinferError:
            continue
        assert count is None or len(decoded) == count


contents_fields = [
    "bool_contents",
    "int_contents",
    "int64_contents",
    "uint_contents",
    "uint64_contents",
    "fp32_contents",
    "fp64_contents",
    "bytes_contents",
]


@st.composite
def grpc_requests(draw: st.DrawFn) -> bytes:
    msg = pb.ModelInferRequest(model_name=draw(st.text(max_size=6)))
    for _ in range(draw(st.integers(0, 3))):
        tensor = msg.inputs.add(
            name=draw(st.sampled_from(["INPUT0", "INPUT1", ""])),
            datatype=draw(st.sampled_from([*DATATYPES, "FP8", ""])),
            shape=draw(st.lists(st.integers(-2, 6), max_size=3)),
        )
        if draw(st.booleans()):
            field = draw(st.sampled_from(contents_fields))
            count = draw(st.integers(0, 8))
            element = {
                "bool_contents": st.booleans(),
                "int_contents": st.integers(-(2**31), 2**31 - 1),
                "int64_contents": st.integers(-(2**63), 2**63 - 1),
                "uint_contents": st.integers(0, 2**32 - 1),
                "uint64_contents": st.integers(0, 2**64 - 1),
                "fp32_contents": st.floats(width=32),
                "fp64_contents": st.floats(),
                "bytes_contents": st.binary(max_size=6),
            }[field]
            getattr(tensor.contents, field).extend(
                draw(st.lists(element, min_size=count, max_size=count))
            )
        if draw(st.booleans()):
            tensor.parameters["binary_data_size"].int64_param = draw(st.integers(-2, 50))
    for _ in range(draw(st.integers(0, 3))):
        msg.raw_input_contents.append(draw(st.binary(max_size=40)))
    wire = msg.SerializeToString()
    if draw(st.integers(0, 4)) == 0:  # flip, cut or pad the wire bytes
        cut = draw(st.integers(0, len(wire)))
        wire = wire[:cut] + draw(st.binary(max_size=8))
    return wire


@FUZZ
@given(grpc_requests())
def test_grpc_decoder_returns_a_request_or_a_typed_error(wire: bytes) -> None:
    try:
        message = pb.ModelInferRequest.FromString(wire)
    except DecodeError:
        return  # the server answers INVALID_ARGUMENT before decoding
    _decodes_or_refuses(grpc_codec.request_from_proto, message)


# ---------------------------------------------------------------------- the live server

LIVE = settings(FUZZ, max_examples=max(50, EXAMPLES // 3))


@pytest.fixture(scope="module")
def connection(server: LocalServer) -> Any:
    parts = urlsplit(server.http_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    yield conn
    conn.close()


@LIVE
@given(
    body=rest_bodies(),
    model=st.sampled_from(
        ["add_sub", "identity_fp32", "identity_bytes", "identity_bool", "identity_int8"]
    ),
)
def test_live_server_never_answers_5xx(
    connection: Any, body: tuple[bytes, int | None], model: str
) -> None:
    data, header_length = body
    headers = {} if header_length is None else {rest.HEADER_LENGTH: str(header_length)}
    connection.request("POST", f"/v2/models/{model}/infer", body=data, headers=headers)
    answer = connection.getresponse()
    text = answer.read()
    assert answer.status < 500, text[:300]


def test_fuzz_budget_is_bounded_in_ci() -> None:
    assert EXAMPLES <= 1000 or not os.environ.get("CI"), "CI keeps the fuzz budget small"
    assert struct.calcsize("<I") == 4 and np.dtype(np.float32).itemsize == 4
