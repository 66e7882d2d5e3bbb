"""Triton Python-backend models (``TritonPythonModel``) run unchanged through nbinfer's shim.

The model files below are written exactly as a Triton user writes them. They are served through
the backend dispatcher + DataPlane, through nbinfer's real HTTP and gRPC frontends (in a thread
of this process, spoken to with tritonclient), and through a ``python -m nbinfer.server``
process reading the repository.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import InferenceError, InvalidInputError
from nbinfer.protocol.types import InferInput, InferRequest, RequestedOutput
from nbinfer.server.backends import load_model_dir, model_from_repository_entry
from nbinfer.server.backends import triton_utils as pb_utils
from nbinfer.server.backends.python_backend import TritonPythonBackendModel
from nbinfer.server.dataplane import DataPlane
from nbinfer.server.repository import ModelRepository

# -- the models, as a Triton user writes them ---------------------------------------------------

ADD_SUB_MODEL = '''
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Adds and subtracts two vectors, scaled by a weight file next to this model."""

    def initialize(self, args):
        self.model_config = model_config = json.loads(args["model_config"])
        output0_config = pb_utils.get_output_config_by_name(model_config, "OUTPUT0")
        output1_config = pb_utils.get_output_config_by_name(model_config, "OUTPUT1")
        self.output0_dtype = pb_utils.triton_string_to_numpy(output0_config["data_type"])
        self.output1_dtype = pb_utils.triton_string_to_numpy(output1_config["data_type"])
        weights = os.path.join(args["model_repository"], args["model_version"], "scale.npy")
        self.scale = np.load(weights)
        self.args = dict(args)
        self.finalize_marker = os.path.join(args["model_repository"], "finalized.txt")

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            params = json.loads(request.parameters())
            if params.get("fail"):
                error = pb_utils.TritonError("asked to fail: " + str(params["fail"]))
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
                continue
            if params.get("raise"):
                raise pb_utils.TritonModelException("execute raised on purpose")
            a = in_0.as_numpy()
            b = in_1.as_numpy()
            out_0 = pb_utils.Tensor("OUTPUT0", ((a + b) * self.scale).astype(self.output0_dtype))
            out_1 = pb_utils.Tensor("OUTPUT1", ((a - b) * self.scale).astype(self.output1_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out_0, out_1]))
        return responses

    def finalize(self):
        with open(self.finalize_marker, "w") as f:
            f.write("finalized")
'''

ADD_SUB_CONFIG = """
name: "add_sub_py"
backend: "python"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_FP64
    dims: [ 4 ]
  }
]
instance_group [ { kind: KIND_CPU } ]
"""

UPPER_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Upper-cases strings; declares its tensors in auto_complete_config (no config inputs)."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        inputs = [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]}]
        outputs = [{"name": "UPPER", "data_type": "TYPE_STRING", "dims": [-1]}]
        config = auto_complete_model_config.as_dict()
        input_names = [i["name"] for i in config["input"]]
        output_names = [o["name"] for o in config["output"]]
        for inp in inputs:
            if inp["name"] not in input_names:
                auto_complete_model_config.add_input(inp)
        for out in outputs:
            if out["name"] not in output_names:
                auto_complete_model_config.add_output(out)
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            upper = np.array([t.decode("utf-8").upper().encode("utf-8") for t in text],
                             dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("UPPER", upper)]))
        return responses
'''

UPPER_CONFIG = 'backend: "python"\n'


def write_triton_python_repository(root: Path) -> Path:
    add_sub = root / "add_sub_py"
    (add_sub / "1").mkdir(parents=True)
    (add_sub / "config.pbtxt").write_text(ADD_SUB_CONFIG)
    (add_sub / "1" / "model.py").write_text(textwrap.dedent(ADD_SUB_MODEL))
    np.save(add_sub / "1" / "scale.npy", np.float32(2.0))
    upper = root / "upper_py"
    (upper / "1").mkdir(parents=True)
    (upper / "config.pbtxt").write_text(UPPER_CONFIG)
    (upper / "1" / "model.py").write_text(textwrap.dedent(UPPER_MODEL))
    return root


@pytest.fixture()
def triton_repo(tmp_path: Path) -> Path:
    return write_triton_python_repository(tmp_path / "repo")


def _vectors() -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, dtype=np.float32)
    return a, b


def _add_sub_request(**params: Any) -> InferRequest:
    a, b = _vectors()
    return InferRequest(
        model_name="add_sub_py",
        inputs=[InferInput("INPUT0", "FP32", [2, 4], a), InferInput("INPUT1", "FP32", [2, 4], b)],
        parameters=dict(params),
    )


def _dataplane(*models: Any) -> DataPlane:
    return DataPlane(ModelRepository(models=list(models), device="cpu"))


# -- the shim ---------------------------------------------------------------------------------


def test_shim_is_importable_under_tritons_name_once_a_model_loads(triton_repo: Path) -> None:
    load_model_dir(triton_repo / "add_sub_py")
    import triton_python_backend_utils as imported  # type: ignore[import-not-found]

    assert imported is sys.modules["triton_python_backend_utils"]
    assert imported.Tensor is pb_utils.Tensor


def test_shim_does_not_replace_an_existing_triton_python_backend_utils(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sentinel = type(sys)("triton_python_backend_utils")
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", sentinel)
    assert pb_utils.install() is sentinel


def test_shim_dtype_helpers_follow_triton() -> None:
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    assert pb_utils.triton_string_to_numpy("TYPE_BOOL") is np.bool_
    assert pb_utils.triton_string_to_numpy("TYPE_NOPE") is None
    assert pb_utils.numpy_to_triton_type(np.int64) == 9
    assert pb_utils.triton_to_numpy_type(11) is np.float32
    encoded = pb_utils.serialize_byte_tensor(np.array([b"ab", b"c"], dtype=object))
    assert list(pb_utils.deserialize_bytes_tensor(encoded.item())) == [b"ab", b"c"]


def test_shim_lookup_helpers_return_none_for_unknown_names() -> None:
    t = pb_utils.Tensor("X", np.ones(3, np.float32))
    req = pb_utils.InferenceRequest(model_name="m", inputs=[t], requested_output_names=["Y"])
    assert pb_utils.get_input_tensor_by_name(req, "X") is t
    assert pb_utils.get_input_tensor_by_name(req, "Z") is None
    resp = pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", np.zeros(1))])
    assert pb_utils.get_output_tensor_by_name(resp, "Y").name() == "Y"
    assert pb_utils.get_output_tensor_by_name(resp, "Q") is None
    config = {"input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [3]}], "output": []}
    assert pb_utils.get_input_config_by_name(config, "X")["dims"] == [3]
    assert pb_utils.get_output_config_by_name(config, "X") is None
    with pytest.raises(pb_utils.TritonModelException, match="BLS"):
        req.exec()


# -- dispatch + DataPlane ---------------------------------------------------------------------


def test_dispatcher_picks_the_python_backend_for_triton_models(triton_repo: Path) -> None:
    model_dir = triton_repo / "add_sub_py"
    from nbinfer.server.model_config import read_config

    model = model_from_repository_entry(model_dir, model_dir / "1", read_config(model_dir))
    assert isinstance(model, TritonPythonBackendModel)
    assert [d.name for d in model.input_defs()] == ["INPUT0", "INPUT1"]
    assert model.max_batch_size == 8


def test_dispatcher_leaves_nbinfer_models_to_the_repository(tmp_path: Path) -> None:
    vdir = tmp_path / "native" / "1"
    vdir.mkdir(parents=True)
    (vdir / "model.py").write_text("from nbinfer.server.model import Model\n")
    assert model_from_repository_entry(vdir.parent, vdir, {"backend": "python"}) is None
    assert model_from_repository_entry(vdir.parent, vdir, {}) is None


def test_triton_python_model_serves_through_the_dataplane(triton_repo: Path) -> None:
    model = load_model_dir(triton_repo / "add_sub_py")
    assert model is not None

    async def main() -> Any:
        dp = _dataplane(model)
        try:
            return await dp.infer(_add_sub_request())
        finally:
            await dp.close()

    resp = asyncio.run(main())
    a, b = _vectors()
    out = {o.name: o for o in resp.outputs}
    np.testing.assert_allclose(out["OUTPUT0"].data, (a + b) * 2)
    assert out["OUTPUT1"].datatype == "FP64"
    np.testing.assert_allclose(out["OUTPUT1"].data, (a - b) * 2)
    assert (triton_repo / "add_sub_py" / "finalized.txt").read_text() == "finalized"


def test_initialize_gets_tritons_args(triton_repo: Path) -> None:
    model = load_model_dir(triton_repo / "add_sub_py")
    assert isinstance(model, TritonPythonBackendModel)
    model.device = "cpu"
    model.finalize()
    model.load()
    args = model.instance.args
    assert args["model_name"] == "add_sub_py"
    assert args["model_version"] == "1"
    assert args["model_instance_kind"] == "CPU"
    assert args["model_instance_name"] == "add_sub_py_0_0"
    assert Path(args["model_repository"]) == triton_repo / "add_sub_py"
    config = json.loads(args["model_config"])
    assert config["max_batch_size"] == 8
    assert config["backend"] == "python"
    assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
    model.unload()


def test_error_response_becomes_inference_error_with_the_models_message(
    triton_repo: Path,
) -> None:
    model = load_model_dir(triton_repo / "add_sub_py")

    async def main(**params: Any) -> None:
        dp = _dataplane(model)
        try:
            await dp.infer(_add_sub_request(**params))
        finally:
            await dp.close()

    with pytest.raises(InferenceError, match="asked to fail: please"):
        asyncio.run(main(fail="please"))
    model = load_model_dir(triton_repo / "add_sub_py")
    with pytest.raises(InferenceError, match="execute raised on purpose"):
        asyncio.run(main(**{"raise": True}))


def test_auto_complete_config_declares_bytes_tensors(triton_repo: Path) -> None:
    model = load_model_dir(triton_repo / "upper_py")
    assert model is not None
    assert [(d.name, d.datatype, d.dims) for d in model.input_defs()] == [("TEXT", "BYTES", [-1])]

    async def main() -> Any:
        dp = _dataplane(model)
        try:
            text = np.array([b"hello", "w\u00f6rld".encode()], dtype=object)
            req = InferRequest(
                model_name="upper_py",
                inputs=[InferInput("TEXT", "BYTES", [2], text)],
                outputs=[RequestedOutput("UPPER")],
            )
            return await dp.infer(req)
        finally:
            await dp.close()

    resp = asyncio.run(main())
    assert list(resp.outputs[0].data) == [b"HELLO", "W\u00d6RLD".encode()]


def test_model_py_without_tensor_declarations_is_rejected(tmp_path: Path) -> None:
    mdir = tmp_path / "bare"
    (mdir / "1").mkdir(parents=True)
    (mdir / "config.pbtxt").write_text('backend: "python"\n')
    (mdir / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    )
    with pytest.raises(InvalidInputError, match="declares no inputs"):
        load_model_dir(mdir)


def test_broken_import_names_the_file(tmp_path: Path) -> None:
    mdir = tmp_path / "broken"
    (mdir / "1").mkdir(parents=True)
    (mdir / "config.pbtxt").write_text('backend: "python"\n')
    (mdir / "1" / "model.py").write_text(
        "import no_such_module_xyz\n\nclass TritonPythonModel:\n    pass\n"
    )
    with pytest.raises(InvalidInputError, match=r"model\.py.*no_such_module_xyz"):
        load_model_dir(mdir)


# -- real HTTP + gRPC frontends (in a thread) ---------------------------------------------------


@contextlib.contextmanager
def serve_in_thread(dp: DataPlane) -> Iterator[tuple[str, str]]:
    """nbinfer's real HTTP + gRPC frontends over ``dp`` on 127.0.0.1 (free ports)."""
    from nbinfer.server.app import ServerOptions, serve_async

    ready = threading.Event()
    urls: list[str] = []
    loop = asyncio.new_event_loop()
    stop_holder: list[asyncio.Event] = []
    errors: list[BaseException] = []

    def on_ready(http_url: str, grpc_url: str) -> None:
        urls.extend([http_url, grpc_url])
        ready.set()

    async def main() -> None:
        stop = asyncio.Event()
        stop_holder.append(stop)
        await serve_async(ServerOptions(), stop=stop, on_ready=on_ready, dataplane=dp)

    def run() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            ready.set()
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30), "server thread did not become ready"
    if errors:
        raise errors[0]
    try:
        yield urls[0], urls[1]
    finally:
        loop.call_soon_threadsafe(stop_holder[0].set)
        thread.join(15)


@pytest.fixture()
def triton_python_server(triton_repo: Path) -> Iterator[tuple[str, str]]:
    models = [load_model_dir(triton_repo / n) for n in ("add_sub_py", "upper_py")]
    with serve_in_thread(_dataplane(*models)) as urls:
        yield urls


def test_triton_python_model_serves_over_http_with_tritonclient(
    triton_python_server: tuple[str, str],
) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    http_url, _ = triton_python_server
    a, b = _vectors()
    with httpclient.InferenceServerClient(http_url.removeprefix("http://")) as client:
        assert client.is_model_ready("add_sub_py")
        inputs = [
            httpclient.InferInput("INPUT0", [2, 4], "FP32"),
            httpclient.InferInput("INPUT1", [2, 4], "FP32"),
        ]
        inputs[0].set_data_from_numpy(a, binary_data=True)
        inputs[1].set_data_from_numpy(b, binary_data=False)
        result = client.infer("add_sub_py", inputs)
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), (a + b) * 2)
        np.testing.assert_allclose(result.as_numpy("OUTPUT1"), (a - b) * 2)
        assert result.as_numpy("OUTPUT1").dtype == np.float64
        text = httpclient.InferInput("TEXT", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"triton"], dtype=object))
        upper = client.infer("upper_py", [text]).as_numpy("UPPER")
        assert list(upper) == [b"TRITON"]
        from tritonclient.utils import InferenceServerException

        with pytest.raises(InferenceServerException, match="asked to fail: yes"):
            client.infer("add_sub_py", inputs, parameters={"fail": "yes"})


def test_triton_python_model_serves_over_grpc_with_tritonclient(
    triton_python_server: tuple[str, str],
) -> None:
    grpcclient = pytest.importorskip("tritonclient.grpc")
    _, grpc_url = triton_python_server
    a, b = _vectors()
    with grpcclient.InferenceServerClient(grpc_url) as client:
        inputs = [
            grpcclient.InferInput("INPUT0", [2, 4], "FP32"),
            grpcclient.InferInput("INPUT1", [2, 4], "FP32"),
        ]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        outputs = [grpcclient.InferRequestedOutput("OUTPUT1")]
        result = client.infer("add_sub_py", inputs, outputs=outputs)
        np.testing.assert_allclose(result.as_numpy("OUTPUT1"), (a - b) * 2)
        assert result.as_numpy("OUTPUT0") is None
        config = client.get_model_config("add_sub_py", as_json=True)["config"]
        assert config["max_batch_size"] == 8


# -- through the server process reading the repository ------------------------------------


def test_server_process_serves_an_unmodified_triton_python_repository(triton_repo: Path) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    grpcclient = pytest.importorskip("tritonclient.grpc")
    from nbinfer.server.launcher import LocalServer

    a, b = _vectors()
    with LocalServer(
        model_repository=triton_repo, demo=False, device="cpu", auth_token=None
    ) as server:
        with httpclient.InferenceServerClient(server.http_url.removeprefix("http://")) as c:
            inputs = [
                httpclient.InferInput("INPUT0", [2, 4], "FP32"),
                httpclient.InferInput("INPUT1", [2, 4], "FP32"),
            ]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(b)
            result = c.infer("add_sub_py", inputs)
            np.testing.assert_allclose(result.as_numpy("OUTPUT0"), (a + b) * 2)
        with grpcclient.InferenceServerClient(server.grpc_address) as g:
            text = grpcclient.InferInput("TEXT", [1], "BYTES")
            text.set_data_from_numpy(np.array([b"abc"], dtype=object))
            assert list(g.infer("upper_py", [text]).as_numpy("UPPER")) == [b"ABC"]


def test_a_dynamic_batch_reaches_execute_as_one_request_per_client_request(
    tmp_path: Path,
) -> None:
    mdir = tmp_path / "count_py"
    (mdir / "1").mkdir(parents=True)
    (mdir / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 8\n'
        "dynamic_batching { max_queue_delay_microseconds: 200000 preferred_batch_size: [ 4 ] }\n"
        'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "SEEN" data_type: TYPE_INT32 dims: [ 2 ] } ]\n'
    )
    (mdir / "1" / "model.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def execute(self, requests):
                    out = []
                    for r in requests:
                        x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                        seen = np.array([[len(requests), v] for v in x.ravel()], np.int32)
                        out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", seen)]))
                    return out
            """
        )
    )

    async def main() -> list[Any]:
        dp = DataPlane(ModelRepository(tmp_path, device="cpu"))
        try:
            requests = [
                InferRequest(
                    model_name="count_py",
                    inputs=[InferInput("X", "INT32", [rows, 1], np.full((rows, 1), i, np.int32))],
                )
                for i, rows in enumerate([1, 2, 1])
            ]
            return list(await asyncio.gather(*(dp.infer(r) for r in requests)))
        finally:
            await dp.close()

    answers = [r.outputs[0].data.tolist() for r in asyncio.run(main())]
    # the three requests ran together (preferred size 4 = 1 + 2 + 1 rows): three requests
    # in one execute(), each getting back its own rows
    assert answers == [[[3, 0]], [[3, 1], [3, 1]], [[3, 2]]]
