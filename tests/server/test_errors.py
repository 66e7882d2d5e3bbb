"""Errors map to the right HTTP status / gRPC code, name the problem, and leave the server up."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

from nbinfer import Client
from nbinfer.errors import (
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    RemoteUnsupportedError,
    ServerError,
    ServerUnavailableError,
    UnsupportedError,
    error_for_grpc_code,
    error_for_status,
    grpc_code_of,
    status_of,
)
from nbinfer.protocol.grpc import pb
from nbinfer.server.launcher import LocalServer

IHCL = "Inference-Header-Content-Length"


@pytest.fixture()
def http(http_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=http_url, timeout=30) as c:
        yield c
        # After every error the server still answers.
        assert c.get("/v2/health/ready").status_code == 200


@pytest.fixture(scope="module")
def gclient(grpc_address: str) -> Iterator[Any]:
    c = tg.InferenceServerClient(grpc_address)
    yield c
    assert c.is_server_ready()
    c.close()


def _add_sub_json(**override: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
        ]
    }
    body.update(override)
    return body


def _error(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    message = r.json()["error"]
    assert isinstance(message, str) and message
    return message


def _grpc_inputs(
    shape: list[int], datatype: str = "FP32", names: tuple[str, ...] = ("INPUT0", "INPUT1")
) -> list[Any]:
    out = []
    for n in names:
        inp = tg.InferInput(n, shape, datatype)
        inp.set_data_from_numpy(
            np.zeros(shape, dtype=np.float32 if datatype == "FP32" else np.int32)
        )
        out.append(inp)
    return out


def _grpc_error(fn: Any) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as info:
        fn()
    return str(info.value.status()), info.value.message()


# -- unknown things -----------------------------------------------------------------------------


def test_unknown_model_is_404_and_not_found(http: httpx.Client, gclient: Any) -> None:
    assert "no_such_model" in _error(
        http.post("/v2/models/no_such_model/infer", json=_add_sub_json()), 404
    )
    assert "no_such_model" in _error(http.get("/v2/models/no_such_model"), 404)
    # readiness: 400 as Triton answers it; nbinfer's client reads the header as not-found
    ready = http.get("/v2/models/no_such_model/ready")
    assert "no_such_model" in _error(ready, 400) and ready.headers["nbinfer-model-not-found"]
    code, msg = _grpc_error(lambda: gclient.infer("no_such_model", _grpc_inputs([1, 16])))
    assert "NOT_FOUND" in code and "no_such_model" in msg
    code, msg = _grpc_error(lambda: gclient.get_model_metadata("no_such_model"))
    assert "NOT_FOUND" in code


def test_unknown_version_is_404(http: httpx.Client, gclient: Any) -> None:
    msg = _error(http.post("/v2/models/add_sub/versions/42/infer", json=_add_sub_json()), 404)
    assert "42" in msg
    code, msg = _grpc_error(
        lambda: gclient.infer("add_sub", _grpc_inputs([1, 16]), model_version="42")
    )
    assert "NOT_FOUND" in code and "42" in msg


def test_unknown_input_is_400_naming_it(http: httpx.Client, gclient: Any) -> None:
    body = _add_sub_json()
    body["inputs"][1]["name"] = "BOGUS"
    msg = _error(http.post("/v2/models/add_sub/infer", json=body), 400)
    assert "BOGUS" in msg
    code, msg = _grpc_error(
        lambda: gclient.infer("add_sub", _grpc_inputs([1, 16], names=("INPUT0", "BOGUS")))
    )
    assert "INVALID_ARGUMENT" in code and "BOGUS" in msg


def test_unknown_output_is_400_naming_it(http: httpx.Client, gclient: Any) -> None:
    msg = _error(
        http.post("/v2/models/add_sub/infer", json=_add_sub_json(outputs=[{"name": "NOPE"}])), 400
    )
    assert "NOPE" in msg
    code, msg = _grpc_error(
        lambda: gclient.infer(
            "add_sub", _grpc_inputs([1, 16]), outputs=[tg.InferRequestedOutput("NOPE")]
        )
    )
    assert "INVALID_ARGUMENT" in code and "NOPE" in msg


def test_wrong_shape_is_400_with_expected_and_actual(http: httpx.Client, gclient: Any) -> None:
    body = _add_sub_json()
    body["inputs"][0]["shape"] = [1, 4]
    body["inputs"][0]["data"] = [0.0] * 4
    msg = _error(http.post("/v2/models/add_sub/infer", json=body), 400)
    assert "INPUT0" in msg and "16" in msg and "4" in msg
    code, msg = _grpc_error(lambda: gclient.infer("add_sub", _grpc_inputs([1, 4])))
    assert "INVALID_ARGUMENT" in code and "INPUT0" in msg


def test_data_count_not_matching_shape_is_400(http: httpx.Client) -> None:
    body = _add_sub_json()
    body["inputs"][0]["data"] = [0.0] * 15
    msg = _error(http.post("/v2/models/add_sub/infer", json=body), 400)
    assert "INPUT0" in msg


def test_wrong_datatype_is_400(http: httpx.Client, gclient: Any) -> None:
    body = _add_sub_json()
    body["inputs"][0]["datatype"] = "INT32"
    body["inputs"][0]["data"] = [0] * 16
    msg = _error(http.post("/v2/models/add_sub/infer", json=body), 400)
    assert "INPUT0" in msg and "FP32" in msg and "INT32" in msg
    code, msg = _grpc_error(lambda: gclient.infer("add_sub", _grpc_inputs([1, 16], "INT32")))
    assert "INVALID_ARGUMENT" in code and "FP32" in msg


def test_unknown_datatype_is_400(http: httpx.Client) -> None:
    body = _add_sub_json()
    body["inputs"][0]["datatype"] = "FP128"
    assert "FP128" in _error(http.post("/v2/models/add_sub/infer", json=body), 400)


# -- malformed bodies ---------------------------------------------------------------------------


def test_binary_size_mismatch_is_400(http: httpx.Client) -> None:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 60},
                },
                {
                    "name": "INPUT1",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 64},
                },
            ]
        }
    ).encode()
    r = http.post(
        "/v2/models/add_sub/infer", content=header + b"\x00" * 124, headers={IHCL: str(len(header))}
    )
    msg = _error(r, 400)
    assert "INPUT0" in msg and "64" in msg and "60" in msg


def test_binary_section_shorter_than_declared_is_400(http: httpx.Client) -> None:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 64},
                },
                {
                    "name": "INPUT1",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 64},
                },
            ]
        }
    ).encode()
    r = http.post(
        "/v2/models/add_sub/infer", content=header + b"\x00" * 100, headers={IHCL: str(len(header))}
    )
    _error(r, 400)


def test_header_length_beyond_body_is_400(http: httpx.Client) -> None:
    body = json.dumps(_add_sub_json()).encode()
    r = http.post("/v2/models/add_sub/infer", content=body, headers={IHCL: str(len(body) + 10)})
    msg = _error(r, 400)
    assert "Inference-Header-Content-Length" in msg


def test_malformed_json_is_400(http: httpx.Client) -> None:
    r = http.post(
        "/v2/models/add_sub/infer",
        content=b'{"inputs": [',
        headers={"Content-Type": "application/json"},
    )
    assert "JSON" in _error(r, 400) or "json" in _error(r, 400)
    r = http.post("/v2/repository/index", content=b"{nope")
    _error(r, 400)


def test_json_that_is_not_an_infer_request_is_400(http: httpx.Client) -> None:
    _error(http.post("/v2/models/add_sub/infer", json=[1, 2, 3]), 400)
    _error(http.post("/v2/models/add_sub/infer", json={"inputs": [{"name": "INPUT0"}]}), 400)


def test_truncated_body_is_answered_or_dropped_and_server_survives(http_url: str) -> None:
    """A client that sends less than its Content-Length and hangs up must not hurt the server."""
    host, port = http_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b'{"inputs": ['
        )
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        try:
            reply = s.recv(4096)
        except OSError:
            reply = b""
    assert reply == b"" or reply.startswith(b"HTTP/1.1 4")
    assert httpx.get(http_url + "/v2/health/ready").status_code == 200


def test_bad_content_encoding_is_400(http: httpx.Client) -> None:
    r = http.post(
        "/v2/models/add_sub/infer",
        content=b"not gzip at all",
        headers={"Content-Encoding": "gzip"},
    )
    assert "gzip" in _error(r, 400)


# -- model failures --------------------------------------------------------------------------


def test_model_that_raises_is_500_with_its_message(http: httpx.Client, gclient: Any) -> None:
    body = {"inputs": [{"name": "X", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}]}
    msg = _error(http.post("/v2/models/failing/infer", json=body), 500)
    assert "boom" in msg and "failing" in msg
    inp = tg.InferInput("X", [2], "FP32")
    inp.set_data_from_numpy(np.zeros(2, dtype=np.float32))
    code, msg = _grpc_error(lambda: gclient.infer("failing", [inp]))
    assert "INTERNAL" in code and "boom" in msg


def test_unloaded_model_is_not_ready(http: httpx.Client) -> None:
    assert http.post("/v2/repository/models/identity_int64/unload").status_code == 200
    try:
        r = http.get("/v2/models/identity_int64/ready")
        assert r.status_code != 200
        body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT64", "data": [1]}]}
        r = http.post("/v2/models/identity_int64/infer", json=body)
        assert r.status_code in (400, 404, 503)
        assert "identity_int64" in r.json()["error"]
    finally:
        assert http.post("/v2/repository/models/identity_int64/load").status_code == 200


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_inference_on_an_unloaded_model_is_model_not_ready(
    server: LocalServer, protocol: str
) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    x = np.ones((1, 1), np.int16)
    with Client(url) as client:
        client.unload_model("identity_int16")
        try:
            with pytest.raises(ModelNotReadyError, match=r"identity_int16.*not ready") as info:
                client.infer("identity_int16", {"INPUT0": x})
            assert not isinstance(info.value, ModelLoadError | ServerUnavailableError)
            assert info.value.status == 503
        finally:
            client.load_model("identity_int16")
        assert client.infer("identity_int16", {"INPUT0": x}).as_numpy("OUTPUT0").tolist() == [[1]]


_LOAD_RAISES = """
from nbinfer.server.model import Model


class LoadRaises(Model):
    name = "load_raises"
    inputs = [("X", "FP32", [-1])]
    outputs = [("Y", "FP32", [-1])]

    def load(self):
        raise OSError("weights.bin is truncated at byte 42")

    def predict(self, inputs):
        return inputs["X"]
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_whose_load_raises_is_a_load_error_with_its_own_text(
    server: LocalServer, protocol: str
) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    with Client(url) as client:
        with pytest.raises(ModelLoadError) as info:
            client.load_model("load_raises", files={"1/model.py": _LOAD_RAISES.encode()})
        message = str(info.value)
        assert "load_raises" in message
        assert "OSError: weights.bin is truncated at byte 42" in message
        assert isinstance(info.value, ModelNotReadyError) and info.value.status == 400
        assert client.is_server_ready()


def test_loading_an_unknown_model_is_an_error_naming_it(http: httpx.Client) -> None:
    r = http.post("/v2/repository/models/never_heard_of/load", json={})
    assert r.status_code in (400, 404)
    assert "never_heard_of" in r.json()["error"]


def test_grpc_stream_error_is_inline_and_stream_continues(grpc_address: str) -> None:
    good = pb.ModelInferRequest(model_name="echo", id="ok")
    t = good.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, 1])
    t.contents.bytes_contents.append(b"x")
    bad = pb.ModelInferRequest(model_name="no_such_model", id="bad")
    with grpc.insecure_channel(grpc_address) as channel:
        call = channel.stream_stream(
            "/inference.GRPCInferenceService/ModelStreamInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelStreamInferResponse.FromString,
        )
        replies = list(call(iter([good, bad, good]), timeout=10))
    assert [r.error_message == "" for r in replies] == [True, False, True]
    assert "no_such_model" in replies[1].error_message
    assert replies[2].infer_response.id == "ok"


def test_unknown_grpc_method_is_unimplemented(grpc_address: str) -> None:
    with grpc.insecure_channel(grpc_address) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/NoSuchRpc")
        with pytest.raises(grpc.RpcError) as info:
            call(b"", timeout=5)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- size limits --------------------------------------------------------------------------------

LIMIT = 1 << 20


@pytest.fixture(scope="module")
def small_server() -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, max_request_bytes=LIMIT, auth_token=None).start()
    yield srv
    srv.stop()


def test_body_above_the_limit_is_413(small_server: LocalServer) -> None:
    n = (LIMIT // 4) + 1024
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, n],
                    "datatype": "BYTES",
                    "parameters": {"binary_data_size": 4 * n},
                }
            ]
        }
    ).encode()
    with httpx.Client(base_url=small_server.http_url, timeout=30) as c:
        r = c.post(
            "/v2/models/echo/infer",
            content=header + b"\x00" * (4 * n),
            headers={IHCL: str(len(header))},
        )
        msg = _error(r, 413)
        assert str(LIMIT) in msg
        assert c.get("/v2/health/ready").status_code == 200


def test_chunked_body_above_the_limit_is_413(small_server: LocalServer) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"\x00" * 65536

    with httpx.Client(base_url=small_server.http_url, timeout=30) as c:
        r = c.post("/v2/models/echo/infer", content=chunks(), headers={IHCL: "10"})
        assert r.status_code == 413
        assert c.get("/v2/health/ready").status_code == 200


def test_gzip_bomb_above_the_limit_is_413(small_server: LocalServer) -> None:
    import gzip

    bomb = gzip.compress(b"\x00" * (4 * LIMIT))
    with httpx.Client(base_url=small_server.http_url, timeout=30) as c:
        r = c.post("/v2/models/echo/infer", content=bomb, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413
        assert c.get("/v2/health/ready").status_code == 200


def test_grpc_message_above_the_limit_is_resource_exhausted(small_server: LocalServer) -> None:
    c = tg.InferenceServerClient(small_server.grpc_address)
    try:
        arr = np.zeros((1, LIMIT), dtype=np.float32)  # 4 MiB > 1 MiB
        inp = tg.InferInput("INPUT0", [1, LIMIT], "FP32")
        inp.set_data_from_numpy(arr)
        code, _ = _grpc_error(lambda: c.infer("iris", [inp]))
        assert "RESOURCE_EXHAUSTED" in code
        assert c.is_server_ready()
    finally:
        c.close()


def test_default_server_refuses_code_uploads_with_400_and_keeps_serving() -> None:
    import base64

    from nbinfer.server.launcher import LocalServer

    with LocalServer(demo=True, device="cpu", auth_token=None) as srv:
        body = {"parameters": {"file:1/model.py": base64.b64encode(b"import os").decode()}}
        r = httpx.post(f"{srv.http_url}/v2/repository/models/echo_code/load", json=body)
        assert r.status_code == 400
        assert "--allow-code-upload" in r.json()["error"]
        # under a serving demo model's name the replace rule refuses it first (issue 25)
        r = httpx.post(f"{srv.http_url}/v2/repository/models/echo/load", json=body)
        assert r.status_code == 403
        assert "--allow-model-replace" in r.json()["error"]
        assert httpx.get(f"{srv.http_url}/v2/health/ready").status_code == 200
        assert httpx.get(f"{srv.http_url}/v2/models/echo/ready").status_code == 200


# What peers answer for a model that is not ready / failed to load, as they word it (Triton
# 2.51 and KServe answers recorded from the real servers; see tests/peers/test_errors_on_peers.py).
NOT_READY_ANSWERS = [
    ("nbinfer", 503, "UNAVAILABLE", "model 'm' is not ready (UNAVAILABLE: unloaded)"),
    ("kserve", 503, "UNAVAILABLE", "Model with name m is not ready."),
    ("triton", 404, "NOT_FOUND", "Request for unknown model: 'm' has no available versions"),
    (
        "triton-version",
        503,
        "UNAVAILABLE",
        "Request for unknown model: 'm' version 1 is not at ready state",
    ),
]


@pytest.mark.parametrize(("peer", "status", "code", "message"), NOT_READY_ANSWERS)
def test_not_ready_is_recognised_from_every_peer_by_status_and_message(
    peer: str, status: int, code: str, message: str
) -> None:
    for error in (error_for_status(status, message), error_for_grpc_code(code, message)):
        assert type(error) is ModelNotReadyError, (peer, error)
        assert error.message == message


def test_unknown_model_busy_server_and_bad_input_keep_their_classes() -> None:
    unknown = "Request for unknown model: 'm' is not found"
    assert type(error_for_status(404, unknown)) is ModelNotFoundError
    assert type(error_for_grpc_code("NOT_FOUND", unknown)) is ModelNotFoundError
    assert type(error_for_status(503, "Server is not ready.")) is ServerUnavailableError
    assert type(error_for_grpc_code("UNAVAILABLE", "server overloaded")) is ServerUnavailableError
    assert isinstance(error_for_status(400, "input 'x': shape [2]"), InvalidInputError)


@pytest.mark.parametrize(
    "message",
    [
        "failed to load 'm': version 1: load() raised OSError: no weights",
        "failed to load model 'm': version 1: load() raised OSError: no weights",
        "load failed for model 'm': version 1 is at UNAVAILABLE state: Internal: OSError: no "
        "weights",
    ],
    ids=["nbinfer", "nbinfer-before-issue-26", "triton"],
)
def test_a_failed_load_is_a_load_error_keeping_the_models_text(message: str) -> None:
    for error in (error_for_status(400, message), error_for_grpc_code("INVALID_ARGUMENT", message)):
        assert type(error) is ModelLoadError
        assert "OSError: no weights" in str(error) and error.status == 400


def test_the_server_maps_load_errors_and_not_ready_onto_distinct_statuses() -> None:
    load = ModelLoadError("failed to load 'm': boom")
    assert (status_of(load), grpc_code_of(load)) == (400, "INVALID_ARGUMENT")
    ready = ModelNotReadyError("model 'm' is not ready (LOADING)")
    assert (status_of(ready), grpc_code_of(ready)) == (503, "UNAVAILABLE")


# -- a missing extension or route: one class on both transports and from every peer -------------

# How peers say "not here": HTTP 501 / gRPC UNIMPLEMENTED (Triton answers its UNSUPPORTED errors so,
# nbinfer its absent extensions), grpcio's own UNIMPLEMENTED "Method not found!" for an RPC the
# server does not register (KServe's gRPC server, MLServer), and a bare 404 for a route the HTTP
# router lacks: FastAPI's {"detail": "Not Found"} (KServe, MLServer), aiohttp's "404: Not Found",
# nbinfer's "no route for GET /x".
MISSING_ANSWERS = [
    ("nbinfer-http", 501, "tracing is not available in nbinfer (trace extension absent)"),
    ("nbinfer-route", 404, "no route for GET /v2/trace/setting"),
    ("fastapi", 404, "Not Found"),
    ("aiohttp", 404, "404: Not Found"),
    ("grpcio", "UNIMPLEMENTED", "Method not found!"),
    ("triton-grpc", "UNIMPLEMENTED", "the server does not support this request"),
]


@pytest.mark.parametrize(("peer", "status", "message"), MISSING_ANSWERS)
def test_a_missing_route_or_extension_is_unsupported_from_every_peer(
    peer: str, status: int | str, message: str
) -> None:
    if isinstance(status, int):
        error = error_for_status(status, message)
    else:
        error = error_for_grpc_code(status, message)
    assert type(error) is RemoteUnsupportedError, peer
    assert isinstance(error, UnsupportedError) and isinstance(error, ServerError)
    assert error.message == message
    assert error.status == (404 if status == 404 else 501)


def test_a_404_naming_a_model_stays_model_not_found() -> None:
    for message in (
        "Request for unknown model: 'm' is not found",  # Triton
        "Model with name m does not exist.",  # KServe
        "model 'm' not found",  # nbinfer
    ):
        assert type(error_for_status(404, message)) is ModelNotFoundError, message
        assert type(error_for_grpc_code("NOT_FOUND", message)) is ModelNotFoundError, message


def test_the_server_answers_unsupported_as_501_and_unimplemented() -> None:
    for error in (UnsupportedError("no tracing"), RemoteUnsupportedError("no tracing")):
        assert (status_of(error), grpc_code_of(error)) == (501, "UNIMPLEMENTED")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    ("call", "settings"),
    [
        ("update_trace_settings", {"trace_level": ["TIMESTAMPS"]}),
        ("update_log_settings", {"log_file": "/tmp/server.log"}),
    ],
)
def test_an_absent_extension_is_the_same_error_on_both_transports(
    http_url: str, grpc_url: str, protocol: str, call: str, settings: dict[str, Any]
) -> None:
    url = http_url if protocol == "http" else grpc_url
    with Client(url, protocol=protocol) as client:
        with pytest.raises(RemoteUnsupportedError) as info:
            getattr(client, call)(settings=settings)
        assert client.get_trace_settings()["trace_level"] == ["OFF"]  # still serving
    error = info.value
    assert isinstance(error, UnsupportedError) and error.status == 501
    assert error.message.startswith(f"{call}: the server at {client.url} ({protocol})")
    assert error.server == client.url and error.context["call"] == call
    assert error.context.get("grpc_code") == ("UNIMPLEMENTED" if protocol == "grpc" else None)
    cause = error.__cause__
    assert isinstance(cause, RemoteUnsupportedError) and cause.server == ""
    assert cause.message in error.message


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_unknown_model_on_an_extension_call_stays_model_not_found(
    http_url: str, grpc_url: str, protocol: str
) -> None:
    url = http_url if protocol == "http" else grpc_url
    with Client(url, protocol=protocol) as client, pytest.raises(ModelNotFoundError):
        client.get_inference_statistics("no_such_model")
