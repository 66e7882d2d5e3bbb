"""nbinfer's generate routes: auth and web screen like every route, cancellation in the stats.

The client-facing behaviour (both routes, both transports, datatypes, errors, cancellation seen
by the model) is pinned against nbinfer and tritonserver alike in
``tests/peers/test_triton_generate.py``; here what only nbinfer's server promises.
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nbinfer import Client
from nbinfer.errors import UnauthenticatedError
from nbinfer.server.launcher import LocalServer
from tests.waiting import wait_for_text, wait_until

REPO = (Path(__file__).parents[1] / "peers" / "generate_repo").resolve()
TOKEN = "generate-test-token"


#: A native model with the datatypes only nbinfer maps from JSON (Triton refuses them there).
HALF = """
import numpy as np
from nbinfer import Model

class HalfEcho(Model):
    name = "half_echo"
    inputs = (("h", "FP16", [-1]), ("bf", "BF16", [-1]))
    outputs = (("h_out", "FP16", [-1]), ("bf_out", "BF16", [-1]), ("raw", "BYTES", [1]))

    def predict(self, inputs, context):
        raw = np.array([b"\\xff" if context.parameters.get("bad") else b"ok"], dtype=object)
        return {"h_out": inputs["h"] * 2, "bf_out": inputs["bf"] * 2, "raw": raw}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    repo = tmp_path_factory.mktemp("generate-repo")
    shutil.copytree(REPO, repo, dirs_exist_ok=True)
    (repo / "half_echo" / "1").mkdir(parents=True)
    (repo / "half_echo" / "1" / "model.py").write_text(HALF)
    local = LocalServer(model_repository=repo, demo=False, device="cpu", auth_token=TOKEN)
    local.start()
    yield local
    local.stop()


def _auth() -> dict[str, str]:
    return {"authorization": f"Bearer {TOKEN}"}


def test_generate_routes_need_the_token(server: LocalServer) -> None:
    body = {"text_input": "a", "max_tokens": 1}
    for route in ("generate", "generate_stream"):
        url = f"{server.http_url}/v2/models/gen_words/{route}"
        assert httpx.post(url, json=body).status_code == 401
    wrong = {"authorization": "Bearer wrong"}
    with Client(server.http_url, headers=wrong) as c, pytest.raises(UnauthenticatedError):
        list(c.generate_stream("gen_words", text_input="a", max_tokens=1))


def test_generate_stream_is_refused_to_a_web_page(server: LocalServer) -> None:
    url = f"{server.http_url}/v2/models/gen_words/generate_stream"
    headers = {**_auth(), "origin": "https://evil.example", "sec-fetch-site": "cross-site"}
    reply = httpx.post(url, json={"text_input": "a", "max_tokens": 1}, headers=headers)
    assert reply.status_code == 403


def test_generate_stream_frames_server_sent_events(server: LocalServer) -> None:
    url = f"{server.http_url}/v2/models/gen_words/versions/1/generate_stream"
    reply = httpx.post(url, json={"text_input": "a b", "max_tokens": 2}, headers=_auth())
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert reply.text == (
        'data: {"model_name":"gen_words","model_version":"1","text_output":"a ","index":0}\n\n'
        'data: {"model_name":"gen_words","model_version":"1","text_output":"b ","index":1}\n\n'
    )


def test_a_bad_field_is_a_json_400_naming_it(server: LocalServer) -> None:
    url = f"{server.http_url}/v2/models/gen_words/generate_stream"
    reply = httpx.post(url, json={"text_input": "a", "max_tokens": 1.5}, headers=_auth())
    assert reply.status_code == 400
    assert reply.headers["content-type"] == "application/json"
    assert "max_tokens" in reply.json()["error"]
    reply = httpx.post(url, json={"text_input": "a", "max_tokens": 1, "p": [1]}, headers=_auth())
    assert reply.status_code == 400 and "'p'" in reply.json()["error"]


def _cancelled(server: LocalServer) -> int:
    with Client(server.http_url) as c:
        stats = c.get_inference_statistics("gen_words")["model_stats"][0]
    return int(stats["response_stats"].get("0", {}).get("cancel", {}).get("count", 0))


def _assert_cancelled_once(server: LocalServer, record: Path, before: int) -> None:
    """The model recorded a cancel long before its last token, and the server counted one."""
    assert int(wait_for_text(record, 20, "the model's record of the cancellation")) < 100000
    wait_until(lambda: _cancelled(server) != before, 20, "the server's cancel count")
    assert _cancelled(server) == before + 1


def test_a_client_disconnect_counts_as_cancelled_and_the_model_sees_it(
    server: LocalServer, tmp_path: Path
) -> None:
    before = _cancelled(server)
    record = tmp_path / "cancelled.txt"
    fields = {"text_input": "w", "max_tokens": 100000, "delay_ms": 20, "cancel_file": str(record)}
    body = json.dumps(fields).encode()
    port = int(server.http_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            b"POST /v2/models/gen_words/generate_stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        received = b""
        while received.count(b"data: ") < 2:
            received += sock.recv(65536)
        assert b"200 OK" in received
    _assert_cancelled_once(server, record, before)


def test_a_grpc_generation_closed_early_counts_as_cancelled_too(
    server: LocalServer, tmp_path: Path
) -> None:
    before = _cancelled(server)
    record = tmp_path / "cancelled.txt"
    with Client(server.grpc_url) as client:
        stream = client.generate_stream(
            "gen_words", text_input="w", max_tokens=100000, delay_ms=20, cancel_file=str(record)
        )
        assert [next(stream)["index"], next(stream)["index"]] == [0, 1]
        stream.close()  # type: ignore[attr-defined]
    _assert_cancelled_once(server, record, before)


def test_the_generate_routes_are_bounded_like_every_route(tmp_path: Path) -> None:
    """--max-request-bytes, and the inflate limit for a gzip bomb, hold on both generate routes
    (413 naming the option, before anything runs); the server then answers as before."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    limit = 64 * 1024
    with LocalServer(
        model_repository=repo, demo=False, device="cpu", auth_token=None, max_request_bytes=limit
    ) as small:
        big = json.dumps({"text_input": "w " * limit, "max_tokens": 1}).encode()
        bomb = gzip.compress(json.dumps({"text_input": "w", "pad": "0" * (4 * limit)}).encode())
        assert len(bomb) < limit  # small on the wire, four times the limit inflated
        for route in ("generate", "generate_stream"):
            url = f"{small.http_url}/v2/models/gen_words/{route}"
            for body, headers in ((big, {}), (bomb, {"content-encoding": "gzip"})):
                reply = httpx.post(url, content=body, headers=headers)
                assert reply.status_code == 413, reply.text
                assert "--max-request-bytes" in reply.json()["error"]
            reply = httpx.post(url, json={"text_input": "a", "max_tokens": 1})  # one response
            assert reply.status_code == 200 and '"text_output":"a "' in reply.text, reply.text


def test_the_openapi_document_lists_the_generate_routes(server: LocalServer) -> None:
    doc = httpx.get(f"{server.http_url}/v2/openapi.json", headers=_auth()).json()
    assert "/v2/models/{model}/generate" in doc["paths"]
    assert "/v2/models/{model}/versions/{version}/generate_stream" in doc["paths"]


def test_fp16_and_bf16_map_from_numbers_and_a_non_utf8_output_is_an_error_event(
    server: LocalServer,
) -> None:
    url = f"{server.http_url}/v2/models/half_echo/generate_stream"
    reply = httpx.post(url, json={"h": [0.5], "bf": 2.5, "bad": True}, headers=_auth())
    assert reply.status_code == 200
    events = [line for line in reply.text.split("\n\n") if line]
    assert len(events) == 1 and events[0].startswith('data: {"error"')
    assert "raw" in events[0] and "UTF-8" in events[0]


def test_generate_answers_fp16_and_bf16_as_numbers(server: LocalServer) -> None:
    with Client(server.http_url, auth=TOKEN) as c:
        out = c.generate("half_echo", h=[0.5, 1.5], bf=2.5, parameters={"bad": False})
    assert out == {
        "model_name": "half_echo",
        "model_version": "1",
        "h_out": [1.0, 3.0],
        "bf_out": 5.0,
        "raw": "ok",
    }
