"""KServe SDK code runs on nbinfer.compat.kserve with only its import changed.

``examples/kserve_v2_client.py`` is a KServe program (REST v2 and gRPC clients, the request /
response types and their codecs); it runs ported (one import line changed) and, where the KServe
SDK is installed, as written, both against the embedded server, each in a subprocess (KServe's
protobuf module and tritonclient's cannot share one process).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nbinfer.compat.kserve import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    RequestedOutput,
    RESTConfig,
)
from nbinfer.config import ClientConfig
from nbinfer.errors import InvalidInputError
from nbinfer.server.launcher import LocalServer

EXAMPLE = Path(__file__).parent / "examples" / "kserve_v2_client.py"
_IMPORT = re.compile(r"^(\s*)from\s+kserve\b")
HAS_KSERVE = importlib.util.find_spec("kserve") is not None


def _run(program: Path, server: LocalServer) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(program),
            "--rest-url",
            server.http_url,
            "--grpc-url",
            server.grpc_address,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )


def test_kserve_program_runs_with_only_its_import_changed(
    server: LocalServer, tmp_path: Path
) -> None:
    source = EXAMPLE.read_text()
    lines = source.splitlines(keepends=True)
    ported = "".join(_IMPORT.sub(r"\1from nbinfer.compat.kserve", line) for line in lines)
    changed = [a for a, b in zip(lines, ported.splitlines(keepends=True), strict=True) if a != b]
    assert changed == ["from kserve import (\n"]
    program = tmp_path / EXAMPLE.name
    program.write_text(ported)
    done = _run(program, server)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "PASS" in done.stdout


@pytest.mark.skipif(not HAS_KSERVE, reason="the KServe SDK is not installed")
def test_the_same_program_passes_under_the_kserve_sdk(server: LocalServer) -> None:
    done = _run(EXAMPLE, server)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def _request(binary: bool) -> InferRequest:
    x = InferInput("x", [2, 3], "FP32")
    x.set_data_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), binary_data=binary)
    s = InferInput("s", [2], "BYTES")
    s.set_data_from_numpy(np.array([b"a", "\u00e9".encode()], dtype=object), binary_data=binary)
    return InferRequest(
        "m",
        [x, s],
        request_id="42",
        parameters={"p": 1},
        request_outputs=[RequestedOutput("y", {"binary_data": True})],
    )


@pytest.mark.parametrize("binary", [True, False])
def test_request_to_rest_decodes_back_to_the_same_request(binary: bool) -> None:
    request = _request(binary)
    body, json_length = request.to_rest()
    if binary:
        assert isinstance(body, bytes) and json_length is not None
        again = InferRequest.from_bytes(body, json_length, "m")
    else:
        assert isinstance(body, dict) and json_length is None
        assert body["inputs"][1]["data"] == ["a", "\u00e9"]
        again = InferRequest.from_rest(body, "m")
    assert again == request
    assert again.request_outputs[0].binary_data is True


def test_request_grpc_round_trip_keeps_inputs_and_parameters() -> None:
    request = _request(True)
    message = request.to_grpc()
    assert message.model_name == "m" and message.id == "42"
    again = InferRequest.from_grpc(message)
    assert again == request
    assert again.get_input_by_name("s").as_string() == ["a", "\u00e9"]  # type: ignore[union-attr]
    assert again.get_input_by_name("nope") is None


def test_response_codecs_round_trip() -> None:
    y = InferOutput("y", [2], "INT64")
    y.set_data_from_numpy(np.array([7, -1], dtype=np.int64))
    response = InferResponse("1", "m", [y], model_version="3")
    body, json_length = response.to_rest()
    assert InferResponse.from_bytes(body, json_length) == response  # type: ignore[arg-type]
    json_body, _ = InferResponse("1", "m", [InferOutput("y", [2], "INT64", [7, -1])]).to_rest()
    assert json_body == {  # type: ignore[comparison-overlap]
        "model_name": "m",
        "model_version": "",
        "id": "1",
        "outputs": [{"name": "y", "datatype": "INT64", "shape": [2], "data": [7, -1]}],
    }
    assert InferResponse.from_grpc(response.to_grpc()) == response
    assert response.get_output_by_name("y") is y and response.get_output_by_name("z") is None
    assert response.to_dict()["outputs"][0]["data"] == [7, -1]


def test_as_dataframe_gives_one_column_per_input() -> None:
    a = InferInput("a", [3, 1], "INT32", [1, 2, 3])
    t = InferInput("t", [3], "BYTES", [b"x", b"y", b"z"])
    frame = InferRequest("m", [a, t]).as_dataframe()
    assert list(frame.columns) == ["a", "t"]
    assert frame["a"].tolist() == [1, 2, 3] and frame["t"].tolist() == ["x", "y", "z"]


def test_set_data_from_numpy_rejects_a_dtype_of_another_datatype() -> None:
    with pytest.raises(InvalidInputError, match="FP32"):
        InferInput("x", [1], "INT32").set_data_from_numpy(np.zeros(1, np.float32))


def test_rest_config_becomes_a_client_config() -> None:
    config = ClientConfig.from_rest_config(RESTConfig(protocol="v2", timeout=(2, 9), retries=0))
    assert (config.timeouts.connect, config.timeouts.total, config.retries.attempts) == (2, 9, 1)
