"""nbinfer.testing.MockTransport: clients run offline against a handler, through real codecs."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import (
    ConnectError,
    InferenceError,
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    RequestTimeoutError,
    TransportError,
)
from nbinfer.testing import MockTransport, Request, Response

METADATA = {
    "name": "doubler",
    "versions": ["1"],
    "platform": "python",
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}],
}


def v2_server(request: Request) -> Response:
    """A tiny v2 JSON server: health, server and model metadata, and a doubling model."""
    seen.append(request)
    if request.path in ("/v2/health/live", "/v2/health/ready"):
        return Response(200)
    if request.path == "/v2":
        return Response(200, json={"name": "mock", "version": "0", "extensions": []})
    if request.path == "/v2/models/doubler":
        return Response(200, json=METADATA)
    if request.path == "/v2/models/doubler/infer":
        body = request.json()
        x = body["inputs"][0]
        y = [2 * v for v in x["data"]]
        out = {"name": "y", "datatype": "FP32", "shape": x["shape"], "data": y}
        return Response(
            200, json={"model_name": "doubler", "id": body.get("id", ""), "outputs": [out]}
        )
    return Response(404, json={"error": f"unknown model or route {request.path}"})


seen: list[Request] = []


def test_sync_client_speaks_v2_json_to_a_handler() -> None:
    seen.clear()
    transport = MockTransport(v2_server)
    with Client("http://mock:1", transport=transport, headers={"X-Team": "a"}) as client:
        assert client.is_server_live() and client.is_server_ready()
        assert client.get_server_metadata().name == "mock"
        meta = client.get_model_metadata("doubler")
        assert [i.name for i in meta.inputs] == ["x"]
        result = client.infer("doubler", {"x": [1.0, 2.5]}, request_id="r1")  # FP32 from metadata
        with pytest.raises(ModelNotFoundError, match="unknown model"):
            client.infer("nope", {"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(result["y"], np.array([2.0, 5.0], np.float32))
    assert result.id == "r1"
    infer_calls = [r for r in seen if r.path.endswith("/infer")]
    assert infer_calls[0].method == "POST" and infer_calls[0].headers["x-team"] == "a"


def test_async_client_with_an_async_handler() -> None:
    async def handler(request: Request) -> Response:
        await asyncio.sleep(0)
        return v2_server(request)

    async def main() -> Any:
        async with AsyncClient("http://mock:1", transport=MockTransport(handler)) as client:
            assert await client.is_server_ready()
            return await client.infer("doubler", {"x": np.array([3.0], np.float32)})

    np.testing.assert_array_equal(asyncio.run(main())["y"], [6.0])


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (ConnectionRefusedError("refused"), ConnectError),
        (RequestTimeoutError("slow", url="x"), RequestTimeoutError),
        (__import__("builtins").TimeoutError("slow"), RequestTimeoutError),
        (InferenceError("model broke", status=500), InferenceError),
        (ValueError("bug in the handler"), TransportError),
    ],
)
def test_a_raising_handler_gives_the_matching_error_class(
    raised: Exception, expected: type[NbinferError]
) -> None:
    def handler(request: Request) -> Response:
        raise raised

    client = Client("http://mock:1", transport=MockTransport(handler), retries=0)
    with client, pytest.raises(expected) as info:
        client.infer("m", {"x": np.ones(1, np.float32)}, binary=False)
    assert isinstance(info.value, NbinferError)
    if not isinstance(raised, NbinferError):
        assert info.value.__cause__ is raised


def test_grpc_handler_answers_with_dicts_of_the_reply_fields() -> None:
    def handler(request: Request) -> Any:
        if request.rpc == "ServerReady":
            return {"ready": True}
        if request.rpc == "ModelInfer":
            x = np.frombuffer(request.message.raw_input_contents[0], np.float32)
            raw = base64.b64encode((x * 2).tobytes()).decode()
            out = {"name": "y", "datatype": "FP32", "shape": [len(x)]}
            return {
                "model_name": request.message.model_name,
                "outputs": [out],
                "raw_output_contents": [raw],
            }
        raise ModelNotFoundError(f"no rpc {request.rpc}", status=404)

    with Client("grpc://mock:1", transport=MockTransport(handler)) as client:
        assert client.is_server_ready()
        result = client.infer("doubler", {"x": np.array([1.0, 4.0], np.float32)})
        with pytest.raises(ModelNotFoundError):
            client.get_model_config("doubler")
    np.testing.assert_array_equal(result["y"], [2.0, 8.0])


def test_sync_client_refuses_an_async_handler() -> None:
    async def handler(request: Request) -> Response:
        return Response(200)

    client = Client("http://mock:1", transport=MockTransport(handler))
    with client, pytest.raises(TransportError, match="AsyncClient"):
        client.is_server_live()


def test_closed_mock_client_refuses_calls() -> None:
    client = Client("http://mock:1", transport=MockTransport(v2_server))
    client.close()
    with pytest.raises(TransportError, match="closed"):
        client.is_server_live()


def test_something_that_is_not_a_transport_is_refused_at_construction() -> None:
    with pytest.raises(InvalidInputError, match="transport must build engines"):
        Client("http://mock:1", transport=v2_server)  # type: ignore[arg-type]  # the handler
