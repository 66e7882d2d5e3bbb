"""Export: a served model -> a Triton model repository entry (+ KServe manifest) -> served again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.types import InferInput, InferRequest, RequestedOutput
from nbinfer.server.backends import load_model_dir
from nbinfer.server.backends.python_backend import TritonPythonBackendModel
from nbinfer.server.dataplane import DataPlane
from nbinfer.server.demo.models import Iris
from nbinfer.server.export import export_model, kserve_manifest, main_export, to_yaml
from nbinfer.server.model import FunctionModel, Model
from nbinfer.server.pbtxt import config_to_pbtxt, parse_pbtxt
from nbinfer.server.repository import ModelRepository

IRIS_ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]], np.float32)


def _run(model: Model, request: InferRequest) -> Any:
    async def main() -> Any:
        dp = DataPlane(ModelRepository(models=[model], device="cpu"))
        try:
            return await dp.infer(request)
        finally:
            await dp.close()

    return asyncio.run(main())


def _outputs(model: Model, name: str, inputs: list[InferInput], **kw: Any) -> dict[str, Any]:
    resp = _run(model, InferRequest(model_name=name, inputs=inputs, **kw))
    return {o.name: o.data for o in resp.outputs}


# -- config.pbtxt -----------------------------------------------------------------------------


def test_config_pbtxt_round_trips_through_the_parser() -> None:
    config = {
        "name": "m",
        "backend": "python",
        "max_batch_size": 8,
        "input": [
            {"name": "x", "data_type": "TYPE_FP32", "dims": [4, -1], "optional": True},
            {"name": "s", "data_type": "TYPE_STRING", "dims": [1], "reshape": {"shape": []}},
        ],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3], "label_filename": "l.txt"}],
        "instance_group": [{"kind": "KIND_CPU", "count": 2}],
        "parameters": {"note": {"string_value": 'quote " and \\ backslash, \u00fcnicode'}},
        "dynamic_batching": {"max_queue_delay_microseconds": 100},
    }
    text = config_to_pbtxt(config)
    assert "data_type: TYPE_FP32" in text  # enums stay bare
    assert parse_pbtxt(text) == config


# -- round trips ----------------------------------------------------------------------------------


def test_function_model_exports_to_a_python_backend_that_serves_the_same_outputs(
    tmp_path: Path,
) -> None:
    def scale(x: npt.NDArray[np.float32], factor: npt.NDArray[np.float32]) -> Any:
        return {"scaled": x * factor, "label": np.array([b"ok"] * len(x), dtype=object)}

    original = FunctionModel(
        scale,
        inputs=[("x", "FP32", [-1]), ("factor", "FP32", [1])],
        outputs=[("scaled", "FP32", [-1]), ("label", "BYTES", [-1])],
    )
    path = export_model(original, tmp_path / "repo", version=3)
    assert path == tmp_path / "repo" / "scale"
    files = sorted(p.name for p in (path / "3").iterdir())
    assert files == ["function.pkl", "model.py", "nbinfer_export.json", "nbinfer_runtime.py"]
    settings = json.loads((path / "3" / "nbinfer_export.json").read_text())
    assert settings["route"] == "pickle" and "PICKLED (not portable)" in settings["note"]
    assert "cloudpickle" in settings["requires"]["packages"]
    config = parse_pbtxt((path / "config.pbtxt").read_text())
    assert config["backend"] == "python" and config["name"] == "scale"

    reloaded = load_model_dir(path)
    assert isinstance(reloaded, TritonPythonBackendModel)
    inputs = [
        InferInput("x", "FP32", [3], np.array([1.0, 2.0, 3.0], np.float32)),
        InferInput("factor", "FP32", [1], np.array([2.0], np.float32)),
    ]
    want = _outputs(original, "scale", inputs)
    got = _outputs(reloaded, "scale", inputs)
    np.testing.assert_array_equal(got["scaled"], want["scaled"])
    assert list(got["label"]) == list(want["label"]) == [b"ok"] * 3


def test_model_subclass_exports_with_its_labels_and_serves_the_same_outputs(
    tmp_path: Path,
) -> None:
    original = Iris()
    original.load()
    path = export_model(original, tmp_path / "repo", name="iris_export")
    assert (path / "labels.txt").read_text().split() == list(original.labels or [])
    config = parse_pbtxt((path / "config.pbtxt").read_text())
    assert config["output"][0]["label_filename"] == "labels.txt"

    reloaded = load_model_dir(path)
    assert reloaded is not None
    inputs = [InferInput("input", "FP32", [3, 4], IRIS_ROWS)]
    want = _outputs(Iris(), "iris", inputs)
    got = _outputs(reloaded, "iris_export", inputs)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=1e-6)
    classified = _outputs(
        reloaded, "iris_export", inputs, outputs=[RequestedOutput("probabilities", class_count=1)]
    )
    top = [row.decode().split(":")[2] for row in classified["probabilities"].reshape(-1)]
    assert top[0] == "setosa"


def test_onnx_model_exports_its_file(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from nbinfer.server.backends.onnx import OnnxModel

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "neg", [x], [y])
    model_proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model_proto.ir_version = 8
    src = tmp_path / "neg.onnx"
    onnx.save(model_proto, str(src))
    original = OnnxModel(src, name="neg", max_batch_size=4)
    path = export_model(original, tmp_path / "repo")
    assert (path / "1" / "model.onnx").read_bytes() == src.read_bytes()
    config = parse_pbtxt((path / "config.pbtxt").read_text())
    assert config["platform"] == "onnxruntime_onnx" and config["max_batch_size"] == 4
    reloaded = load_model_dir(path)
    assert isinstance(reloaded, OnnxModel)
    data = np.array([[1.0, -2.0]], np.float32)
    got = _outputs(reloaded, "neg", [InferInput("x", "FP32", [1, 2], data)])
    np.testing.assert_array_equal(got["y"], -data)


def test_torch_module_exports_as_torchscript(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from nbinfer.server.backends.torch import TorchModel

    class Double(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 + 1

    original = TorchModel(
        Double(), name="double", inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])]
    )
    path = export_model(original, tmp_path / "repo")
    assert (path / "1" / "model.pt").is_file()
    assert parse_pbtxt((path / "config.pbtxt").read_text())["platform"] == "pytorch_libtorch"
    reloaded = load_model_dir(path)
    assert isinstance(reloaded, TorchModel) and reloaded.scripted
    data = np.array([1.0, 2.5], np.float32)
    got = _outputs(reloaded, "double", [InferInput("x", "FP32", [2], data)])
    np.testing.assert_array_equal(got["y"], data * 2 + 1)


_TRITON_MODEL = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        here = os.path.join(args["model_repository"], args["model_version"])
        self.offset = np.load(os.path.join(here, "offset.npy"))

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + self.offset)]))
        return out
"""


def test_triton_python_model_exports_its_files_unchanged(tmp_path: Path) -> None:
    src = tmp_path / "src" / "shift"
    (src / "2").mkdir(parents=True)
    (src / "2" / "model.py").write_text(_TRITON_MODEL)
    np.save(src / "2" / "offset.npy", np.float32(10))
    (src / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 2\ndynamic_batching { }\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    original = load_model_dir(src)
    assert isinstance(original, TritonPythonBackendModel)
    path = export_model(original, tmp_path / "out")
    assert (path / "1" / "model.py").read_text() == _TRITON_MODEL
    config = parse_pbtxt((path / "config.pbtxt").read_text())
    assert config["backend"] == "python" and "dynamic_batching" in config
    reloaded = load_model_dir(path)
    assert reloaded is not None
    x = np.array([[1.0], [2.0]], np.float32)
    got = _outputs(reloaded, "shift", [InferInput("X", "FP32", [2, 1], x)])
    np.testing.assert_array_equal(got["Y"], x + 10)
    # its execution environment comes from what its own model.py imports
    path = export_model(original, tmp_path / "env", execution_env="env.tar.gz")
    assert "PACKAGES=(numpy)\n" in (path / "build_python_env.sh").read_text()
    config = parse_pbtxt((path / "config.pbtxt").read_text())
    assert "dynamic_batching" in config
    assert config["parameters"]["EXECUTION_ENV_PATH"] == {
        "string_value": "$$TRITON_MODEL_DIRECTORY/env.tar.gz"
    }


def test_format_must_fit_the_model(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot be exported as ONNX"):
        export_model(Iris(), tmp_path, format="onnx")
    with pytest.raises(InvalidInputError, match="unknown export format"):
        export_model(Iris(), tmp_path, format="savedmodel")
    with pytest.raises(InvalidInputError, match="version must be a positive integer"):
        export_model(Iris(), tmp_path, version=0)


def test_python_export_refuses_bf16_tensors_triton_cannot_hand_it(tmp_path: Path) -> None:
    def same(x: Any) -> Any:
        return x

    bf16 = FunctionModel(same, inputs=[("x", "BF16", [-1])], outputs=[("y", "BF16", [-1])])
    with pytest.raises(InvalidInputError, match=r"BF16 tensors \(x, y\).*as_numpy refuses BF16"):
        export_model(bf16, tmp_path / "repo")
    assert not (tmp_path / "repo").exists()


# -- KServe manifest ----------------------------------------------------------------------------


def test_kserve_manifest_is_an_inference_service_for_triton() -> None:
    yaml = pytest.importorskip("yaml")
    text = kserve_manifest("iris", "gs://bucket/models", gpus=1)
    doc = yaml.safe_load(text)
    assert doc["apiVersion"] == "serving.kserve.io/v1beta1"
    assert doc["kind"] == "InferenceService"
    assert doc["metadata"] == {"name": "iris"}
    model = doc["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "triton"}
    assert model["runtime"] == "kserve-tritonserver"
    assert model["protocolVersion"] == "v2"
    assert model["storageUri"] == "gs://bucket/models"
    assert model["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    grpc = yaml.safe_load(kserve_manifest("iris", "s3://b/m", protocol="grpc-v2"))
    assert grpc["spec"]["predictor"]["model"]["ports"][0]["name"] == "h2c"


def test_kserve_manifest_rejects_names_kubernetes_would_refuse() -> None:
    with pytest.raises(InvalidInputError, match=r"e\.g\. 'my-model'"):
        kserve_manifest("My_Model", "gs://b/m")
    with pytest.raises(InvalidInputError, match="protocol"):
        kserve_manifest("m", "gs://b/m", protocol="v3")


def test_yaml_emitter_quotes_what_yaml_would_misread() -> None:
    yaml = pytest.importorskip("yaml")
    data = {"a": "yes", "b": "1.5", "c": "x: y", "d": [{"e": "null", "f": 2}], "g": {}, "h": "ok"}
    assert yaml.safe_load(to_yaml(data)) == data


# -- CLI ------------------------------------------------------------------------------------------

_NATIVE = """
import numpy as np
from nbinfer.server.model import Model


class Triple(Model):
    name = "triple"
    inputs = [("x", "INT32", [-1])]
    outputs = [("y", "INT32", [-1])]

    def predict(self, inputs, context):
        return {"y": inputs["x"] * 3}
"""


def test_main_export_writes_the_entry_and_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    (repo / "triple" / "1").mkdir(parents=True)
    (repo / "triple" / "1" / "model.py").write_text(_NATIVE)
    manifest = tmp_path / "isvc.yaml"
    code = main_export(
        [
            "--model-repository", str(repo),
            "--model", "triple",
            "--out", str(tmp_path / "out"),
            "--kserve-manifest", str(manifest),
            "--storage-uri", "pvc://models/out",
        ]
    )  # fmt: skip
    assert code == 0
    assert "name: triple" in manifest.read_text()
    assert "source route; Triton's Python needs Python >=3.10 and numpy" in capsys.readouterr().out
    reloaded = load_model_dir(tmp_path / "out" / "triple")
    assert reloaded is not None
    got = _outputs(reloaded, "triple", [InferInput("x", "INT32", [2], np.array([1, 2], np.int32))])
    np.testing.assert_array_equal(got["y"], [3, 6])


def test_main_export_reports_an_unknown_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "repo" / "other").mkdir(parents=True)
    code = main_export(
        ["--model-repository", str(tmp_path / "repo"), "--model", "nope", "--out", str(tmp_path)]
    )
    assert code == 1
    assert "no model 'nope'" in capsys.readouterr().err


def test_exported_repository_is_served_by_the_server_process(tmp_path: Path) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    from nbinfer.server.launcher import LocalServer

    original = Iris()
    original.load()
    export_model(original, tmp_path / "repo")
    want = _outputs(Iris(), "iris", [InferInput("input", "FP32", [3, 4], IRIS_ROWS)])
    with (
        LocalServer(
            model_repository=tmp_path / "repo", demo=False, device="cpu", auth_token=None
        ) as server,
        httpclient.InferenceServerClient(server.http_url.removeprefix("http://")) as c,
    ):
        inp = httpclient.InferInput("input", [3, 4], "FP32")
        inp.set_data_from_numpy(IRIS_ROWS)
        result = c.infer("iris", [inp])
        np.testing.assert_allclose(
            result.as_numpy("probabilities"), want["probabilities"], rtol=1e-6
        )


def test_main_export_needs_a_storage_uri_for_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model-repository", str(tmp_path), "--model", "m", "--out", str(tmp_path)]
    assert main_export([*argv, "--kserve-manifest", str(tmp_path / "x.yaml")]) == 2
    assert "--storage-uri" in capsys.readouterr().err


# -- Triton's execution environment -------------------------------------------------------------

_WITH_ORJSON = """
import orjson
import numpy as np
from nbinfer.server.model import Model


class Pack(Model):
    name = "pack"
    inputs = [("x", "INT32", [-1])]
    outputs = [("y", "BYTES", [1])]

    def predict(self, inputs, context):
        return {"y": np.array([orjson.dumps(inputs["x"].tolist())], dtype=object)}
"""


def _repository_with(tmp_path: Path, name: str, source: str) -> Path:
    repo = tmp_path / "repo"
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(source)
    return repo


def test_execution_env_recipe_builds_the_python_and_packages_the_export_needs(
    tmp_path: Path,
) -> None:
    import shutil
    import subprocess
    import sys
    from importlib.metadata import version

    from google.protobuf import text_format

    from nbinfer.protocol._generated import model_config_pb2

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    repo = ModelRepository(_repository_with(tmp_path, "pack", _WITH_ORJSON), device="cpu")
    try:
        model = repo.resolve("pack").model
        assert model is not None
        path = export_model(model, tmp_path / "out", execution_env="python_env")
    finally:
        repo.close()
    script = path / "build_python_env.sh"
    text = script.read_text()
    assert subprocess.run([bash, "-n", str(script)], capture_output=True).returncode == 0
    assert f"PYTHON_VERSION={sys.version_info.major}.{sys.version_info.minor}\n" in text
    assert f"PACKAGES=(numpy orjson=={version('orjson')})\n" in text
    assert "conda-pack" in text and 'TARGET="$MODEL_DIR/python_env"' in text
    config = text_format.Parse((path / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    param = config.parameters["EXECUTION_ENV_PATH"].string_value
    assert param == "$$TRITON_MODEL_DIRECTORY/python_env"
    # without conda the script says so and builds nothing
    done = subprocess.run(
        [bash, str(script)], capture_output=True, text=True, env={"PATH": "/nonexistent"}
    )
    assert done.returncode == 127 and "needs conda" in done.stderr
    assert not (path / "python_env").exists()
    # nbinfer still serves the entry (the parameter is Triton's)
    reloaded = load_model_dir(path)
    assert reloaded is not None
    got = _outputs(reloaded, "pack", [InferInput("x", "INT32", [2], np.array([1, 2], np.int32))])
    assert got["y"].tolist() == [b"[1,2]"]


def test_the_distributions_of_imports_are_the_ones_importlib_names() -> None:
    # the exporter's own lookup (only the names asked, file lists parsed only where they may
    # hold one) against importlib's whole-environment map: a name whose distribution is named
    # otherwise (yaml: PyYAML), a namespace (google), a plain one, and one nobody provides
    from importlib.metadata import packages_distributions

    from nbinfer.server.export_python import _providers

    tops = {"yaml", "google", "orjson", "numpy", "no_such_module_here"}
    everything = packages_distributions()
    assert _providers(tops) == {t: everything[t] for t in tops if t in everything}
    assert "no_such_module_here" not in _providers(tops) and _providers(set()) == {}


def test_execution_env_follows_what_the_export_can_run_on(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from nbinfer.server.backends.torch import TorchModel

    def double(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return x * 2

    pickled = FunctionModel(double, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
    with pytest.raises(InvalidInputError, match=r"pickled: .* needs Python 3\.\d+.*not 3\.99"):
        export_model(pickled, tmp_path, execution_env="e", execution_env_python="3.99")
    with pytest.raises(InvalidInputError, match="give both"):
        export_model(pickled, tmp_path, execution_env_python="3.11")
    path = export_model(pickled, tmp_path, execution_env="env.tar.gz")
    assert "pip install" in (path / "build_python_env.sh").read_text()
    assert "cloudpickle" in (path / "build_python_env.sh").read_text()
    with pytest.raises(InvalidInputError, match="inside the model directory"):
        export_model(pickled, tmp_path, execution_env="../env")
    native = TorchModel(
        torch.nn.Identity(),
        name="same",
        inputs=[("x", "FP32", [-1])],
        outputs=[("y", "FP32", [-1])],
    )
    with pytest.raises(InvalidInputError, match=r"natively \(torchscript\).*does not apply"):
        export_model(native, tmp_path, execution_env="env.tar.gz")
    assert not (tmp_path / "same").exists()


def test_main_export_writes_the_execution_env_recipe_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repository_with(tmp_path, "triple", _NATIVE)
    argv = ["--model-repository", str(repo), "--model", "triple", "--out", str(tmp_path / "out")]
    assert main_export([*argv, "--execution-env", "--execution-env-python", "3.10"]) == 0
    out = capsys.readouterr().out
    script = tmp_path / "out" / "triple" / "build_python_env.sh"
    assert f"wrote {script}: run it (conda + conda-pack) to build python_env.tar.gz" in out
    assert "Python 3.10 and numpy" in out and "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz" in out
    assert "PYTHON_VERSION=3.10\n" in script.read_text()
    assert main_export([*argv, "--execution-env-python", "3.9", "--execution-env"]) == 1
    assert "needs Python >=3.10" in capsys.readouterr().err
