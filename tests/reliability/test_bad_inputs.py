"""The bad-input corpus: every case in ``bad_inputs.json`` over HTTP or gRPC, then a health check.

Each case names its transport, the request, the expected HTTP status or gRPC code, and a word the
error message must contain. After every case the server must still be ready and answer a correct
inference over both transports: no case may crash, hang or poison the server.

A case is one JSON object per line, with an ``id``, a ``transport``, a ``kind`` (one of
``reliability_report.KINDS``, the rows of docs/reliability.md's table) and, for a known open bug,
``xfail`` (the reason: the case then runs as a strict xfail until the bug is fixed):

* HTTP: ``method``, ``path``, ``body`` (text) or ``body_b64``, ``headers``; ``nest: N`` wraps
  ``body`` in N brackets; ``header_count`` / ``header_bytes`` add filler headers;
  ``content_length`` announces a body that is never sent; ``raw_headers`` adds a header line as is.
* gRPC: ``rpc`` (a method of ``inference.GRPCInferenceService``) with ``request`` (protobuf JSON)
  or ``raw_b64`` (bytes sent as the message, unparsed).

Grow it from every bug found: add the request that showed the bug as one more line.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
import reliability_report
from google.protobuf import json_format

from nbinfer.protocol._generated import grpc_service_pb2 as pb
from nbinfer.server.launcher import LocalServer

CORPUS = json.loads((Path(__file__).parent / "bad_inputs.json").read_text())
SERVICE = "/inference.GRPCInferenceService/"


def test_corpus_holds_at_least_100_cases_over_both_transports() -> None:
    transports = [case["transport"] for case in CORPUS]
    assert len(CORPUS) >= 100 and transports.count("grpc") >= 14
    assert len({case["id"] for case in CORPUS}) == len(CORPUS)


def test_every_case_has_a_kind_of_the_page() -> None:
    kinds = {case["id"]: case.get("kind") for case in CORPUS}
    unknown = {id_: kind for id_, kind in kinds.items() if kind not in reliability_report.KINDS}
    assert not unknown, f"cases of no kind in reliability_report.KINDS: {unknown}"


def _http_body(case: dict[str, Any]) -> bytes:
    if "body_b64" in case:
        return base64.b64decode(case["body_b64"])
    body = (case.get("body") or "").encode()
    depth = case.get("nest", 0)
    return b"[" * depth + body + b"]" * depth


def _raw_http(host: str, port: int, head: bytes) -> tuple[int, str]:
    """Send a hand-made request head (no body) and read the status line and the rest."""
    with socket.create_connection((host, port), timeout=20) as sock:
        sock.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data.decode("latin-1")


def send_http(url: str, case: dict[str, Any]) -> tuple[int, str]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    if any(k in case for k in ("header_count", "header_bytes", "content_length", "raw_headers")):
        lines = [f"{case['method']} {case['path']} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"X-Filler-{i}: x" for i in range(case.get("header_count", 0))]
        if "header_bytes" in case:
            lines.append("X-Big: " + "a" * case["header_bytes"])
        if "content_length" in case:
            lines.append(f"Content-Length: {case['content_length']}")
        if "raw_headers" in case:
            lines.append(case["raw_headers"])
        return _raw_http(host, port, ("\r\n".join(lines) + "\r\n\r\n").encode())
    conn = http.client.HTTPConnection(host, port, timeout=20)
    try:
        body = _http_body(case) if case["method"] != "GET" else None
        conn.request(case["method"], case["path"], body=body, headers=case.get("headers", {}))
        answer = conn.getresponse()
        return answer.status, answer.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def send_grpc(channel: grpc.Channel, case: dict[str, Any]) -> tuple[str, str]:
    if "raw_b64" in case:
        payload = base64.b64decode(case["raw_b64"])
    else:
        message = getattr(pb, f"{case['rpc']}Request")()
        payload = json_format.ParseDict(case["request"], message).SerializeToString()
    call: Callable[..., bytes] = channel.unary_unary(SERVICE + case["rpc"])
    try:
        call(payload, timeout=20)
    except grpc.RpcError as exc:
        return exc.code().name, exc.details() or ""
    return "OK", ""


@pytest.fixture(scope="module")
def channel(server: LocalServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.grpc_address) as chan:
        yield chan


def _param(case: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(reason=case["xfail"], strict=True)] if "xfail" in case else []
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CORPUS])
def test_bad_input_is_refused_and_the_server_stays_healthy(
    server: LocalServer,
    channel: grpc.Channel,
    assert_healthy: Callable[[], None],
    case: dict[str, Any],
) -> None:
    if case["transport"] == "http":
        status, message = send_http(server.http_url, case)
        assert status == case["status"], message[:500]
    else:
        code, message = send_grpc(channel, case)
        assert code == case["code"], message[:500]
    assert case["word"] in message, message[:500]
    assert_healthy()
