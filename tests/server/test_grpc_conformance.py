"""v2 gRPC conformance of the embedded server, driven by tritonclient.grpc."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import grpc
import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

from nbinfer.protocol.dtypes import DATATYPES
from nbinfer.protocol.grpc import RPCS, RequestTemplate, pb


def identity_name(datatype: str) -> str:
    return f"identity_{datatype.lower()}"


@pytest.fixture(scope="module")
def client(grpc_address: str) -> Any:
    c = tg.InferenceServerClient(grpc_address)
    yield c
    c.close()


def _add_sub_inputs(batch: int = 1) -> tuple[list[Any], np.ndarray, np.ndarray]:
    a = np.arange(16 * batch, dtype=np.float32).reshape(batch, 16)
    b = np.ones((batch, 16), dtype=np.float32)
    ins = [
        tg.InferInput("INPUT0", [batch, 16], "FP32"),
        tg.InferInput("INPUT1", [batch, 16], "FP32"),
    ]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    return ins, a, b


def test_health(client: Any) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("versioned", "1")


def test_server_metadata_lists_extensions(client: Any) -> None:
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "nbinfer"
    ext = set(meta["extensions"])
    assert {"binary_tensor_data", "classification", "model_repository", "statistics"} <= ext
    assert "system_shared_memory" in ext


def test_model_metadata_and_config(client: Any) -> None:
    meta = client.get_model_metadata("add_sub", as_json=True)
    assert meta["name"] == "add_sub"
    assert {t["name"] for t in meta["inputs"]} == {"INPUT0", "INPUT1"}
    assert meta["inputs"][0]["datatype"] == "FP32"
    assert [int(d) for d in meta["inputs"][0]["shape"]] == [-1, 16]
    config = client.get_model_config("add_sub", as_json=True)["config"]
    assert config["name"] == "add_sub"
    assert {i["name"] for i in config["input"]} == {"INPUT0", "INPUT1"}


def test_infer_add_sub_with_request_id(client: Any) -> None:
    ins, a, b = _add_sub_inputs(batch=3)
    result = client.infer("add_sub", ins, request_id="g-1")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.get_response().id == "g-1"


def test_infer_only_requested_output(client: Any) -> None:
    ins, a, b = _add_sub_inputs()
    result = client.infer("add_sub", ins, outputs=[tg.InferRequestedOutput("OUTPUT1")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.as_numpy("OUTPUT0") is None


def test_echo_bytes_with_empty_strings_and_nuls(client: Any) -> None:
    data = np.array([[b"hello", b"", b"a\x00b", "héllo".encode(), b"\x00"]], dtype=object)
    inp = tg.InferInput("INPUT0", list(data.shape), "BYTES")
    inp.set_data_from_numpy(data)
    out = client.infer("echo", [inp]).as_numpy("OUTPUT0")
    assert out.tolist() == data.tolist()


def test_classification_on_iris_returns_labels(client: Any) -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    inp = tg.InferInput("input", [1, 4], "FP32")
    inp.set_data_from_numpy(x)
    out = client.infer(
        "iris", [inp], outputs=[tg.InferRequestedOutput("probabilities", class_count=3)]
    )
    top = out.as_numpy("probabilities")
    assert top.shape == (1, 3)
    assert top[0, 0].decode().endswith(":0:setosa")


def _sample(datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(3)
    if datatype == "BYTES":
        return np.array([[b"a", b"", b"\x00z"], [b"xyz", b"1", b"\xff"]], dtype=object)
    if datatype == "BOOL":
        return rng.random(shape) > 0.5
    if datatype == "BF16":
        return rng.random(shape).astype(ml_dtypes.bfloat16)
    if datatype.startswith("FP"):
        return rng.random(shape).astype(
            {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}[datatype]
        )
    np_dt = np.dtype(datatype.lower())
    info = np.iinfo(np_dt)
    return np.array([[info.min, 0, info.max], [1, 2, 3]], dtype=np_dt)


@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_round_trips(client: Any, datatype: str) -> None:
    arr = _sample(datatype, (2, 3))
    inp = tg.InferInput("INPUT0", [2, 3], datatype)
    inp.set_data_from_numpy(arr)
    out = client.infer(identity_name(datatype), [inp]).as_numpy("OUTPUT0")
    assert out.shape == (2, 3)
    if datatype == "BYTES":
        assert out.tolist() == arr.tolist()
    else:
        assert out.dtype == arr.dtype
        np.testing.assert_array_equal(out, arr)


@pytest.mark.parametrize("datatype", ["INT32", "FP32", "BOOL", "BYTES", "UINT64", "FP64"])
def test_typed_contents_requests_are_accepted(grpc_address: str, datatype: str) -> None:
    """Requests that carry tensors in the typed ``contents`` fields (not raw) work too."""
    arr = _sample(datatype, (2, 3))
    req = pb.ModelInferRequest(model_name=identity_name(datatype))
    tensor = req.inputs.add(name="INPUT0", datatype=datatype, shape=[2, 3])
    field = {
        "INT32": "int_contents",
        "FP32": "fp32_contents",
        "BOOL": "bool_contents",
        "BYTES": "bytes_contents",
        "UINT64": "uint64_contents",
        "FP64": "fp64_contents",
    }[datatype]
    getattr(tensor.contents, field).extend(arr.reshape(-1).tolist())
    with grpc.insecure_channel(grpc_address) as channel:
        call = channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelInferResponse.FromString,
        )
        resp = call(req, timeout=10)
    assert resp.outputs[0].name == "OUTPUT0"
    assert list(resp.outputs[0].shape) == [2, 3]
    assert len(resp.raw_output_contents) == 1


def test_stream_infer_answers_each_request_in_order_with_errors_inline(client: Any) -> None:
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for i in range(3):
            a = np.full((1, 16), i, dtype=np.float32)
            ins = [
                tg.InferInput("INPUT0", [1, 16], "FP32"),
                tg.InferInput("INPUT1", [1, 16], "FP32"),
            ]
            ins[0].set_data_from_numpy(a)
            ins[1].set_data_from_numpy(a)
            client.async_stream_infer("add_sub", ins, request_id=f"s{i}")
        bad = tg.InferInput("INPUT0", [1, 3], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 3), dtype=np.float32))
        client.async_stream_infer("add_sub", [bad], request_id="bad")
        got = [results.get(timeout=10) for _ in range(4)]
    finally:
        client.stop_stream()
    for i, (result, error) in enumerate(got[:3]):
        assert error is None
        assert result.get_response().id == f"s{i}"
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), 2 * i))
    result, error = got[3]
    assert result is None and error is not None
    assert "INPUT1" in str(error) or "shape" in str(error)


def test_versions_are_addressable(client: Any) -> None:
    x = np.array([1, 2, 3], dtype=np.int32)
    inp = tg.InferInput("X", [3], "INT32")
    inp.set_data_from_numpy(x)
    np.testing.assert_array_equal(
        client.infer("versioned", [inp], model_version="1").as_numpy("Y"), x
    )
    np.testing.assert_array_equal(
        client.infer("versioned", [inp], model_version="2").as_numpy("Y"), 2 * x
    )


def test_repository_index_unload_load_while_serving(client: Any, grpc_address: str) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []
    served: list[int] = []

    def background() -> None:
        c = tg.InferenceServerClient(grpc_address)
        try:
            while not stop.is_set():
                ins, a, b = _add_sub_inputs()
                np.testing.assert_array_equal(c.infer("add_sub", ins).as_numpy("OUTPUT0"), a + b)
                served.append(1)
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.close()

    t = threading.Thread(target=background)
    t.start()
    try:
        index = client.get_model_repository_index(as_json=True)["models"]
        assert {m["name"] for m in index} >= {"add_sub", "echo", "iris"}
        name = identity_name("INT8")
        client.unload_model(name)
        assert not client.is_model_ready(name)
        client.load_model(name)
        assert client.is_model_ready(name)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    assert served


def test_load_uploaded_model_over_grpc(client: Any, model_source: Any) -> None:
    source = model_source("add_sub", tag="grpc_up").encode()
    client.load_model(
        "add_sub_grpc_up",
        config=json.dumps({"name": "add_sub_grpc_up"}),
        files={"file:1/model.py": source},
    )
    ins, a, b = _add_sub_inputs()
    np.testing.assert_array_equal(client.infer("add_sub_grpc_up", ins).as_numpy("OUTPUT0"), a + b)


def test_statistics_match_the_requests_made(client: Any) -> None:
    name = identity_name("UINT16")
    inp = tg.InferInput("INPUT0", [1, 2], "UINT16")
    inp.set_data_from_numpy(np.ones((1, 2), dtype=np.uint16))

    def success() -> tuple[int, int]:
        s = client.get_inference_statistics(name, as_json=True)["model_stats"][0]
        return int(s["inference_stats"]["success"].get("count", 0)), int(
            s.get("execution_count", 0)
        )

    before = success()
    for _ in range(4):
        client.infer(name, [inp])
    after = success()
    assert after[0] - before[0] == 4
    assert after[1] - before[1] == 4


def test_shared_memory_register_of_a_missing_key_is_invalid_argument(client: Any) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.register_system_shared_memory("r", "/nbinfer_no_such_key", 16)
    assert "INVALID_ARGUMENT" in str(info.value.status())
    assert "nbinfer_no_such_key" in str(info.value)
    # Status calls answer "no regions".
    client.get_system_shared_memory_status()


def test_large_message_above_grpc_default_4mib_is_accepted(client: Any) -> None:
    arr = np.random.default_rng(0).random((1, 3_000_000), dtype=np.float32)  # 12 MB
    inp = tg.InferInput("INPUT0", list(arr.shape), "FP32")
    inp.set_data_from_numpy(arr)
    out = client.infer(identity_name("FP32"), [inp]).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, arr)


def test_stream_carries_large_tensors_and_names_a_large_bad_request(grpc_address: str) -> None:
    # Large stream requests are parsed without copying their tensors; an error still names
    # the request it answers.
    arr = np.random.default_rng(1).random((1, 3_000_000), dtype=np.float32)  # 12 MB
    model = identity_name("FP32")
    good = RequestTemplate(model, "", [("INPUT0", "FP32", arr.shape, arr.nbytes)])
    bad = RequestTemplate(model, "", [("INPUT0", "FP32", (1, 3_000_001), arr.nbytes)])
    size = [("grpc.max_receive_message_length", 1 << 26)]
    with grpc.insecure_channel(grpc_address, options=size) as channel:
        call = channel.stream_stream(RPCS["ModelStreamInfer"].path)
        wire = list(call(iter([good.encode([arr], "big"), bad.encode([arr], "bad")])))
    replies = [pb.ModelStreamInferResponse.FromString(data) for data in wire]
    assert [r.infer_response.id for r in replies] == ["big", "bad"]
    assert replies[0].error_message == ""
    out = np.frombuffer(replies[0].infer_response.raw_output_contents[0], dtype=np.float32)
    np.testing.assert_array_equal(out, arr.ravel())
    assert "INPUT0" in replies[1].error_message
