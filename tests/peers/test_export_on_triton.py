"""`nbinfer export` on a real Triton: portable exports load in a numpy-only Python and answer
exactly as nbinfer's embedded server does; configs parse with Triton's own proto; the KServe
manifest loads into kserve's own ``V1beta1InferenceService``."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import text_format

from nbinfer.client import Client
from nbinfer.errors import InvalidInputError
from nbinfer.protocol._generated import model_config_pb2
from nbinfer.server.export import kserve_manifest

PEER_MODELS = Path(__file__).parent / "models"

RNG = np.random.default_rng(7)
CASES: dict[str, dict[str, np.ndarray[Any, Any]]] = {
    "add_sub": {
        "INPUT0": RNG.standard_normal((3, 16)).astype(np.float32),
        "INPUT1": RNG.standard_normal((3, 16)).astype(np.float32),
    },
    "times_two": {"INPUT0": np.array([1, -7, 2**40], dtype=np.int64)},
    "upper": {"INPUT0": np.array([b"abc", "\u00e9t\u00e9".encode(), b""], dtype=object)},
    "negate": {"x": np.array([1.5, -2.0, 0.0], dtype=np.float32)},
    "echo": {"INPUT0": np.array([[b"a\x00b", b"xyz"]], dtype=object)},
}


def _answers(url: str, model: str) -> dict[str, Any]:
    with Client(url) as client:
        result = client.infer(model, CASES[model])
        return {o.name: result.as_numpy(o.name) for o in result.response.outputs}


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        if value.dtype == object:
            assert got[name].tolist() == value.tolist()
        else:
            np.testing.assert_array_equal(got[name], value)


@pytest.mark.parametrize("model", sorted(CASES))
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_portable_export_answers_on_triton_as_the_embedded_server(
    triton: Any, nbinfer_peer: Any, model: str, protocol: str
) -> None:
    url = triton.http_url if protocol == "http" else triton.grpc_url
    _assert_same(_answers(url, model), _answers(nbinfer_peer.http_url, model))


def test_tritonclient_reads_the_exports_as_nbinfer_does(triton: Any, nbinfer_peer: Any) -> None:
    import tritonclient.grpc as grpcclient

    with grpcclient.InferenceServerClient(triton.grpc_url.removeprefix("grpc://")) as client:
        inputs = []
        for name, value in CASES["add_sub"].items():
            tensor = grpcclient.InferInput(name, list(value.shape), "FP32")
            tensor.set_data_from_numpy(value)
            inputs.append(tensor)
        result = client.infer("add_sub", inputs)
        want = _answers(nbinfer_peer.http_url, "add_sub")
        _assert_same({n: result.as_numpy(n) for n in want}, want)


def test_exports_need_no_nbinfer_and_no_cloudpickle(triton_repository: Path) -> None:
    for name in ("add_sub", "times_two", "upper", "negate", "echo"):
        version = triton_repository / name / "1"
        settings = json.loads((version / "nbinfer_export.json").read_text())
        assert settings["route"] == "source", (name, settings)
        assert settings["requires"]["packages"] == ["numpy"]
        assert not list(version.glob("*.pkl"))
        runtime = (version / "nbinfer_runtime.py").read_text()
        assert not re.search(r"^\s*(from nbinfer|import (nbinfer|cloudpickle))", runtime, re.M)


def test_exported_configs_parse_with_tritons_model_config_proto(triton_repository: Path) -> None:
    for config_file in sorted(triton_repository.glob("*/config.pbtxt")):
        config = text_format.Parse(config_file.read_text(), model_config_pb2.ModelConfig())
        assert config.name == config_file.parent.name and config.backend == "python"


def test_exported_batching_model_keeps_the_batch_dim_implicit(
    tmp_path: Path, triton_launcher: Any, nbinfer_peer: Any
) -> None:
    import nbinfer

    src = tmp_path / "src.py"
    src.write_text(
        "import nbinfer\n\n\nclass Scale(nbinfer.Model):\n"
        "    name = 'scale'\n    max_batch_size = 8\n"
        "    inputs = [('x', 'FP32', [3])]\n    outputs = [('y', 'FP32', [3])]\n\n"
        "    def predict(self, inputs, context):\n        return {'y': inputs['x'] * 3}\n"
    )
    spec = importlib.util.spec_from_file_location("peer_user_scale", src)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_user_scale"] = module
    spec.loader.exec_module(module)
    from nbinfer.server.export import export_model

    path = export_model(module.Scale(), tmp_path / "repo")
    config = text_format.Parse((path / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert config.max_batch_size == 8 and list(config.input[0].dims) == [3]
    peer = triton_launcher(tmp_path / "repo", models=("scale",))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with nbinfer.Client(peer.http_url) as client:
        meta = client.get_model_metadata("scale")
        assert list(meta.inputs[0].shape) == [-1, 3]
        np.testing.assert_array_equal(client.infer("scale", {"x": x}).as_numpy("y"), x * 3)


def test_triton_runs_the_export_in_the_execution_env_it_names(
    tmp_path: Path, triton_launcher: Any
) -> None:
    """``execution_env=`` writes an ``EXECUTION_ENV_PATH`` the real Triton loads the model with.

    The recipe script needs conda, which CI has not: the stock numpy-only venv stands in for
    what it builds (an unpacked environment with ``bin/activate``, as conda-pack's has), and
    Triton starts with a PATH whose Python has no numpy, so only that environment can run it.
    """
    from venvs import ensure_venv

    from nbinfer.server.export import export_model
    from nbinfer.server.repository import ModelRepository

    repo = ModelRepository(PEER_MODELS, device="cpu")
    try:
        model = repo.resolve("negate").model
        assert model is not None
        path = export_model(model, tmp_path / "repo", execution_env="python_env")
    finally:
        repo.close()
    assert (path / "build_python_env.sh").is_file()
    env = ensure_venv("stock-python")
    (path / "python_env").symlink_to(env, target_is_directory=True)
    peer = triton_launcher(
        tmp_path / "repo", models=("negate",), flags=("--log-verbose=1",), path="/usr/bin:/bin"
    )
    x = CASES["negate"]["x"]
    with Client(peer.http_url) as client:
        np.testing.assert_array_equal(client.infer("negate", {"x": x}).as_numpy("y"), -x)
    assert peer.log is not None
    peer.log.seek(0)
    assert f"source {env.resolve()}/bin/activate" in peer.log.read().decode(errors="replace")


_VALIDATE = """
import json, re, sys
import kubernetes.client
import kserve.models
import yaml
from kserve import V1beta1InferenceService

def build(type_name, value, where):
    # kserve's own models, their openapi_types / attribute_map; unknown keys are errors
    if value is None or type_name in ("str", "int", "bool", "float", "object"):
        return value
    found = re.match(r"(?:list|List)\\[(.*)\\]$", type_name)
    if found:
        return [build(found.group(1), v, f"{where}[{i}]") for i, v in enumerate(value)]
    found = re.match(r"(?:dict\\(str, (.*)\\)|Dict\\[str, (.*)\\])$", type_name)
    if found:
        inner = found.group(1) or found.group(2)
        return {k: build(inner, v, f"{where}.{k}") for k, v in value.items()}
    cls = getattr(kserve.models, type_name, None) or getattr(kubernetes.client, type_name)
    by_key = {key: attr for attr, key in cls.attribute_map.items()}
    unknown = sorted(set(value) - set(by_key))
    if unknown:
        raise SystemExit(f"{where}: {type_name} has no field(s) {unknown}")
    kwargs = {by_key[k]: build(cls.openapi_types[by_key[k]], v, f"{where}.{k}")
              for k, v in value.items()}
    return cls(**kwargs)

doc = yaml.safe_load(sys.stdin.read())
isvc = build("V1beta1InferenceService", doc, "InferenceService")
assert isinstance(isvc, V1beta1InferenceService), type(isvc)
model = isvc.spec.predictor.model
print(json.dumps({"name": isvc.metadata.name, "format": model.model_format.name,
                  "runtime": model.runtime, "protocol": model.protocol_version,
                  "uri": model.storage_uri}))
"""


@pytest.mark.parametrize("protocol", ["v2", "grpc-v2"])
def test_kserve_manifest_loads_into_kserves_inference_service(protocol: str) -> None:
    if importlib.util.find_spec("kserve") is None:  # imported only in a subprocess: protos clash
        pytest.skip("kserve is not installed (it comes with nbinfer[test])")
    text = kserve_manifest("add-sub", "gs://bucket/repo", protocol=protocol, gpus=1)
    done = subprocess.run(
        [sys.executable, "-c", _VALIDATE], input=text, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "name": "add-sub",
        "format": "triton",
        "runtime": "kserve-tritonserver",
        "protocol": protocol,
        "uri": "gs://bucket/repo",
    }


def test_kserve_combinations_kserve_rejects_are_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"kserve-tritonserver.*v2"):
        kserve_manifest("m", "gs://b/r", runtime="triton", protocol="v1")
