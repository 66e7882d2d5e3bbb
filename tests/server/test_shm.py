"""System shared memory on the embedded server, driven by tritonclient's own utilities.

Inputs are read from, and outputs written into, POSIX shm regions the client created; the results
are read back from the output region. One server for the module.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from nbinfer.server.launcher import LocalServer

SIZE = 64  # one [1, 16] FP32 tensor


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, device="cpu").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: LocalServer) -> Iterator[Any]:
    if request.param == "http":
        c: Any = th.InferenceServerClient(server.http_url.removeprefix("http://"))
    else:
        c = tg.InferenceServerClient(server.grpc_url)
    try:
        yield c
    finally:
        c.unregister_system_shared_memory()
        c.close()


def _key(tag: str) -> str:
    return f"/nbinfer_test_{os.getpid()}_{tag}_{uuid.uuid4().hex[:6]}"


@pytest.fixture
def regions() -> Iterator[Any]:
    """Make tritonclient shm regions; destroyed after the test."""
    made: list[Any] = []

    def make(name: str, byte_size: int) -> tuple[Any, str]:
        key = _key(name)
        handle = shm.create_shared_memory_region(name, key, byte_size)
        made.append(handle)
        return handle, key

    yield make
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def _mod(client: Any) -> Any:
    return th if isinstance(client, th.InferenceServerClient) else tg


def _add_sub_in_shm(client: Any, in_region: str, out_region: str) -> list[Any]:
    mod = _mod(client)
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    inputs[0].set_shared_memory(in_region, SIZE, offset=0)
    inputs[1].set_shared_memory(in_region, SIZE, offset=SIZE)
    outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory(out_region, SIZE, offset=0)
    outputs[1].set_shared_memory(out_region, SIZE, offset=SIZE)
    return [inputs, outputs]


def test_add_sub_reads_inputs_from_and_writes_outputs_to_system_shm(
    client: Any, regions: Any
) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 0.5, dtype=np.float32)
    in_handle, in_key = regions("in", 2 * SIZE)
    out_handle, out_key = regions("out", 2 * SIZE)
    shm.set_shared_memory_region(in_handle, [a, b])
    client.register_system_shared_memory("in", in_key, 2 * SIZE)
    client.register_system_shared_memory("out", out_key, 2 * SIZE)
    inputs, outputs = _add_sub_in_shm(client, "in", "out")
    result = client.infer("add_sub", inputs, outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [1, 16]), a + b)
    np.testing.assert_array_equal(
        shm.get_contents_as_numpy(out_handle, np.float32, [1, 16], offset=SIZE), a - b
    )
    # the response carries the outputs' metadata, not their data
    out0 = result.get_output("OUTPUT0")
    if isinstance(client, th.InferenceServerClient):
        assert "data" not in out0
        assert out0["parameters"]["shared_memory_region"] == "out"
        assert out0["parameters"]["shared_memory_byte_size"] == SIZE
        assert out0["shape"] == [1, 16]
    else:
        assert out0.parameters["shared_memory_region"].string_param == "out"
        assert not result.get_response().raw_output_contents
    # a second request through the same regions sees the new input values
    shm.set_shared_memory_region(in_handle, [b, a])
    client.infer("add_sub", inputs, outputs=outputs)
    np.testing.assert_array_equal(
        shm.get_contents_as_numpy(out_handle, np.float32, [1, 16], offset=SIZE), b - a
    )


def test_regions_registered_with_an_offset_are_addressed_relative_to_it(
    client: Any, regions: Any
) -> None:
    a = np.ones((1, 16), np.float32)
    b = np.full((1, 16), 2, np.float32)
    handle, key = regions("big", 4 * SIZE)
    shm.set_shared_memory_region(handle, [a, b], offset=2 * SIZE)
    client.register_system_shared_memory("upper", key, 2 * SIZE, offset=2 * SIZE)
    client.register_system_shared_memory("lower", key, 2 * SIZE, offset=0)
    inputs, outputs = _add_sub_in_shm(client, "upper", "lower")
    client.infer("add_sub", inputs, outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(handle, np.float32, [1, 16]), a + b)


def test_status_lists_regions_and_unregister_removes_one_or_all(client: Any, regions: Any) -> None:
    _, key = regions("r", 128)
    client.register_system_shared_memory("r1", key, 64)
    client.register_system_shared_memory("r2", key, 32, offset=64)
    status = client.get_system_shared_memory_status()
    if isinstance(client, th.InferenceServerClient):
        rows = {r["name"]: r for r in status}
        assert rows["r2"] == {"name": "r2", "key": key, "offset": 64, "byte_size": 32}
    else:
        rows = {name: r for name, r in status.regions.items()}
        assert (rows["r2"].key, rows["r2"].offset, rows["r2"].byte_size) == (key, 64, 32)
    assert set(rows) == {"r1", "r2"}
    client.unregister_system_shared_memory("r1")
    status = client.get_system_shared_memory_status()
    names = [r["name"] for r in status] if isinstance(status, list) else list(status.regions)
    assert names == ["r2"]
    client.unregister_system_shared_memory()
    status = client.get_system_shared_memory_status()
    assert not (status if isinstance(status, list) else status.regions)


def _error(client: Any, call: Any) -> str:
    with pytest.raises(InferenceServerException) as info:
        call()
    status = str(info.value.status())
    assert status in ("400", "StatusCode.INVALID_ARGUMENT"), status
    return str(info.value)


def test_unknown_region_is_rejected_naming_it(client: Any) -> None:
    inputs, outputs = _add_sub_in_shm(client, "never_registered", "never_registered")
    message = _error(client, lambda: client.infer("add_sub", inputs, outputs=outputs))
    assert "never_registered" in message
    assert "not registered" in message


def test_input_window_beyond_the_region_is_out_of_bounds(client: Any, regions: Any) -> None:
    _, key = regions("small", SIZE + 8)
    client.register_system_shared_memory("small", key, SIZE + 8)
    inputs, outputs = _add_sub_in_shm(client, "small", "small")
    message = _error(client, lambda: client.infer("add_sub", inputs, outputs=outputs))
    assert "out of bounds" in message
    assert "'small'" in message and "INPUT1" in message


def test_output_window_too_small_for_the_output_is_rejected(client: Any, regions: Any) -> None:
    _, in_key = regions("in", 2 * SIZE)
    _, out_key = regions("out", 2 * SIZE)
    client.register_system_shared_memory("in", in_key, 2 * SIZE)
    client.register_system_shared_memory("out", out_key, 2 * SIZE)
    mod = _mod(client)
    inputs, _ = _add_sub_in_shm(client, "in", "out")
    out = mod.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory("out", 16)
    message = _error(client, lambda: client.infer("add_sub", inputs, outputs=[out]))
    assert "too small" in message and "64 bytes" in message and "OUTPUT0" in message


def test_input_byte_size_that_does_not_match_the_shape_is_rejected(
    client: Any, regions: Any
) -> None:
    _, key = regions("in", 2 * SIZE)
    client.register_system_shared_memory("in", key, 2 * SIZE)
    mod = _mod(client)
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    inputs[0].set_shared_memory("in", 32)
    inputs[1].set_shared_memory("in", SIZE, offset=SIZE)
    message = _error(client, lambda: client.infer("add_sub", inputs))
    assert "INPUT0" in message and "64 bytes" in message


def test_register_refuses_missing_keys_windows_beyond_the_object_and_taken_names(
    client: Any, regions: Any
) -> None:
    message = _error(
        client, lambda: client.register_system_shared_memory("x", "/nbinfer_missing_key", 8)
    )
    assert "/nbinfer_missing_key" in message
    _, key = regions("r", 64)
    message = _error(client, lambda: client.register_system_shared_memory("x", key, 64, offset=8))
    assert "exceeds" in message
    client.register_system_shared_memory("x", key, 64)
    message = _error(client, lambda: client.register_system_shared_memory("x", key, 64))
    assert "already registered" in message


def test_bytes_tensors_travel_through_shm(client: Any, regions: Any) -> None:
    values = np.array([[b"alpha", b"", b"\x00\xffgamma"]], dtype=object)
    payload = serialize_byte_tensor(values)
    raw = payload.item() if payload.size else b""
    in_handle, in_key = regions("bin", len(raw))
    out_handle, out_key = regions("bout", 256)
    shm.set_shared_memory_region(in_handle, [payload])
    client.register_system_shared_memory("bin", in_key, len(raw))
    client.register_system_shared_memory("bout", out_key, 256)
    mod = _mod(client)
    inp = mod.InferInput("INPUT0", [1, 3], "BYTES")
    inp.set_shared_memory("bin", len(raw))
    out = mod.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory("bout", 256)
    client.infer("echo", [inp], outputs=[out])
    got = shm.get_contents_as_numpy(out_handle, np.object_, [1, 3])
    assert got.tolist() == values.tolist()


def test_cuda_shared_memory_is_refused_clearly_without_a_cuda_device(server: LocalServer) -> None:
    if os.path.exists("/proc/driver/nvidia/version"):
        pytest.skip("an NVIDIA driver is present: the no-CUDA answer cannot be tested here")
    body = {"raw_handle": {"b64": base64.b64encode(b"\x00" * 64).decode()}, "device_id": 0}
    body["byte_size"] = 64
    base = server.http_url
    r = httpx.post(f"{base}/v2/cudasharedmemory/region/c0/register", json=body)
    assert r.status_code == 400
    assert "CUDA" in r.json()["error"]
    assert httpx.get(f"{base}/v2/cudasharedmemory/status").json() == []
    c = tg.InferenceServerClient(server.grpc_url)
    try:
        with pytest.raises(InferenceServerException) as info:
            c.register_cuda_shared_memory("c0", b"\x00" * 64, 0, 64)
        assert "CUDA" in str(info.value)
        assert not c.get_cuda_shared_memory_status().regions
    finally:
        c.close()


def test_server_metadata_advertises_system_shared_memory(server: LocalServer) -> None:
    ext = httpx.get(f"{server.http_url}/v2").json()["extensions"]
    assert "system_shared_memory" in ext
    assert "cuda_shared_memory" not in ext
