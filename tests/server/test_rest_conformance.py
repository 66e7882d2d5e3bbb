"""v2 REST conformance of the embedded server, driven by tritonclient.http and raw httpx."""

from __future__ import annotations

import gzip
import json
import struct
import threading
from typing import Any

import httpx
import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

from nbinfer.protocol.dtypes import DATATYPES
from nbinfer.server.rest import RestApp, _route


def identity_name(datatype: str) -> str:
    return f"identity_{datatype.lower()}"


IHCL = "Inference-Header-Content-Length"


@pytest.fixture(scope="module")
def client(http_host: str) -> Any:
    c = th.InferenceServerClient(http_host)
    yield c
    c.close()


@pytest.fixture()
def http(http_url: str) -> Any:
    with httpx.Client(base_url=http_url, timeout=30) as c:
        yield c


def _add_sub_inputs(binary: bool, batch: int = 1) -> tuple[list[Any], np.ndarray, np.ndarray]:
    a = np.arange(16 * batch, dtype=np.float32).reshape(batch, 16)
    b = np.ones((batch, 16), dtype=np.float32)
    ins = [
        th.InferInput("INPUT0", [batch, 16], "FP32"),
        th.InferInput("INPUT1", [batch, 16], "FP32"),
    ]
    ins[0].set_data_from_numpy(a, binary_data=binary)
    ins[1].set_data_from_numpy(b, binary_data=binary)
    return ins, a, b


def _split_binary(resp: httpx.Response) -> tuple[dict[str, Any], bytes]:
    n = int(resp.headers[IHCL])
    return json.loads(resp.content[:n]), resp.content[n:]


# -- health / metadata ----------------------------------------------------------------------


def test_health_live_and_ready(client: Any, http: httpx.Client) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert http.get("/v2/health/live").status_code == 200
    assert http.get("/v2/health/ready").status_code == 200


def test_model_ready_for_served_model_and_versions(client: Any) -> None:
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("versioned", "1")
    assert client.is_model_ready("versioned", "2")


def test_server_metadata_lists_the_extensions_it_implements(client: Any) -> None:
    meta = client.get_server_metadata()
    assert meta["name"] == "nbinfer"
    assert meta["version"]
    ext = set(meta["extensions"])
    for name in (
        "binary_tensor_data",
        "classification",
        "model_repository",
        "model_configuration",
        "statistics",
    ):
        assert name in ext
    assert "system_shared_memory" in ext
    # Not implemented (CUDA IPC handles are not mapped), so not advertised.
    assert "cuda_shared_memory" not in ext


def test_model_metadata_describes_add_sub(client: Any) -> None:
    meta = client.get_model_metadata("add_sub")
    assert meta["name"] == "add_sub"
    assert meta["versions"]
    inputs = {t["name"]: t for t in meta["inputs"]}
    assert inputs["INPUT0"]["datatype"] == "FP32"
    assert inputs["INPUT0"]["shape"] == [-1, 16]
    assert {t["name"] for t in meta["outputs"]} == {"OUTPUT0", "OUTPUT1"}


def test_model_config_is_triton_shaped(client: Any) -> None:
    config = client.get_model_config("add_sub")
    assert config["name"] == "add_sub"
    assert {i["name"] for i in config["input"]} == {"INPUT0", "INPUT1"}
    assert config["input"][0]["data_type"] == "TYPE_FP32"


@pytest.mark.parametrize(
    ("path", "handler", "args"),
    [
        ("/v2/models/m/infer", RestApp._infer, ("m", "")),
        ("/v2/models/m/versions/3/infer/", RestApp._infer, ("m", "3")),
        ("/v2/models/stats", RestApp._stats, ("", "")),
        ("/v2/models/m/versions/3/config", RestApp._config, ("m", "3")),
        ("/v2/repository/models/m/load", RestApp._load, ("m", "")),
        ("/v2/cudasharedmemory/region/r/register", RestApp._shm_register, ("r", "cuda")),
        ("/v2/systemsharedmemory/unregister", RestApp._shm_unregister, ("", "system")),
        ("/v1/models/m:explain", RestApp._v1_explain, ("m", "")),
        ("/", RestApp._v1_live, ("", "")),
    ],
)
def test_each_route_binds_straight_to_its_handler(
    path: str, handler: Any, args: tuple[str, str]
) -> None:
    route = _route(path)
    assert route is not None
    assert route[0] is handler and route[2:] == args


def test_paths_without_a_route_resolve_to_nothing() -> None:
    for path in ("/v2/models/m/infer/extra", "/v1/models/m:train", "/v3", "/v2/repository"):
        assert _route(path) is None


def test_unknown_route_is_404_and_wrong_method_is_405(http: httpx.Client) -> None:
    r = http.get("/v2/nonsense/route")
    assert r.status_code == 404
    assert "error" in r.json()
    r = http.get("/v2/models/add_sub/infer")
    assert r.status_code == 405
    assert "POST" in r.headers["allow"]
    r = http.post("/v2/health/ready")
    assert r.status_code == 405


# -- inference via tritonclient --------------------------------------------------------------


@pytest.mark.parametrize("binary_in", [False, True], ids=["json-in", "binary-in"])
@pytest.mark.parametrize("binary_out", [False, True], ids=["json-out", "binary-out"])
def test_infer_add_sub(client: Any, binary_in: bool, binary_out: bool) -> None:
    ins, a, b = _add_sub_inputs(binary_in, batch=2)
    outs = [
        th.InferRequestedOutput("OUTPUT0", binary_data=binary_out),
        th.InferRequestedOutput("OUTPUT1", binary_data=binary_out),
    ]
    result = client.infer("add_sub", ins, outputs=outs, request_id="req-42")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    resp = result.get_response()
    assert resp["id"] == "req-42"
    assert resp["model_name"] == "add_sub"


def test_infer_returns_only_requested_outputs(client: Any) -> None:
    ins, a, b = _add_sub_inputs(True)
    result = client.infer("add_sub", ins, outputs=[th.InferRequestedOutput("OUTPUT1")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.as_numpy("OUTPUT0") is None


def test_infer_with_gzip_request_and_response_compression(client: Any) -> None:
    ins, a, b = _add_sub_inputs(True, batch=64)
    for algo in ("gzip", "deflate"):
        result = client.infer(
            "add_sub",
            ins,
            request_compression_algorithm=algo,
            response_compression_algorithm=algo,
        )
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_echo_bytes_round_trips_empty_strings_and_nuls(client: Any) -> None:
    data = np.array([[b"hello", b"", b"a\x00b", "héllo".encode(), b"\x00\x00"]], dtype=object)
    for binary in (True, False):
        if not binary:
            # JSON strings cannot carry arbitrary bytes; keep it valid UTF-8 without NULs.
            data_j = np.array([["hello", "", "héllo", "x y"]], dtype=object)
            inp = th.InferInput("INPUT0", list(data_j.shape), "BYTES")
            inp.set_data_from_numpy(data_j, binary_data=False)
            expected = np.array([[s.encode() for s in data_j[0]]], dtype=object)
        else:
            inp = th.InferInput("INPUT0", list(data.shape), "BYTES")
            inp.set_data_from_numpy(data, binary_data=True)
            expected = data
        result = client.infer(
            "echo", [inp], outputs=[th.InferRequestedOutput("OUTPUT0", binary_data=binary)]
        )
        out = result.as_numpy("OUTPUT0")
        assert out.shape == expected.shape
        # tritonclient hands JSON strings back as str, binary elements as bytes.
        got = [[x.encode() if isinstance(x, str) else x for x in row] for row in out.tolist()]
        assert got == expected.tolist()


def test_classification_on_iris_returns_labels(client: Any) -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    inp = th.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    for binary in (True, False):
        out = th.InferRequestedOutput("probabilities", binary_data=binary, class_count=2)
        result = client.infer("iris", [inp], outputs=[out])
        top = result.as_numpy("probabilities")
        assert top.shape == (2, 2)
        first = top[0, 0].decode() if isinstance(top[0, 0], bytes) else str(top[0, 0])
        score, index, label = first.split(":")
        assert label == "setosa" and index == "0" and 0.5 < float(score) <= 1.0
        last = top[1, 0].decode() if isinstance(top[1, 0], bytes) else str(top[1, 0])
        assert last.endswith(":virginica")


@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_round_trips(client: Any, datatype: str) -> None:
    rng = np.random.default_rng(7)
    shape = (2, 3)
    if datatype == "BYTES":
        arr = np.array([[b"a", b"", b"\x00z"], [b"xyz", b"1", b"\xff"]], dtype=object)
    elif datatype == "BOOL":
        arr = rng.random(shape) > 0.5
    elif datatype == "BF16":
        arr = rng.random(shape).astype(ml_dtypes.bfloat16)
    elif datatype.startswith("FP"):
        arr = rng.random(shape).astype(
            {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}[datatype]
        )
    else:
        np_dt = np.dtype(datatype.lower().replace("uint", "uint").replace("int", "int"))
        info = np.iinfo(np_dt)
        arr = np.array([[info.min, 0, info.max], [1, 2, 3]], dtype=np_dt)
    name = identity_name(datatype)
    modes = [True] if datatype in ("BF16",) else [True, False]
    if datatype == "BYTES":
        modes = [True]  # arbitrary bytes only travel in binary
    for binary in modes:
        inp = th.InferInput("INPUT0", list(shape), datatype)
        inp.set_data_from_numpy(arr, binary_data=binary)
        result = client.infer(
            name, [inp], outputs=[th.InferRequestedOutput("OUTPUT0", binary_data=binary)]
        )
        out = result.as_numpy("OUTPUT0")
        assert out.shape == shape
        if datatype == "BYTES":
            assert out.tolist() == arr.tolist()
        else:
            assert out.dtype == arr.dtype, (datatype, binary, out.dtype)
            np.testing.assert_array_equal(out, arr)


def test_model_versions_are_addressable(client: Any) -> None:
    x = np.array([1, 2, 3], dtype=np.int32)
    inp = th.InferInput("X", [3], "INT32")
    inp.set_data_from_numpy(x)
    v1 = client.infer("versioned", [inp], model_version="1").as_numpy("Y")
    v2 = client.infer("versioned", [inp], model_version="2").as_numpy("Y")
    latest = client.infer("versioned", [inp]).as_numpy("Y")
    np.testing.assert_array_equal(v1, x)
    np.testing.assert_array_equal(v2, 2 * x)
    np.testing.assert_array_equal(latest, 2 * x)
    meta = client.get_model_metadata("versioned")
    assert set(meta["versions"]) >= {"1", "2"}


def test_concurrent_clients_each_get_their_own_answers(http_host: str) -> None:
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        c = th.InferenceServerClient(http_host)
        try:
            for i in range(20):
                a = np.full((1, 16), k * 100 + i, dtype=np.float32)
                ins = [
                    th.InferInput("INPUT0", [1, 16], "FP32"),
                    th.InferInput("INPUT1", [1, 16], "FP32"),
                ]
                ins[0].set_data_from_numpy(a)
                ins[1].set_data_from_numpy(a)
                r = c.infer("add_sub", ins)
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), 2 * a)
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# -- raw HTTP ---------------------------------------------------------------------------------


def test_raw_json_request_with_nested_data(http: httpx.Client) -> None:
    body = {
        "id": "j1",
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [list(range(16))]},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
        ],
    }
    r = http.post("/v2/models/add_sub/infer", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["id"] == "j1"
    outs = {o["name"]: o for o in doc["outputs"]}
    assert outs["OUTPUT0"]["data"] == [float(i + 1) for i in range(16)]
    assert outs["OUTPUT0"]["shape"] == [1, 16]
    assert outs["OUTPUT0"]["datatype"] == "FP32"


def test_raw_binary_request_and_binary_data_output(http: httpx.Client) -> None:
    a = np.arange(16, dtype=np.float32)
    b = np.full(16, 2, dtype=np.float32)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 64},
                },
                {
                    "name": "INPUT1",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 64},
                },
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    r = http.post(
        "/v2/models/add_sub/infer",
        content=header + a.tobytes() + b.tobytes(),
        headers={IHCL: str(len(header)), "Content-Type": "application/octet-stream"},
    )
    assert r.status_code == 200, r.text
    doc, tail = _split_binary(r)
    outs = {o["name"]: o for o in doc["outputs"]}
    assert outs["OUTPUT0"]["parameters"]["binary_data_size"] == 64
    assert outs["OUTPUT1"]["parameters"]["binary_data_size"] == 64
    # Outputs follow the order in the JSON header.
    offset = 0
    for o in doc["outputs"]:
        chunk = tail[offset : offset + 64]
        offset += 64
        expected = a + b if o["name"] == "OUTPUT0" else a - b
        np.testing.assert_array_equal(np.frombuffer(chunk, dtype=np.float32), expected)
    assert offset == len(tail)


def test_per_output_binary_data_overrides_request_default(http: httpx.Client) -> None:
    body = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
        ],
        "outputs": [
            {"name": "OUTPUT0", "parameters": {"binary_data": True}},
            {"name": "OUTPUT1", "parameters": {"binary_data": False}},
        ],
    }
    r = http.post("/v2/models/add_sub/infer", json=body)
    assert r.status_code == 200, r.text
    doc, tail = _split_binary(r)
    outs = {o["name"]: o for o in doc["outputs"]}
    assert "data" not in outs["OUTPUT0"]
    assert outs["OUTPUT1"]["data"] == [-1.0] * 16
    np.testing.assert_array_equal(np.frombuffer(tail, dtype=np.float32), np.ones(16))


def test_raw_single_input_body_when_header_length_is_zero(http: httpx.Client) -> None:
    data = [b"abc", b"", b"\x00"]
    body = b"".join(struct.pack("<I", len(s)) + s for s in data)
    # echo's input is [-1, -1]: the raw body needs a known shape, iris has [-1, 4].
    x = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    r = http.post("/v2/models/iris/infer", content=x.tobytes(), headers={IHCL: "0"})
    assert r.status_code == 200, r.text
    doc, tail = _split_binary(r)
    probs = np.frombuffer(tail, dtype=np.float32)
    assert probs.shape == (3,) and probs.argmax() == 0
    assert doc["outputs"][0]["shape"] == [1, 3]
    del body


def test_raw_body_to_a_two_input_model_is_rejected(http: httpx.Client) -> None:
    r = http.post("/v2/models/add_sub/infer", content=b"\x00" * 64, headers={IHCL: "0"})
    assert r.status_code == 400
    assert "one input" in r.json()["error"]


def test_mixed_json_and_binary_inputs(http: httpx.Client) -> None:
    b = np.full(16, 3, dtype=np.float32)
    header = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
                {
                    "name": "INPUT1",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 64},
                },
            ]
        }
    ).encode()
    r = http.post(
        "/v2/models/add_sub/infer", content=header + b.tobytes(), headers={IHCL: str(len(header))}
    )
    assert r.status_code == 200, r.text
    outs = {o["name"]: o for o in r.json()["outputs"]}
    assert outs["OUTPUT0"]["data"] == [4.0] * 16


def test_gzip_request_body_is_inflated(http: httpx.Client) -> None:
    body = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
            ]
        }
    ).encode()
    r = http.post(
        "/v2/models/add_sub/infer",
        content=gzip.compress(body),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    assert {o["name"]: o for o in r.json()["outputs"]}["OUTPUT0"]["data"] == [2.0] * 16


def test_generic_accept_encoding_list_is_not_compressed(http: httpx.Client) -> None:
    # httpx sends "gzip, deflate" by default: loopback answers stay uncompressed.
    r = http.get("/v2/models/add_sub/config")
    assert r.status_code == 200
    assert "content-encoding" not in r.headers


# -- KServe v1 -----------------------------------------------------------------------------


def test_v1_model_and_predict(http: httpx.Client) -> None:
    r = http.get("/v1/models/iris")
    assert r.status_code == 200
    assert r.json()["name"] == "iris" and r.json()["ready"] is True
    r = http.post(
        "/v1/models/iris:predict", json={"instances": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}
    )
    assert r.status_code == 200, r.text
    preds = np.array(r.json()["predictions"])
    assert preds.shape == (2, 3)
    assert preds[0].argmax() == 0 and preds[1].argmax() == 2


def test_v1_predict_and_explain_on_a_model_with_an_explainer(http: httpx.Client) -> None:
    body = {"instances": [[1.0, 3.0], [2.0, 2.0]]}
    r = http.post("/v1/models/explained:predict", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["predictions"] == [4.0, 4.0]
    r = http.post("/v1/models/explained:explain", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["contributions"] == [[0.25, 0.75], [0.5, 0.5]]


def test_v1_explain_without_an_explainer_is_404_naming_the_model(http: httpx.Client) -> None:
    r = http.post("/v1/models/iris:explain", json={"instances": [[5.1, 3.5, 1.4, 0.2]]})
    assert r.status_code == 404
    assert "iris" in r.json()["error"]
    assert http.post("/v1/models/iris:frobnicate", json={}).status_code == 404


def test_v1_unknown_model_is_404(http: httpx.Client) -> None:
    r = http.post("/v1/models/nope:predict", json={"instances": [[1]]})
    assert r.status_code == 404
    assert "nope" in r.json()["error"]


# -- repository / statistics ------------------------------------------------------------------


def test_repository_index_lists_models_with_state(client: Any) -> None:
    index = client.get_model_repository_index()
    by_name = {m["name"]: m for m in index}
    for name in ("add_sub", "echo", "iris", identity_name("FP32")):
        assert by_name[name]["state"] == "READY"


def test_unload_and_load_while_other_models_serve(client: Any, http_host: str) -> None:
    stop = threading.Event()
    served: list[int] = []
    errors: list[BaseException] = []

    def background() -> None:
        c = th.InferenceServerClient(http_host)
        try:
            while not stop.is_set():
                ins, a, b = _add_sub_inputs(True)
                r = c.infer("add_sub", ins)
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
                served.append(1)
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.close()

    t = threading.Thread(target=background)
    t.start()
    try:
        name = identity_name("INT16")
        client.unload_model(name)
        assert not client.is_model_ready(name)
        states = {m["name"]: m["state"] for m in client.get_model_repository_index()}
        assert states[name] != "READY"
        inp = th.InferInput("INPUT0", [1, 1], "INT16")
        inp.set_data_from_numpy(np.array([[5]], dtype=np.int16))
        with pytest.raises(InferenceServerException):
            client.infer(name, [inp])
        client.load_model(name)
        assert client.is_model_ready(name)
        assert client.infer(name, [inp]).as_numpy("OUTPUT0")[0, 0] == 5
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    assert served, "add_sub kept serving during unload / load"


def test_load_a_new_model_from_uploaded_files(client: Any, model_source: Any) -> None:
    source = model_source("add_sub", tag="uploaded").encode()
    config = json.dumps({"name": "add_sub_uploaded", "backend": "python"})
    client.load_model("add_sub_uploaded", config=config, files={"file:1/model.py": source})
    assert client.is_model_ready("add_sub_uploaded")
    ins, a, b = _add_sub_inputs(True)
    r = client.infer("add_sub_uploaded", ins)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


def test_load_body_with_bad_base64_is_400(http: httpx.Client) -> None:
    r = http.post(
        "/v2/repository/models/whatever/load",
        json={"parameters": {"file:1/model.py": "!!!not base64!!!"}},
    )
    assert r.status_code == 400
    assert "base64" in r.json()["error"]


def test_statistics_count_the_requests_made(client: Any) -> None:
    name = identity_name("UINT32")
    before = client.get_inference_statistics(name)["model_stats"][0]
    inp = th.InferInput("INPUT0", [3, 2], "UINT32")
    inp.set_data_from_numpy(np.ones((3, 2), dtype=np.uint32))
    for _ in range(5):
        client.infer(name, [inp])
    stats = client.get_inference_statistics(name)["model_stats"]
    assert len(stats) == 1
    after = stats[0]
    assert after["name"] == name
    success = int(after["inference_stats"]["success"]["count"])
    assert success - int(before["inference_stats"]["success"]["count"]) == 5
    assert int(after["execution_count"]) - int(before["execution_count"]) == 5
    assert int(after["last_inference"]) > 0
    everything = client.get_inference_statistics()["model_stats"]
    assert name in {s["name"] for s in everything}


def test_large_binary_tensor_round_trips(client: Any, http: httpx.Client) -> None:
    arr = np.random.default_rng(1).random((1, 2_000_000), dtype=np.float32)  # 8 MB
    inp = th.InferInput("INPUT0", list(arr.shape), "FP32")
    inp.set_data_from_numpy(arr, binary_data=True)
    out = client.infer(identity_name("FP32"), [inp], outputs=[th.InferRequestedOutput("OUTPUT0")])
    np.testing.assert_array_equal(out.as_numpy("OUTPUT0"), arr)
    # The same through httpx, checking Content-Length and the binary section exactly.
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": list(arr.shape),
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": arr.nbytes},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    r = http.post(
        f"/v2/models/{identity_name('FP32')}/infer",
        content=header + arr.tobytes(),
        headers={IHCL: str(len(header))},
    )
    assert r.status_code == 200
    assert int(r.headers["content-length"]) == len(r.content)
    _, tail = _split_binary(r)
    np.testing.assert_array_equal(np.frombuffer(tail, dtype=np.float32), arr.ravel())
