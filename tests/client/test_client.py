"""nbinfer.Client / AsyncClient against the real embedded server, over HTTP and gRPC."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client, InferResult, Sequence
from nbinfer.errors import (
    ConnectError,
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    RemoteInvalidInputError,
    RequestTimeoutError,
    ServerUnavailableError,
    TransportError,
)
from nbinfer.protocol.types import ClassificationResult, InferInput, RequestedOutput

IRIS_ROWS = np.array(
    [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 2.8, 4.3, 1.3]], dtype=np.float32
)


def add_sub_inputs(seed: int, batch: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "INPUT0": rng.standard_normal((batch, 16)).astype(np.float32),
        "INPUT1": rng.standard_normal((batch, 16)).astype(np.float32),
    }


# -- health and metadata ---------------------------------------------------------------------


def test_health_and_metadata(url: str) -> None:
    with Client(url) as client:
        assert client.is_server_live()
        assert client.is_server_ready()
        assert client.is_model_ready("add_sub")
        meta = client.get_server_metadata()
        assert meta.name
        assert isinstance(meta.extensions, list)
        model = client.get_model_metadata("add_sub")
        assert [(t.name, t.datatype, t.shape) for t in model.inputs] == [
            ("INPUT0", "FP32", [-1, 16]),
            ("INPUT1", "FP32", [-1, 16]),
        ]
        assert [t.name for t in model.outputs] == ["OUTPUT0", "OUTPUT1"]


def test_model_config_is_triton_shaped_json(url: str) -> None:
    with Client(url) as client:
        config = client.get_model_config("add_sub")
    assert config["name"] == "add_sub"
    assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]


def test_is_model_ready_of_unknown_model_raises_not_found(url: str) -> None:
    with Client(url) as client, pytest.raises(ModelNotFoundError):
        client.is_model_ready("no_such_model")


# -- inference ---------------------------------------------------------------------------------


def test_infer_add_sub_fp32_is_exact(url: str) -> None:
    inputs = add_sub_inputs(1, batch=3)
    with Client(url) as client:
        result = client.infer("add_sub", inputs, request_id="r-1")
    assert isinstance(result, InferResult)
    assert result.model_name == "add_sub"
    assert result.id == "r-1"
    assert result.output_names == ["OUTPUT0", "OUTPUT1"]
    out0 = result.as_numpy("OUTPUT0")
    assert out0.dtype == np.float32 and out0.shape == (3, 16)
    np.testing.assert_array_equal(out0, inputs["INPUT0"] + inputs["INPUT1"])
    np.testing.assert_array_equal(result["OUTPUT1"], inputs["INPUT0"] - inputs["INPUT1"])
    assert result.get_output("OUTPUT0").datatype == "FP32"


def test_infer_subset_of_outputs(url: str) -> None:
    with Client(url) as client:
        result = client.infer("add_sub", add_sub_inputs(2), outputs=["OUTPUT1"])
    assert result.output_names == ["OUTPUT1"]


def test_infer_python_lists_take_the_models_datatype(url: str) -> None:
    row = [float(i) for i in range(16)]
    with Client(url) as client:
        request = client.build_request("add_sub", {"INPUT0": [row], "INPUT1": [row]})
        assert [i.datatype for i in request.inputs] == ["FP32", "FP32"]
        result = client.infer("add_sub", {"INPUT0": [row], "INPUT1": [row]})
    np.testing.assert_array_equal(result["OUTPUT0"], 2 * np.array([row], np.float32))


def test_infer_accepts_infer_inputs_and_requests(url: str) -> None:
    data = add_sub_inputs(3)
    inputs = [InferInput(k, "FP32", list(v.shape), v) for k, v in data.items()]
    with Client(url) as client:
        by_list = client.infer("add_sub", inputs)
        request = client.build_request("add_sub", data, request_id="req")
        by_request = client.infer("add_sub", request)
    np.testing.assert_array_equal(by_list["OUTPUT0"], by_request["OUTPUT0"])
    assert by_request.id == "req"


def test_infer_bytes_echo_round_trips(url: str) -> None:
    values = np.array([[b"hello", b"", "wörld".encode(), b"\x00\xff"]], dtype=object)
    with Client(url) as client:
        result = client.infer("echo", {"INPUT0": values})
        from_str = client.infer("echo", {"INPUT0": [["a", "bc"]]})
    out = result.as_numpy("OUTPUT0")
    assert out.shape == (1, 4)
    assert out.tolist() == values.tolist()
    assert from_str["OUTPUT0"].tolist() == [[b"a", b"bc"]]


def test_infer_classification_extension_returns_top_k(url: str) -> None:
    with Client(url) as client:
        probs = client.infer("iris", {"input": IRIS_ROWS})["probabilities"]
        result = client.infer(
            "iris", {"input": IRIS_ROWS}, outputs=[RequestedOutput("probabilities", class_count=2)]
        )
    raw = result.as_numpy("probabilities")
    assert raw.shape == (3, 2) and raw.dtype == object
    rows = result.as_classification("probabilities")
    assert len(rows) == 3
    for row, p in zip(rows, probs, strict=True):
        assert all(isinstance(c, ClassificationResult) for c in row)
        assert [c.index for c in row] == list(np.argsort(-p)[:2])
        assert row[0].score == pytest.approx(float(p.max()), rel=1e-5)
    assert rows[0][0].label == "setosa"


def test_a_negative_classification_count_is_refused_naming_the_output(url: str) -> None:
    asked = [RequestedOutput("probabilities", class_count=-1)]
    with Client(url) as client:
        with pytest.raises(RemoteInvalidInputError, match=r"'probabilities'.*>= 0, got -1"):
            client.infer("iris", {"input": IRIS_ROWS}, outputs=asked)
        assert client.infer("iris", {"input": IRIS_ROWS})["probabilities"].shape == (3, 3)


@pytest.mark.parametrize("binary", [True, False])
def test_http_binary_override(server: Any, binary: bool) -> None:
    inputs = add_sub_inputs(4)
    with Client(server.http_url, binary=binary) as client:
        result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"])
    is_binary = "inference-header-content-length" in result.headers
    assert is_binary == binary


def test_http_client_uses_binary_when_the_server_advertises_it(server: Any) -> None:
    with Client(server.http_url) as client:
        extensions = client.get_server_metadata().extensions
        result = client.infer("add_sub", add_sub_inputs(5))
    is_binary = "inference-header-content-length" in result.headers
    assert is_binary == ("binary_tensor_data" in extensions)


def test_large_tensor_round_trip(url: str) -> None:
    a = np.arange(1 << 20, dtype=np.float32).reshape(-1, 16)  # 4 MiB per input
    with Client(url) as client:
        result = client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
    np.testing.assert_array_equal(result["OUTPUT1"], np.zeros_like(a))
    np.testing.assert_array_equal(result["OUTPUT0"], a * 2)


def test_sequence_helper_carries_id_and_flags(url: str) -> None:
    seq = Sequence(42)
    with Client(url) as client:
        first = client.build_request("add_sub", add_sub_inputs(6), sequence=seq)
        assert first.parameters == {
            "sequence_id": 42,
            "sequence_start": True,
            "sequence_end": False,
        }
        client.infer("add_sub", add_sub_inputs(6), sequence=seq)
        assert seq.started
        second = client.build_request("add_sub", add_sub_inputs(6), sequence=seq, sequence_end=True)
        assert second.parameters["sequence_start"] is False
        assert second.parameters["sequence_end"] is True
        client.infer("add_sub", add_sub_inputs(6), sequence=seq, sequence_end=True)
        assert seq.ended
        with pytest.raises(InvalidInputError, match="ended"):
            client.infer("add_sub", add_sub_inputs(6), sequence=seq)
    assert isinstance(Sequence().id, int)


# -- errors ----------------------------------------------------------------------------------


def test_unknown_model_raises_model_not_found_with_the_server_message(url: str) -> None:
    with Client(url) as client, pytest.raises(ModelNotFoundError) as info:
        client.infer("no_such_model", add_sub_inputs(7), request_id="id-7")
    assert "no_such_model" in str(info.value)
    assert info.value.status == 404
    assert info.value.request_id == "id-7"  # the caller's id travels with the error, for logs


def test_bad_shape_raises_remote_invalid_input(url: str) -> None:
    bad = {"INPUT0": np.zeros((1, 8), np.float32), "INPUT1": np.zeros((1, 8), np.float32)}
    with Client(url) as client, pytest.raises(InvalidInputError) as info:
        client.infer("add_sub", bad)
    assert isinstance(info.value, RemoteInvalidInputError)
    assert info.value.status == 400
    assert "INPUT0" in str(info.value) or "INPUT1" in str(info.value)


def test_as_numpy_of_unknown_output_lists_known_names(url: str) -> None:
    with Client(url) as client:
        result = client.infer("add_sub", add_sub_inputs(8))
    with pytest.raises(InvalidInputError, match="OUTPUT0, OUTPUT1"):
        result.as_numpy("nope")


def test_bad_inputs_fail_locally() -> None:
    client = Client("127.0.0.1:1")
    with pytest.raises(InvalidInputError):
        client.infer("m", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        client.infer("m", [1, 2])  # type: ignore[list-item]
    client.close()


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_closed_port_raises_connect_error(scheme: str, closed_port: int) -> None:
    with Client(f"{scheme}://127.0.0.1:{closed_port}", retries=0, timeout=5) as client:
        started = time.monotonic()
        with pytest.raises(ConnectError) as info:
            client.is_server_live()
    assert time.monotonic() - started < 4
    assert not isinstance(info.value, RequestTimeoutError)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_silent_server_raises_timeout_error(scheme: str, silent_port: int) -> None:
    with Client(f"{scheme}://127.0.0.1:{silent_port}", retries=0) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            client.infer("add_sub", add_sub_inputs(9), timeout=0.5)
    assert time.monotonic() - started < 4


def test_connect_errors_are_retried_with_backoff(closed_port: int) -> None:
    with Client(f"http://127.0.0.1:{closed_port}", retries=3) as client:
        started = time.monotonic()
        with pytest.raises(ConnectError):
            client.is_server_live()
    # three retries: 0.05 + 0.1 + 0.2 seconds of backoff (+-25% jitter)
    assert time.monotonic() - started >= 0.25


def test_503_is_retried_for_idempotent_calls(scripted: Callable[..., Any]) -> None:
    answers = iter([(503, b'{"error": "busy"}')] * 2 + [(200, b'{"name": "s", "version": "1"}')])
    srv = scripted(lambda handler: next(answers, (200, b'{"name": "s", "version": "1"}')))
    with Client(srv.url, retries=3) as client:
        assert client.get_server_metadata().name == "s"
    assert len(srv.requests) == 3


def test_503_surfaces_as_server_unavailable_without_retries(
    scripted: Callable[..., Any],
) -> None:
    srv = scripted(lambda handler: (503, b'{"error": "server is overloaded"}'))
    with Client(srv.url, retries=0) as client, pytest.raises(ServerUnavailableError) as info:
        client.get_server_metadata()
    assert str(info.value) == "server is overloaded"
    assert len(srv.requests) == 1


def test_infer_is_not_retried_unless_asked(scripted: Callable[..., Any]) -> None:
    srv = scripted(lambda handler: (503, b'{"error": "busy"}'))
    with Client(srv.url, retries=2, binary=False) as client:
        with pytest.raises(ServerUnavailableError):
            client.infer("m", {"x": np.zeros(2, np.float32)})
        assert len(srv.requests) == 1
        with pytest.raises(ServerUnavailableError):
            client.infer("m", {"x": np.zeros(2, np.float32)}, retry=True)
        assert len(srv.requests) == 4


def test_auth_and_headers_are_sent(scripted: Callable[..., Any]) -> None:
    srv = scripted(lambda handler: (200, b"{}"))
    with Client(srv.url, auth=("user", "pw"), headers={"X-Team": "a"}) as client:
        client.is_server_live()
    with Client(srv.url, auth="tok") as client:
        client.is_server_live(headers={"x-call": "1"})
    (_, path0, first), (_, _, second) = srv.requests
    assert path0 == "/v2/health/live"
    assert first["authorization"] == "Basic dXNlcjpwdw=="
    assert first["x-team"] == "a"
    assert second["authorization"] == "Bearer tok"
    assert second["x-call"] == "1"


def test_extension_calls_use_the_v2_routes_and_bodies(scripted: Callable[..., Any]) -> None:
    srv = scripted(lambda handler: (200, b"{}"))
    with Client(srv.url) as client:
        client.register_system_shared_memory("r0", "/shm0", 64, offset=8)
        client.unregister_system_shared_memory()
        client.register_cuda_shared_memory("c0", b"\x01\x02", 0, 16)
        client.update_trace_settings("m", {"trace_rate": 10})
        client.update_log_settings({"log_info": True})
        client.load_model("m", config={"max_batch_size": 2}, files={"1/model.py": b"x"})
        client.unload_model("m")
    routes = [(method, path) for method, path, _ in srv.requests]
    assert routes == [
        ("POST", "/v2/systemsharedmemory/region/r0/register"),
        ("POST", "/v2/systemsharedmemory/unregister"),
        ("POST", "/v2/cudasharedmemory/region/c0/register"),
        ("POST", "/v2/models/m/trace/setting"),
        ("POST", "/v2/logging"),
        ("POST", "/v2/repository/models/m/load"),
        ("POST", "/v2/repository/models/m/unload"),
    ]
    bodies = [json.loads(b) for b in srv.bodies]
    assert bodies[0] == {"key": "/shm0", "offset": 8, "byte_size": 64}
    assert bodies[2] == {"raw_handle": {"b64": "AQI="}, "device_id": 0, "byte_size": 16}
    assert bodies[3] == {"trace_rate": 10}
    assert bodies[4] == {"log_info": True}
    assert bodies[5] == {
        "parameters": {"config": '{"max_batch_size": 2}', "file:1/model.py": "eA=="}
    }
    assert bodies[6] == {"parameters": {"unload_dependents": False}}


def test_gzip_compression_round_trips(url: str) -> None:
    inputs = add_sub_inputs(14, batch=64)
    with Client(url, compression="gzip") as client:
        result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"])


def test_kserve_v1_predict(server: Any, grpc_url: str) -> None:
    with Client(server.http_url) as client:
        predictions = client.predict("iris", IRIS_ROWS.tolist())
        with pytest.raises(ModelNotFoundError, match="nope"):
            client.predict("nope", [[1.0]])
    assert len(predictions) == 3
    assert int(np.argmax(predictions[0])) == 0
    with Client(grpc_url) as client, pytest.raises(NbinferError, match="REST only"):
        client.predict("iris", IRIS_ROWS.tolist())


# -- concurrency, event loops, lifecycle -------------------------------------------------------


def test_sync_client_works_inside_a_running_event_loop(url: str) -> None:
    inputs = add_sub_inputs(10)

    async def cell() -> np.ndarray:
        asyncio.get_running_loop()  # like a Jupyter cell: a loop is running
        with Client(url) as client:
            assert client.is_server_ready()
            return client.infer("add_sub", inputs)["OUTPUT0"]

    out = asyncio.run(cell())
    np.testing.assert_array_equal(out, inputs["INPUT0"] + inputs["INPUT1"])


def test_one_client_hammered_from_eight_threads_gives_exact_results(url: str) -> None:
    errors: list[BaseException] = []
    with Client(url) as client:

        def work(tid: int) -> None:
            try:
                for i in range(40):
                    data = add_sub_inputs(tid * 1000 + i)
                    rid = f"{tid}-{i}"
                    result = client.infer("add_sub", data, request_id=rid)
                    assert result.id == rid
                    np.testing.assert_array_equal(
                        result["OUTPUT0"], data["INPUT0"] + data["INPUT1"]
                    )
                    np.testing.assert_array_equal(
                        result["OUTPUT1"], data["INPUT0"] - data["INPUT1"]
                    )
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_async_infer_returns_a_future_and_calls_back(url: str) -> None:
    seen: list[tuple[Any, Any]] = []
    done = threading.Event()

    def callback(result: Any, error: Any) -> None:
        seen.append((result, error))
        done.set()

    inputs = add_sub_inputs(11)
    with Client(url) as client:
        future = client.async_infer("add_sub", inputs, callback=callback, request_id="a")
        result = future.result(timeout=10)
        assert done.wait(10)
        failing = client.async_infer("missing_model", inputs)
        with pytest.raises(ModelNotFoundError):
            failing.result(timeout=10)
    np.testing.assert_array_equal(result["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"])
    assert seen[0][1] is None and seen[0][0].id == "a"


def test_close_is_idempotent_and_closed_clients_refuse_calls(url: str) -> None:
    client = Client(url)
    assert client.is_server_live()
    client.close()
    client.close()
    with pytest.raises(TransportError):
        client.is_server_live()


def close_as_threads_end(url: str, rounds: int = 200, http_engine: str | None = None) -> None:
    """``rounds`` times: a client called from a thread, closed as that thread ends.

    Each thread's curl handle dies with the thread; pycurl (>= 7.49) then closes it in its
    finalizer with the GIL released. close() on the main thread at that moment used to reach
    the dying handle and fail ("perform() is currently running") or abort the process. Also run
    in a child on the oldest and newest pycurl allowed (tests/test_pycurl_range.py).
    """
    for _ in range(rounds):
        client = Client(url, http_engine=http_engine)
        answered = threading.Event()

        def call(client: Client = client, answered: threading.Event = answered) -> None:
            assert client.is_server_live()
            answered.set()

        worker = threading.Thread(target=call)
        worker.start()
        assert answered.wait(10)
        client.close()
        worker.join(10)
        with pytest.raises(TransportError, match="closed"):
            client.is_server_live()


def test_close_while_the_threads_that_used_the_client_end(url: str) -> None:
    close_as_threads_end(url)
    if url.startswith("http://"):  # and on libcurl, the engine of TLS / HTTP/2 / proxied URLs
        close_as_threads_end(url, http_engine="pycurl")


def test_url_and_protocol_selection() -> None:
    assert Client("127.0.0.1:9").protocol == "http"
    assert Client("http://h:1/").url == "http://h:1"
    assert Client("grpc://h:1").protocol == "grpc"
    assert Client("h:1", protocol="grpc").url == "grpc://h:1"
    assert Client("https://h:1").config.tls is not None
    with pytest.raises(InvalidInputError, match="scheme"):
        Client("ftp://h:1")
    with pytest.raises(InvalidInputError, match="protocol"):
        Client("h:1", protocol="soap")


def test_stream_needs_grpc(server: Any) -> None:
    with Client(server.http_url) as client, pytest.raises(NbinferError, match="gRPC"):
        client.start_stream(lambda r, e: None)


# -- streaming ---------------------------------------------------------------------------------


def test_stream_infer_replies_match_requests(server: Any, grpc_url: str) -> None:
    replies: dict[str, Any] = {}
    errors: list[Any] = []
    done = threading.Event()
    n = 20

    def callback(result: Any, error: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            replies[result.id] = result
        if len(replies) + len(errors) == n:
            done.set()

    sent = {str(i): add_sub_inputs(100 + i) for i in range(n)}
    with Client(grpc_url) as client:
        client.start_stream(callback)
        for rid, data in sent.items():
            client.stream_infer("add_sub", data, request_id=rid)
        assert done.wait(20), f"got {len(replies)} replies, {errors}"
        client.stop_stream()
    assert errors == []
    for rid, data in sent.items():
        np.testing.assert_array_equal(replies[rid]["OUTPUT0"], data["INPUT0"] + data["INPUT1"])


def test_stream_errors_reach_the_callback(server: Any, grpc_url: str) -> None:
    got: list[Any] = []
    done = threading.Event()

    def callback(result: Any, error: Any) -> None:
        got.append(error)
        done.set()

    with Client(grpc_url) as client:
        client.start_stream(callback)
        client.stream_infer("add_sub", {"INPUT0": np.zeros((1, 3), np.float32)}, request_id="x")
        assert done.wait(10)
        client.stop_stream()
    assert isinstance(got[0], NbinferError)


def test_async_stream_infer_is_an_async_iterator(server: Any, grpc_url: str) -> None:
    async def main() -> dict[str, Any]:
        async with AsyncClient(grpc_url) as client:
            requests = [
                await client.build_request("add_sub", add_sub_inputs(200 + i), request_id=str(i))
                for i in range(10)
            ]
            return {r.id: r async for r in client.stream_infer(requests)}

    results = asyncio.run(main())
    assert sorted(results, key=int) == [str(i) for i in range(10)]
    data = add_sub_inputs(203)
    np.testing.assert_array_equal(results["3"]["OUTPUT0"], data["INPUT0"] + data["INPUT1"])


# -- asyncio face ------------------------------------------------------------------------------


def test_async_client_health_metadata_and_infer(url: str) -> None:
    async def main() -> None:
        async with AsyncClient(url) as client:
            assert await client.is_server_live()
            assert await client.is_server_ready()
            assert await client.is_model_ready("add_sub")
            meta = await client.get_model_metadata("echo")
            assert meta.inputs[0].datatype == "BYTES"
            batches = [add_sub_inputs(300 + i) for i in range(16)]
            results = await asyncio.gather(*(client.infer("add_sub", b) for b in batches))
            for data, result in zip(batches, results, strict=True):
                np.testing.assert_array_equal(result["OUTPUT0"], data["INPUT0"] + data["INPUT1"])
            echoed = await client.infer("echo", {"INPUT0": [["x", "yz"]]})
            assert echoed["OUTPUT0"].tolist() == [[b"x", b"yz"]]
            with pytest.raises(ModelNotFoundError):
                await client.infer("no_such_model", batches[0])
        await client.aclose()  # idempotent

    asyncio.run(main())


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_async_client_transport_errors(scheme: str, closed_port: int, silent_port: int) -> None:
    async def main() -> None:
        async with AsyncClient(f"{scheme}://127.0.0.1:{closed_port}", retries=0) as client:
            with pytest.raises(ConnectError):
                await client.is_server_live()
        async with AsyncClient(f"{scheme}://127.0.0.1:{silent_port}", retries=0) as client:
            with pytest.raises(RequestTimeoutError):
                await client.infer("add_sub", add_sub_inputs(1), timeout=0.5)

    asyncio.run(main())


def test_async_client_survives_successive_event_loops(url: str) -> None:
    client = AsyncClient(url)

    async def live() -> bool:
        return await client.is_server_live()

    assert asyncio.run(live())
    assert asyncio.run(live())
    asyncio.run(client.aclose())


# -- repository, statistics --------------------------------------------------------------------


def test_repository_index_unload_and_load(url: str) -> None:
    with Client(url) as client:
        names = {m.name for m in client.get_model_repository_index()}
        assert {"add_sub", "echo", "iris", "digits"} <= names
        client.unload_model("digits")
        assert not client.is_model_ready("digits")
        ready = {m.name for m in client.get_model_repository_index(ready_only=True)}
        assert "digits" not in ready
        client.load_model("digits")
        assert client.is_model_ready("digits")


def test_statistics_count_inferences(url: str) -> None:
    with Client(url) as client:
        before = client.get_inference_statistics("add_sub")["model_stats"][0]
        client.infer("add_sub", add_sub_inputs(12))
        client.infer("add_sub", add_sub_inputs(13))
        after = client.get_inference_statistics("add_sub")["model_stats"][0]
    assert after["name"] == "add_sub"
    assert int(after["inference_count"]) == int(before.get("inference_count", 0)) + 2
