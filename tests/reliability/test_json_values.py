"""JSON never changes a value silently, against the peers users port from.

The forms, checked here against the real peers:

* tritonclient (``binary_data=False``) writes NaN and infinities as the ``NaN`` / ``Infinity`` /
  ``-Infinity`` tokens and reads them back (rapidjson): nbinfer reads and writes the same tokens,
  so a tritonclient round trip is exact.
* KServe's server accepts those tokens in requests and writes ``null`` for every non-finite float
  in its answers: nbinfer's client reads that ``null`` as NaN (an infinity is lost at KServe's end).
* ``null``, booleans and strings in numeric data, numbers in BOOL data and values out of the
  datatype's range are a 400 naming the input and the element (the corpus in
  ``bad_inputs.json`` holds one case per datatype and kind).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from nbinfer.client import Client
from nbinfer.errors import InvalidInputError
from nbinfer.protocol import rest
from nbinfer.protocol.types import InferOutput, InferResponse
from nbinfer.server.launcher import LocalServer
from tests.ports import free_port

SPECIAL = [np.nan, np.inf, -np.inf, 1.5, -0.0, 3.0e38]
KSERVE_SCRIPT = Path(__file__).parents[1] / "client" / "kserve_server.py"


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("datatype", ["FP32", "FP64"])
def test_tritonclient_json_round_trips_nan_and_infinities(
    server: LocalServer, datatype: str
) -> None:
    data = np.array(SPECIAL, dtype=np.float32 if datatype == "FP32" else np.float64)
    client = triton_http.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        given = triton_http.InferInput("INPUT0", list(data.shape), datatype)
        given.set_data_from_numpy(data, binary_data=False)
        wanted = triton_http.InferRequestedOutput("OUTPUT0", binary_data=False)
        result = client.infer(f"identity_{datatype.lower()}", [given], outputs=[wanted])
        assert same(result.as_numpy("OUTPUT0"), data)
        body = result.get_response()["outputs"][0]["data"]
        assert [str(x) for x in body[:3]] == ["nan", "inf", "-inf"]
    finally:
        client.close()


@pytest.mark.parametrize("datatype", ["FP16", "BF16", "FP32", "FP64"])
def test_nbinfer_json_round_trips_nan_and_infinities(server: LocalServer, datatype: str) -> None:
    with Client(server.http_url, binary=False) as client:
        out = client.infer(
            f"identity_{datatype.lower()}", {"INPUT0": [np.nan, np.inf, -np.inf, 2.5]}
        )
        got = np.asarray(out["OUTPUT0"], dtype=np.float64)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf and got[3] == 2.5


def test_out_of_range_json_is_a_400_naming_input_and_element(server: LocalServer) -> None:
    body = b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[3],"data":[1,2,1e39]}]}'
    request = urllib.request.Request(
        f"{server.http_url}/v2/models/identity_fp32/infer", data=body, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 400
    message = info.value.read().decode()
    assert "'INPUT0'" in message and "element 2" in message and "out of range" in message


# ------------------------------------------------------------------------------------- KServe


@pytest.fixture(scope="module")
def kserve_url() -> Iterator[str]:
    # Never import kserve here: its protobuf module clashes with tritonclient's in one process.
    if importlib.util.find_spec("kserve") is None:
        pytest.skip("kserve is not installed")
    http_port, grpc_port = free_port(), free_port()
    cmd = [sys.executable, str(KSERVE_SCRIPT), "--http-port", str(http_port)]
    cmd += ["--grpc-port", str(grpc_port)]
    proc = subprocess.Popen(
        cmd,
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


def test_kserve_takes_the_tokens_and_answers_null_read_as_nan(kserve_url: str) -> None:
    data = np.array([[np.nan, np.inf, -np.inf, 1.5]], np.float32)
    with Client(kserve_url, binary=False) as client:
        out = client.infer("add_one", {"INPUT0": data})["OUTPUT0"]
    # KServe writes null for every non-finite float: NaN here, infinities lost at KServe's end
    assert out.dtype == np.float32 and np.isnan(out[0, :3]).all() and out[0, 3] == 2.5


# ------------------------------------------------------------------ the response direction


@pytest.mark.parametrize(
    ("datatype", "data", "word"),
    [
        ("BOOL", "[1,0]", "true or false"),
        ("FP32", '["1",2]', "wrong type"),
        ("FP32", "[true,2]", "wrong type"),
        ("INT8", "[1,300]", "out of range"),
        ("INT32", "[null,1]", "wrong type"),
    ],
)
def test_client_refuses_lenient_json_in_answers_too(datatype: str, data: str, word: str) -> None:
    tensor = f'{{"name":"OUTPUT0","datatype":"{datatype}","shape":[2],"data":{data}}}'
    body = f'{{"outputs":[{tensor}]}}'.encode()
    with pytest.raises(
        InvalidInputError, match=f"output 'OUTPUT0' \\({datatype}\\) element .*{word}"
    ):
        rest.decode_response(body, None)


def test_answers_write_booleans_and_non_finite_tokens_and_read_them_back() -> None:
    response = InferResponse(
        "m",
        [
            InferOutput("b", "BOOL", [2], np.array([True, False])),
            InferOutput("f", "FP32", [3], np.array([np.nan, np.inf, -np.inf], np.float32)),
        ],
    )
    body, _ = rest.encode_response(response)
    assert b'"data":[true,false]' in body and b'"data":[NaN,Infinity,-Infinity]' in body
    outputs = rest.decode_response(body, None).outputs
    assert same(outputs[0].data, np.array([True, False]))
    assert same(outputs[1].data, np.array([np.nan, np.inf, -np.inf], np.float32))
