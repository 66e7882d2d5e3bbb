"""PyTorch backend: nn.Module objects and TorchScript files served on the CPU."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import InferenceError, InvalidInputError
from nbinfer.protocol.types import InferInput, InferRequest
from nbinfer.server.backends import load_model_dir
from nbinfer.server.dataplane import DataPlane
from nbinfer.server.repository import ModelRepository

torch = pytest.importorskip("torch")
# TorchScript (Triton's pytorch_libtorch format) is deprecated in recent torch
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

from nbinfer.server.backends.torch import TorchModel, from_numpy, to_numpy  # noqa: E402


class Affine(torch.nn.Module):
    """y = x @ W^T + b with fixed weights; also returns the row sums."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        with torch.no_grad():
            self.linear.weight.copy_(torch.arange(12, dtype=torch.float32).reshape(3, 4) / 10)
            self.linear.bias.copy_(torch.tensor([0.5, -0.5, 1.0]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), x.sum(dim=1)


class Scale(torch.nn.Module):
    def forward(self, values: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
        return values * factor


def _expected(x: np.ndarray) -> np.ndarray:
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    return x @ w.T + np.array([0.5, -0.5, 1.0], np.float32)


def _infer(model: Any, inputs: list[InferInput], name: str) -> Any:
    async def main() -> Any:
        dp = DataPlane(ModelRepository(models=[model], device="cpu"))
        try:
            return await dp.infer(InferRequest(model_name=name, inputs=inputs))
        finally:
            await dp.close()

    return asyncio.run(main())


def test_nn_module_serves_through_the_dataplane() -> None:
    model = TorchModel(
        Affine(),
        name="affine",
        inputs=[("x", "FP32", [-1, 4])],
        outputs=[("y", "FP32", [-1, 3]), ("total", "FP32", [-1])],
    )
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    resp = _infer(model, [InferInput("x", "FP32", [2, 4], x)], "affine")
    out = {o.name: o.data for o in resp.outputs}
    np.testing.assert_allclose(out["y"], _expected(x), rtol=1e-6)
    np.testing.assert_allclose(out["total"], x.sum(axis=1))
    assert model.device == "cpu"
    assert model.platform == "pytorch_libtorch"


def test_inputs_named_after_forward_parameters_are_passed_by_keyword() -> None:
    # declared in the opposite order of forward(values, factor)
    model = TorchModel(
        Scale(),
        name="scale",
        inputs=[("factor", "FP32", [1]), ("values", "FP32", [-1])],
        outputs=[("out", "FP32", [-1])],
    )
    resp = _infer(
        model,
        [
            InferInput("factor", "FP32", [1], np.array([3.0], np.float32)),
            InferInput("values", "FP32", [3], np.array([1.0, 2.0, 4.0], np.float32)),
        ],
        "scale",
    )
    np.testing.assert_allclose(resp.outputs[0].data, [3.0, 6.0, 12.0])


def test_torchscript_file_in_triton_layout_uses_triton_tensor_names(tmp_path: Path) -> None:
    mdir = tmp_path / "affine_ts"
    (mdir / "1").mkdir(parents=True)
    torch.jit.save(torch.jit.script(Affine()), str(mdir / "1" / "model.pt"))
    # outputs listed out of order: OUTPUT__<i> binds to the i-th returned value
    (mdir / "config.pbtxt").write_text(
        'platform: "pytorch_libtorch"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ ] },\n'
        '         { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
    )
    model = load_model_dir(mdir)
    assert isinstance(model, TorchModel) and model.scripted
    x = np.ones((3, 4), np.float32)
    resp = _infer(model, [InferInput("INPUT__0", "FP32", [3, 4], x)], "affine_ts")
    out = {o.name: o.data for o in resp.outputs}
    np.testing.assert_allclose(out["OUTPUT__0"], _expected(x), rtol=1e-6)
    np.testing.assert_allclose(out["OUTPUT__1"], [4.0, 4.0, 4.0])


def test_unnamed_declarations_get_tritons_names(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(Affine()), str(path))
    model = TorchModel(
        path, name="m", inputs=[("FP32", [-1, 4])], outputs=[("FP32", [-1, 3]), ("FP32", [-1])]
    )
    assert [d.name for d in model.input_defs()] == ["INPUT__0"]
    assert [d.name for d in model.output_defs()] == ["OUTPUT__0", "OUTPUT__1"]


def test_torchscript_config_without_tensors_is_rejected(tmp_path: Path) -> None:
    mdir = tmp_path / "bare"
    (mdir / "1").mkdir(parents=True)
    torch.jit.save(torch.jit.script(Affine()), str(mdir / "1" / "model.pt"))
    (mdir / "config.pbtxt").write_text('platform: "pytorch_libtorch"\n')
    with pytest.raises(InvalidInputError, match="needs 'input' and 'output'"):
        load_model_dir(mdir)


def test_numpy_and_torch_share_memory_on_the_cpu() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = from_numpy(a)
    assert t.data_ptr() == a.ctypes.data
    back = to_numpy(t)
    assert np.shares_memory(back, a)
    readonly = np.frombuffer(a.tobytes(), dtype=np.float32)  # like a request body view
    assert not readonly.flags.writeable
    assert from_numpy(readonly).sum().item() == a.sum()


def test_bf16_round_trips_through_torch() -> None:
    from nbinfer.protocol.dtypes import numpy_dtype

    a = np.array([1.5, -2.0, 3.25], dtype=numpy_dtype("BF16"))
    t = from_numpy(a)
    assert t.dtype == torch.bfloat16
    np.testing.assert_array_equal(to_numpy(t).astype(np.float32), a.astype(np.float32))


def test_bytes_inputs_are_refused_with_a_clear_error() -> None:
    with pytest.raises(InvalidInputError, match="BYTES"):
        from_numpy(np.array([b"x"], dtype=object))


def test_module_that_raises_becomes_an_inference_error() -> None:
    model = TorchModel(
        Affine(), name="bad", inputs=[("x", "FP32", [-1, -1])], outputs=[("y", "FP32", [-1, 3])]
    )
    x = np.ones((2, 5), np.float32)  # wrong inner size for Linear(4, 3)
    with pytest.raises(InferenceError, match="bad"):
        _infer(model, [InferInput("x", "FP32", [2, 5], x)], "bad")


def test_missing_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"pip install 'nbinfer\[torch\]'"):
        TorchModel("x.pt", name="m", inputs=[("FP32", [1])], outputs=[("FP32", [1])])


def test_server_process_serves_torchscript_from_a_triton_repository(tmp_path: Path) -> None:
    grpcclient = pytest.importorskip("tritonclient.grpc")
    from nbinfer.server.launcher import LocalServer

    mdir = tmp_path / "repo" / "affine_ts"
    (mdir / "1").mkdir(parents=True)
    torch.jit.save(torch.jit.script(Affine()), str(mdir / "1" / "model.pt"))
    (mdir / "config.pbtxt").write_text(
        'platform: "pytorch_libtorch"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
    )
    x = np.ones((2, 4), np.float32)
    with (
        LocalServer(
            model_repository=tmp_path / "repo", demo=False, device="cpu", auth_token=None
        ) as server,
        grpcclient.InferenceServerClient(server.grpc_address) as c,
    ):
        inp = grpcclient.InferInput("INPUT__0", [2, 4], "FP32")
        inp.set_data_from_numpy(x)
        result = c.infer("affine_ts", [inp])
        np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), _expected(x), rtol=1e-6)
