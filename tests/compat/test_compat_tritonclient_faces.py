"""The rest of tritonclient's surface: its protobuf modules, keepalive, the asyncio faces, BYTES
in shared memory and JSON BYTES outputs, each against the embedded server.

Where tritonclient is installed the same calls also go through it (in this process: nbinfer's
messages live in their own descriptor pool), and both must give the same answers.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import grpc
import numpy as np
import pytest

import nbinfer.compat.tritonclient.grpc as grpcclient
import nbinfer.compat.tritonclient.grpc.aio as grpcaio
import nbinfer.compat.tritonclient.http as httpclient
import nbinfer.compat.tritonclient.http.aio as httpaio
import nbinfer.compat.tritonclient.utils.shared_memory as shm
from nbinfer.compat.tritonclient import utils
from nbinfer.compat.tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
from nbinfer.server.launcher import LocalServer


def _host(url: str) -> str:
    return url.split("://", 1)[-1]


def _numbers(start: int = 0) -> np.ndarray[Any, Any]:
    return np.arange(start, start + 16, dtype=np.int32).reshape(1, 16)


def _text(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.array([str(v).encode() for v in values.ravel()], dtype=object).reshape(values.shape)


def _int_inputs(module: Any) -> list[Any]:
    inputs = [module.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(_numbers())
    inputs[1].set_data_from_numpy(np.full((1, 16), 3, np.int32))
    return inputs


# -- service_pb2, service_pb2_grpc, model_config_pb2 -----------------------------------------


def test_proto_modules_name_every_message_and_enum_tritonclient_does() -> None:
    tc_service = pytest.importorskip("tritonclient.grpc.service_pb2")
    tc_config = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    for ours, theirs in ((service_pb2, tc_service), (model_config_pb2, tc_config)):
        names = set(theirs.DESCRIPTOR.message_types_by_name)
        names |= set(theirs.DESCRIPTOR.enum_types_by_name)
        assert names, theirs
        missing = [n for n in sorted(names) if not hasattr(ours, n)]
        assert missing == []
    assert model_config_pb2.ModelInput.FORMAT_NCHW == tc_config.ModelInput.FORMAT_NCHW == 2
    assert model_config_pb2.TYPE_FP32 == tc_config.TYPE_FP32
    assert service_pb2.ModelConfig is model_config_pb2.ModelConfig  # as in Triton's module


def test_a_request_built_with_service_pb2_has_tritonclients_wire_form() -> None:
    tc_service = pytest.importorskip("tritonclient.grpc.service_pb2")

    def build(pb: Any) -> Any:
        request = pb.ModelInferRequest(model_name="simple_string", id="7")
        tensor = pb.ModelInferRequest().InferInputTensor(name="INPUT0", datatype="BYTES")
        tensor.shape.extend([1, 2])
        tensor.contents.bytes_contents.extend([b"1", b"22"])
        request.inputs.extend([tensor])
        request.parameters["sequence_id"].int64_param = 5
        return request

    ours, theirs = build(service_pb2), build(tc_service)
    wire = ours.SerializeToString(deterministic=True)
    assert wire == theirs.SerializeToString(deterministic=True)
    assert tc_service.ModelInferRequest.FromString(wire) == theirs


@pytest.fixture
def stub(server: LocalServer) -> Iterator[Any]:
    channel = grpc.insecure_channel(server.grpc_address)
    try:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    finally:
        channel.close()


def test_stub_model_infer_with_explicit_bytes_contents(stub: Any) -> None:
    request = service_pb2.ModelInferRequest(model_name="simple_string")
    for name, values in (("INPUT0", range(16)), ("INPUT1", [4] * 16)):
        tensor = service_pb2.ModelInferRequest().InferInputTensor(name=name, datatype="BYTES")
        tensor.shape.extend([1, 16])
        tensor.contents.bytes_contents.extend(str(v).encode() for v in values)
        request.inputs.extend([tensor])
    for name in ("OUTPUT0", "OUTPUT1"):
        request.outputs.extend(
            [service_pb2.ModelInferRequest().InferRequestedOutputTensor(name=name)]
        )
    response = stub.ModelInfer(request)
    assert isinstance(response, service_pb2.ModelInferResponse)
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
    total = utils.deserialize_bytes_tensor(response.raw_output_contents[0])
    diff = utils.deserialize_bytes_tensor(response.raw_output_contents[1])
    assert [int(v) for v in total] == [i + 4 for i in range(16)]
    assert [int(v) for v in diff] == [i - 4 for i in range(16)]


def test_stub_model_infer_with_explicit_int_contents_and_model_config(stub: Any) -> None:
    request = service_pb2.ModelInferRequest(model_name="simple")
    for name, values in (("INPUT0", range(16)), ("INPUT1", [1] * 16)):
        tensor = service_pb2.ModelInferRequest().InferInputTensor(name=name, datatype="INT32")
        tensor.shape.extend([1, 16])
        tensor.contents.int_contents.extend(values)
        request.inputs.extend([tensor])
    response = stub.ModelInfer(request)
    by_name = dict(
        zip([o.name for o in response.outputs], response.raw_output_contents, strict=True)
    )
    assert np.frombuffer(by_name["OUTPUT0"], np.int32).tolist() == list(range(1, 17))
    config = stub.ModelConfig(service_pb2.ModelConfigRequest(name="simple")).config
    assert isinstance(config, model_config_pb2.ModelConfig)
    assert [i.name for i in config.input] == ["INPUT0", "INPUT1"]
    assert config.input[0].data_type == model_config_pb2.TYPE_INT32
    assert stub.ServerLive(service_pb2.ServerLiveRequest()).live is True
    later = stub.ModelInfer.future(request)  # the image clients' async form
    assert later.result().outputs[0].name == response.outputs[0].name
    streamed = list(stub.ModelStreamInfer(iter([request, request])))  # and their stream
    assert [r.error_message for r in streamed] == ["", ""]
    assert streamed[1].infer_response.raw_output_contents == response.raw_output_contents


# grpc's own warning, as for tritonclient's one-off calls
@pytest.mark.filterwarnings("ignore::grpc.experimental.ExperimentalApiWarning")
def test_one_off_calls_without_a_channel_name_every_rpc_tritonclient_does(
    server: LocalServer,
) -> None:
    tc_grpc = pytest.importorskip("tritonclient.grpc.service_pb2_grpc")
    theirs = [n for n in vars(tc_grpc.GRPCInferenceService) if not n.startswith("_")]
    assert theirs and all(hasattr(service_pb2_grpc.GRPCInferenceService, n) for n in theirs)
    service = service_pb2_grpc.GRPCInferenceService
    address = server.grpc_address
    live = service.ServerLive(service_pb2.ServerLiveRequest(), address, insecure=True, timeout=10)
    assert isinstance(live, service_pb2.ServerLiveResponse) and live.live is True
    request = service_pb2.ModelInferRequest(model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        tensor = service_pb2.ModelInferRequest().InferInputTensor(name=name, datatype="INT32")
        tensor.shape.extend([1, 16])
        tensor.contents.int_contents.extend(range(16))
        request.inputs.extend([tensor])
    reply = service.ModelInfer(request, address, insecure=True, timeout=10)
    assert np.frombuffer(reply.raw_output_contents[0], np.int32).tolist() == [
        2 * i for i in range(16)
    ]
    streamed = list(service.ModelStreamInfer(iter([request]), address, insecure=True, timeout=10))
    assert streamed[0].infer_response.raw_output_contents == reply.raw_output_contents
    with pytest.raises(grpc.RpcError) as info:
        service.ModelMetadata(
            service_pb2.ModelMetadataRequest(name="nope"), address, insecure=True, timeout=10
        )
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_servicer_on_a_grpc_server_answers_a_stub() -> None:
    from concurrent import futures

    class Live(service_pb2_grpc.GRPCInferenceServiceServicer):
        def ServerLive(self, request: Any, context: Any) -> Any:
            return service_pb2.ServerLiveResponse(live=True)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Live(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            client = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            assert client.ServerLive(service_pb2.ServerLiveRequest()).live is True
            with pytest.raises(grpc.RpcError) as info:
                client.ServerReady(service_pb2.ServerReadyRequest())
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(None)


# -- KeepAliveOptions ----------------------------------------------------------------------


def test_keepalive_options_set_the_channels_ping_period(server: LocalServer) -> None:
    options = grpcclient.KeepAliveOptions(
        keepalive_time_ms=15000,
        keepalive_timeout_ms=5000,
        keepalive_permit_without_calls=True,
        http2_max_pings_without_data=0,
    )
    client = grpcclient.InferenceServerClient(server.grpc_address, keepalive_options=options)
    assert client.client.config.keepalive_seconds == 15
    result = client.infer("simple", _int_inputs(grpcclient), headers={"test": "1"})
    assert result.as_numpy("OUTPUT0").tolist() == (_numbers() + 3).tolist()  # type: ignore[union-attr]
    client.close()
    off = grpcclient.InferenceServerClient(
        server.grpc_address, keepalive_options=grpcclient.KeepAliveOptions()
    )
    assert off.client.config.keepalive_seconds is None  # INT32_MAX: tritonclient's "never"
    assert off.is_server_live()
    off.close()


# -- the asyncio faces ---------------------------------------------------------------------


async def _aio_session(module: Any, url: str) -> dict[str, Any]:
    """The calls Triton's aio examples make, answers collected for comparison."""
    seen: dict[str, Any] = {}
    js: dict[str, Any] = {"as_json": True} if "grpc" in module.__name__ else {}
    async with module.InferenceServerClient(url=url) as client:
        seen["live"] = await client.is_server_live()
        seen["ready"] = await client.is_server_ready()
        seen["model_ready"] = await client.is_model_ready("simple")
        try:
            seen["unknown_ready"] = await client.is_model_ready("no_such_model")
        except Exception:  # tritonclient's gRPC clients raise on the server's NOT_FOUND
            seen["unknown_ready"] = "raised"
        metadata = await client.get_model_metadata("simple", **js)
        seen["metadata"] = (metadata["name"], [i["name"] for i in metadata["inputs"]])
        config = await client.get_model_config("simple", **js)
        config = config.get("config", config)
        seen["config_inputs"] = [i["name"] for i in config["input"]]
        index = await client.get_model_repository_index(**js)
        index = index.get("models", index) if isinstance(index, dict) else index
        seen["indexed"] = "simple" in [m["name"] for m in index]
        outputs = [module.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
        result = await client.infer("simple", _int_inputs(module), outputs=outputs, request_id="r1")
        seen["sum"] = result.as_numpy("OUTPUT0").tolist()
        seen["diff"] = result.as_numpy("OUTPUT1").tolist()
        stats = await client.get_inference_statistics("simple", **js)
        seen["stats_model"] = stats["model_stats"][0]["name"]
        await client.unregister_system_shared_memory()  # answers None: awaited all the same
        await client.unregister_cuda_shared_memory()
        regions = await client.get_system_shared_memory_status(**js)
        seen["regions"] = len(regions.get("regions", regions)) if isinstance(regions, dict) else 0
        try:
            await client.get_model_metadata("no_such_model")
        except Exception as exc:  # tritonclient's one exception type, from either library
            seen["error"] = (type(exc).__name__, "no_such_model" in str(exc))
    return seen


@pytest.mark.parametrize("kind", ["http", "grpc"])
def test_aio_client_answers_as_tritonclients_aio_client(kind: str, server: LocalServer) -> None:
    url = _host(server.http_url if kind == "http" else server.grpc_url)
    ours = asyncio.run(_aio_session(httpaio if kind == "http" else grpcaio, url))
    assert ours["live"] and ours["ready"] and ours["model_ready"] and not ours["unknown_ready"]
    assert ours["metadata"] == ("simple", ["INPUT0", "INPUT1"])
    assert ours["config_inputs"] == ["INPUT0", "INPUT1"] and ours["indexed"]
    assert ours["sum"] == (_numbers() + 3).tolist() and ours["diff"] == (_numbers() - 3).tolist()
    assert ours["stats_model"] == "simple" and ours["regions"] == 0
    assert ours["error"] == ("InferenceServerException", True)
    real = pytest.importorskip(f"tritonclient.{kind}.aio")
    theirs = asyncio.run(_aio_session(real, url))
    # an unknown model's readiness: nbinfer's gRPC server answers NOT_FOUND, which tritonclient
    # raises and the compat face reads as False (Triton itself answers ready=false)
    assert theirs.pop("unknown_ready") in (False, "raised")
    assert theirs == {k: v for k, v in ours.items() if k != "unknown_ready"}


def test_aio_client_methods_are_coroutines_with_the_sync_clients_arguments() -> None:
    import inspect

    for name in ("infer", "get_model_config", "load_model", "register_system_shared_memory"):
        method = getattr(grpcaio.InferenceServerClient, name)
        assert inspect.iscoroutinefunction(method), name
        sync = getattr(grpcclient.InferenceServerClient, name)
        assert inspect.signature(method) == inspect.signature(sync), name


async def _stream(module: Any, url: str) -> list[tuple[str | None, list[int] | None, bool]]:
    async def requests() -> AsyncIterator[dict[str, Any]]:
        for i in range(3):
            yield {"model_name": "simple", "inputs": _int_inputs(module), "request_id": str(i)}
        yield {"model_name": "no_such_model", "inputs": _int_inputs(module)}

    replies: list[tuple[str | None, list[int] | None, bool]] = []
    async with module.InferenceServerClient(url=url) as client:
        async for result, error in client.stream_infer(inputs_iterator=requests()):
            if error is not None:
                replies.append((None, None, "no_such_model" in str(error)))
                break
            response = result.get_response()
            replies.append((response.id, result.as_numpy("OUTPUT0")[0][:2].tolist(), False))
    return replies


def test_grpc_aio_stream_infer_yields_result_error_pairs(server: LocalServer) -> None:
    url = server.grpc_address
    ours = asyncio.run(_stream(grpcaio, url))
    replies = [(str(i), [3, 4], False) for i in range(3)]
    assert ours == [*replies, (None, None, True)]
    real = pytest.importorskip("tritonclient.grpc.aio")
    assert asyncio.run(_stream(real, url)) == ours


def test_grpc_aio_stream_refuses_an_item_that_is_not_a_request_dict(server: LocalServer) -> None:
    async def run() -> None:
        async def requests() -> AsyncIterator[Any]:
            yield ["simple"]

        async with grpcaio.InferenceServerClient(url=server.grpc_address) as client:
            async for _ in client.stream_infer(requests()):
                pass

    with pytest.raises(utils.InferenceServerException, match="not yielding a dict"):
        asyncio.run(run())


# -- BYTES in system shared memory ---------------------------------------------------------


def _shm_string_round_trip(client_module: Any, shm_module: Any, util: Any, url: str) -> Any:
    """Triton's shm_string example flow: serialized BYTES in, BYTES results read from regions."""
    tag = f"{os.getpid()}_{client_module.__name__.replace('.', '_')}"
    client = client_module.InferenceServerClient(url)
    client.unregister_system_shared_memory()
    first = _text(_numbers())
    second = _text(np.ones((1, 16), np.int32))
    expected = [_text(_numbers() + 1), _text(_numbers() - 1)]
    blobs = [util.serialize_byte_tensor(a) for a in (first, second)]
    sizes = [util.serialized_byte_size(b) for b in blobs]
    out_sizes = [util.serialized_byte_size(util.serialize_byte_tensor(e)) for e in expected]
    handles = []
    try:
        for i, (blob, size) in enumerate(zip(blobs, sizes, strict=True)):
            handle = shm_module.create_shared_memory_region(f"in{i}", f"/in{i}_{tag}", size)
            handles.append(handle)
            shm_module.set_shared_memory_region(handle, [blob])
            client.register_system_shared_memory(f"in{i}", f"/in{i}_{tag}", size)
        out_handles = []
        for i, size in enumerate(out_sizes):
            handle = shm_module.create_shared_memory_region(f"out{i}", f"/out{i}_{tag}", size)
            handles.append(handle)
            out_handles.append(handle)
            client.register_system_shared_memory(f"out{i}", f"/out{i}_{tag}", size)
        inputs = [client_module.InferInput(f"INPUT{i}", [1, 16], "BYTES") for i in range(2)]
        for i, item in enumerate(inputs):
            item.set_shared_memory(f"in{i}", sizes[i])
        outputs = [client_module.InferRequestedOutput(f"OUTPUT{i}") for i in range(2)]
        for i, out in enumerate(outputs):
            out.set_shared_memory(f"out{i}", out_sizes[i])
        result = client.infer("simple_string", inputs, outputs=outputs)
        got = []
        for i, handle in enumerate(out_handles):
            described = result.get_output(f"OUTPUT{i}")
            shape = described["shape"] if isinstance(described, dict) else described.shape
            got.append(shm_module.get_contents_as_numpy(handle, np.object_, shape).tolist())
        assert got == [e.tolist() for e in expected]
        return got
    finally:
        client.unregister_system_shared_memory()
        for handle in handles:
            shm_module.destroy_shared_memory_region(handle)
        client.close()


@pytest.mark.parametrize("kind", ["http", "grpc"])
def test_serialized_bytes_go_into_shared_memory_as_given(kind: str, server: LocalServer) -> None:
    module = httpclient if kind == "http" else grpcclient
    url = _host(server.http_url if kind == "http" else server.grpc_url)
    ours = _shm_string_round_trip(module, shm, utils, url)
    real_client = pytest.importorskip(f"tritonclient.{kind}")
    real_shm = pytest.importorskip("tritonclient.utils.shared_memory")
    real_utils = pytest.importorskip("tritonclient.utils")
    assert _shm_string_round_trip(real_client, real_shm, real_utils, url) == ours


def test_set_shared_memory_region_still_serializes_a_plain_bytes_array() -> None:
    items = np.array([b"ab", b"c"], dtype=object)
    size = utils.serialized_byte_size(utils.serialize_byte_tensor(items))
    handle = shm.create_shared_memory_region("plain", f"/plain_{os.getpid()}", size)
    try:
        shm.set_shared_memory_region(handle, [items])  # not serialized first: done here
        assert shm.get_contents_as_numpy(handle, np.object_, [2]).tolist() == [b"ab", b"c"]
        with pytest.raises(shm.SharedMemoryException, match="do not fit"):
            shm.set_shared_memory_region(handle, [utils.serialize_byte_tensor(items)], offset=1)
        with pytest.raises(shm.SharedMemoryException, match="serialized bytes"):
            shm.set_shared_memory_region(handle, [np.array("text", dtype=object)])
    finally:
        shm.destroy_shared_memory_region(handle)


def test_serialize_byte_tensor_matches_tritonclients() -> None:
    real = pytest.importorskip("tritonclient.utils")
    for arr in (
        np.array([b"a", "\u00e9", 3], dtype=object),
        np.array([[b"xy"], [b""]], dtype=object),
        np.array([b"ab", b"c"], dtype="S2"),
        np.array([], dtype=object),
    ):
        ours, theirs = utils.serialize_byte_tensor(arr), real.serialize_byte_tensor(arr)
        assert (ours.shape, ours.dtype, ours.tolist()) == (
            theirs.shape,
            theirs.dtype,
            theirs.tolist(),
        )
        assert utils.serialized_byte_size(ours) == real.serialized_byte_size(theirs)
    with pytest.raises(utils.InferenceServerException, match="invalid datatype"):
        utils.serialize_byte_tensor(np.zeros(2, np.float32))


# -- JSON BYTES outputs --------------------------------------------------------------------


def _string_outputs(module: Any, url: str, binary_inputs: bool) -> list[list[Any]]:
    client = module.InferenceServerClient(url)
    inputs = [module.InferInput(n, [1, 16], "BYTES") for n in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(_text(_numbers()), binary_data=binary_inputs)
    inputs[1].set_data_from_numpy(_text(np.ones((1, 16), np.int32)), binary_data=binary_inputs)
    outputs = [
        module.InferRequestedOutput("OUTPUT0", binary_data=False),
        module.InferRequestedOutput("OUTPUT1", binary_data=True),
    ]
    result = client.infer("simple_string", inputs, outputs=outputs)
    unasked = client.infer("simple_string", inputs)  # no outputs named: binary, as tritonclient
    client.close()
    return [
        [type(v).__name__ + ":" + str(v) for v in result.as_numpy(name)[0][:3]]
        for name in ("OUTPUT0", "OUTPUT1")
    ] + [[type(v).__name__ for v in unasked.as_numpy("OUTPUT0")[0][:1]]]


@pytest.mark.parametrize("binary_inputs", [True, False])
def test_http_json_bytes_outputs_are_str_binary_ones_bytes(
    binary_inputs: bool, server: LocalServer
) -> None:
    url = _host(server.http_url)
    ours = _string_outputs(httpclient, url, binary_inputs)
    assert ours == [
        ["str:1", "str:2", "str:3"],
        ["bytes:b'-1'", "bytes:b'0'", "bytes:b'1'"],
        ["bytes"],
    ]
    real = pytest.importorskip("tritonclient.http")
    assert _string_outputs(real, url, binary_inputs) == ours


# -- client plugins ------------------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers ``GET /v2/health/live`` and keeps the Authorization header it got."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str | None]]]:
    _Recorder.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}", _Recorder.seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _plugged_calls(module: Any, auth: Any, url: str) -> None:
    client = module.InferenceServerClient(url)
    plugin = auth.BasicAuth("user", "secret")
    client.register_plugin(plugin)
    assert client.plugin() is plugin
    with pytest.raises(Exception, match="already registered"):
        client.register_plugin(plugin)
    assert client.is_server_live()
    client.unregister_plugin()
    assert client.is_server_live()
    with pytest.raises(Exception, match="No plugin"):
        client.unregister_plugin()
    client.close()


def test_basic_auth_plugin_sends_tritonclients_header(
    recorder: tuple[str, list[str | None]],
) -> None:
    import nbinfer.compat.tritonclient.http.auth as auth

    url, seen = recorder
    _plugged_calls(httpclient, auth, url)
    assert seen == ["Basic dXNlcjpzZWNyZXQ=", None]
    real = pytest.importorskip("tritonclient.http")
    real_auth = pytest.importorskip("tritonclient.http.auth")
    _plugged_calls(real, real_auth, url)
    assert seen == ["Basic dXNlcjpzZWNyZXQ=", None] * 2


def test_a_plugin_reaches_grpc_aio_calls_as_metadata() -> None:
    from concurrent import futures

    import nbinfer.compat.tritonclient.grpc.aio.auth as auth

    metadata: list[dict[str, str]] = []

    class Live(service_pb2_grpc.GRPCInferenceServiceServicer):
        def ServerLive(self, request: Any, context: Any) -> Any:
            metadata.append(dict(context.invocation_metadata()))
            return service_pb2.ServerLiveResponse(live=True)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Live(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()

    async def run() -> bool:
        async with grpcaio.InferenceServerClient(f"127.0.0.1:{port}") as client:
            client.register_plugin(auth.BasicAuth("user", "secret"))
            return bool(await client.is_server_live(headers={"x-extra": "1"}))

    try:
        assert asyncio.run(run())
    finally:
        server.stop(None)
    assert metadata[0]["authorization"] == "Basic dXNlcjpzZWNyZXQ="
    assert metadata[0]["x-extra"] == "1"


# -- request / response bodies without a connection ----------------------------------------


def _post(server: LocalServer, model: str, body: bytes, json_size: int | None) -> tuple[bytes, Any]:
    import urllib.request

    headers = {"Content-Type": "application/octet-stream" if json_size else "application/json"}
    if json_size is not None:
        headers["Inference-Header-Content-Length"] = str(json_size)
    request = urllib.request.Request(
        f"{server.http_url}/v2/models/{model}/infer", data=body, headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.read(), reply.headers.get("Inference-Header-Content-Length")


@pytest.mark.parametrize("binary", [True, False])
def test_generated_request_bodies_and_parsed_responses(binary: bool, server: LocalServer) -> None:
    inputs = [httpclient.InferInput(n, [1, 16], "BYTES") for n in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(_text(_numbers()), binary_data=binary)
    inputs[1].set_data_from_numpy(_text(np.ones((1, 16), np.int32)), binary_data=binary)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=False),
        httpclient.InferRequestedOutput("OUTPUT1"),
    ]
    body, json_size = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="g1"
    )
    assert (json_size is not None) == binary
    reply, length = _post(server, "simple_string", body, json_size)
    header_length = None if length is None else int(length)
    result = httpclient.InferenceServerClient.parse_response_body(
        reply, header_length=header_length
    )
    assert result.get_response()["id"] == "g1"
    sums, diffs = result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")
    assert sums is not None and diffs is not None
    assert sums[0][:3].tolist() == ["1", "2", "3"]  # asked for as JSON: str
    assert diffs[0][:3].tolist() == [b"-1", b"0", b"1"]
    again = httpclient.InferResult.from_response_body(reply, header_length=header_length)
    assert again.as_numpy("OUTPUT0").tolist() == sums.tolist()  # type: ignore[union-attr]
    real = pytest.importorskip("tritonclient.http")
    theirs = real.InferenceServerClient.parse_response_body(reply, header_length=header_length)
    assert theirs.as_numpy("OUTPUT0").tolist() == sums.tolist()
    assert theirs.as_numpy("OUTPUT1").tolist() == diffs.tolist()
