"""tritonclient programs run unchanged on nbinfer.compat.tritonclient, only their imports edited.

Each program in ``examples/`` is a tritonclient program as its users write them (argparse ``-u``,
``sys.exit(1)`` on a wrong answer, ``PASS`` at the end). The test rewrites its import lines
(``tritonclient`` -> ``nbinfer.compat.tritonclient``), checks nothing else changed, and runs it
in a subprocess against the embedded server; where tritonclient is installed the original runs
too, which shows the programs really are tritonclient programs.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nbinfer.compat.tritonclient import grpc as grpcclient
from nbinfer.compat.tritonclient import http as httpclient
from nbinfer.compat.tritonclient.utils import (
    InferenceServerException,
    np_to_triton_dtype,
    triton_to_np_dtype,
)
from nbinfer.errors import ConnectError, ModelNotFoundError, NbinferError

EXAMPLES = Path(__file__).parent / "examples"
_IMPORT = re.compile(r"^(\s*)(import|from)\s+tritonclient\b")
HAS_TRITONCLIENT = importlib.util.find_spec("tritonclient") is not None


def port(source: str) -> str:
    """The program with its tritonclient imports pointed at nbinfer.compat.tritonclient."""
    return "".join(
        _IMPORT.sub(r"\1\2 nbinfer.compat.tritonclient", line)
        for line in source.splitlines(keepends=True)
    )


def changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]


def run(program: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, str(program), "-u", url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


PROGRAMS = {
    "simple_http_infer_client.py": "http",
    "simple_http_string_infer_client.py": "http",
    "simple_grpc_infer_client.py": "grpc",
    "simple_grpc_shm_client.py": "grpc",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tritonclient_program_runs_with_only_its_imports_changed(
    name: str, addresses: dict[str, str], tmp_path: Path
) -> None:
    source = (EXAMPLES / name).read_text()
    ported = port(source)
    changes = changed_lines(source, ported)
    assert changes, "the program imports tritonclient"
    assert all("import" in line for line in changes), changes
    assert not any(_IMPORT.match(line) for line in ported.splitlines())
    program = tmp_path / name
    program.write_text(ported)
    done = run(program, addresses[PROGRAMS[name]])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "PASS" in done.stdout


@pytest.mark.skipif(not HAS_TRITONCLIENT, reason="tritonclient is not installed")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_same_program_passes_under_real_tritonclient(
    name: str, addresses: dict[str, str]
) -> None:
    done = run(EXAMPLES / name, addresses[PROGRAMS[name]])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "PASS" in done.stdout


def test_infer_input_keeps_tritonclients_argument_order() -> None:
    item = httpclient.InferInput("x", [2, 3], "FP32")
    item.set_data_from_numpy(np.zeros((2, 3), np.float32))
    assert (item.name(), item.shape(), item.datatype()) == ("x", [2, 3], "FP32")
    with pytest.raises(InferenceServerException, match="shape"):
        item.set_data_from_numpy(np.zeros((3, 2), np.float32))
    out = httpclient.InferRequestedOutput("y", binary_data=False, class_count=3)
    assert out.name() == "y"


def test_exception_is_an_nbinfer_error_caused_by_the_specific_one(
    addresses: dict[str, str],
) -> None:
    client = grpcclient.InferenceServerClient(addresses["grpc"])
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("missing_model")
    assert isinstance(info.value, NbinferError)
    assert isinstance(info.value.__cause__, ModelNotFoundError)
    assert info.value.error is info.value.__cause__
    assert info.value.status() == "StatusCode.NOT_FOUND"
    assert "missing_model" in str(info.value)
    client.close()


def test_classification_through_requested_output(addresses: dict[str, str]) -> None:
    client = httpclient.InferenceServerClient(addresses["http"])
    inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    inputs[1].set_data_from_numpy(np.zeros((1, 16), np.int32))
    out = httpclient.InferRequestedOutput("OUTPUT0", class_count=2)
    top = client.infer("simple", inputs, outputs=[out]).as_numpy("OUTPUT0")
    assert [bytes(b).decode() for b in top[0]] == ["15:15", "14:14"]
    client.close()


def test_dtype_helpers_answer_as_tritonclient() -> None:
    assert np_to_triton_dtype(np.float32) == "FP32"
    assert np_to_triton_dtype(np.dtype("S3")) == "BYTES"
    assert np_to_triton_dtype(np.complex64) is None
    assert triton_to_np_dtype("BOOL") is bool
    assert triton_to_np_dtype("BYTES") is np.object_
    assert triton_to_np_dtype("NOPE") is None


def test_grpc_requested_output_takes_class_count_second_as_tritonclient() -> None:
    out = grpcclient.InferRequestedOutput("y", 3)
    assert out._to_nbinfer().class_count == 3 and out._to_nbinfer().binary_data is None


def test_grpc_as_json_answers_are_the_messages_as_dicts(addresses: dict[str, str]) -> None:
    client = grpcclient.InferenceServerClient(addresses["grpc"])
    inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for item in inputs:
        item.set_data_from_numpy(np.ones((1, 16), np.int32))
    result = client.infer("simple", inputs, request_id="j")
    doc = result.get_response(as_json=True)
    assert doc["model_name"] == "simple" and doc["id"] == "j"
    assert result.get_output("OUTPUT1", as_json=True)["datatype"] == "INT32"
    assert client.get_server_metadata(as_json=True)["extensions"]
    client.close()


def test_is_model_ready_is_false_for_an_unknown_model_and_raises_when_unreachable(
    addresses: dict[str, str],
) -> None:
    client = httpclient.InferenceServerClient(addresses["http"])
    assert client.is_model_ready("simple") and not client.is_model_ready("no_such_model")
    client.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    unreachable = httpclient.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=2)
    with pytest.raises(InferenceServerException) as info:
        unreachable.is_model_ready("simple")
    assert isinstance(info.value.error, ConnectError)
    unreachable.close()
