"""Heavy request work off the event loop, and caps on what a stranger can make the server hold.

Issue 25, items 6 and 8: each test reproduces the attack against a real server on 127.0.0.1
(raw sockets where the attack needs them) and shows that it is now refused, bounded, and that
other clients are answered meanwhile. "Off the loop" is shown structurally (a probe answered
before the heavy request completes), never with a tight timing.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

from nbinfer import Client
from nbinfer.errors import InvalidInputError, QueueFullError
from nbinfer.protocol.grpc import SERVICE_NAME, pb
from nbinfer.server.launcher import LocalServer
from nbinfer.server.sequence import DEFAULT_MAX_SEQUENCES, SequenceManager, parse_sequence
from tests.rawhttp import read_message

MiB = 1 << 20
#: Generous bound on server memory growth under a bomb that would inflate to 256 MiB.
BOMB_RSS_BOUND_MB = 96


def _status_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


def _address(server: LocalServer) -> tuple[str, int]:
    host, port = server.http_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _gzip(size: int) -> bytes:
    """``size`` zero bytes, gzip-compressed (about 1000:1)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    parts = [c.compress(block) for _ in range(size // MiB)]
    parts.append(c.flush())
    return b"".join(parts)


def _post_head(path: str, length: int, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def _read_response(sock: socket.socket, timeout: float = 60.0) -> tuple[int, bytes]:
    """Status and body of one HTTP response (Content-Length framed)."""
    sock.settimeout(timeout)
    message = read_message(sock)
    if message is None:
        raise AssertionError("connection closed before a response")
    head, body, _ = message
    return int(head.split()[1]), body


def _add_sub_body() -> dict[str, Any]:
    return {
        "inputs": [
            {"name": n, "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16}
            for n in ("INPUT0", "INPUT1")
        ]
    }


def _add_sub_ok(server: LocalServer) -> None:
    r = httpx.post(f"{server.http_url}/v2/models/add_sub/infer", json=_add_sub_body(), timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [2.0] * 16


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer(
        demo=True,
        device="cpu",
        max_request_bytes=16 * MiB,
        limits={"max_sequences": 50, "max_inflight_bytes": 40 * MiB},
        auth_token=None,
    )
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


# -- compression bombs ---------------------------------------------------------------------------
def test_gzip_bomb_is_refused_with_413_and_never_inflates_past_the_limit() -> None:
    """A 256 KiB body that inflates to 256 MiB: 413 naming the limit, peak RSS bounded."""
    bomb = _gzip(256 * MiB)
    assert len(bomb) < 400_000
    with LocalServer(demo=True, device="cpu", max_request_bytes=16 * MiB, auth_token=None) as srv:
        assert srv.pid is not None
        _add_sub_ok(srv)
        peak_before = _status_mb(srv.pid, "VmHWM")
        for _ in range(3):  # back to back
            r = httpx.post(
                f"{srv.http_url}/v2/models/add_sub/infer",
                content=bomb,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
                timeout=60,
            )
            assert r.status_code == 413, r.text
            message = r.json()["error"]
            assert str(16 * MiB) in message and "--max-request-bytes" in message
        # the peak resident size of the whole server process: the bomb was never inflated
        # beyond the limit (16 MiB, plus the 1 MiB step), let alone to its 256 MiB
        assert _status_mb(srv.pid, "VmHWM") - peak_before < BOMB_RSS_BOUND_MB
        _add_sub_ok(srv)


def test_a_json_body_past_max_json_bytes_is_refused_unread_and_binary_data_is_not() -> None:
    """A JSON body is parsed whole, holding the GIL every other request waits for (~1 ms per
    MB, valid or not): it is capped by --max-json-bytes (64 MiB by default, tritonserver's
    --http-max-input-size), refused from its Content-Length before a byte is read; binary
    tensor data of the same size is read; a load's uploads count on top, as base64."""
    with LocalServer(
        demo=True,
        device="cpu",
        auth_token=None,
        limits={"max_json_bytes": MiB},
        model_limits={"max_upload_bytes": 3 * MiB},
    ) as srv:
        for path, size, named in (
            ("/v2/models/add_sub/infer", 2 * MiB, b"--max-json-bytes: a JSON body is parsed"),
            ("/v1/models/iris:predict", 2 * MiB, b"--max-json-bytes"),
            ("/v2/repository/models/x/load", MiB + 4 * MiB + 1, b"4/3 of --max-upload-bytes"),
        ):
            with socket.create_connection(_address(srv)) as sock:
                sock.sendall(_post_head(path, size))  # announced, never sent
                status, body = _read_response(sock, timeout=10)
            assert status == 413 and named in body, (path, body)
        # the same size as binary tensor data is read (and decoded: its shape is refused)
        x = np.ones((1, MiB // 2), np.float32)
        with Client(srv.http_url) as client, pytest.raises(InvalidInputError, match="shape"):
            client.infer("add_sub", {"INPUT0": x, "INPUT1": x})
        # a compressed JSON body stops where it inflates past the cap
        r = httpx.post(
            f"{srv.http_url}/v2/models/add_sub/infer",
            content=_gzip(4 * MiB),
            headers={"content-encoding": "gzip", "content-type": "application/json"},
        )
        assert r.status_code == 413 and "--max-json-bytes" in r.json()["error"]
        # a load within its allowance is read and decoded (not an ONNX file: 400)
        files = {"file:1/model.onnx": base64.b64encode(bytes(2 * MiB)).decode()}
        r = httpx.post(f"{srv.http_url}/v2/repository/models/x/load", json={"parameters": files})
        assert r.status_code == 400 and "x" in r.json()["error"], r.text
        _add_sub_ok(srv)


def test_other_clients_are_answered_while_a_large_legal_body_inflates() -> None:
    """A legal compressed body inflating to 240 MiB does not hold the event loop (binary
    tensor data: a JSON body stops at --max-json-bytes, 64 MiB)."""
    packed = _gzip(240 * MiB)
    with LocalServer(demo=True, device="cpu", auth_token=None) as srv:  # the default 256 MiB limit
        big = socket.create_connection(_address(srv))
        probes: list[float] = []
        try:
            big.sendall(
                _post_head(
                    "/v2/models/add_sub/infer",
                    len(packed),
                    "Content-Encoding: gzip\r\nInference-Header-Content-Length: 0\r\n",
                )
                + packed
            )
            done = threading.Event()
            result: list[tuple[int, bytes]] = []

            def wait_big() -> None:
                result.append(_read_response(big, timeout=120))
                done.set()

            waiter = threading.Thread(target=wait_big)
            waiter.start()
            with httpx.Client(base_url=srv.http_url, timeout=60) as probe:
                while not done.is_set():
                    r = probe.get("/v2/health/ready")
                    assert r.status_code == 200
                    if not done.is_set():
                        probes.append(time.monotonic())
                    done.wait(0.02)  # a probe every 20 ms, not a loop taking the CPU it probes
            waiter.join()
        finally:
            big.close()
        # it was decoded (raw binary data for a model of two inputs: 400), after the probes
        status, body = result[0]
        assert status == 400, body
        assert b"exactly one input" in body
        assert probes, "no other request was answered while the body inflated"
        _add_sub_ok(srv)


def test_unsupported_content_encoding_is_400_naming_it(server: LocalServer) -> None:
    r = httpx.post(
        f"{server.http_url}/v2/models/add_sub/infer",
        content=b"abc",
        headers={"Content-Encoding": "br"},
    )
    assert r.status_code == 400
    assert "'br'" in r.json()["error"]


def test_gzip_request_within_the_limit_is_served(server: LocalServer) -> None:
    import orjson

    raw = orjson.dumps(_add_sub_body())
    for level_wbits in (31, 15, -15):  # gzip, zlib, raw deflate
        c = zlib.compressobj(6, zlib.DEFLATED, level_wbits)
        packed = c.compress(raw) + c.flush()
        enc = "gzip" if level_wbits == 31 else "deflate"
        r = httpx.post(
            f"{server.http_url}/v2/models/add_sub/infer",
            content=packed,
            headers={"Content-Encoding": enc, "Content-Type": "application/json"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == [2.0] * 16


# -- parameters ----------------------------------------------------------------------------------
def _raw_infer(server: LocalServer, message: bytes, timeout: float = 60) -> Any:
    with grpc.insecure_channel(
        server.grpc_address, options=[("grpc.max_send_message_length", 64 * MiB)]
    ) as channel:
        call = channel.unary_unary(f"/{SERVICE_NAME}/ModelInfer")
        return call(message, timeout=timeout)


def test_500k_grpc_parameters_are_refused_naming_the_limit(server: LocalServer) -> None:
    msg = pb.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        tensor = msg.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        tensor.contents.fp32_contents.extend([1.0] * 16)
    for i in range(500_000):
        msg.parameters[f"p{i}"].string_param = "x"
    data = msg.SerializeToString()
    assert 4 * MiB < len(data) < 16 * MiB
    with pytest.raises(grpc.RpcError) as info:
        _raw_infer(server, data)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "more than the server's limit of 1000" in info.value.details() or (
        "more than 1000 parameters" in info.value.details()
    )
    assert "--max-parameters" in info.value.details()
    # a small message (not scanned first) is refused by the same limit, with its count
    small = pb.ModelInferRequest(model_name="add_sub")
    for i in range(1001):
        small.parameters[f"p{i}"].bool_param = True
    with pytest.raises(grpc.RpcError) as info:
        _raw_infer(server, small.SerializeToString())
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "1001 parameters" in info.value.details()
    # the same over HTTP JSON
    body = _add_sub_body()
    body["parameters"] = {f"p{i}": 1 for i in range(5000)}
    r = httpx.post(f"{server.http_url}/v2/models/add_sub/infer", json=body)
    assert r.status_code == 400
    assert "--max-parameters" in r.json()["error"]
    # a request at the limit is served on both transports
    body["parameters"] = {f"p{i}": 1 for i in range(1000)}
    r = httpx.post(f"{server.http_url}/v2/models/add_sub/infer", json=body)
    assert r.status_code == 200, r.text
    msg.parameters.clear()
    for i in range(1000):
        msg.parameters[f"p{i}"].string_param = "x"
    reply = pb.ModelInferResponse.FromString(_raw_infer(server, msg.SerializeToString()))
    assert reply.model_name == "add_sub"


def test_parameter_bombs_back_to_back_do_not_freeze_other_clients(server: LocalServer) -> None:
    """600k parameters took ~4 s of the event loop each; now they are refused unparsed.

    Generous bound: no liveness probe waits 1.5 s while five bombs are sent back to back.
    """
    msg = pb.ModelInferRequest(model_name="add_sub")
    for i in range(600_000):
        msg.parameters[f"k{i}"].int64_param = i
    data = msg.SerializeToString()
    done = threading.Event()
    errors: list[grpc.RpcError] = []

    def bombs() -> None:
        try:
            for _ in range(5):
                try:
                    _raw_infer(server, data)
                except grpc.RpcError as exc:
                    errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=bombs)
    waits: list[float] = []
    with httpx.Client(base_url=server.http_url, timeout=60) as probe:
        thread.start()
        while not done.is_set():
            t0 = time.monotonic()
            assert probe.get("/v2/health/live").status_code == 200
            waits.append(time.monotonic() - t0)
            done.wait(0.02)  # a probe every 20 ms (a freeze is 1.5 s), not a busy loop
    thread.join()
    assert len(errors) == 5
    assert {e.code() for e in errors} == {grpc.StatusCode.INVALID_ARGUMENT}
    assert all("--max-parameters" in e.details() for e in errors)
    assert max(waits) < 1.5, f"a probe waited {max(waits):.2f} s"


# -- sequences -----------------------------------------------------------------------------------
def _start(client: httpx.Client, seq: Any, value: int = 1, **flags: Any) -> httpx.Response:
    body = {
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1], "data": [value]}],
        "parameters": {"sequence_id": seq, **flags},
    }
    return client.post("/v2/models/accumulate/infer", json=body)


def test_open_sequences_are_capped_and_the_open_ones_keep_working(server: LocalServer) -> None:
    """The server's cap is 50: the 51st start and every later one is refused with 503."""
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        started = []
        refused = []
        for i in range(1, 201):
            r = _start(client, 10_000 + i, sequence_start=True)
            (started if r.status_code == 200 else refused).append(r)
        assert len(started) == 50
        assert len(refused) == 150
        assert {r.status_code for r in refused} == {503}
        message = refused[0].json()["error"]
        assert "50" in message and "--max-sequences" in message
        # gRPC: RESOURCE_EXHAUSTED
        grpc_client = tg.InferenceServerClient(server.grpc_address)
        try:
            tensor = tg.InferInput("INPUT", [1], "INT32")
            tensor.set_data_from_numpy(np.array([1], np.int32))
            with pytest.raises(InferenceServerException) as info:
                grpc_client.infer("accumulate", [tensor], sequence_id=99_999, sequence_start=True)
            assert "RESOURCE_EXHAUSTED" in str(info.value.status())
            assert "--max-sequences" in str(info.value)
        finally:
            grpc_client.close()
        # the open sequences still work, and ending one makes room for a new one
        r = _start(client, 10_005, value=41)
        assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [42]
        r = _start(client, 10_005, sequence_end=True)
        assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [43]
        assert _start(client, 20_000, sequence_start=True).status_code == 200
        assert _start(client, 20_001, sequence_start=True).status_code == 503
        # leave room for the other tests
        for i in [*range(1, 201), 0]:
            if i != 5:
                _start(client, 10_000 + i if i else 20_000, sequence_end=True)


def test_twenty_thousand_sequences_stop_at_the_default_cap() -> None:
    """The reproduced attack (20,000 open sequences) against the default cap of 1,000."""
    import asyncio

    async def attack() -> tuple[int, int]:
        manager = SequenceManager()
        opened = refused = 0
        for i in range(20_000):
            try:
                manager.acquire("accumulate", "1", i + 1, start=True, idle_us=60_000_000)
                opened += 1
            except QueueFullError as exc:
                assert "--max-sequences" in exc.message
                refused += 1
        assert len(manager) == DEFAULT_MAX_SEQUENCES
        await manager.close()
        return opened, refused

    assert asyncio.run(attack()) == (DEFAULT_MAX_SEQUENCES, 20_000 - DEFAULT_MAX_SEQUENCES)


def test_five_megabyte_sequence_id_is_refused(server: LocalServer) -> None:
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        r = _start(client, "s" * (5 * MiB), sequence_start=True)
        assert r.status_code == 400
        message = r.json()["error"]
        assert "256" in message and "--max-sequence-id-bytes" in message
        assert len(message) < 1000  # the id is not echoed back
        ok = "s" * 256
        assert _start(client, ok, sequence_start=True).status_code == 200
        assert _start(client, ok, sequence_end=True).json()["outputs"][0]["data"] == [2]
    with pytest.raises(InvalidInputError, match="257 bytes"):
        parse_sequence({"sequence_id": "é" * 128 + "x"}, "m")


# -- bytes in flight -----------------------------------------------------------------------------
def test_concurrent_large_bodies_are_bounded_by_the_inflight_cap(server: LocalServer) -> None:
    """Four 15 MB bodies at once against a 40 MiB in-flight cap: two wait their turn."""
    assert server.pid is not None
    size = 15 * 1000 * 1000
    rss_before = _status_mb(server.pid, "VmRSS")
    conns = [socket.create_connection(_address(server)) for _ in range(4)]
    try:
        for conn in conns:  # headers only: each body is announced, none is sent yet
            conn.sendall(_post_head("/v2/models/add_sub/infer", size))
        # two fit (30 MB of 40 MiB); the other two are refused before their bodies are sent
        refused = []
        for conn in conns[2:]:
            status, body = _read_response(conn, timeout=30)
            refused.append((status, body))
        for status, body in refused:
            assert status == 503, body
            assert b"--max-inflight-bytes" in body and str(40 * MiB).encode() in body
        # another client's small request is answered meanwhile, on both transports
        _add_sub_ok(server)
        client = tg.InferenceServerClient(server.grpc_address)
        try:
            inputs = [tg.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
            for tensor in inputs:
                tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
            assert client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[2.0] * 16]
            # a large gRPC message does not fit in what is left: RESOURCE_EXHAUSTED
            big = [tg.InferInput(n, [1, 1792 * 1024], "FP32") for n in ("INPUT0", "INPUT1")]
            for tensor in big:
                tensor.set_data_from_numpy(np.zeros((1, 1792 * 1024), np.float32))
            with pytest.raises(InferenceServerException) as info:
                client.infer("add_sub", big)
            assert "RESOURCE_EXHAUSTED" in str(info.value.status())
            assert "--max-inflight-bytes" in str(info.value)
        finally:
            client.close()
        # the two admitted bodies arrive and are answered (zeros are not JSON: 400)
        chunk = bytes(MiB)
        for conn in conns[:2]:
            left = size
            while left:
                n = min(left, len(chunk))
                conn.sendall(chunk[:n])
                left -= n
        for conn in conns[:2]:
            status, body = _read_response(conn, timeout=60)
            assert status == 400, body
        # memory: what the two admitted bodies need, not four (generous: 3x the cap)
        assert _status_mb(server.pid, "VmRSS") - rss_before < 3 * 40
    finally:
        for conn in conns:
            conn.close()
    # the budget was given back: a body of the cap's size fits again
    _add_sub_ok(server)
    r = httpx.post(
        f"{server.http_url}/v2/models/add_sub/infer",
        content=b" " * (15 * MiB) + b"{}",
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 400 and "inputs" in r.text


def test_large_bodies_read_into_one_buffer_decode_as_before(server: LocalServer) -> None:
    """Bodies of 1 MiB and more are read into one buffer: JSON (with NaN), binary, gzip."""
    rows = 12_000  # ~1.9 MB of JSON
    data = [1.0] * (rows * 16)
    data[5] = float("nan")
    body = (
        '{"inputs": ['
        + ", ".join(
            f'{{"name": "{n}", "datatype": "FP32", "shape": [{rows}, 16], "data": '
            + str(data).replace("nan", "NaN")
            + "}"
            for n in ("INPUT0", "INPUT1")
        )
        + '], "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": true}}]}'
    ).encode()
    assert len(body) > MiB
    for content, headers in (
        (body, {}),
        (zlib.compress(body), {"Content-Encoding": "deflate"}),
    ):
        r = httpx.post(
            f"{server.http_url}/v2/models/add_sub/infer",
            content=content,
            headers={"Content-Type": "application/json", **headers},
            timeout=60,
        )
        assert r.status_code == 200, r.text[:300]
        header_length = int(r.headers["inference-header-content-length"])
        out = np.frombuffer(r.content[header_length:], np.float32).reshape(rows, 16)
        assert np.isnan(out[0, 5]) and out[0, 4] == 2.0 and out[-1, -1] == 2.0
