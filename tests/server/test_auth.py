"""Token authentication of the embedded server and the refusal to expose it without one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

from nbinfer import Client
from nbinfer.errors import ServerStartError, UnauthenticatedError
from nbinfer.server.auth import authorized, check_exposure, is_loopback
from nbinfer.server.launcher import LocalServer

TOKEN = "s3cret-token-for-tests"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, device="cpu", auth_token=TOKEN).start()
    try:
        yield srv
    finally:
        srv.stop()


def _add_sub_body() -> dict[str, object]:
    row = [1.0] * 16
    return {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": row},
            {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": row},
        ]
    }


# -- HTTP ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
    ids=["none", "wrong", "no-scheme", "basic"],
)
def test_http_without_the_right_bearer_token_is_401_json(
    server: LocalServer, headers: dict[str, str]
) -> None:
    base = server.http_url
    for method, path, body in (
        ("GET", "/v2/health/ready", None),
        ("GET", "/v2", None),
        ("GET", "/v2/models/add_sub", None),
        ("POST", "/v2/models/add_sub/infer", _add_sub_body()),
        ("GET", "/v2/systemsharedmemory/status", None),
    ):
        r = httpx.request(method, base + path, json=body, headers=headers)
        assert r.status_code == 401, path
        assert "Bearer" in r.json()["error"]
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_http_with_the_token_is_served(server: LocalServer) -> None:
    base = server.http_url
    assert httpx.get(base + "/v2/health/ready", headers=BEARER).status_code == 200
    r = httpx.post(base + "/v2/models/add_sub/infer", json=_add_sub_body(), headers=BEARER)
    assert r.status_code == 200
    assert r.json()["outputs"][0]["data"] == [2.0] * 16
    lower = {"authorization": f"bearer {TOKEN}"}  # the scheme is case-insensitive
    assert httpx.get(base + "/v2", headers=lower).status_code == 200


def test_liveness_stays_open_without_a_token(server: LocalServer) -> None:
    assert httpx.get(server.http_url + "/v2/health/live").status_code == 200
    c = tg.InferenceServerClient(server.grpc_address)
    try:
        assert c.is_server_live()
    finally:
        c.close()


# -- gRPC ---------------------------------------------------------------------------------------


def _grpc_inputs() -> list[tg.InferInput]:
    a = np.ones((1, 16), np.float32)
    inputs = [tg.InferInput("INPUT0", [1, 16], "FP32"), tg.InferInput("INPUT1", [1, 16], "FP32")]
    for inp in inputs:
        inp.set_data_from_numpy(a)
    return inputs


def test_grpc_without_the_token_is_unauthenticated(server: LocalServer) -> None:
    c = tg.InferenceServerClient(server.grpc_address)
    try:
        for call in (
            lambda: c.is_server_ready(),
            lambda: c.infer("add_sub", _grpc_inputs()),
            lambda: c.infer("add_sub", _grpc_inputs(), headers={"authorization": "Bearer no"}),
            lambda: c.get_system_shared_memory_status(),
        ):
            with pytest.raises(InferenceServerException) as info:
                call()
            assert info.value.status() == "StatusCode.UNAUTHENTICATED"
    finally:
        c.close()


def test_grpc_with_the_token_is_served(server: LocalServer) -> None:
    c = tg.InferenceServerClient(server.grpc_address)
    headers = {"authorization": f"Bearer {TOKEN}"}
    try:
        assert c.is_server_ready(headers=headers)
        out = c.infer("add_sub", _grpc_inputs(), headers=headers).as_numpy("OUTPUT0")
        np.testing.assert_array_equal(out, np.full((1, 16), 2, np.float32))
    finally:
        c.close()


def test_grpc_stream_needs_the_token(server: LocalServer) -> None:
    with grpc.insecure_channel(server.grpc_address) as channel:
        from nbinfer.protocol.grpc import pb

        call = channel.stream_stream(
            "/inference.GRPCInferenceService/ModelStreamInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelStreamInferResponse.FromString,
        )
        request = pb.ModelInferRequest(model_name="echo", id="x")
        t = request.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, 1])
        t.contents.bytes_contents.append(b"hi")
        with pytest.raises(grpc.RpcError) as info:
            list(call(iter([request]), timeout=10))
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        replies = list(
            call(iter([request]), timeout=10, metadata=(("authorization", f"Bearer {TOKEN}"),))
        )
        assert replies[0].infer_response.id == "x"


# -- nbinfer's own client -----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_nbinfer_client_with_auth_or_handed_the_token_is_served_and_a_wrong_one_refused(
    server: LocalServer, protocol: str
) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    x = {"INPUT0": np.ones((1, 16), np.float32), "INPUT1": np.ones((1, 16), np.float32)}
    with Client(url, auth=TOKEN) as client:
        np.testing.assert_array_equal(client.infer("add_sub", x)["OUTPUT1"], np.zeros((1, 16)))
    # an nbinfer client without auth in this process is handed the server's token (the registry
    # of LocalServer): the client without the token is one with credentials of its own
    with Client(url, retries=0) as handed:
        np.testing.assert_array_equal(handed.infer("add_sub", x)["OUTPUT1"], np.zeros((1, 16)))
    with Client(url, auth="not-" + TOKEN, retries=0) as client, pytest.raises(UnauthenticatedError):
        client.infer("add_sub", x)


# -- exposure guard -----------------------------------------------------------------------------


def test_loopback_detection() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com", ""):
        assert not is_loopback(host), host


def test_exposure_guard_allows_tokens_loopback_or_explicit_insecurity() -> None:
    check_exposure("0.0.0.0", token="t", insecure_no_auth=False)
    check_exposure("127.0.0.1", token=None, insecure_no_auth=False)
    check_exposure("0.0.0.0", token=None, insecure_no_auth=True)
    with pytest.raises(ServerStartError, match="--insecure-no-auth"):
        check_exposure("0.0.0.0", token=None, insecure_no_auth=False)


def test_authorized_compares_bearer_tokens() -> None:
    assert authorized(f"Bearer {TOKEN}".encode(), TOKEN)
    assert authorized(f"Bearer {TOKEN}", TOKEN)
    assert not authorized(b"Bearer " + TOKEN.encode()[:-1], TOKEN)
    assert not authorized(None, TOKEN)
    assert not authorized(TOKEN, TOKEN)


def test_local_server_refuses_a_public_host_without_a_token() -> None:
    assert LocalServer(demo=False, host="0.0.0.0").auth_token is not None  # the default: a token
    server = LocalServer(demo=False, host="0.0.0.0", auth_token=None)
    with pytest.raises(ServerStartError, match=r"refusing to bind '0\.0\.0\.0' without auth"):
        server.start()
    assert server.pid is None  # refused before spawning anything


def test_server_process_refuses_a_public_host_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NBINFER_AUTH_TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", "nbinfer.server", "--host", "0.0.0.0", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode != 0
    assert "refusing to bind '0.0.0.0' without authentication" in proc.stderr
    assert "NBINFER READY" not in proc.stdout
