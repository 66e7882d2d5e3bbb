"""Parity with what users port from (issue 17): KServe's and tritonclient's health checks, KServe
v1 routes, Triton's metric names, trace / log settings on both protocols, OVMS's encoded-image
forms, explain, headers in Model hooks and Triton decoupled Python models over the gRPC stream.

One server for the module: the shared test repository plus the models written below.
"""

from __future__ import annotations

import importlib.util
import json
import queue
import re
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from nbinfer.client import Client
from nbinfer.errors import ServerError
from nbinfer.protocol.rest import decode_response
from nbinfer.protocol.types import InferInput
from tests.children import python_json
from tests.ports import free_port
from tests.server.conftest import write_model, write_test_repository

_HEADERS_MODEL = """
from nbinfer.server.model import Model


class HeaderEcho(Model):
    name = "header_echo"
    inputs = [("X", "FP32", [-1])]
    outputs = [("USER", "BYTES", [1])]
    run_in_thread = False

    def predict(self, inputs, context):
        context.response_headers["x-served-for"] = context.headers.get("x-user", "nobody")
        return {"USER": [context.headers.get("x-user", "nobody").encode()]}
"""

# Triton's "repeat" pattern: execute() returns at once, a thread sends one response per element,
# then closes the stream with the final flag.
_DECOUPLED_MODEL = """
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()

            def send(values=values, sender=sender):
                for v in values:
                    out = pb_utils.Tensor("OUT", np.array([v * 10], dtype=np.int32))
                    sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

            threading.Thread(target=send).start()
        return None
"""

_DECOUPLED_CONFIG = """
name: "triton_repeat"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN", data_type: TYPE_INT32, dims: [ -1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def model_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = write_test_repository(tmp_path_factory.mktemp("repo"))
    write_model(repo, "header_echo", "1", textwrap.dedent(_HEADERS_MODEL))
    write_model(repo, "triton_repeat", "1", textwrap.dedent(_DECOUPLED_MODEL), _DECOUPLED_CONFIG)
    return repo


@pytest.fixture(scope="module")
def http(http_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=http_url, timeout=30) as client:
        yield client


# -- health and KServe v1 routes ----------------------------------------------------------------


def test_health_answers_carry_json_bodies_as_kserve_sends_them(http: httpx.Client) -> None:
    assert http.get("/v2/health/live").json() == {"live": True}
    assert http.get("/v2/health/ready").json() == {"ready": True}
    ready = http.get("/v2/models/add_sub_t/ready")
    assert ready.status_code == 200
    assert ready.json() == {"name": "add_sub_t", "ready": True}


def test_tritonclient_health_checks_accept_the_json_bodies(
    http_url: str, grpc_address: str
) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(http_url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("add_sub_t")
    gclient = grpcclient.InferenceServerClient(grpc_address)
    assert gclient.is_server_live() and gclient.is_server_ready()


def test_kserve_v1_root_and_model_list(http: httpx.Client) -> None:
    assert http.get("/").json() == {"status": "alive"}
    models = http.get("/v1/models").json()["models"]
    assert {"add_sub_t", "explained", "header_echo"} <= set(models)
    assert models == sorted(models)


# -- metrics ------------------------------------------------------------------------------------


def _metric(text: str, name: str, model: str) -> int:
    match = re.search(rf'^{name}{{model="{model}",version="1"}} (\d+)$', text, re.M)
    assert match is not None, f"{name} for {model} missing from:\n{text}"
    return int(match.group(1))


def test_metrics_use_tritons_names_and_count_successes_and_failures(
    http: httpx.Client, http_url: str
) -> None:
    before = http.get("/metrics").text
    with Client(http_url) as client:
        x = np.ones((2, 16), dtype=np.float32)
        for _ in range(3):
            client.infer("add_sub_t", {"INPUT0": x, "INPUT1": x})
        with pytest.raises(ServerError):
            client.infer("failing", {"X": np.ones(2, dtype=np.float32)})
    reply = http.get("/metrics")
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = reply.text
    assert "# TYPE nv_inference_request_success counter" in text

    def grew(name: str, model: str) -> int:
        old = _metric(before, name, model) if f'{name}{{model="{model}"' in before else 0
        return _metric(text, name, model) - old

    assert grew("nv_inference_request_success", "add_sub_t") == 3
    assert grew("nv_inference_count", "add_sub_t") == 3
    assert grew("nv_inference_exec_count", "add_sub_t") == 3
    assert grew("nv_inference_request_failure", "failing") == 1
    assert grew("nv_inference_request_failure", "add_sub_t") == 0
    for name in (
        "nv_inference_request_duration_us",
        "nv_inference_queue_duration_us",
        "nv_inference_compute_input_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_compute_output_duration_us",
    ):
        assert _metric(text, name, "add_sub_t") >= 0


# -- trace and log settings ---------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_trace_settings_answer_off_and_refuse_tracing_with_501(
    protocol: str, http_url: str, grpc_url: str
) -> None:
    with Client(http_url if protocol == "http" else grpc_url) as client:
        assert client.get_trace_settings()["trace_level"] == ["OFF"]
        assert client.get_trace_settings(model_name="add_sub_t")["trace_level"] == ["OFF"]
        assert client.update_trace_settings(settings={"trace_level": ["OFF"]})["trace_level"] == [
            "OFF"
        ]
        with pytest.raises(ServerError, match="trace extension absent") as info:
            client.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"]})
        assert info.value.status == 501


def test_log_settings_are_one_state_on_both_protocols(http_url: str, grpc_url: str) -> None:
    with Client(http_url) as hclient, Client(grpc_url) as gclient:
        start = hclient.get_log_settings()
        assert start == gclient.get_log_settings()
        assert {"log_info", "log_warning", "log_error", "log_verbose_level"} <= set(start)
        try:
            assert hclient.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
            assert gclient.get_log_settings()["log_verbose_level"] == 1
        finally:
            gclient.update_log_settings({"log_verbose_level": 0})
        assert hclient.get_log_settings()["log_verbose_level"] == 0


def test_tritonclient_reads_trace_and_log_settings(http_url: str, grpc_address: str) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    hclient = httpclient.InferenceServerClient(http_url.removeprefix("http://"))
    assert hclient.get_trace_settings()["trace_level"] == ["OFF"]
    assert "log_info" in hclient.get_log_settings()
    gclient = grpcclient.InferenceServerClient(grpc_address)
    trace = gclient.get_trace_settings(as_json=True)
    assert trace["settings"]["trace_level"]["value"] == ["OFF"]
    assert "log_info" in gclient.get_log_settings(as_json=True)["settings"]


# -- encoded images (OVMS's forms) --------------------------------------------------------------

_JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 2 + b"\xff\xd9"
_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 86


def _post_binary(http: httpx.Client, header: dict[str, object], data: bytes) -> httpx.Response:
    head = json.dumps({**header, "parameters": {"binary_data_output": True}}).encode()
    return http.post(
        "/v2/models/identity_bytes/infer",
        content=head + data,
        headers={"Inference-Header-Content-Length": str(len(head))},
    )


def _elements(reply: httpx.Response) -> list[bytes]:
    assert reply.status_code == 200, reply.text
    length = int(reply.headers["inference-header-content-length"])
    (output,) = decode_response(reply.content, length).outputs
    return list(np.asarray(output.data).ravel())


def test_ovms_comma_separated_binary_data_size(http: httpx.Client) -> None:
    sizes = f"{len(_JPEG)},{len(_PNG)}"
    header = {
        "inputs": [
            {
                "name": "INPUT0",
                "datatype": "BYTES",
                "shape": [1, 2],
                "parameters": {"binary_data_size": sizes},
            }
        ]
    }
    assert _elements(_post_binary(http, header, _JPEG + _PNG)) == [_JPEG, _PNG]


def test_ovms_curl_form_without_binary_data_size(http: httpx.Client) -> None:
    header = {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 1]}]}
    assert _elements(_post_binary(http, header, _JPEG)) == [_JPEG]


def test_single_unprefixed_element_with_binary_data_size(http: httpx.Client) -> None:
    header = {
        "inputs": [
            {
                "name": "INPUT0",
                "datatype": "BYTES",
                "shape": [1, 1],
                "parameters": {"binary_data_size": len(_PNG)},
            }
        ]
    }
    assert _elements(_post_binary(http, header, _PNG)) == [_PNG]


def test_tritons_prefixed_form_still_works(http: httpx.Client) -> None:
    data = b"".join(struct.pack("<I", len(e)) + e for e in (_JPEG, _PNG))
    header = {
        "inputs": [
            {
                "name": "INPUT0",
                "datatype": "BYTES",
                "shape": [1, 2],
                "parameters": {"binary_data_size": len(data)},
            }
        ]
    }
    assert _elements(_post_binary(http, header, data)) == [_JPEG, _PNG]


def test_element_sizes_that_do_not_match_the_shape_are_400(http: httpx.Client) -> None:
    header = {
        "inputs": [
            {
                "name": "INPUT0",
                "datatype": "BYTES",
                "shape": [1, 3],
                "parameters": {"binary_data_size": f"{len(_JPEG)},{len(_PNG)}"},
            }
        ]
    }
    reply = _post_binary(http, header, _JPEG + _PNG)
    assert reply.status_code == 400
    assert "INPUT0" in reply.json()["error"]


def test_grpc_unprefixed_single_element_raw_bytes(grpc_address: str) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.grpc import service_pb2

    client = grpcclient.InferenceServerClient(grpc_address)
    request = service_pb2.ModelInferRequest(model_name="identity_bytes")
    tensor = request.inputs.add(name="INPUT0", datatype="BYTES")
    tensor.shape.extend([1, 1])
    request.raw_input_contents.append(_JPEG)
    reply = client._client_stub.ModelInfer(request)
    (raw,) = reply.raw_output_contents
    assert raw == struct.pack("<I", len(_JPEG)) + _JPEG


# -- explain ------------------------------------------------------------------------------------


def test_client_explain_reads_nbinfers_answer(http_url: str) -> None:
    with Client(http_url) as client:
        answer = client.explain("explained", [[1.0, 3.0]])
    assert answer == {"contributions": [[0.25, 0.75]]}


# -- headers in hooks ---------------------------------------------------------------------------


def test_model_hooks_see_request_headers_and_set_response_headers(http_url: str) -> None:
    with Client(http_url) as client:
        result = client.infer(
            "header_echo", {"X": np.ones(1, dtype=np.float32)}, headers={"X-User": "ada"}
        )
    assert result.as_numpy("USER").tolist() == [b"ada"]
    assert result.headers["x-served-for"] == "ada"


def test_v1_predict_hooks_see_headers_too(http: httpx.Client) -> None:
    reply = http.post(
        "/v1/models/header_echo:predict", json={"instances": [1.0]}, headers={"x-user": "bob"}
    )
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": ["bob"]}
    assert reply.headers["x-served-for"] == "bob"


def test_grpc_metadata_reaches_hooks_and_response_headers_come_back(grpc_address: str) -> None:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(grpc_address)
    inp = grpcclient.InferInput("X", [1], "FP32")
    inp.set_data_from_numpy(np.ones(1, dtype=np.float32))
    result = client.infer("header_echo", [inp], headers={"x-user": "grace"})
    assert result.as_numpy("USER").tolist() == [b"grace"]
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="header_echo")
    tensor = request.inputs.add(name="X", datatype="FP32")
    tensor.shape.append(1)
    request.raw_input_contents.append(np.ones(1, dtype=np.float32).tobytes())
    _, call = client._client_stub.ModelInfer.with_call(request, metadata=[("x-user", "lin")])
    assert ("x-served-for", "lin") in tuple(call.initial_metadata())


# -- Triton decoupled Python models -------------------------------------------------------------


def test_triton_decoupled_python_model_streams_with_final_flags(grpc_address: str) -> None:
    import tritonclient.grpc as grpcclient

    got: queue.Queue[object] = queue.Queue()
    client = grpcclient.InferenceServerClient(grpc_address)
    client.start_stream(callback=lambda result, error: got.put(error or result))
    try:
        inp = grpcclient.InferInput("IN", [3], "INT32")
        inp.set_data_from_numpy(np.array([1, 2, 3], dtype=np.int32))
        client.async_stream_infer("triton_repeat", [inp], enable_empty_final_response=True)
        values, finals = [], []
        while True:
            item = got.get(timeout=30)
            assert isinstance(item, grpcclient.InferResult), str(item)
            final = item.get_response().parameters["triton_final_response"].bool_param
            finals.append(final)
            if final:
                break
            values.append(int(item.as_numpy("OUT")[0]))
    finally:
        client.stop_stream()
    assert values == [10, 20, 30]
    assert finals == [False, False, False, True]


def test_decoupled_python_model_over_plain_infer_points_to_the_stream(http_url: str) -> None:
    with Client(http_url) as client, pytest.raises(ServerError, match="stream"):
        client.infer(
            "triton_repeat", [InferInput("IN", "INT32", [1], np.array([1], dtype=np.int32))]
        )


# -- KServe's own code (a subprocess: kserve cannot be imported beside tritonclient) ------------

KSERVE_SCRIPT = Path(__file__).with_name("kserve_parity.py")
needs_kserve = pytest.mark.skipif(
    importlib.util.find_spec("kserve") is None, reason="kserve is not installed"
)


@needs_kserve
def test_kserve_inference_rest_client_v1_and_v2_work_against_nbinfer(http_url: str) -> None:
    got = python_json([str(KSERVE_SCRIPT), "clients", "--url", http_url])
    assert got["v2_live"] is True and got["v2_ready"] is True and got["v2_model_ready"] is True
    x = np.arange(16, dtype=np.float32)
    assert got["v2_infer"] == {"OUTPUT0": [(x + x).tolist()], "OUTPUT1": [[0.0] * 16]}
    assert got["v2_metadata"]["name"] == "add_sub_t"
    assert [i["name"] for i in got["v2_metadata"]["inputs"]] == ["INPUT0", "INPUT1"]
    assert got["v1_live"] is True and got["v1_model_ready"] is True
    assert got["v1_predict"] == {"predictions": [4.0]}
    assert got["v1_explain"] == {"contributions": [[0.25, 0.75]]}


@pytest.fixture(scope="module")
def kserve_explainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    http_port, grpc_port = free_port(), free_port()
    log = tmp_path_factory.mktemp("kserve") / "kserve.log"
    with open(log, "w+b") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(KSERVE_SCRIPT),
                "serve",
                f"--http-port={http_port}",
                f"--grpc-port={grpc_port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{http_port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    if httpx.get(f"{url}/v1/models/explainer", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            else:
                out.seek(0)
                pytest.fail(f"KServe did not start:\n{out.read().decode(errors='replace')[-3000:]}")
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@needs_kserve
def test_client_explain_reads_kserves_answer(kserve_explainer: str) -> None:
    with Client(kserve_explainer) as client:
        assert client.predict("explainer", [[1.0, 3.0]]) == [4.0]
        answer = client.explain("explainer", [[1.0, 3.0]])
    assert answer == {"explanations": {"contributions": [[0.25, 0.75]]}}
