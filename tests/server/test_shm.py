"""System shared memory on the embedded server, driven by tritonclient's own utilities.

Inputs are read from, and outputs written into, POSIX shm regions the client created; the results
are read back from the output region. One server for the module, without and with a token.

A client that truncates a registered object cannot crash the server (issue 19.7):

The server once mapped the client's POSIX object; a client that registered a region, used it, then
``ftruncate``-d the object to 0 made the next inference fault the server with SIGBUS. Now every use
checks the object's current size and copies with ``pread`` / ``pwrite``: a 400 / INVALID_ARGUMENT
naming the truncation, and both ports keep serving.
"""

from __future__ import annotations

import base64
import functools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from nbinfer.errors import InvalidInputError
from nbinfer.server.launcher import LocalServer
from nbinfer.server.shm import SharedMemoryManager

SIZE = 64  # one [1, 16] FP32 tensor
SHM = Path("/dev/shm")
TOKEN = "shm-token"

pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs POSIX shared memory in /dev/shm")


@pytest.fixture(scope="module", params=[None, TOKEN], ids=["no-token", "token"])
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, device="cpu", auth_token=request.param).start()
    try:
        yield srv
    finally:
        srv.stop()


def _headers(server: LocalServer) -> dict[str, str]:
    return {"authorization": f"Bearer {server.auth_token}"} if server.auth_token else {}


class _Authed:
    """A tritonclient client that sends the server's token (if any) with every call."""

    def __init__(self, inner: Any, server: LocalServer) -> None:
        self.inner = inner
        self._headers = _headers(server)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "close" or not callable(attr) or not self._headers:
            return attr
        return functools.partial(attr, headers=self._headers)


def _grpc_client(server: LocalServer) -> Any:
    return _Authed(tg.InferenceServerClient(server.grpc_address), server)


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: LocalServer) -> Iterator[Any]:
    if request.param == "http":
        c: Any = _Authed(th.InferenceServerClient(server.http_url.removeprefix("http://")), server)
    else:
        c = _grpc_client(server)
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
    return th if isinstance(client.inner, th.InferenceServerClient) else tg


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
    if _mod(client) is th:
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
    if _mod(client) is th:
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
    base, headers = server.http_url, _headers(server)
    r = httpx.post(f"{base}/v2/cudasharedmemory/region/c0/register", json=body, headers=headers)
    assert r.status_code == 400
    assert "CUDA" in r.json()["error"]
    assert httpx.get(f"{base}/v2/cudasharedmemory/status", headers=headers).json() == []
    c = _grpc_client(server)
    try:
        with pytest.raises(InferenceServerException) as info:
            c.register_cuda_shared_memory("c0", b"\x00" * 64, 0, 64)
        assert "CUDA" in str(info.value)
        assert not c.get_cuda_shared_memory_status().regions
    finally:
        c.close()


def test_server_metadata_advertises_system_shared_memory(server: LocalServer) -> None:
    ext = httpx.get(f"{server.http_url}/v2", headers=_headers(server)).json()["extensions"]
    assert "system_shared_memory" in ext
    assert "cuda_shared_memory" not in ext


# -- truncation after registration (issue 19.7) ----------------------------------------------------


class Region:
    """A POSIX shm object made and resized by the test (no mapping on this side either)."""

    def __init__(self, size: int) -> None:
        self.key = f"/nbinfer_sec_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.fd = os.open(SHM / self.key[1:], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(self.fd, size)

    def write(self, offset: int, arr: np.ndarray[Any, Any]) -> None:
        os.pwrite(self.fd, arr.tobytes(), offset)

    def read(self, offset: int, count: int) -> np.ndarray[Any, Any]:
        return np.frombuffer(os.pread(self.fd, count * 4, offset), dtype=np.float32)

    def truncate(self, size: int = 0) -> None:
        os.ftruncate(self.fd, size)

    def close(self) -> None:
        os.close(self.fd)
        os.unlink(SHM / self.key[1:])


@pytest.fixture
def raw_regions() -> Iterator[Any]:
    """Make raw POSIX shm objects this test can truncate; unlinked after the test."""
    made: list[Region] = []

    def make(size: int) -> Region:
        made.append(Region(size))
        return made[-1]

    yield make
    for region in made:
        region.close()


A = np.arange(16, dtype=np.float32).reshape(1, 16)
B = np.full((1, 16), 0.5, dtype=np.float32)


def _infer_from_shm(client: Any, region: str) -> Any:
    mod = _mod(client)
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    inputs[0].set_shared_memory(region, SIZE, offset=0)
    inputs[1].set_shared_memory(region, SIZE, offset=SIZE)
    return client.infer("add_sub", inputs)


def _infer_into_shm(client: Any, region: str) -> Any:
    mod = _mod(client)
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    inputs[0].set_data_from_numpy(A)
    inputs[1].set_data_from_numpy(B)
    outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory(region, SIZE, offset=0)
    outputs[1].set_shared_memory(region, SIZE, offset=SIZE)
    return client.infer("add_sub", inputs, outputs=outputs)


def _refused(call: Any) -> str:
    with pytest.raises(InferenceServerException) as info:
        call()
    status = str(info.value.status())
    assert status in ("400", "StatusCode.INVALID_ARGUMENT"), (status, info.value.message())
    return str(info.value.message())


def _both_ports_serve(server: LocalServer) -> None:
    ready = httpx.get(f"{server.http_url}/v2/health/ready", headers=_headers(server), timeout=10)
    assert ready.status_code == 200
    g = _grpc_client(server)
    try:
        assert g.is_server_ready()
        inputs = [tg.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(A)
        inputs[1].set_data_from_numpy(B)
        np.testing.assert_allclose(g.infer("add_sub", inputs).as_numpy("OUTPUT0"), A + B)
    finally:
        g.close()


def test_input_region_truncated_after_use_is_400_and_the_server_keeps_serving(
    client: Any, server: LocalServer, raw_regions: Any
) -> None:
    region = raw_regions(2 * SIZE)
    region.write(0, A)
    region.write(SIZE, B)
    client.register_system_shared_memory("in", region.key, 2 * SIZE)
    np.testing.assert_allclose(_infer_from_shm(client, "in").as_numpy("OUTPUT0"), A + B)
    region.truncate(0)
    message = _refused(lambda: _infer_from_shm(client, "in"))
    assert "'in'" in message and "truncated" in message
    region.truncate(SIZE + 8)  # partly back: the second input's window still does not fit
    assert "truncated" in _refused(lambda: _infer_from_shm(client, "in"))
    _both_ports_serve(server)
    region.truncate(2 * SIZE)  # whole again (zeros): the region works again
    np.testing.assert_allclose(_infer_from_shm(client, "in").as_numpy("OUTPUT0"), 0)


def test_output_region_truncated_after_use_is_400_and_the_server_keeps_serving(
    client: Any, server: LocalServer, raw_regions: Any
) -> None:
    region = raw_regions(2 * SIZE)
    client.register_system_shared_memory("out", region.key, 2 * SIZE)
    _infer_into_shm(client, "out")
    np.testing.assert_allclose(region.read(0, 16), (A + B).ravel())
    region.truncate(0)
    message = _refused(lambda: _infer_into_shm(client, "out"))
    assert "'out'" in message and "truncated" in message
    assert os.fstat(region.fd).st_size == 0  # the server did not grow the object back
    _both_ports_serve(server)


def test_the_manager_checks_the_current_size_on_every_read_and_write(raw_regions: Any) -> None:
    region = raw_regions(SIZE)
    region.write(0, A)
    shm = SharedMemoryManager()
    try:
        shm.register("r", region.key, byte_size=SIZE)
        args: dict[str, Any] = {"offset": 0, "byte_size": SIZE, "what": "input 'x'"}
        got = shm.read("r", datatype="FP32", shape=[1, 16], tensor="x", **args)
        np.testing.assert_array_equal(got, A)
        region.write(0, B)  # a copy: the client cannot change the model's input under it
        np.testing.assert_array_equal(got, A)
        region.truncate(0)
        with pytest.raises(InvalidInputError, match="truncated"):
            shm.read("r", datatype="FP32", shape=[1, 16], tensor="x", **args)
        with pytest.raises(InvalidInputError, match="truncated"):
            shm.write("r", arr=A, datatype="FP32", **args)
    finally:
        shm.close()


def test_shm_keys_follow_the_name_pattern(client: Any) -> None:
    for key in ("/../etc/passwd", "/a/b", "/", "/.hidden", "/x\x00y", "/" + "k" * 200):
        with pytest.raises(InferenceServerException) as info:
            client.register_system_shared_memory("bad", key, SIZE)
        assert "key" in str(info.value.message())


def test_a_key_that_is_not_a_regular_shm_object_is_refused(client: Any, tmp_path: Path) -> None:
    name = f"nbinfer_sec_fifo_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    os.mkfifo(SHM / name)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.register_system_shared_memory("fifo", "/" + name, SIZE)
        assert "not a shared memory object" in str(info.value.message())
    finally:
        os.unlink(SHM / name)
