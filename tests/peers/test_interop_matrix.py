"""The interop matrix: every client x every v2 server (docs/interop.md shows what this proves).

Clients: nbinfer HTTP (binary and JSON), nbinfer gRPC, nbinfer asyncio, tritonclient HTTP and
gRPC, curl. Servers: nbinfer, KServe ModelServer, Seldon MLServer, real Triton (the peer
fixtures of ``conftest.py``). Each cell checks health, metadata, FP32 / INT64 / BYTES inference
and, for nbinfer's clients, that an unknown model raises ``ModelNotFoundError``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from typing import Any

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import ModelNotFoundError

SERVERS = ["nbinfer_peer", "kserve", "mlserver", "triton"]
RNG = np.random.default_rng(3)
A = RNG.standard_normal((2, 16)).astype(np.float32)
B = RNG.standard_normal((2, 16)).astype(np.float32)
CASES: dict[str, tuple[dict[str, np.ndarray[Any, Any]], dict[str, np.ndarray[Any, Any]]]] = {
    "FP32": ({"INPUT0": A, "INPUT1": B}, {"OUTPUT0": A + B, "OUTPUT1": A - B}),
    "INT64": (
        {"INPUT0": np.array([3, -4, 2**40], np.int64)},
        {"OUTPUT0": np.array([6, -8, 2**41], np.int64)},
    ),
    "BYTES": (
        {"INPUT0": np.array([b"ab", b"Cd e"], dtype=object)},
        {"OUTPUT0": np.array([b"AB", b"CD E"], dtype=object)},
    ),
}
MODEL = {"FP32": "add_sub", "INT64": "times_two", "BYTES": "upper"}


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    for name, value in want.items():
        arr = np.asarray(got[name])
        if value.dtype == object:
            # tritonclient gives JSON BYTES back as str
            flat = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.reshape(-1)]
            assert flat == value.tolist(), name
        else:
            np.testing.assert_allclose(arr, value, rtol=1e-6, err_msg=name)


# -- nbinfer clients ---------------------------------------------------------------------------


@pytest.mark.parametrize("face", ["http-binary", "http-json", "grpc"])
@pytest.mark.parametrize("datatype", sorted(CASES))
def test_nbinfer_client(server: Any, face: str, datatype: str) -> None:
    url = server.grpc_url if face == "grpc" else server.http_url
    binary = None if face == "grpc" else face == "http-binary" and server.binary_http
    inputs, want = CASES[datatype]
    with Client(url, binary=binary) as client:
        assert client.is_server_ready()
        meta = client.get_model_metadata(MODEL[datatype])
        assert sorted(t.name for t in meta.inputs) == sorted(inputs)
        result = client.infer(MODEL[datatype], inputs)
        _same({n: result.as_numpy(n) for n in want}, want)
        with pytest.raises(ModelNotFoundError):
            client.infer("no_such_model", inputs)


@pytest.mark.parametrize("datatype", sorted(CASES))
def test_nbinfer_async_client(server: Any, datatype: str) -> None:
    inputs, want = CASES[datatype]

    async def main() -> None:
        async with AsyncClient(server.http_url, binary=server.binary_http) as client:
            assert await client.is_server_ready()
            result = await client.infer(MODEL[datatype], inputs)
            _same({n: result.as_numpy(n) for n in want}, want)
            with pytest.raises(ModelNotFoundError):
                await client.infer("no_such_model", inputs)

    asyncio.run(main())


# -- tritonclient ----------------------------------------------------------------------------


@pytest.mark.parametrize("face", ["http", "grpc"])
@pytest.mark.parametrize("datatype", sorted(CASES))
def test_tritonclient(server: Any, face: str, datatype: str) -> None:
    if face == "http":
        import tritonclient.http as tc

        url = server.http_url.removeprefix("http://")
    else:
        import tritonclient.grpc as tc  # type: ignore[no-redef]

        url = server.grpc_url.removeprefix("grpc://")
    inputs, want = CASES[datatype]
    client = tc.InferenceServerClient(url)
    try:
        assert client.is_server_ready()
        tensors = []
        for name, value in inputs.items():
            tensor = tc.InferInput(name, list(value.shape), datatype)
            if face == "http":
                tensor.set_data_from_numpy(value, binary_data=server.binary_http)
            else:
                tensor.set_data_from_numpy(value)
            tensors.append(tensor)
        if face == "http":
            outputs = [tc.InferRequestedOutput(n, binary_data=server.binary_http) for n in want]
        else:
            outputs = [tc.InferRequestedOutput(n) for n in want]
        result = client.infer(MODEL[datatype], tensors, outputs=outputs)
        _same({n: result.as_numpy(n) for n in want}, want)
    finally:
        client.close()


# -- curl ----------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_json(server: Any) -> None:
    inputs, want = CASES["FP32"]
    body = {
        "inputs": [
            {"name": n, "datatype": "FP32", "shape": list(v.shape), "data": v.ravel().tolist()}
            for n, v in inputs.items()
        ]
    }
    url = f"{server.http_url}/v2/models/add_sub/infer"
    out = subprocess.run(
        ["curl", "-sf", "-H", "Content-Type: application/json", "-d", json.dumps(body), url],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    outputs = {
        o["name"]: np.array(o["data"], np.float32) for o in json.loads(out.stdout)["outputs"]
    }
    _same({n: outputs[n].reshape(want[n].shape) for n in want}, want)
    ready = subprocess.run(
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            f"{server.http_url}/v2/health/ready",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ready.stdout == "200"
