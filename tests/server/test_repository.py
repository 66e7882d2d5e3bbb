"""The model repository: config.pbtxt parsing, Triton layout, versions, failures, load / unload."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import (
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
)
from nbinfer.protocol.types import InferInput, InferRequest
from nbinfer.server import DataPlane, ModelRepository
from nbinfer.server.pbtxt import parse_pbtxt

DENSENET_PBTXT = """
# A Triton model configuration as found in Triton's examples.
name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0, 1 ] } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
}
version_policy: { specific: { versions: 1 versions: 3 } }
parameters: {
  key: "EXECUTION_ENV_PATH"
  value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" }
}
parameters { key: "note" value { string_value: "tab\\there \\"quoted\\"" } }
"""

ADD = """
from nbinfer.server import Model


class Add(Model):
    inputs = [("A", "INT32", [-1]), ("B", "INT32", [-1])]
    outputs = [("SUM", "INT32", [-1])]

    def predict(self, inputs, context):
        return inputs["A"] + inputs["B"] + {bias}
"""

SCALE = """
from nbinfer.server import Model


class Scale(Model):
    def predict(self, inputs, context):
        return {{"Y": inputs["X"] * {factor}}}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def infer_add(dp: DataPlane, name: str, version: str = "") -> list[int]:
    a = np.array([1, 2], np.int32)
    req = InferRequest(
        inputs=[InferInput("A", "INT32", [2], a), InferInput("B", "INT32", [2], a)],
        model_name=name,
        model_version=version,
    )
    resp = run(dp.infer(req))
    assert resp.outputs[0].data is not None
    result: list[int] = resp.outputs[0].data.tolist()
    return result


def test_pbtxt_parses_a_triton_config_into_triton_json() -> None:
    cfg = parse_pbtxt(DENSENET_PBTXT)
    assert cfg["name"] == "densenet_onnx"
    assert cfg["max_batch_size"] == 0
    assert cfg["input"] == [
        {
            "name": "data_0",
            "data_type": "TYPE_FP32",
            "format": "FORMAT_NCHW",
            "dims": [3, 224, 224],
            "reshape": {"shape": [1, 3, 224, 224]},
        }
    ]
    assert cfg["output"][0]["label_filename"] == "densenet_labels.txt"
    assert cfg["output"][0]["dims"] == [1000]
    assert cfg["instance_group"] == [{"count": 2, "kind": "KIND_GPU", "gpus": [0, 1]}]
    assert cfg["dynamic_batching"] == {
        "preferred_batch_size": [4, 8],
        "max_queue_delay_microseconds": 100,
    }
    assert cfg["version_policy"] == {"specific": {"versions": [1, 3]}}
    assert cfg["parameters"] == {
        "EXECUTION_ENV_PATH": {"string_value": "$$TRITON_MODEL_DIRECTORY/env.tar.gz"},
        "note": {"string_value": 'tab\there "quoted"'},
    }


def test_pbtxt_parse_agrees_with_protobufs_own_text_format_parser() -> None:
    from google.protobuf import text_format

    from nbinfer.protocol.grpc import pb
    from nbinfer.protocol.grpc_json import config_json_to_proto

    reference = text_format.Parse(DENSENET_PBTXT, pb.ModelConfig())
    assert config_json_to_proto(parse_pbtxt(DENSENET_PBTXT)) == reference


def test_pbtxt_single_values_of_repeated_fields_become_lists() -> None:
    cfg = parse_pbtxt(
        'output { name: "y" data_type: TYPE_STRING dims: 4 }\nversion_policy { all {} }'
    )
    assert cfg["output"] == [{"name": "y", "data_type": "TYPE_STRING", "dims": [4]}]
    assert cfg["version_policy"] == {"all": {}}


def test_pbtxt_errors_name_the_file_and_line() -> None:
    with pytest.raises(InvalidInputError, match=r"cfg.pbtxt:3: .*':'"):
        parse_pbtxt('name: "x"\n\nmax_batch_size 4\n', source="cfg.pbtxt")
    with pytest.raises(InvalidInputError, match="missing '}'"):
        parse_pbtxt("input { name: 'x'")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with good models and several kinds of broken ones."""
    write(tmp_path / "add" / "1" / "model.py", ADD.format(bias=0))
    write(
        tmp_path / "add" / "config.pbtxt",
        """
        name: "add"
        input [ { name: "A" data_type: TYPE_INT32 dims: [ -1 ] },
                { name: "B" data_type: TYPE_INT32 dims: [ -1 ] } ]
        output [ { name: "SUM" data_type: TYPE_INT32 dims: [ -1 ] } ]
        """,
    )
    # config-only declarations, three versions, all loaded
    for v, factor in (("1", 1), ("2", 2), ("3", 3)):
        write(tmp_path / "scale" / v / "model.py", SCALE.format(factor=factor))
    write(
        tmp_path / "scale" / "config.pbtxt",
        """
        name: "scale"
        max_batch_size: 4
        version_policy: { all { } }
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
        """,
    )
    write(tmp_path / "broken_import" / "1" / "model.py", "import does_not_exist_anywhere\n")
    write(tmp_path / "broken_config" / "1" / "model.py", ADD.format(bias=0))
    write(tmp_path / "broken_config" / "config.pbtxt", 'name: "broken_config"\ninput [ { name: ')
    write(tmp_path / "mismatch" / "1" / "model.py", ADD.format(bias=0))
    write(
        tmp_path / "mismatch" / "config.pbtxt",
        """
        input [ { name: "A" data_type: TYPE_FP64 dims: [ -1 ] },
                { name: "B" data_type: TYPE_INT32 dims: [ -1 ] } ]
        """,
    )
    write(tmp_path / "bad_dtype" / "1" / "model.py", SCALE.format(factor=1))
    write(
        tmp_path / "bad_dtype" / "config.pbtxt",
        'input [ { name: "X" data_type: TYPE_FLOAT99 dims: [ 2 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]',
    )
    write(tmp_path / "no_versions" / "config.pbtxt", 'name: "no_versions"\n')
    write(
        tmp_path / "tf_model" / "config.pbtxt",
        'name: "tf_model"\nplatform: "tensorflow_graphdef"\n',
    )
    (tmp_path / "tf_model" / "1").mkdir()
    (tmp_path / "tf_model" / "1" / "model.graphdef").write_bytes(b"\x00")
    write(
        tmp_path / "load_fails" / "1" / "model.py",
        """
        from nbinfer.server import Model

        class Boom(Model):
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP32", [1])]

            def load(self):
                raise RuntimeError("weights file is corrupt")
        """,
    )
    return tmp_path


def test_failing_models_are_reported_with_reasons_while_good_ones_serve(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo))
    rows = {(r.name, r.version): r for r in dp.repository_index()}
    assert rows[("add", "1")].state == "READY"
    assert [rows[("scale", v)].state for v in "123"] == ["READY"] * 3

    def reason(name: str, version: str = "1") -> str:
        row = rows[(name, version)]
        assert row.state == "UNAVAILABLE", row
        return row.reason

    assert "does_not_exist_anywhere" in reason("broken_import")
    assert "ModuleNotFoundError" in reason("broken_import")
    assert "config.pbtxt:2" in reason("broken_config", "")
    assert "'A'" in reason("mismatch") and "TYPE_FP64" in reason("mismatch")
    assert "TYPE_FLOAT99" in reason("bad_dtype")
    assert "no version directory" in reason("no_versions", "")
    assert "'tensorflow_graphdef' is not served here" in reason("tf_model")
    assert "weights file is corrupt" in reason("load_fails")

    assert infer_add(dp, "add") == [2, 4]
    assert dp.model_ready("add") and not dp.model_ready("load_fails")
    with pytest.raises(ModelNotReadyError, match="weights file is corrupt"):
        dp.model_metadata("load_fails")
    ready = {r.name for r in dp.repository_index(ready_only=True)}
    assert ready == {"add", "scale"}


def test_versions_latest_by_default_and_specific_on_request(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo))
    meta = dp.model_metadata("scale")
    assert meta.versions == ["1", "2", "3"]
    assert meta.inputs[0].shape == [-1, 2]

    def scale(version: str) -> list[list[float]]:
        x = np.ones((1, 2), np.float32)
        req = InferRequest(
            inputs=[InferInput("X", "FP32", [1, 2], x)], model_name="scale", model_version=version
        )
        resp = run(dp.infer(req))
        assert resp.model_version == (version or "3")
        return resp.outputs[0].data.tolist()  # type: ignore[union-attr]

    assert scale("") == [[3.0, 3.0]]
    assert scale("1") == [[1.0, 1.0]]
    assert scale("2") == [[2.0, 2.0]]
    with pytest.raises(
        ModelNotFoundError,
        match=r"^Request for unknown model: 'scale' version 9 is not found; versions: 1, 2, 3",
    ):
        scale("9")
    with pytest.raises(ModelNotFoundError, match="'scale' version 9 is not found"):
        dp.model_ready("scale", "9")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", ["3"]),
        ("version_policy: { latest { num_versions: 2 } }", ["2", "3"]),
        ("version_policy: { specific { versions: [1, 3] } }", ["1", "3"]),
        ("version_policy: { all { } }", ["1", "2", "3"]),
    ],
)
def test_version_policy_selects_versions(tmp_path: Path, policy: str, expected: list[str]) -> None:
    for v in "123":
        write(tmp_path / "m" / v / "model.py", SCALE.format(factor=v))
    write(
        tmp_path / "m" / "config.pbtxt",
        f"""
        {policy}
        input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        """,
    )
    repo = ModelRepository(tmp_path)
    assert [r.version for r in repo.index()] == expected


def test_config_json_and_label_file_are_read(tmp_path: Path) -> None:
    write(tmp_path / "cls" / "1" / "model.py", SCALE.format(factor=1))
    write(tmp_path / "cls" / "labels.txt", "cat\ndog\nbird\n\n")
    config = {
        "name": "cls",
        "max_batch_size": 2,
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [3]}],
        "output": [
            {"name": "Y", "data_type": "TYPE_FP32", "dims": [3], "label_filename": "labels.txt"}
        ],
        "parameters": {"flavour": {"string_value": "vanilla"}},
    }
    (tmp_path / "cls" / "config.json").write_text(json.dumps(config))
    repo = ModelRepository(tmp_path)
    model = repo.resolve("cls").model
    assert model is not None
    assert model.output_defs()[0].labels == ["cat", "dog", "bird"]
    assert model.max_batch_size == 2
    dp = DataPlane(repo)
    cfg = dp.model_config("cls")
    assert cfg["output"][0]["label_filename"] == "labels.txt"
    assert cfg["output"][0]["data_type"] == "TYPE_FP32"
    assert cfg["parameters"]["flavour"] == {"string_value": "vanilla"}
    assert cfg["max_batch_size"] == 2


def test_missing_label_file_fails_the_load_with_its_path(tmp_path: Path) -> None:
    write(tmp_path / "cls" / "1" / "model.py", SCALE.format(factor=1))
    write(
        tmp_path / "cls" / "config.pbtxt",
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "nope.txt" } ]',
    )
    (row,) = ModelRepository(tmp_path).index()
    assert row.state == "UNAVAILABLE" and "nope.txt" in row.reason


def test_model_py_may_define_a_decorated_function(tmp_path: Path) -> None:
    write(
        tmp_path / "neg" / "1" / "model.py",
        """
        import nbinfer.server.model as srv  # the module (nbinfer.server no longer shadows it)

        @srv.model(inputs=[("x", "INT8", [-1])], outputs=[("y", "INT8", [-1])])
        def negate(x):
            return -x
        """,
    )
    dp = DataPlane(ModelRepository(tmp_path))
    x = np.array([1, -2], np.int8)
    resp = run(dp.infer(InferRequest(inputs=[InferInput("x", "INT8", [2], x)], model_name="neg")))
    assert resp.outputs[0].data.tolist() == [-1, 2]  # type: ignore[union-attr]
    assert resp.model_name == "neg"


def test_explicit_mode_loads_nothing_until_asked(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo, load=False))
    rows = {r.name: r for r in dp.repository_index()}
    assert rows["add"].state == "UNAVAILABLE" and rows["add"].reason == "not loaded"
    with pytest.raises(ModelNotReadyError):
        infer_add(dp, "add")
    run(dp.load_model("add"))
    assert infer_add(dp, "add") == [2, 4]
    with pytest.raises(ModelNotFoundError, match="nothere"):
        run(dp.load_model("nothere"))
    with pytest.raises(ModelLoadError, match=r"^failed to load 'load_fails'.*corrupt"):
        run(dp.load_model("load_fails"))


def test_unload_then_reload(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo))

    async def scenario() -> None:
        await dp.unload_model("add")
        rows = {r.name: r for r in dp.repository_index()}
        assert rows["add"].state == "UNAVAILABLE" and rows["add"].reason == "unloaded"
        with pytest.raises(ModelNotReadyError, match="unloaded"):
            await dp.infer(InferRequest(inputs=[], model_name="add"))
        assert dp.model_ready("scale")
        await dp.load_model("add")
        assert dp.model_ready("add")
        with pytest.raises(ModelNotFoundError):
            await dp.unload_model("nothere")

    run(scenario())


def _closed_leaves_no_copies(dp: DataPlane, *names: str) -> None:
    """Close ``dp``: the temporary copies its uploads made for ``names`` are deleted."""
    copies = [dp.repository._entries[name].temp_dir for name in names]
    assert all(copy is not None and copy.is_dir() for copy in copies), copies
    run(dp.close())
    assert not [copy for copy in copies if copy is not None and copy.exists()], copies


def test_code_uploads_are_refused_unless_enabled_but_data_files_are_accepted(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo))
    for path in ("1/model.py", "1/model.pt", "1/weights.pkl", "1/lib.so"):
        with pytest.raises(InvalidInputError, match="--allow-code-upload"):
            run(dp.load_model("add", files={f"file:{path}": b"x"}))
    assert infer_add(dp, "add") == [2, 4]  # still the original, still serving
    run(dp.load_model("add", files={"file:labels.txt": b"a\nb\n"}))
    assert infer_add(dp, "add") == [2, 4]
    _closed_leaves_no_copies(dp, "add")


def test_load_with_file_and_config_overrides(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo, allow_code_upload=True))
    original = (repo / "add" / "1" / "model.py").read_text()
    # a new version of an existing model, uploaded; the repository on disk is untouched
    run(dp.load_model("add", files={"file:1/model.py": ADD.format(bias=100).encode()}))
    assert infer_add(dp, "add") == [102, 104]
    assert (repo / "add" / "1" / "model.py").read_text() == original
    # a brand-new model from files + config JSON
    config = json.dumps(
        {
            "name": "uploaded",
            "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}],
        }
    )
    run(
        dp.load_model(
            "uploaded", config=config, files={"file:1/model.py": SCALE.format(factor=5).encode()}
        )
    )
    x = np.array([1.0], np.float32)
    req = InferRequest(inputs=[InferInput("X", "FP32", [1], x)], model_name="uploaded")
    assert run(dp.infer(req)).outputs[0].data.tolist() == [5.0]
    assert not (repo / "uploaded").exists()
    # config override of a disk model: a different max_batch_size shows in its config
    override = json.loads(json.dumps(parse_pbtxt((repo / "scale" / "config.pbtxt").read_text())))
    override["max_batch_size"] = 2
    run(dp.load_model("scale", config=json.dumps(override)))
    assert dp.model_config("scale")["max_batch_size"] == 2
    with pytest.raises(InvalidInputError, match="inside the model directory"):
        run(dp.load_model("add", files={"file:../escape.py": b""}))
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        run(dp.load_model("add", config="{nope"))
    _closed_leaves_no_copies(dp, "add", "uploaded")


def test_failed_reload_keeps_the_previous_version_serving(repo: Path) -> None:
    dp = DataPlane(ModelRepository(repo, allow_code_upload=True))
    with pytest.raises(ModelLoadError, match=r"^failed to load 'add'.*SyntaxError"):
        run(dp.load_model("add", files={"file:1/model.py": b"def broken(:\n"}))
    assert infer_add(dp, "add") == [2, 4]
    assert dp.repository._entries["add"].temp_dir is None  # the failed copy went at once
    run(dp.close())


def test_in_memory_models_register_and_replace(tmp_path: Path) -> None:
    from nbinfer.server import FunctionModel

    repo = ModelRepository()
    repo.add(
        FunctionModel(
            lambda x: x + 1,
            name="inc",
            inputs=[("x", "INT32", [-1])],
            outputs=[("y", "INT32", [-1])],
        )
    )
    repo.add(
        FunctionModel(
            lambda x: x + 2,
            name="inc",
            inputs=[("x", "INT32", [-1])],
            outputs=[("y", "INT32", [-1])],
        )
    )
    dp = DataPlane(repo)
    x = np.array([1], np.int32)
    resp = run(dp.infer(InferRequest(inputs=[InferInput("x", "INT32", [1], x)], model_name="inc")))
    assert resp.outputs[0].data.tolist() == [3]  # type: ignore[union-attr]
    assert [r.name for r in repo.index()] == ["inc"]
    with pytest.raises(
        ModelNotFoundError,
        match=r"^Request for unknown model: 'nope' is not found; known models: inc",
    ):
        repo.resolve("nope")


def test_not_a_directory_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is not a directory"):
        ModelRepository(tmp_path / "missing")


def test_config_reshape_and_optional_inputs(tmp_path: Path) -> None:
    write(
        tmp_path / "shaped" / "1" / "model.py",
        """
        from nbinfer.server import Model

        class Shaped(Model):
            def predict(self, inputs, context):
                x = inputs["X"]
                assert x.shape == (2, 2), x.shape  # the reshape the config asks for
                extra = inputs.get("B")
                return {"Y": x.T + (0 if extra is None else extra)}
        """,
    )
    write(
        tmp_path / "shaped" / "config.pbtxt",
        """
        input [ { name: "X" data_type: TYPE_INT32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } },
                { name: "B" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]
        output [ { name: "Y" data_type: TYPE_INT32 dims: [ 2, 2 ] } ]
        """,
    )
    dp = DataPlane(ModelRepository(tmp_path))
    x = np.arange(4, dtype=np.int32)
    req = InferRequest(inputs=[InferInput("X", "INT32", [4], x)], model_name="shaped")
    assert run(dp.infer(req)).outputs[0].data.tolist() == [[0, 2], [1, 3]]  # type: ignore[union-attr]
    req.inputs.append(InferInput("B", "INT32", [1], np.array([10], np.int32)))
    assert run(dp.infer(req)).outputs[0].data.tolist() == [[10, 12], [11, 13]]  # type: ignore[union-attr]
    cfg = dp.model_config("shaped")
    assert cfg["input"][0]["reshape"] == {"shape": [2, 2]}
    assert cfg["input"][1]["optional"] is True


def test_duplicate_tensor_names_in_config_fail_the_load(tmp_path: Path) -> None:
    write(tmp_path / "dup" / "1" / "model.py", SCALE.format(factor=1))
    write(
        tmp_path / "dup" / "config.pbtxt",
        """
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] },
                { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
        """,
    )
    (row,) = ModelRepository(tmp_path).index()
    assert row.state == "UNAVAILABLE" and "duplicate input 'X'" in row.reason
