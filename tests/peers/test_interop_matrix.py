"""The interop matrix: every client x every v2 server (docs/interop.md shows what this proves).

Clients: nbinfer HTTP (binary and JSON), nbinfer gRPC, nbinfer asyncio, tritonclient HTTP and
gRPC, curl. Servers: nbinfer, KServe ModelServer, Seldon MLServer, real Triton (the peer
fixtures of ``conftest.py``). Each cell checks health, metadata, FP32 / INT64 / BYTES / BF16
inference and, for nbinfer's clients, that an unknown model raises ``ModelNotFoundError``. Where a
server cannot take BF16, the cell pins what happens instead: a typed error with the server's
reason (``BF16_REFUSED``), never a crash or values silently changed.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import InferenceError, ModelNotFoundError, RemoteInvalidInputError

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
    # exact in bfloat16: a sign, the extremes, a full 7-bit mantissa, a subnormal
    "BF16": (
        {"INPUT0": np.array([1.5, -0.0, 3.0e38, -1.0078125, 1.0e-40], ml_dtypes.bfloat16)},
        {"OUTPUT0": np.array([1.5, -0.0, 3.0e38, -1.0078125, 1.0e-40], ml_dtypes.bfloat16)},
    ),
}
MODEL = {"FP32": "add_sub", "INT64": "times_two", "BYTES": "upper", "BF16": "identity_bf16"}
#: BF16 where the server cannot take it: (server, face) -> the error nbinfer raises and the text
#: of the server's reason. MLServer's HTTP takes JSON only ("http-binary" sends JSON there).
BF16_REFUSED: dict[tuple[str, str], tuple[type[Exception], str]] = {
    # KServe 0.21's numpy codec has no BF16 (its message names the dtype it found: None)
    ("kserve", "http-binary"): (RemoteInvalidInputError, "invalid datatype None in the input"),
    ("kserve", "http-json"): (RemoteInvalidInputError, "invalid datatype None in the input"),
    ("kserve", "grpc"): (RemoteInvalidInputError, "invalid content type"),
    # MLServer 1.7's Datatype enum has no BF16: its request validation refuses it
    ("mlserver", "http-binary"): (RemoteInvalidInputError, "'input': 'BF16'"),
    ("mlserver", "http-json"): (RemoteInvalidInputError, "'input': 'BF16'"),
    ("mlserver", "grpc"): (InferenceError, "'BF16' is not a valid Datatype"),
    # Triton takes BF16 as binary data only
    ("triton", "http-json"): (RemoteInvalidInputError, "receiving BF16 data via JSON is not"),
}


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    for name, value in want.items():
        arr = np.asarray(got[name])
        if value.dtype == ml_dtypes.bfloat16:  # bit for bit: -0.0 and subnormals included
            assert arr.dtype == value.dtype, name
            np.testing.assert_array_equal(arr.view(np.uint16), value.view(np.uint16), name)
        elif value.dtype == object:
            # tritonclient gives JSON BYTES back as str
            flat = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.reshape(-1)]
            assert flat == value.tolist(), name
        else:
            np.testing.assert_allclose(arr, value, rtol=1e-6, err_msg=name)


#: The same for tritonclient: (server, face) -> the text of its InferenceServerException.
TRITONCLIENT_BF16_REFUSED = {
    ("kserve", "http"): "invalid datatype None in the input",
    ("kserve", "grpc"): "invalid content type",
    # MLServer takes no binary HTTP, and tritonclient sends BF16 over HTTP as binary only
    ("mlserver", "http"): "BF16 inputs must be sent as binary data",
    ("mlserver", "grpc"): "'BF16' is not a valid Datatype",
}


def _refusal(server: Any, face: str, datatype: str) -> tuple[type[Exception], str] | None:
    return BF16_REFUSED.get((server.name, face)) if datatype == "BF16" else None


def _probe(datatype: str) -> dict[str, np.ndarray[Any, Any]]:
    """Inputs for an unknown model (KServe's gRPC and MLServer refuse BF16 before routing)."""
    return CASES["INT64" if datatype == "BF16" else datatype][0]


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
        declared = [] if (server.name, datatype) == ("mlserver", "BF16") else sorted(inputs)
        assert sorted(t.name for t in meta.inputs) == declared
        refused = _refusal(server, face, datatype)
        if refused is None:
            result = client.infer(MODEL[datatype], inputs)
            _same({n: result.as_numpy(n) for n in want}, want)
        else:
            with pytest.raises(refused[0], match=re.escape(refused[1])):
                client.infer(MODEL[datatype], inputs)
        with pytest.raises(ModelNotFoundError):
            client.infer("no_such_model", _probe(datatype))


@pytest.mark.parametrize("datatype", sorted(CASES))
def test_nbinfer_async_client(server: Any, datatype: str) -> None:
    inputs, want = CASES[datatype]

    async def main() -> None:
        async with AsyncClient(server.http_url, binary=server.binary_http) as client:
            assert await client.is_server_ready()
            refused = _refusal(server, "http-binary", datatype)
            if refused is None:
                result = await client.infer(MODEL[datatype], inputs)
                _same({n: result.as_numpy(n) for n in want}, want)
            else:
                with pytest.raises(refused[0], match=re.escape(refused[1])):
                    await client.infer(MODEL[datatype], inputs)
            with pytest.raises(ModelNotFoundError):
                await client.infer("no_such_model", _probe(datatype))

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

    def infer() -> Any:
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
        return client.infer(MODEL[datatype], tensors, outputs=outputs)

    try:
        assert client.is_server_ready()
        refused = TRITONCLIENT_BF16_REFUSED.get((server.name, face)) if datatype == "BF16" else None
        if refused is None:
            result = infer()
            _same({n: result.as_numpy(n) for n in want}, want)
        else:
            with pytest.raises(InferenceServerException, match=re.escape(refused)):
                infer()
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


#: BF16 as JSON numbers, by server: (HTTP status, text of the body) where it is refused.
CURL_BF16_REFUSED = {
    "kserve": (400, "invalid datatype None in the input"),
    "mlserver": (422, '"input":"BF16"'),
    "triton": (400, "receiving BF16 data via JSON is not supported"),
}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_json_bf16(server: Any) -> None:
    inputs, want = CASES["BF16"]
    body = {
        "inputs": [
            {"name": n, "datatype": "BF16", "shape": list(v.shape), "data": v.tolist()}
            for n, v in inputs.items()
        ]
    }
    url = f"{server.http_url}/v2/models/identity_bf16/infer"
    header = "Content-Type: application/json"
    cmd = ["curl", "-s", "-w", "\n%{http_code}", "-H", header, "-d", json.dumps(body), url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True)
    text, status = out.stdout.rsplit("\n", 1)
    if server.name in CURL_BF16_REFUSED:
        want_status, reason = CURL_BF16_REFUSED[server.name]
        assert int(status) == want_status and reason in text, text
        return
    assert status == "200", text
    (output,) = json.loads(text)["outputs"]
    assert output["datatype"] == "BF16" and output["shape"] == [5]
    got = np.array(output["data"], np.float32).astype(ml_dtypes.bfloat16)
    _same({"OUTPUT0": got}, want)
