"""Device requests that cannot be met fail loudly, the same way for every backend.

On a machine without an NVIDIA driver: ``cuda:N`` stops the server at start (``nbinfer serve``,
``python -m nbinfer.server``, ``LocalServer`` / ``Session``) and, asked for by one model's
config, makes that model UNAVAILABLE with the same reason whether it is an nbinfer Model, a
TorchScript file or an ONNX file; ``auto`` falls back to the CPU with a logged warning.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nbinfer.errors import InvalidInputError, ServerStartError
from nbinfer.server.devices import check_device_request
from nbinfer.server.launcher import LocalServer
from nbinfer.server.repository import ModelRepository

pytestmark = pytest.mark.skipif(
    os.path.exists("/proc/driver/nvidia/version") or not sys.platform.startswith("linux"),
    reason="needs a Linux machine without an NVIDIA driver",
)

REASON = "device 'cuda:0' cannot be used: this machine has no NVIDIA driver"

_PY_MODEL = """
from nbinfer.server.model import Model


class Twice(Model):
    name = "py"
    inputs = [("x", "FP32", [-1, 4])]
    outputs = [("y", "FP32", [-1, 4])]

    def predict(self, inputs, context):
        return {"y": inputs["x"] * 2}
"""

_TRITON_PY_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            out = pb_utils.Tensor("y", x * 2)
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""

_KIND_GPU = "instance_group [ { kind: KIND_GPU, gpus: [ 0 ] } ]\n"
_TENSORS = (
    'input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]\n'
    'output [ { name: "y" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]\n'
)


def _repository(root: Path, *, gpu_config: bool) -> Path:
    """``py`` (nbinfer Model), ``ts`` (TorchScript), ``ox`` (ONNX), ``tp`` (Triton Python)."""
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    for name in ("py", "ts", "ox", "tp"):
        (root / name / "1").mkdir(parents=True)
    (root / "py" / "1" / "model.py").write_text(textwrap.dedent(_PY_MODEL))
    (root / "tp" / "1" / "model.py").write_text(textwrap.dedent(_TRITON_PY_MODEL))

    class Twice(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    torch.jit.save(torch.jit.script(Twice()), str(root / "ts" / "1" / "model.pt"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["y"])], "g", [x], [y], [two])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(root / "ox" / "1" / "model.onnx"))

    gpu = _KIND_GPU if gpu_config else ""
    (root / "py" / "config.pbtxt").write_text(f'name: "py"\n{gpu}')
    (root / "ts" / "config.pbtxt").write_text(
        f'name: "ts"\nplatform: "pytorch_libtorch"\n{_TENSORS.replace("x", "INPUT__0")}'.replace(
            '"y"', '"OUTPUT__0"'
        )
        + gpu
    )
    (root / "ox" / "config.pbtxt").write_text(f'name: "ox"\nplatform: "onnxruntime_onnx"\n{gpu}')
    (root / "tp" / "config.pbtxt").write_text(f'name: "tp"\nbackend: "python"\n{_TENSORS}{gpu}')
    return root


def _states(repo: ModelRepository) -> dict[str, tuple[str, str]]:
    return {row.name: (row.state, row.reason) for row in repo.index()}


def test_check_device_request_refuses_cuda_without_a_driver() -> None:
    assert check_device_request("auto") == "auto"
    assert check_device_request("CPU") == "cpu"
    with pytest.raises(InvalidInputError, match=REASON):
        check_device_request("cuda:0")
    with pytest.raises(InvalidInputError, match="unknown device 'cuda:x'"):
        check_device_request("cuda:x")


@pytest.mark.parametrize("command", [["-m", "nbinfer.server"], ["-m", "nbinfer.cli", "serve"]])
def test_serve_with_cuda_exits_at_start_naming_the_device(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, *command, "--device", "cuda:0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert REASON in done.stderr


def test_local_server_with_cuda_fails_before_spawning() -> None:
    server = LocalServer(demo=True, device="cuda:0")
    with pytest.raises(ServerStartError, match=REASON):
        server.start()
    assert not server.running


@pytest.mark.parametrize("default", ["cpu", "auto"])
def test_a_model_asking_for_a_gpu_is_unavailable_with_one_reason_for_every_backend(
    tmp_path: Path, default: str
) -> None:
    repo = ModelRepository(_repository(tmp_path, gpu_config=True), device=default)
    states = _states(repo)
    assert set(states) == {"py", "ts", "ox", "tp"}
    for name, (state, reason) in states.items():
        assert state == "UNAVAILABLE", name
        assert REASON in reason, (name, reason)


def test_the_servers_cuda_default_fails_every_backend_alike(tmp_path: Path) -> None:
    repo = ModelRepository(_repository(tmp_path, gpu_config=False), device="cuda:0")
    states = _states(repo)
    # Triton Python models run where their config says, the CPU when it is silent (the backend
    # pins them), so the server's default does not reach them.
    assert states.pop("tp")[0] == "READY"
    for name, (state, reason) in states.items():
        assert state == "UNAVAILABLE" and REASON in reason, (name, reason)


def test_auto_falls_back_to_the_cpu_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from nbinfer.server.devices import _FELL_BACK

    _FELL_BACK.clear()  # the warning is logged once per process and reason
    with caplog.at_level(logging.WARNING, logger="nbinfer"):
        repo = ModelRepository(_repository(tmp_path, gpu_config=False), device="auto")
    states = _states(repo)
    assert {s for s, _ in states.values()} == {"READY"}, states
    for name in states:
        model = repo.resolve(name).model
        assert model is not None and model.device == "cpu", name
    assert any("running on the CPU" in r.getMessage() for r in caplog.records)


def test_the_servers_log_says_auto_runs_on_the_cpu(tmp_path: Path) -> None:
    (tmp_path / "py" / "1").mkdir(parents=True)
    (tmp_path / "py" / "1" / "model.py").write_text(textwrap.dedent(_PY_MODEL))
    with LocalServer(model_repository=tmp_path, demo=False, device="auto") as server:
        log = server.logs()
    assert "device 'auto'" in log and "running on the CPU" in log
