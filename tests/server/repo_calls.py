"""Raw repository / settings calls for the model-control and upload tests (HTTP and gRPC).

Each call returns what the wire said (an HTTP status and body, or a gRPC code and details), so a
test can pin the exact status of a refusal; ``answers_add_sub`` checks the demo ``add_sub`` with
tritonclient (HTTP and gRPC) and nbinfer's own client on both transports.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np

from nbinfer import Client
from nbinfer.protocol.grpc import pb
from nbinfer.server.launcher import LocalServer

_SERVICE = "/inference.GRPCInferenceService/"


def http(
    server: LocalServer, path: str, body: Any = None, *, method: str = "POST"
) -> tuple[int, str]:
    """One HTTP call; returns (status, body text)."""
    r = httpx.request(
        method,
        server.http_url + path,
        content=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    return r.status_code, r.text


def grpc_call(server: LocalServer, rpc: str, request: Any) -> tuple[grpc.StatusCode, str]:
    """One gRPC call; returns (code, details)."""
    reply_type = getattr(pb, type(request).__name__.replace("Request", "Response"))
    with grpc.insecure_channel(server.grpc_address) as channel:
        call = channel.unary_unary(
            _SERVICE + rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=reply_type.FromString,
        )
        try:
            call(request, timeout=60)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def http_load(
    server: LocalServer, name: str, files: dict[str, bytes] | None = None, config: Any = None
) -> tuple[int, str]:
    """``POST /v2/repository/models/<name>/load`` with ``file:`` uploads and a config."""
    params: dict[str, str] = {
        f"file:{k}": base64.b64encode(v).decode() for k, v in (files or {}).items()
    }
    if config is not None:
        params["config"] = config if isinstance(config, str) else json.dumps(config)
    return http(server, f"/v2/repository/models/{name}/load", {"parameters": params})


def grpc_load(
    server: LocalServer, name: str, files: dict[str, bytes] | None = None, config: Any = None
) -> tuple[grpc.StatusCode, str]:
    """``RepositoryModelLoad`` with ``file:`` uploads and a config."""
    req = pb.RepositoryModelLoadRequest(model_name=name)
    for key, content in (files or {}).items():
        req.parameters[f"file:{key}"].bytes_param = content
    if config is not None:
        text = config if isinstance(config, str) else json.dumps(config)
        req.parameters["config"].string_param = text
    return grpc_call(server, "RepositoryModelLoad", req)


def http_unload(server: LocalServer, name: str) -> tuple[int, str]:
    """``POST /v2/repository/models/<name>/unload``."""
    return http(server, f"/v2/repository/models/{name}/unload", {})


def grpc_unload(server: LocalServer, name: str) -> tuple[grpc.StatusCode, str]:
    """``RepositoryModelUnload``."""
    return grpc_call(
        server, "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name=name)
    )


def swapped_add_sub_onnx() -> bytes:
    """An ONNX ``add_sub`` with the same signature that answers the WRONG numbers.

    ``OUTPUT0 = INPUT0 - INPUT1`` and ``OUTPUT1 = INPUT0 + INPUT1`` (swapped): the attack of
    issue 25 item 3 (the same inputs and outputs, so every client keeps calling it).
    """
    from onnx import TensorProto, helper

    def io(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", 16])

    graph = helper.make_graph(
        [
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "add_sub",
        [io("INPUT0"), io("INPUT1")],
        [io("OUTPUT0"), io("OUTPUT1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


ONNX_CONFIG = {"platform": "onnxruntime_onnx", "max_batch_size": 0}
#: The line of the file outside the repository that an operator's link points to.
SECRET = "outside-secret-line"


def linked_repository(root: Path) -> tuple[Path, Path]:
    """``root/repo`` whose model ``labeled`` (the swapped ``add_sub``) holds the operator's link
    ``ext`` to ``root/outside``, a directory with ``secret.txt`` (:data:`SECRET`): issue 25
    item 7. Returns (repo, outside)."""
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    repo = root / "repo"
    (repo / "labeled" / "1").mkdir(parents=True)
    (repo / "labeled" / "1" / "model.onnx").write_bytes(swapped_add_sub_onnx())
    (repo / "labeled" / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
    )
    (repo / "labeled" / "ext").symlink_to(outside, target_is_directory=True)  # the operator's
    return repo, outside


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    return a, np.full((1, 16), 3.0, np.float32)


def answers_add_sub(server: LocalServer) -> list[str]:
    """Which clients get WRONG numbers from ``add_sub`` (empty: every client is right).

    Asks tritonclient over HTTP and gRPC and nbinfer's Client over HTTP and gRPC.
    """
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    a, b = _inputs()
    wrong: list[str] = []

    def check(who: str, out0: Any, out1: Any) -> None:
        if not (np.allclose(out0, a + b) and np.allclose(out1, a - b)):
            wrong.append(who)

    for who, mod, url in (
        ("tritonclient http", httpclient, server.http_url.removeprefix("http://")),
        ("tritonclient grpc", grpcclient, server.grpc_address),
    ):
        client: Any = mod.InferenceServerClient(url)
        inputs = [
            mod.InferInput("INPUT0", [1, 16], "FP32"),
            mod.InferInput("INPUT1", [1, 16], "FP32"),
        ]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer("add_sub", inputs)
        check(who, result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1"))
        client.close()
    for who, url in (
        ("nbinfer http", server.http_url),
        ("nbinfer grpc", server.grpc_url),
    ):
        with Client(url) as nb:
            res = nb.infer("add_sub", {"INPUT0": a, "INPUT1": b})
            check(who, res.as_numpy("OUTPUT0"), res.as_numpy("OUTPUT1"))
    return wrong
