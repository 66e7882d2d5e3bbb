"""Interop: nbinfer's Client / AsyncClient against a real KServe ``ModelServer`` (0.21).

The peer is the ``kserve`` fixture of ``conftest.py`` (``tests/client/kserve_server.py`` in the
kserve venv: kserve parses ``sys.argv`` at import and registers ``inference.*`` protos that clash
with tritonclient's, so it is never imported here). Every test runs on both faces (sync, async);
inference tests also on HTTP-JSON, HTTP-binary and gRPC. Models served by the peer are described
in ``kserve_server.py``. The matrix (``test_interop_matrix.py``) covers the plain cells; these
are KServe's edges: its error mapping, v1, binary negotiation, message limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client, InferResult
from nbinfer.errors import (
    InferenceError,
    ModelNotFoundError,
    NbinferError,
    PayloadTooLargeError,
    RemoteInvalidInputError,
)
from nbinfer.protocol.types import InferInput

if TYPE_CHECKING:
    from peer import Peer

# Kept in sync with tests/client/kserve_server.py (which cannot be imported here).
MAGIC_ERROR = "broken model exploded on purpose"
REFUSAL = "refusing model declines every request"


# -- running one call on either face -----------------------------------------------------------

FACES = ["sync", "async"]


def run(face: str, url: str, fn: Callable[[Any], Any], **options: Any) -> Any:
    """Open a Client (sync) or AsyncClient (async) on ``url`` and return ``fn(client)``.

    For the async face ``fn`` returns an awaitable, which is awaited inside ``asyncio.run``.
    """
    options.setdefault("timeout", 10.0)
    if face == "sync":
        with Client(url, **options) as client:
            return fn(client)

    async def main() -> Any:
        async with AsyncClient(url, **options) as client:
            return await fn(client)

    return asyncio.run(main())


@pytest.fixture(params=FACES)
def face(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["http", "grpc"])
def url(request: pytest.FixtureRequest, kserve: Peer) -> str:
    return kserve.http_url if request.param == "http" else kserve.grpc_url


# (protocol, client binary option): HTTP with nbinfer's default (JSON against KServe, which does
# not list the binary_tensor_data extension), HTTP forced binary, HTTP forced JSON, gRPC.
WIRES = {"http": None, "http-binary": True, "http-json": False, "grpc": None}


@pytest.fixture(params=list(WIRES))
def wire(request: pytest.FixtureRequest, kserve: Peer) -> tuple[str, dict[str, Any]]:
    name = str(request.param)
    url = kserve.grpc_url if name == "grpc" else kserve.http_url
    return url, {"binary": WIRES[name]}


def _header(result: InferResult, name: str) -> str | None:
    return {k.lower(): v for k, v in result.headers.items()}.get(name)


# -- health and metadata -----------------------------------------------------------------------


def test_server_reports_live_and_ready(face: str, url: str) -> None:
    assert run(face, url, lambda c: c.is_server_live()) is True
    assert run(face, url, lambda c: c.is_server_ready()) is True


def test_model_readiness_and_unknown_model(face: str, url: str) -> None:
    assert run(face, url, lambda c: c.is_model_ready("add_one")) is True
    with pytest.raises(ModelNotFoundError, match="Model with name nope does not exist") as info:
        run(face, url, lambda c: c.is_model_ready("nope"))
    assert info.value.status == 404


def test_server_metadata_as_kserve_reports_it(face: str, url: str) -> None:
    meta = run(face, url, lambda c: c.get_server_metadata())
    assert meta.name == "kserve"
    assert meta.version.startswith("0.21")
    assert meta.extensions == ["model_repository_extension"]


def test_model_metadata_carries_the_tensor_specs(face: str, url: str) -> None:
    meta = run(face, url, lambda c: c.get_model_metadata("times_two"))
    assert meta.name == "times_two"
    assert meta.versions == []  # KServe sends "versions": null over REST, nothing over gRPC
    assert meta.platform == ""
    assert [(t.name, t.datatype, t.shape) for t in meta.inputs] == [("INPUT0", "INT64", [-1])]
    assert [(t.name, t.datatype, t.shape) for t in meta.outputs] == [("OUTPUT0", "INT64", [-1])]


def test_model_metadata_of_unknown_model_is_model_not_found(face: str, url: str) -> None:
    with pytest.raises(ModelNotFoundError, match="Model with name nope does not exist"):
        run(face, url, lambda c: c.get_model_metadata("nope"))


# -- inference ---------------------------------------------------------------------------------


def test_infer_fp32_is_exact(face: str, wire: tuple[str, dict[str, Any]]) -> None:
    url, options = wire
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    result = run(
        face, url, lambda c: c.infer("add_one", {"INPUT0": x}, request_id="r-7"), **options
    )
    out = result.as_numpy("OUTPUT0")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x + np.float32(1))
    assert result.model_name == "add_one"
    assert result.id == "r-7"
    assert result.output_names == ["OUTPUT0"]


def test_infer_int64_keeps_values_beyond_float_precision(
    face: str, wire: tuple[str, dict[str, Any]]
) -> None:
    url, options = wire
    x = np.array([2**53 + 1, -7, 0, 2**61 + 3], dtype=np.int64)
    result = run(face, url, lambda c: c.infer("times_two", {"INPUT0": x}), **options)
    out = result.as_numpy("OUTPUT0")
    assert out.dtype == np.int64
    assert out.tolist() == [2 * int(v) for v in x]


def test_infer_bytes_round_trips_exact_values(face: str, wire: tuple[str, dict[str, Any]]) -> None:
    url, options = wire
    values = [b"hello", "w\u00f6rld".encode(), b"", b"a\x00b"]
    x = np.array(values, dtype=np.object_)
    result = run(face, url, lambda c: c.infer("upper", {"INPUT0": x}), **options)
    out = result.as_numpy("OUTPUT0")
    assert out.shape == (4,)
    assert list(out) == [v.upper() for v in values]


def test_python_data_takes_its_datatype_from_kserve_metadata(
    face: str, wire: tuple[str, dict[str, Any]]
) -> None:
    # Plain ints would default to INT64; add_one's metadata says FP32 (the model rejects INT64).
    url, options = wire
    result = run(face, url, lambda c: c.infer("add_one", {"INPUT0": [[1, 2, 3, 4]]}), **options)
    out = result.as_numpy("OUTPUT0")
    assert out.dtype == np.float32
    assert out.tolist() == [[2.0, 3.0, 4.0, 5.0]]


@pytest.mark.parametrize(
    ("client_binary", "call_binary", "expect_binary"),
    [
        (None, None, False),  # KServe does not list binary_tensor_data: nbinfer sends JSON
        (True, None, True),
        (False, None, False),
        (None, True, True),
        (True, False, False),
    ],
)
def test_http_binary_or_json_is_what_kserve_answers_with(
    face: str,
    kserve: Peer,
    client_binary: bool | None,
    call_binary: bool | None,
    expect_binary: bool,
) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    result = run(
        face,
        kserve.http_url,
        lambda c: c.infer("add_one", {"INPUT0": x}, binary=call_binary),
        binary=client_binary,
    )
    header = _header(result, "inference-header-content-length")
    assert (header is not None) == expect_binary, result.headers
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + 1)


# -- errors ------------------------------------------------------------------------------------


def test_infer_on_unknown_model_is_model_not_found_with_kserve_message(face: str, url: str) -> None:
    x = np.zeros((1, 4), np.float32)
    with pytest.raises(ModelNotFoundError, match="Model with name nope does not exist") as info:
        run(face, url, lambda c: c.infer("nope", {"INPUT0": x}))
    assert info.value.status == 404


def test_wrong_input_name_is_remote_invalid_input(face: str, url: str) -> None:
    inputs = [InferInput("X", "FP32", [1, 4], np.zeros((1, 4), np.float32))]
    with pytest.raises(RemoteInvalidInputError) as info:
        run(face, url, lambda c: c.infer("add_one", inputs))
    assert info.value.status == 400
    assert "model 'add_one' expects one input INPUT0, got ['X']" in info.value.message


def test_wrong_datatype_is_remote_invalid_input(face: str, url: str) -> None:
    x = np.ones((1, 4), np.int32)
    with pytest.raises(RemoteInvalidInputError) as info:
        run(face, url, lambda c: c.infer("add_one", {"INPUT0": x}))
    assert info.value.status == 400
    assert "model 'add_one' expects INPUT0 as FP32, got INT32" in info.value.message


def test_model_raising_is_inference_error(face: str, url: str) -> None:
    x = np.ones(2, np.float32)
    with pytest.raises(InferenceError) as info:
        run(face, url, lambda c: c.infer("broken", {"INPUT0": x}))
    assert info.value.status == 500
    if url.startswith("http"):
        assert info.value.message == f"ValueError : {MAGIC_ERROR}"
    else:  # KServe's gRPC interceptor hides unexpected errors behind a fixed INTERNAL message
        assert info.value.message == "Internal server error"


def test_kserve_inference_error_maps_per_protocol(face: str, url: str) -> None:
    # KServe answers its own InferenceError with HTTP 500 but gRPC INVALID_ARGUMENT.
    x = np.ones(2, np.float32)
    expected: type[NbinferError]
    expected, status = (
        (InferenceError, 500) if url.startswith("http") else (RemoteInvalidInputError, 400)
    )
    with pytest.raises(expected) as info:
        run(face, url, lambda c: c.infer("refusing", {"INPUT0": x}))
    assert getattr(info.value, "status", None) == status
    assert REFUSAL in info.value.message


# -- KServe v1 ---------------------------------------------------------------------------------


def test_v1_predict_over_http(face: str, kserve: Peer) -> None:
    predictions = run(face, kserve.http_url, lambda c: c.predict("add_one", [[1, 2, 3, 4.5]]))
    assert predictions == [[2.0, 3.0, 4.0, 5.5]]


def test_v1_predict_on_unknown_model_is_model_not_found(face: str, kserve: Peer) -> None:
    with pytest.raises(ModelNotFoundError, match="Model with name nope does not exist"):
        run(face, kserve.http_url, lambda c: c.predict("nope", [[1, 2, 3, 4]]))


def test_v1_predict_over_grpc_is_refused_locally(face: str, kserve: Peer) -> None:
    with pytest.raises(NbinferError, match="REST only"):
        run(face, kserve.grpc_url, lambda c: c.predict("add_one", [[1, 2, 3, 4]]))


# -- edges of the peer -------------------------------------------------------------------------


def test_empty_tensor_round_trips(face: str, wire: tuple[str, dict[str, Any]]) -> None:
    url, options = wire
    if url.startswith("http") and not options["binary"]:
        pytest.skip(
            "KServe 0.21 cannot answer an empty tensor in JSON (its response fails validation)"
        )
    x = np.zeros(0, np.int64)
    result = run(face, url, lambda c: c.infer("times_two", {"INPUT0": x}), **options)
    out = result.as_numpy("OUTPUT0")
    assert out.shape == (0,)
    assert out.dtype == np.int64


def test_non_utf8_bytes_round_trip_over_grpc(face: str, kserve: Peer) -> None:
    values = [b"\xff\xfe", b"ok"]
    x = np.array(values, dtype=np.object_)
    result = run(face, kserve.grpc_url, lambda c: c.infer("upper", {"INPUT0": x}))
    assert list(result.as_numpy("OUTPUT0")) == [b"\xff\xfe", b"OK"]


def test_grpc_request_over_kserve_message_limit_is_payload_too_large_not_retried(
    face: str, kserve: Peer
) -> None:
    # KServe caps gRPC messages at 8 MiB unless raised; the request is 8 MiB of tensor + framing.
    x = np.ones((1 << 19, 4), np.float32)
    with pytest.raises(PayloadTooLargeError, match="larger than max") as info:
        run(face, kserve.grpc_url, lambda c: c.infer("add_one", {"INPUT0": x}, retry=True))
    assert info.value.status == 413
    assert info.value.context.get("grpc_code") == "RESOURCE_EXHAUSTED"
