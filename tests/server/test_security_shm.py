"""A client that truncates a registered shared-memory object cannot crash the server (issue 19.7).

The server once mapped the client's POSIX object; a client that registered a region, used it, then
``ftruncate``-d the object to 0 made the next inference fault the server with SIGBUS. Now every use
checks the object's current size and copies with ``pread`` / ``pwrite``: a 400 / INVALID_ARGUMENT
naming the truncation, and both ports keep serving.
"""

from __future__ import annotations

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
from tritonclient.utils import InferenceServerException

from nbinfer.errors import InvalidInputError
from nbinfer.server.launcher import LocalServer
from nbinfer.server.shm import SharedMemoryManager

SIZE = 64  # one [1, 16] FP32 tensor
SHM = Path("/dev/shm")

pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs POSIX shared memory in /dev/shm")


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
def regions() -> Iterator[Any]:
    made: list[Region] = []

    def make(size: int) -> Region:
        made.append(Region(size))
        return made[-1]

    yield make
    for region in made:
        region.close()


def _mod(client: Any) -> Any:
    return th if isinstance(client, th.InferenceServerClient) else tg


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
    assert httpx.get(f"{server.http_url}/v2/health/ready", timeout=10).status_code == 200
    g = tg.InferenceServerClient(server.grpc_url)
    try:
        assert g.is_server_ready()
        inputs = [tg.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(A)
        inputs[1].set_data_from_numpy(B)
        np.testing.assert_allclose(g.infer("add_sub", inputs).as_numpy("OUTPUT0"), A + B)
    finally:
        g.close()


def test_input_region_truncated_after_use_is_400_and_the_server_keeps_serving(
    client: Any, server: LocalServer, regions: Any
) -> None:
    region = regions(2 * SIZE)
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
    client: Any, server: LocalServer, regions: Any
) -> None:
    region = regions(2 * SIZE)
    client.register_system_shared_memory("out", region.key, 2 * SIZE)
    _infer_into_shm(client, "out")
    np.testing.assert_allclose(region.read(0, 16), (A + B).ravel())
    region.truncate(0)
    message = _refused(lambda: _infer_into_shm(client, "out"))
    assert "'out'" in message and "truncated" in message
    assert os.fstat(region.fd).st_size == 0  # the server did not grow the object back
    _both_ports_serve(server)


def test_the_manager_checks_the_current_size_on_every_read_and_write(regions: Any) -> None:
    region = regions(SIZE)
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
