"""KServe's helpers on nbinfer.compat.kserve: the BYTES codec, the parameter converters, its
``InvalidInput`` (a ``ValueError``), and v1 instances of a lower rank than the model's input.

The KServe SDK cannot share a process with tritonclient (their protobuf modules clash), so its
answers are computed in a subprocess, where it is installed, and compared with ours.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nbinfer
from nbinfer.compat.kserve import (
    InferenceRESTClient,
    InferInput,
    InferRequest,
    InvalidInput,
    RESTConfig,
    deserialize_bytes_tensor,
    serialize_byte_tensor,
    to_grpc_parameters,
    to_http_parameters,
)
from nbinfer.errors import InvalidInputError, RemoteInvalidInputError
from nbinfer.protocol.grpc import pb
from nbinfer.server.launcher import LocalServer
from tests.ports import free_port

HAS_KSERVE = importlib.util.find_spec("kserve") is not None
KSERVE_SCRIPT = Path(__file__).parents[1] / "client" / "kserve_server.py"

_KSERVE_PROGRAM = """
import json, sys
import numpy as np
from kserve.errors import InvalidInput
from kserve.protocol.grpc.grpc_predict_v2_pb2 import InferParameter
from kserve.protocol.infer_type import (
    deserialize_bytes_tensor, serialize_byte_tensor, to_grpc_parameters, to_http_parameters,
)

arrays = [
    np.array([b"a", "\\u00e9", 3], dtype=object),
    np.array([[b"xy"], [b""]], dtype=object),
    np.array([b"ab", b"c"], dtype="S2"),
]
out = {"serialized": [serialize_byte_tensor(a).item().hex() for a in arrays]}
out["empty"] = list(serialize_byte_tensor(np.array([], dtype=object)).shape)
wire = bytes.fromhex(out["serialized"][0])
out["deserialized"] = [v.decode() for v in deserialize_bytes_tensor(wire)]
params = to_grpc_parameters({"s": "x", "b": True, "i": -3, "kept": InferParameter(int64_param=9)})
out["grpc"] = {k: v.SerializeToString().hex() for k, v in params.items()}
out["http"] = to_http_parameters(
    {"a": InferParameter(int64_param=4), "n": InferParameter(),
     "s": InferParameter(string_param="t"), "plain": 1}
)
try:
    to_grpc_parameters({"bad": [1]})
except ValueError as exc:
    out["bad"] = [type(exc).__name__, isinstance(exc, InvalidInput), str(exc)]
print(json.dumps(out))
"""


def _ours() -> dict[str, Any]:
    arrays = [
        np.array([b"a", "\u00e9", 3], dtype=object),
        np.array([[b"xy"], [b""]], dtype=object),
        np.array([b"ab", b"c"], dtype="S2"),
    ]
    out: dict[str, Any] = {"serialized": [serialize_byte_tensor(a).item().hex() for a in arrays]}
    out["empty"] = list(serialize_byte_tensor(np.array([], dtype=object)).shape)
    wire = bytes.fromhex(out["serialized"][0])
    out["deserialized"] = [v.decode() for v in deserialize_bytes_tensor(wire)]
    params = to_grpc_parameters(
        {"s": "x", "b": True, "i": -3, "kept": pb.InferParameter(int64_param=9)}
    )
    out["grpc"] = {k: v.SerializeToString().hex() for k, v in params.items()}
    out["http"] = to_http_parameters(
        {
            "a": pb.InferParameter(int64_param=4),
            "n": pb.InferParameter(),
            "s": pb.InferParameter(string_param="t"),
            "plain": 1,
        }
    )
    try:
        to_grpc_parameters({"bad": [1]})
    except ValueError as exc:
        out["bad"] = [type(exc).__name__, isinstance(exc, InvalidInput), str(exc)]
    return out


def test_helpers_give_what_the_kserve_sdk_gives() -> None:
    ours = _ours()
    assert ours["serialized"][0] == (b"\x01\0\0\0a\x02\0\0\0\xc3\xa9\x01\0\0\x003").hex()
    assert ours["empty"] == [0] and ours["deserialized"] == ["a", "\u00e9", "3"]
    assert ours["http"] == {"a": 4, "s": "t", "plain": 1}  # an unset InferParameter is left out
    assert ours["bad"][:2] == ["InvalidInput", True] and "'bad'" in ours["bad"][2]
    if not HAS_KSERVE:
        pytest.skip("the KServe SDK is not installed")
    done = subprocess.run(
        [sys.executable, "-c", _KSERVE_PROGRAM],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert theirs["bad"][:2] == ["InvalidInput", True]
    ours["bad"] = theirs["bad"] = None  # the messages differ in wording only
    assert ours == theirs


def test_to_grpc_parameters_carries_floats_and_large_ints_too() -> None:
    params = to_grpc_parameters({"f": 0.5, "u": 2**63})
    assert params["f"].double_param == 0.5 and params["u"].uint64_param == 2**63
    assert to_http_parameters(params) == {"f": 0.5, "u": 2**63}
    with pytest.raises(InvalidInput, match="'big'"):
        to_grpc_parameters({"big": 2**64})


def test_local_input_errors_are_value_errors_and_nbinfer_errors() -> None:
    with pytest.raises(ValueError, match="FP32") as info:
        InferInput("x", [1], "INT32").set_data_from_numpy(np.zeros(1, np.float32))
    assert isinstance(info.value, InvalidInputError) and isinstance(info.value, InvalidInput)
    assert info.value.reason == info.value.message
    with pytest.raises(ValueError):
        InferRequest.from_rest({"inputs": [{"name": "x"}]}, "m")  # no datatype, shape, data
    with pytest.raises(ValueError, match="invalid datatype"):
        serialize_byte_tensor(np.zeros(2, np.float32))


def test_nbinfers_own_invalid_input_error_stays_apart_from_value_error() -> None:
    # the Session boundary turns ValueError / TypeError into InvalidInputError: nbinfer's own
    # class must not be a ValueError, or every InvalidInputError would be wrapped again there
    assert not issubclass(nbinfer.InvalidInputError, ValueError)
    assert issubclass(InvalidInput, nbinfer.InvalidInputError)


def _v1_at(url: str, model: str, instances: Any) -> Any:
    async def call() -> Any:
        client = InferenceRESTClient(RESTConfig(protocol="v1"))
        try:
            return await client.infer(url, {"instances": instances}, model_name=model)
        finally:
            await client.close()

    return asyncio.run(call())


def test_v1_scalar_instances_feed_a_batching_model_declared_minus_one(server: LocalServer) -> None:
    assert _v1_at(server.http_url, "doubler", [1, 2]) == {"predictions": [2.0, 4.0]}
    assert _v1_at(server.http_url, "doubler", [[1, 2]]) == {"predictions": [[2.0, 4.0]]}
    with nbinfer.Client(server.http_url) as client:
        assert client.predict("doubler", [3.0]) == [6.0]


@pytest.fixture(scope="module")
def kserve_url() -> Iterator[str]:
    """KServe's own ModelServer (tests/client/kserve_server.py) in a subprocess, on loopback."""
    if not HAS_KSERVE:
        pytest.skip("the KServe SDK is not installed")
    http_port, grpc_port = free_port(), free_port()
    cmd = [sys.executable, str(KSERVE_SCRIPT), "--http-port", str(http_port)]
    proc = subprocess.Popen(
        [*cmd, "--grpc-port", str(grpc_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    url = f"http://127.0.0.1:{http_port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "KServe did not start"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_v1_scalar_instances_answer_as_kserve_answers_them(
    server: LocalServer, kserve_url: str
) -> None:
    # KServe's times_two ([-1]) doubles whatever instances it is given; nbinfer's doubler is a
    # batching model declared [-1]: the same instances, the same predictions
    for instances in ([1, 2], [[1, 2]], [[1], [2]]):
        theirs = _v1_at(kserve_url, "times_two", instances)
        assert _v1_at(server.http_url, "doubler", instances) == theirs, instances


def test_v1_instances_missing_a_fixed_dim_are_still_refused(server: LocalServer) -> None:
    with pytest.raises(RemoteInvalidInputError, match=r"\[-1,4\]|\[-1, 4\]"):
        _v1_at(server.http_url, "iris", [1.0, 2.0])
