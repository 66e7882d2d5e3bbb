"""Request limits of the embedded server (issue 19, part B): headers, timeouts, connections, input.

Real servers on 127.0.0.1, with and without a token: the HTTP limits apply before
authentication, so both must hold them.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.grpc import SERVICE_NAME, pb
from nbinfer.server.launcher import LocalServer

TOKEN = "limits-token"
#: Documented bound (docs/security.md): RSS growth under 10 x 50 MB unfinished headers.
RSS_BOUND_MB = 64

_LIMITS = {
    "header_timeout": 1,
    "body_timeout": 1,
    "keep_alive_timeout": 1,
    "max_header_bytes": 16384,
    "max_header_count": 40,
}


@pytest.fixture(scope="module", params=[None, TOKEN], ids=["no-token", "token"])
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, device="cpu", auth_token=request.param, limits=_LIMITS)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _headers(server: LocalServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.auth_token}"} if server.auth_token else {}


def _address(server: LocalServer) -> tuple[str, int]:
    host, port = server.http_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _add_sub(
    shape0: list[int], shape1: list[int], parameters: dict[str, Any] | None = None
) -> dict[str, Any]:
    def tensor(name: str, shape: list[int]) -> dict[str, Any]:
        return {
            "name": name,
            "datatype": "FP32",
            "shape": shape,
            "data": [1.0] * int(np.prod(shape)),
        }

    body: dict[str, Any] = {"inputs": [tensor("INPUT0", shape0), tensor("INPUT1", shape1)]}
    if parameters is not None:
        body["parameters"] = parameters
    return body


def _grpc_add_sub(
    server: LocalServer, shape0: list[int], shape1: list[int], **parameters: Any
) -> Any:
    client = tg.InferenceServerClient(server.grpc_address)
    try:
        inputs = [tg.InferInput("INPUT0", shape0, "FP32"), tg.InferInput("INPUT1", shape1, "FP32")]
        inputs[0].set_data_from_numpy(np.ones(shape0, np.float32))
        inputs[1].set_data_from_numpy(np.ones(shape1, np.float32))
        headers = {k.lower(): v for k, v in _headers(server).items()}
        return client.infer("add_sub", inputs, headers=headers, parameters=parameters or None)
    finally:
        client.close()


# -- headers -----------------------------------------------------------------------------------
def test_unfinished_50mb_headers_get_431_and_memory_stays_bounded(server: LocalServer) -> None:
    assert server.pid is not None
    before = _rss_mb(server.pid)
    socks = []
    for _ in range(10):
        s = socket.create_connection(_address(server))
        s.sendall(b"GET /v2/models/add_sub HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
        socks.append(s)
    chunk = b"a" * (1 << 20)
    answers = []
    for s in socks:
        try:
            for _ in range(50):
                s.sendall(chunk)
        except OSError:
            pass  # the server closed the connection after answering 431
        answers.append(_answer(s))
        s.close()
    assert all(a.startswith(b"HTTP/1.1 431 ") for a in answers), answers
    assert _rss_mb(server.pid) - before < RSS_BOUND_MB
    # and the server still answers
    r = httpx.get(f"{server.http_url}/v2/models/add_sub", headers=_headers(server))
    assert r.status_code == 200


def test_too_many_header_fields_get_431(server: LocalServer) -> None:
    many = {f"X-H{i}": "v" for i in range(60)}
    r = httpx.get(f"{server.http_url}/v2/health/live", headers=many)
    assert r.status_code == 431
    assert "header fields" in r.json()["error"]


def test_headers_within_the_limits_are_served(server: LocalServer) -> None:
    headers = {**_headers(server), "X-Pad": "p" * 8000, **{f"X-H{i}": "v" for i in range(20)}}
    r = httpx.post(
        f"{server.http_url}/v2/models/add_sub/infer",
        json=_add_sub([1, 16], [1, 16]),
        headers=headers,
    )
    assert r.status_code == 200, r.text


# -- timeouts ------------------------------------------------------------------------------------
def test_slowloris_headers_get_408_after_the_header_timeout(server: LocalServer) -> None:
    with socket.create_connection(_address(server)) as s:
        s.sendall(b"GET /v2 HTTP/1.1\r\nHost: localhost\r\n")
        t0 = time.monotonic()
        for _ in range(3):  # keep trickling: the clock runs from the request's first byte
            time.sleep(0.3)
            s.sendall(b"X-Slow: 1\r\n")
        answer = _answer(s)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert 0.8 < time.monotonic() - t0 < 3.0


def test_silent_new_connection_is_closed_after_the_header_timeout(server: LocalServer) -> None:
    with socket.create_connection(_address(server)) as s:
        t0 = time.monotonic()
        answer = _answer(s)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert time.monotonic() - t0 < 3.0


def test_declared_body_that_never_comes_gets_408(server: LocalServer) -> None:
    with socket.create_connection(_address(server)) as s:
        s.sendall(  # binary tensor data (a JSON body this size is refused unread: 413)
            b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: localhost\r\n"
            b"Inference-Header-Content-Length: 100\r\nContent-Length: 200000000\r\n\r\nx"
        )
        t0 = time.monotonic()
        answer = _answer(s)
    if server.auth_token:  # refused before its body is read; then closed all the same
        assert answer.startswith(b"HTTP/1.1 401 "), answer
    else:
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"request body too slow" in answer
    assert answer.count(b"HTTP/1.1 ") == 1
    assert time.monotonic() - t0 < 3.5


def test_body_dripping_below_the_minimum_rate_gets_408(server: LocalServer) -> None:
    with socket.create_connection(_address(server)) as s:
        head = b"POST /v2/repository/index HTTP/1.1\r\nHost: localhost\r\n"
        s.sendall(head + b"Content-Length: 1000\r\n\r\n")
        t0 = time.monotonic()
        try:
            for _ in range(20):
                s.sendall(b"{")
                time.sleep(0.2)
        except OSError:
            pass
        answer = _answer(s)
    assert answer.startswith(b"HTTP/1.1 401 " if server.auth_token else b"HTTP/1.1 408 "), answer
    assert answer.count(b"HTTP/1.1 ") == 1
    assert time.monotonic() - t0 < 4.5


def test_idle_keep_alive_connection_closes_after_its_timeout(server: LocalServer) -> None:
    with socket.create_connection(_address(server)) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
        s.settimeout(5)
        first = s.recv(4096)
        while b"\r\n\r\n" not in first:
            first += s.recv(4096)
        head, body = first.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200 ")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(body) < length:  # the whole first response, however it was segmented
            body += s.recv(4096)
        t0 = time.monotonic()
        assert _answer(s) == b""  # closed without another response
    assert time.monotonic() - t0 < 3.0


def test_large_body_sent_promptly_is_served(server: LocalServer) -> None:
    body = _add_sub([4096, 16], [4096, 16])
    r = httpx.post(
        f"{server.http_url}/v2/models/add_sub/infer",
        json=body,
        headers=_headers(server),
        timeout=30,
    )
    assert r.status_code == 200, r.text


# -- input validation ----------------------------------------------------------------------------
@pytest.mark.parametrize(("shape0", "shape1"), [([2, 16], [1, 16]), ([3, 16], [2, 16])])
def test_inputs_disagreeing_on_batch_size_are_400_over_http(
    server: LocalServer, shape0: list[int], shape1: list[int]
) -> None:
    r = httpx.post(
        f"{server.http_url}/v2/models/add_sub/infer",
        json=_add_sub(shape0, shape1),
        headers=_headers(server),
    )
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert "'INPUT0' has " + str(shape0[0]) in message
    assert "'INPUT1' has " + str(shape1[0]) in message


@pytest.mark.parametrize(("shape0", "shape1"), [([2, 16], [1, 16]), ([3, 16], [2, 16])])
def test_inputs_disagreeing_on_batch_size_are_invalid_argument_over_grpc(
    server: LocalServer, shape0: list[int], shape1: list[int]
) -> None:
    with pytest.raises(InferenceServerException) as info:
        _grpc_add_sub(server, shape0, shape1)
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "'INPUT1' has " + str(shape1[0]) in info.value.message()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("timeout", "abc"),
        ("timeout", -5),
        ("timeout", 1.5),
        ("priority", "high"),
        ("binary_data_output", "maybe"),
    ],
)
def test_malformed_request_parameters_are_400_naming_them(
    server: LocalServer, key: str, value: Any
) -> None:
    r = httpx.post(
        f"{server.http_url}/v2/models/add_sub/infer",
        json=_add_sub([1, 16], [1, 16], {key: value}),
        headers=_headers(server),
    )
    assert r.status_code == 400, r.text
    assert repr(key) in r.json()["error"]


def test_malformed_timeout_parameter_is_invalid_argument_over_grpc(server: LocalServer) -> None:
    # tritonclient refuses to send 'timeout' itself: a raw ModelInferRequest
    request = pb.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        tensor.contents.fp32_contents.extend([1.0] * 16)
    request.parameters["timeout"].string_param = "abc"
    metadata = tuple((k.lower(), v) for k, v in _headers(server).items())
    with grpc.insecure_channel(server.grpc_address) as channel:
        call = channel.unary_unary(
            f"/{SERVICE_NAME}/ModelInfer", request_serializer=pb.ModelInferRequest.SerializeToString
        )
        with pytest.raises(grpc.RpcError) as info:
            call(request, metadata=metadata, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'timeout'" in (info.value.details() or "")


def test_garbage_protobuf_on_model_infer_is_invalid_argument(server: LocalServer) -> None:
    metadata = tuple((k.lower(), v) for k, v in _headers(server).items())
    with grpc.insecure_channel(server.grpc_address) as channel:
        call = channel.unary_unary(f"/{SERVICE_NAME}/ModelInfer")
        with pytest.raises(grpc.RpcError) as info:
            call(b"\xff\xff\xff\xff garbage", metadata=metadata, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed ModelInferRequest" in (info.value.details() or "")
        metadata_call = channel.unary_unary(f"/{SERVICE_NAME}/ModelMetadata")
        with pytest.raises(grpc.RpcError) as info:
            metadata_call(b"\xff\xff", metadata=metadata, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # and a well-formed request still works on the same channel
        ok = channel.unary_unary(
            f"/{SERVICE_NAME}/ServerLive",
            request_serializer=pb.ServerLiveRequest.SerializeToString,
            response_deserializer=pb.ServerLiveResponse.FromString,
        )
        assert ok(pb.ServerLiveRequest(), timeout=10).live


def test_unknown_limit_name_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="header_timeout"):
        LocalServer(limits={"header_timout": 1}).command()


# -- file descriptors -----------------------------------------------------------------------------
_LIMITED = (
    "import resource, sys\n"
    "_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
    "from nbinfer.server.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


class _FdLimitedServer(LocalServer):
    """The server process with ``ulimit -n 256``."""

    def command(self) -> list[str]:
        cmd = super().command()
        assert cmd[1:3] == ["-m", "nbinfer.server"]
        return [cmd[0], "-c", _LIMITED, *cmd[3:]]


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
def test_half_sent_connections_beyond_the_fd_limit_do_not_lock_clients_out(
    token: str | None,
) -> None:
    srv = _FdLimitedServer(demo=True, device="cpu", auth_token=token)
    srv.start()
    socks: list[socket.socket] = []
    try:
        assert srv.pid is not None
        address = _address(srv)
        for _ in range(300):
            s = socket.create_connection(address)
            s.sendall(b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: localhost\r\nX-Half: ")
            socks.append(s)
        time.sleep(0.5)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = httpx.post(
            f"{srv.http_url}/v2/models/add_sub/infer",
            json=_add_sub([1, 16], [1, 16]),
            headers=headers,
            timeout=10,
        )
        assert r.status_code == 200, r.text
        result = _grpc_add_sub(srv, [1, 16], [1, 16])
        assert result.as_numpy("OUTPUT0").tolist() == [[2.0] * 16]
        assert srv.running, srv.logs(tail=20)
    finally:
        for s in socks:
            s.close()
        srv.stop()


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("reads /proc and RLIMIT_NOFILE semantics of Linux")
