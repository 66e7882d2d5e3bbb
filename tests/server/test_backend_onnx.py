"""ONNX Runtime backend: ONNX files served from a Triton-layout repository (CPU only)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.types import InferInput, InferRequest, RequestedOutput
from nbinfer.server.backends import load_model_dir, model_from_repository_entry
from nbinfer.server.dataplane import DataPlane
from nbinfer.server.model_config import read_config
from nbinfer.server.repository import ModelRepository

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

W = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [0.5, 0.5, 0.0], [1.0, 1.0, 1.0]], np.float32)
BIAS = np.array([0.1, -0.2, 0.3], np.float32)


def _save(graph: Any, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def linear_onnx(path: Path) -> Path:
    """y = x @ W + b, x: float[N, 4] -> y: float[N, 3]; also 'n' = number of rows (int64)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    n = helper.make_tensor_value_info("rows", TensorProto.INT64, [1])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "B"], ["y"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "one"], ["rows"]),
    ]
    inits = [
        helper.make_tensor("W", TensorProto.FLOAT, [4, 3], W.reshape(-1).tolist()),
        helper.make_tensor("B", TensorProto.FLOAT, [3], BIAS.tolist()),
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
    ]
    return _save(helper.make_graph(nodes, "linear", [x], [y, n], inits), path)


def add_onnx(path: Path) -> Path:
    """z = a + b over int32[N, 2]."""
    a = helper.make_tensor_value_info("a", TensorProto.INT32, ["N", 2])
    b = helper.make_tensor_value_info("b", TensorProto.INT32, ["N", 2])
    z = helper.make_tensor_value_info("z", TensorProto.INT32, ["N", 2])
    return _save(
        helper.make_graph([helper.make_node("Add", ["a", "b"], ["z"])], "add", [a, b], [z]), path
    )


@pytest.fixture()
def onnx_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    linear_onnx(repo / "linear" / "1" / "model.onnx")
    (repo / "linear" / "config.pbtxt").write_text(
        'name: "linear"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 16\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "labels.txt" } ]\n'
    )
    (repo / "linear" / "labels.txt").write_text("a\nb\nc\n")
    add_onnx(repo / "add" / "1" / "model.onnx")  # no config at all: Triton guesses from the file
    return repo


def _infer(model: Any, request: InferRequest) -> Any:
    async def main() -> Any:
        dp = DataPlane(ModelRepository(models=[model], device="cpu"))
        try:
            return await dp.infer(request)
        finally:
            await dp.close()

    return asyncio.run(main())


def test_onnx_model_declares_tensors_from_session_metadata(tmp_path: Path) -> None:
    from nbinfer.server.backends.onnx import OnnxModel

    m = OnnxModel(linear_onnx(tmp_path / "m.onnx"), name="linear")
    assert [(d.name, d.datatype, d.dims) for d in m.input_defs()] == [("x", "FP32", [-1, 4])]
    assert [(d.name, d.datatype, d.dims) for d in m.output_defs()] == [
        ("y", "FP32", [-1, 3]),
        ("rows", "INT64", [1]),
    ]
    assert m.platform == "onnxruntime_onnx"


def test_onnx_max_batch_size_excludes_the_batch_dim(tmp_path: Path) -> None:
    from nbinfer.server.backends.onnx import OnnxModel

    m = OnnxModel(add_onnx(tmp_path / "m.onnx"), name="add", max_batch_size=4)
    assert [d.dims for d in m.input_defs()] == [[2], [2]]
    batched = OnnxModel(linear_onnx(tmp_path / "l.onnx"), name="l", max_batch_size=4)
    with pytest.raises(InvalidInputError, match="'rows' has shape \\[1\\]"):
        batched.output_defs()


def test_onnx_declared_dims_must_fit_the_file(tmp_path: Path) -> None:
    from nbinfer.server.backends.onnx import OnnxModel

    path = linear_onnx(tmp_path / "m.onnx")
    with pytest.raises(InvalidInputError, match=r"declared dims \[-1, 5\] do not fit"):
        OnnxModel(path, name="m", inputs=[("x", "FP32", [-1, 5])]).input_defs()
    with pytest.raises(InvalidInputError, match="declared FP64 but the file has FP32"):
        OnnxModel(path, name="m", inputs=[("x", "FP64", [-1, 4])]).input_defs()
    with pytest.raises(InvalidInputError, match="has no input 'q'"):
        OnnxModel(path, name="m", inputs=[("q", "FP32", [-1, 4])]).input_defs()
    with pytest.raises(InvalidInputError, match="not found"):
        OnnxModel(tmp_path / "missing.onnx", name="m")


def test_onnx_entry_in_triton_layout_serves_through_the_dataplane(onnx_repo: Path) -> None:
    model = load_model_dir(onnx_repo / "linear")
    assert model is not None and model.max_batch_size == 16
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    request = InferRequest(
        model_name="linear",
        inputs=[InferInput("x", "FP32", [2, 4], x)],
        outputs=[RequestedOutput("y", class_count=1)],
    )
    resp = _infer(model, request)
    scores = x @ W + BIAS
    best = scores.argmax(axis=1)
    got = resp.outputs[0].data.reshape(-1)
    labels = ["a", "b", "c"]
    assert [g.decode().split(":")[2] for g in got] == [labels[i] for i in best]


def test_onnx_computes_only_the_requested_outputs(onnx_repo: Path) -> None:
    model = load_model_dir(onnx_repo / "linear")
    assert model is not None
    x = np.ones((3, 4), np.float32)
    resp = _infer(
        model,
        InferRequest(
            model_name="linear",
            inputs=[InferInput("x", "FP32", [3, 4], x)],
            outputs=[RequestedOutput("y")],
        ),
    )
    assert [o.name for o in resp.outputs] == ["y"]
    np.testing.assert_allclose(resp.outputs[0].data, x @ W + BIAS, rtol=1e-6)


def test_onnx_file_without_config_is_found_by_its_name(onnx_repo: Path) -> None:
    mdir = onnx_repo / "add"
    model = model_from_repository_entry(mdir, mdir / "1", read_config(mdir))
    assert model is not None and model.platform == "onnxruntime_onnx"
    a = np.array([[1, 2], [3, 4]], np.int32)
    resp = _infer(
        model,
        InferRequest(
            model_name="add",
            inputs=[InferInput("a", "INT32", [2, 2], a), InferInput("b", "INT32", [2, 2], a)],
        ),
    )
    np.testing.assert_array_equal(resp.outputs[0].data, a * 2)


def test_onnx_string_tensors_travel_as_bytes(tmp_path: Path) -> None:
    from nbinfer.server.backends.onnx import OnnxModel

    s_in = helper.make_tensor_value_info("text", TensorProto.STRING, ["N"])
    s_out = helper.make_tensor_value_info("same", TensorProto.STRING, ["N"])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["text"], ["same"])], "id", [s_in], [s_out]
    )
    model = OnnxModel(_save(graph, tmp_path / "id.onnx"), name="id")
    assert model.input_defs()[0].datatype == "BYTES"
    text = np.array([b"caf\xc3\xa9", b"x"], dtype=object)
    resp = _infer(
        model, InferRequest(model_name="id", inputs=[InferInput("text", "BYTES", [2], text)])
    )
    assert list(resp.outputs[0].data) == [b"caf\xc3\xa9", b"x"]


def test_onnx_entry_without_the_file_names_what_is_missing(tmp_path: Path) -> None:
    mdir = tmp_path / "empty"
    (mdir / "1").mkdir(parents=True)
    with pytest.raises(InvalidInputError, match=r"no model\.onnx"):
        model_from_repository_entry(mdir, mdir / "1", {"platform": "onnxruntime_onnx"})


def test_missing_onnxruntime_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbinfer.server.backends.onnx import OnnxModel

    path = linear_onnx(tmp_path / "m.onnx")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r"pip install 'nbinfer\[onnx\]'"):
        OnnxModel(path, name="m")


def test_server_process_serves_onnx_from_a_triton_repository(onnx_repo: Path) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    from nbinfer.server.launcher import LocalServer

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with (
        LocalServer(
            model_repository=onnx_repo, demo=False, device="cpu", auth_token=None
        ) as server,
        httpclient.InferenceServerClient(server.http_url.removeprefix("http://")) as c,
    ):
        meta = c.get_model_metadata("linear")
        assert meta["platform"] == "onnxruntime_onnx"
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
        inp = httpclient.InferInput("x", [3, 4], "FP32")
        inp.set_data_from_numpy(x)
        result = c.infer("linear", [inp])
        np.testing.assert_allclose(result.as_numpy("y"), x @ W + BIAS, rtol=1e-6)
