"""The server-side model API: declarations, FunctionModel / @model, devices."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.types import InferInput, InferRequest, TensorSpec
from nbinfer.server import DataPlane, FunctionModel, Model, ModelRepository, TensorDef
from nbinfer.server.devices import resolve_device
from nbinfer.server.model import InferContext, as_tensor_def, model, normalize_datatype

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _infer(m: Model, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    async def go() -> dict[str, np.ndarray]:
        dp = DataPlane(ModelRepository(models=[m]))
        try:
            inputs = [
                InferInput(k, normalize_datatype(v.dtype), list(v.shape), v)
                for k, v in arrays.items()
            ]
            resp = await dp.infer(InferRequest(inputs=inputs, model_name=m.name))
            return {o.name: o.data for o in resp.outputs if o.data is not None}
        finally:
            await dp.close()

    return asyncio.run(go())


def test_datatype_names_accept_v2_triton_and_numpy_spellings() -> None:
    assert normalize_datatype("FP32") == "FP32"
    assert normalize_datatype("TYPE_FP32") == "FP32"
    assert normalize_datatype("TYPE_STRING") == "BYTES"
    assert normalize_datatype(np.float16) == "FP16"
    assert normalize_datatype(np.dtype("int64")) == "INT64"
    assert normalize_datatype(str) == "BYTES"
    with pytest.raises(InvalidInputError, match="FLOAT99"):
        normalize_datatype("FLOAT99")


def test_tensor_declarations_accept_tuples_dicts_and_specs() -> None:
    assert as_tensor_def(("x", "FP32", [4])) == TensorDef("x", "FP32", [4])
    assert as_tensor_def(TensorSpec("x", "INT8", [-1, 2])) == TensorDef("x", "INT8", [-1, 2])
    d = as_tensor_def({"name": "x", "data_type": "TYPE_FP32", "dims": [3], "optional": True})
    assert d == TensorDef("x", "FP32", [3], optional=True)
    with pytest.raises(InvalidInputError, match="dims must be -1 or positive"):
        as_tensor_def(("x", "FP32", [0]))


def test_batched_model_metadata_shape_has_leading_variable_dim() -> None:
    d = TensorDef("x", "FP32", [16])
    assert d.spec(8).shape == [-1, 16]
    assert d.spec(0).shape == [16]


def test_finalize_rejects_duplicate_names_and_missing_name() -> None:
    m = Model("dup", inputs=[("a", "FP32", [1]), ("a", "FP32", [1])], outputs=[])
    with pytest.raises(InvalidInputError, match="duplicate input 'a'"):
        m.finalize()
    with pytest.raises(InvalidInputError, match="has no name"):
        Model(inputs=[], outputs=[]).finalize()


def test_labels_attach_to_outputs_by_name_or_to_the_first_output() -> None:
    m = Model("m", outputs=[("p", "FP32", [3])], labels={"p": ["a", "b", "c"]})
    assert m.output_defs()[0].labels == ["a", "b", "c"]
    m2 = Model("m", outputs=[("p", "FP32", [3])], labels=("x", "y", "z"))
    assert m2.output_defs()[0].labels == ["x", "y", "z"]
    bad = Model("m", outputs=[("p", "FP32", [3])], labels={"q": ["a"]})
    with pytest.raises(InvalidInputError, match="unknown output"):
        bad.output_defs()


def test_function_model_infers_specs_from_numpy_type_hints() -> None:
    def scale(x: npt.NDArray[np.float32], factor: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return x * factor

    m = FunctionModel(scale)
    assert m.name == "scale"
    assert [(d.name, d.datatype) for d in m.input_defs()] == [("x", "FP32"), ("factor", "INT64")]
    assert m.output_defs()[0].datatype == "FP64"
    out = _infer(m, x=np.array([1.5, 2.0], np.float32), factor=np.array([2, 3], np.int64))
    np.testing.assert_array_equal(out["output"], [3.0, 6.0])
    assert out["output"].dtype == np.float64


def test_function_model_without_hints_needs_explicit_specs() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(InvalidInputError, match="cannot infer the datatype of input 'x'"):
        FunctionModel(f)


def test_model_decorator_wraps_a_function_with_declared_tensors() -> None:
    @model(name="double", inputs=[("IN", "INT32", [-1])], outputs=[("OUT", "INT32", [-1])])
    def double(values: Any) -> Any:
        return values * 2

    assert isinstance(double, FunctionModel)
    out = _infer(double, IN=np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(out["OUT"], [2, 4, 6])


def test_bare_decorator_and_tuple_outputs_map_in_declared_order() -> None:
    @model
    def split(x: npt.NDArray[np.int32]) -> Any:
        return x + 1, x - 1

    split.outputs = [("plus", "INT32", [-1]), ("minus", "INT32", [-1])]
    out = _infer(split, x=np.array([10], np.int32))
    assert out["plus"].tolist() == [11] and out["minus"].tolist() == [9]


def test_function_model_passes_context_when_asked() -> None:
    seen: list[InferContext] = []

    def f(x: npt.NDArray[np.float32], context: InferContext) -> Any:
        seen.append(context)
        return x

    _infer(FunctionModel(f), x=np.zeros(2, np.float32))
    assert seen and seen[0].model_name == "f"


def test_async_function_becomes_an_async_model() -> None:
    async def slow_echo(x: npt.NDArray[np.int16]) -> npt.NDArray[np.int16]:
        await asyncio.sleep(0)
        return x

    out = _infer(FunctionModel(slow_echo), x=np.array([7], np.int16))
    assert out["output"].tolist() == [7]


def test_lambda_needs_a_name() -> None:
    with pytest.raises(InvalidInputError, match="lambda"):
        FunctionModel(lambda x: x, inputs=[("x", "FP32", [1])], outputs=[("y", "FP32", [1])])


@pytest.mark.torch
def test_resolve_device_cpu_and_auto() -> None:
    assert resolve_device("cpu") == "cpu"
    if not HAS_TORCH:
        assert resolve_device("auto") == "cpu"
    with pytest.raises(InvalidInputError, match="unknown device 'tpu'"):
        resolve_device("tpu")


@pytest.mark.parametrize("driver", [False, True], ids=["no-driver", "driver"])
@pytest.mark.parametrize("torch_installed", [False, True], ids=["no-torch", "torch"])
def test_a_cuda_request_names_what_this_machine_lacks(
    monkeypatch: pytest.MonkeyPatch, driver: bool, torch_installed: bool
) -> None:
    """Whatever the test machine has: the message a user sees for each of the four machines.

    Without a driver the driver is named first (torch alone would not help) and a missing torch
    is named beside it; with a driver but no torch, torch is what to install.
    """
    from nbinfer.server import devices

    monkeypatch.setattr(devices, "_nvidia_driver", lambda: driver)
    monkeypatch.setattr(devices, "_torch_installed", lambda: torch_installed)
    if driver and torch_installed:
        pytest.importorskip("torch")  # the answer then comes from torch itself (0 GPUs here)
    with pytest.raises(InvalidInputError) as info:
        resolve_device("cuda:0")
    message = str(info.value)
    assert message.startswith("device 'cuda:0' cannot be used: ")
    assert ("no NVIDIA driver" in message) is (not driver)
    assert ("torch is not installed" in message) is (not torch_installed)
    assert "use device='cpu'" in message


def test_device_is_shown_in_metadata_and_config() -> None:
    m = FunctionModel(
        lambda x: x, name="ident", inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])]
    )
    dp = DataPlane(ModelRepository(models=[m]))
    assert dp.model_metadata("ident").parameters["device"] == "cpu"
    assert dp.model_config("ident")["parameters"]["device"] == {"string_value": "cpu"}
    assert dp.model_config("ident")["instance_group"][0]["kind"] == "KIND_CPU"


def test_auto_device_on_a_machine_without_nvidia_driver_does_not_import_torch() -> None:
    import subprocess
    import sys
    from pathlib import Path

    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    code = (
        "import sys; from nbinfer.server.devices import resolve_device; "
        "print(resolve_device('auto'), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "False"]
