"""Property-based fuzzing of the three request decoders and of the live server.

Each decoder must either return a request or raise :class:`nbinfer.errors.NbinferError` (which the
server answers with a 4xx / INVALID_ARGUMENT): never another exception (a 500), never a hang.

CI runs a fixed, deterministic number of examples per target (``EXAMPLES``; hypothesis
derandomized, so every run draws the same examples and a failure reproduces as it is). The
time-bounded run is the opt-in: ``NBINFER_FUZZ_SECONDS`` seconds in all, shared between the
targets by ``TARGETS``, each target running hypothesis in rounds of ``ROUND`` fresh random examples
until its share is spent. Either way the last test checks that every target really ran its due
(its examples, or its share of time at ``MIN_EXAMPLES_PER_SECOND``). A long run, e.g. before a
release::

    NBINFER_FUZZ_SECONDS=1200 python -m pytest -p no:cacheprovider tests/reliability/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
import reliability_report
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

#: Seconds of fuzzing in all of the documented long run.
LONG_SECONDS = 1200
#: The time-bounded run's seconds (``NBINFER_FUZZ_SECONDS``); ``None``: CI's fixed example counts.
_SECONDS = os.environ.get("NBINFER_FUZZ_SECONDS")
SECONDS = float(_SECONDS) if _SECONDS else None
#: target -> (what it fuzzes, its share of the budget); docs/reliability.md shows this table.
TARGETS = {
    "rest": ("REST JSON + binary decoder: structured requests, lying header lengths", 0.25),
    "rest-bytes": ("REST decoder: arbitrary bytes", 0.10),
    "bytes": ("BYTES decoder: round trips, truncation, junk", 0.10),
    "grpc": ("gRPC request decoder: random `ModelInferRequest`s, cut and padded wire", 0.20),
    "live": ("the live server over HTTP: no 5xx", 0.35),
}
#: target -> examples in CI's fixed, derandomized run (about 2 to 15 s each on CI's machine).
EXAMPLES = {"rest": 1000, "rest-bytes": 5000, "bytes": 4000, "grpc": 4000, "live": 1000}
#: Examples per round of the time-bounded run: one hypothesis run, then the clock is looked at.
ROUND = 250
#: The least a target may run, per second of its share (the live server, the slowest, runs 60-180).
MIN_EXAMPLES_PER_SECOND = 20
ROUND_SETTINGS = settings(
    max_examples=ROUND,
    deadline=None,
    database=None,
    derandomize=False,  # fresh examples every round (the fixed run sets it)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: target -> {"examples": n, "seconds": s} of the targets that ran in this process.
RAN: dict[str, dict[str, float]] = {}


def _budget(target: str) -> float:
    """The target's seconds in the time-bounded run (``NBINFER_FUZZ_SECONDS`` set)."""
    assert SECONDS is not None
    return SECONDS * TARGETS[target][1]


def fuzz(target: str, strategy: st.SearchStrategy[Any], check: Callable[[Any], None]) -> None:
    """Run ``check`` on examples of ``strategy``: ``EXAMPLES[target]`` of them, the same ones every
    run; or, with ``NBINFER_FUZZ_SECONDS``, fresh rounds until the target's share is spent."""
    examples = 0

    def count_and_check(example: Any) -> None:
        nonlocal examples
        examples += 1
        check(example)

    start = time.monotonic()
    if SECONDS is None:
        fixed = settings(ROUND_SETTINGS, max_examples=EXAMPLES[target], derandomize=True)
        fixed(given(strategy)(count_and_check))()
    else:
        one_round = ROUND_SETTINGS(given(strategy)(count_and_check))
        budget = _budget(target)
        while time.monotonic() - start < budget:
            one_round()
    RAN[target] = {"examples": examples, "seconds": time.monotonic() - start}
    reliability_report.record(
        "fuzz", target, {"examples": examples, "seconds": round(RAN[target]["seconds"], 1)}
    )


def _timeout(target: str) -> pytest.MarkDecorator:
    return pytest.mark.timeout(300 if SECONDS is None else _budget(target) + 120)


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


#: The fields of a request's tensor: name, datatype and shape always, the others or not.
tensor_fields: dict[str, st.SearchStrategy[Any]] = {
    "name": st.sampled_from(["INPUT0", "INPUT1", "X"]) | values,
    "datatype": datatypes,
    "shape": shapes,
    "data": values,
    "parameters": (
        st.fixed_dictionaries({}, optional={"binary_data_size": st.integers(-3, 40) | values})
        | values
    ),
}


@st.composite
def tensors(draw: st.DrawFn) -> dict[str, Any]:
    tensor: dict[str, Any] = {}
    for key, strategy in tensor_fields.items():
        if draw(st.booleans()) or key in ("name", "datatype", "shape"):
            tensor[key] = draw(strategy)
    return tensor


input_lists = st.lists(tensors(), max_size=3)
output_lists = st.lists(
    st.fixed_dictionaries({"name": st.text(max_size=4)}, optional={"parameters": values}),
    max_size=2,
)
tails = st.binary(max_size=64)
body_modes = st.sampled_from(["json", "binary", "lying"])
# The strategies are built once, here, not inside the composites: one built in a draw is validated
# and has its properties computed again at every example (a third of the REST fuzz's time).


@st.composite
def rest_bodies(draw: st.DrawFn) -> tuple[bytes, int | None]:
    header: Any
    # what is drawn and then thrown away costs as much as what is kept: the choices that decide
    # whether a part is used come before the part (no tensors for a header that is not an object,
    # no binary tail for a pure JSON body)
    if draw(st.integers(0, 9)) == 0:
        header = draw(values)  # not even an object
    else:
        header = {"inputs": draw(input_lists)}
        if draw(st.booleans()):
            header["outputs"] = draw(output_lists)
        if draw(st.booleans()):
            header["parameters"] = draw(values)
    text = json.dumps(header).encode()
    mode = draw(body_modes)
    if mode == "json":
        return text, None
    binary = draw(tails)
    length = len(text) if mode == "binary" else draw(st.integers(-2, len(text) + 70))
    return text + binary, length


def _decodes_or_refuses(decode: Any, *args: Any) -> None:
    with contextlib.suppress(NbinferError):
        decode(*args)


@_timeout("rest")
def test_rest_decoder_returns_a_request_or_a_typed_error() -> None:
    def check(body: tuple[bytes, int | None]) -> None:
        _decodes_or_refuses(rest.decode_request, *body)
        _decodes_or_refuses(rest.decode_response, *body)

    fuzz("rest", rest_bodies(), check)


arbitrary_bodies = st.tuples(st.binary(max_size=300), st.none() | st.integers(-1, 310))


@_timeout("rest-bytes")
def test_rest_decoder_survives_arbitrary_bytes() -> None:
    fuzz(
        "rest-bytes", arbitrary_bodies, lambda body: _decodes_or_refuses(rest.decode_request, *body)
    )


def _bytes_round_trip(example: tuple[list[bytes], bytes, int | None]) -> None:
    items, junk, count = example
    wire = encode_bytes_tensor(items)
    assert decode_bytes_tensor(wire, len(items)).tolist() == items
    for data in (wire + junk, wire[: len(wire) // 2], junk):
        try:
            decoded = decode_bytes_tensor(data, count)
        except NbinferError:
            continue
        assert count is None or len(decoded) == count


bytes_cases = st.tuples(
    st.lists(st.binary(max_size=12), max_size=10),
    st.binary(max_size=8),
    st.none() | st.integers(-1, 12),
)


@_timeout("bytes")
def test_bytes_decoder_round_trips_and_refuses_garbage() -> None:
    fuzz("bytes", bytes_cases, _bytes_round_trip)


#: contents field -> its elements
contents_elements = {
    "bool_contents": st.booleans(),
    "int_contents": st.integers(-(2**31), 2**31 - 1),
    "int64_contents": st.integers(-(2**63), 2**63 - 1),
    "uint_contents": st.integers(0, 2**32 - 1),
    "uint64_contents": st.integers(0, 2**64 - 1),
    "fp32_contents": st.floats(width=32),
    "fp64_contents": st.floats(),
    "bytes_contents": st.binary(max_size=6),
}
contents_fields = list(contents_elements)
#: contents field -> count -> a list of exactly that many elements
contents_lists = {
    field: [st.lists(element, min_size=n, max_size=n) for n in range(9)]
    for field, element in contents_elements.items()
}
grpc_input_names = st.sampled_from(["INPUT0", "INPUT1", ""])
grpc_datatypes = st.sampled_from([*DATATYPES, "FP8", ""])
grpc_shapes = st.lists(st.integers(-2, 6), max_size=3)
grpc_fields = st.sampled_from(contents_fields)
raw_contents = st.binary(max_size=40)
wire_junk = st.binary(max_size=8)


@st.composite
def grpc_requests(draw: st.DrawFn) -> bytes:
    msg = pb.ModelInferRequest(model_name=draw(st.text(max_size=6)))
    for _ in range(draw(st.integers(0, 3))):
        tensor = msg.inputs.add(
            name=draw(grpc_input_names), datatype=draw(grpc_datatypes), shape=draw(grpc_shapes)
        )
        if draw(st.booleans()):
            field = draw(grpc_fields)
            count = draw(st.integers(0, 8))
            getattr(tensor.contents, field).extend(draw(contents_lists[field][count]))
        if draw(st.booleans()):
            tensor.parameters["binary_data_size"].int64_param = draw(st.integers(-2, 50))
    for _ in range(draw(st.integers(0, 3))):
        msg.raw_input_contents.append(draw(raw_contents))
    wire = msg.SerializeToString()
    if draw(st.integers(0, 4)) == 0:  # flip, cut or pad the wire bytes
        cut = draw(st.integers(0, len(wire)))
        wire = wire[:cut] + draw(wire_junk)
    return wire


def _grpc_decodes_or_refuses(wire: bytes) -> None:
    try:
        message = pb.ModelInferRequest.FromString(wire)
    except DecodeError:
        return  # the server answers INVALID_ARGUMENT before decoding
    _decodes_or_refuses(grpc_codec.request_from_proto, message)


@_timeout("grpc")
def test_grpc_decoder_returns_a_request_or_a_typed_error() -> None:
    fuzz("grpc", grpc_requests(), _grpc_decodes_or_refuses)


# ---------------------------------------------------------------------- the live server


@pytest.fixture(scope="module")
def connection(server: LocalServer) -> Any:
    parts = urlsplit(server.http_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    yield conn
    conn.close()


@_timeout("live")
def test_live_server_never_answers_5xx(connection: Any) -> None:
    models = ["add_sub", "identity_fp32", "identity_bytes", "identity_bool", "identity_int8"]

    def check(example: tuple[tuple[bytes, int | None], str]) -> None:
        (data, header_length), model = example
        headers = {} if header_length is None else {rest.HEADER_LENGTH: str(header_length)}
        connection.request("POST", f"/v2/models/{model}/infer", body=data, headers=headers)
        answer = connection.getresponse()
        text = answer.read()
        assert answer.status < 500, text[:300]

    fuzz("live", st.tuples(rest_bodies(), st.sampled_from(models)), check)


def test_every_fuzz_target_ran_its_budget(request: pytest.FixtureRequest) -> None:
    """The budget really ran: every selected target finished and ran its fixed examples, or (the
    time-bounded run) spent its share and reached the floor."""
    names = {item.name for item in request.session.items}
    selected = [target for test, target in _TARGET_TESTS.items() if test in names]
    if not selected:
        pytest.skip("no fuzz target was selected in this session")
    for target in selected:
        assert target in RAN, f"the fuzz target {target!r} did not finish"
        if SECONDS is None:
            due = EXAMPLES[target]
            assert RAN[target]["examples"] >= due, f"{target} ran {RAN[target]} < {due} examples"
            continue
        ran, budget = RAN[target], _budget(target)
        assert ran["seconds"] >= budget, f"{target} stopped before its {budget:.0f} s: {ran}"
        floor = MIN_EXAMPLES_PER_SECOND * budget
        assert ran["examples"] >= floor, f"{target} ran {ran['examples']} < {floor:.0f} examples"


_TARGET_TESTS = {
    test_rest_decoder_returns_a_request_or_a_typed_error.__name__: "rest",
    test_rest_decoder_survives_arbitrary_bytes.__name__: "rest-bytes",
    test_bytes_decoder_round_trips_and_refuses_garbage.__name__: "bytes",
    test_grpc_decoder_returns_a_request_or_a_typed_error.__name__: "grpc",
    test_live_server_never_answers_5xx.__name__: "live",
}
