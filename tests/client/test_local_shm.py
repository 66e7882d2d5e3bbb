"""The zero-copy local path: big tensors through shared memory, both ways, automatically.

Against the real embedded server on 127.0.0.1 (HTTP and gRPC), twice: with its memfd socket
(sealed memfds, the path of a server this process started) and without it (POSIX shm objects
registered over HTTP / gRPC, the path of any other server); scripted HTTP servers that lack the
extension or refuse a region, and a client subprocess killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nbinfer
from nbinfer.client.shm import SHM_THRESHOLD, is_loopback, sweep_orphans
from nbinfer.errors import InvalidInputError, UnsupportedError
from nbinfer.server.launcher import LocalServer

SHM = Path("/dev/shm")
PREFIX = "nbinfer_shm_"
ROWS = SHM_THRESHOLD // (16 * 4) * 2  # 2 MiB per tensor: above the threshold

pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs POSIX shared memory in /dev/shm")


@pytest.fixture(scope="module", params=["memfd", "posix"])
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    """The demo server, with its memfd socket (this process's pools use it) or without."""
    with LocalServer(demo=True, shm_socket=request.param == "memfd") as srv:
        assert (srv.shm_socket is not None) == (request.param == "memfd")
        yield srv


def _inputs(seed: int, rows: int = ROWS) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return {
        "INPUT0": rng.standard_normal((rows, 16)).astype(np.float32),
        "INPUT1": rng.standard_normal((rows, 16)).astype(np.float32),
    }


def _ours(client: nbinfer.Client) -> list[str]:
    """This process's regions registered on the server."""
    mine = f"{PREFIX}{os.getpid()}_"
    return [r["name"] for r in client.get_system_shared_memory_status() if mine in r["name"]]


def _names_in_dev_shm(pid: int) -> list[str]:
    return [p.name for p in SHM.iterdir() if p.name.startswith(f"{PREFIX}{pid}_")]


def test_big_tensors_travel_through_shared_memory_both_ways(url: str, server: LocalServer) -> None:
    data = _inputs(0)
    with nbinfer.Client(url) as client:
        first = client.infer("add_sub", data)  # learns the output sizes
        assert np.array_equal(first["OUTPUT0"], data["INPUT0"] + data["INPUT1"])
        result = client.infer("add_sub", data)
        out0, out1 = result["OUTPUT0"], result["OUTPUT1"]
        np.testing.assert_array_equal(out0, data["INPUT0"] + data["INPUT1"])
        np.testing.assert_array_equal(out1, data["INPUT0"] - data["INPUT1"])
        # the outputs were written by the server into registered regions, not sent
        assert result.get_output("OUTPUT0").parameters["shared_memory_region"] in _ours(client)
        assert not out0.flags.writeable and not out0.flags.owndata
        # every region is unlinked once the server holds it: nothing left in /dev/shm
        assert _names_in_dev_shm(os.getpid()) == []
        assert len(_ours(client)) == 4  # 2 inputs, 2 outputs: registered once
        keys = {r["key"] for r in client.get_system_shared_memory_status()}
        if server.shm_socket is not None:  # sealed memfds handed over the server's socket
            assert keys == {"memfd"}
        else:  # POSIX objects registered over HTTP / gRPC
            assert all(key.startswith(f"/{PREFIX}") for key in keys), keys
        del first, result, out0, out1
        for seed in range(1, 5):
            again = client.infer("add_sub", _inputs(seed))
            del again
        assert len(_ours(client)) == 4  # reused, not re-registered
    with nbinfer.Client(url, shared_memory=False) as other:
        assert _ours(other) == []  # unregistered on close


def test_a_kept_result_never_changes_under_its_owner(url: str) -> None:
    a, b = _inputs(1), _inputs(2)
    with nbinfer.Client(url) as client:
        client.infer("add_sub", a)
        kept = client.infer("add_sub", a)
        kept_array = kept["OUTPUT0"]
        expected = (a["INPUT0"] + a["INPUT1"]).copy()
        for _ in range(3):
            client.infer("add_sub", b)
        np.testing.assert_array_equal(kept["OUTPUT0"], expected)
        del kept  # the array alone still holds its region
        gc.collect()
        for _ in range(3):
            client.infer("add_sub", b)
        np.testing.assert_array_equal(kept_array, expected)
        view = kept_array[10:20]
        del kept_array
        client.infer("add_sub", b)
        np.testing.assert_array_equal(view, expected[10:20])


def test_release_hands_the_regions_back_and_the_result_refuses_further_reads(
    server: LocalServer,
) -> None:
    data = _inputs(3)
    with nbinfer.Client(server.http_url) as client:
        client.infer("add_sub", data)
        result = client.infer("add_sub", data)
        taken = result["OUTPUT1"]
        result.release()
        with pytest.raises(InvalidInputError, match="released"):
            result.as_numpy("OUTPUT0")
        assert "OUTPUT0: FP32" in repr(result)  # still describes itself
        np.testing.assert_array_equal(taken, data["INPUT0"] - data["INPUT1"])
        result.release()  # idempotent


def test_small_tensors_and_shared_memory_false_use_the_wire(server: LocalServer) -> None:
    small = _inputs(4, rows=16)
    with nbinfer.Client(server.http_url) as client:
        for _ in range(2):
            client.infer("add_sub", small)
        assert _ours(client) == []
    with nbinfer.Client(server.http_url, shared_memory=False) as client:
        for _ in range(2):
            client.infer("add_sub", _inputs(5))
        assert _ours(client) == []


def test_shared_memory_true_uses_it_for_small_tensors_too(server: LocalServer) -> None:
    small = _inputs(6, rows=4)
    with nbinfer.Client(server.http_url, shared_memory=True) as client:
        client.infer("add_sub", small)
        result = client.infer("add_sub", small)
        np.testing.assert_array_equal(result["OUTPUT0"], small["INPUT0"] + small["INPUT1"])
        assert "shared_memory_region" in result.get_output("OUTPUT0").parameters
        assert len(_ours(client)) == 4


def test_the_option_is_checked_and_auto_needs_a_loopback_url() -> None:
    with pytest.raises(InvalidInputError, match="shared_memory"):
        nbinfer.Client("http://127.0.0.1:1", shared_memory="yes")  # type: ignore[arg-type]
    assert is_loopback("http://127.0.0.1:8000") and is_loopback("grpc://localhost:8001")
    assert is_loopback("http://[::1]:8000")
    assert not is_loopback("http://10.0.0.7:8000") and not is_loopback("grpc://triton:8001")


def test_the_async_client_takes_the_same_path(url: str) -> None:
    data = _inputs(7)

    async def main() -> tuple[np.ndarray[Any, Any], list[str]]:
        async with nbinfer.AsyncClient(url) as client:
            await client.infer("add_sub", data)
            results = await asyncio.gather(*(client.infer("add_sub", data) for _ in range(4)))
            regions = await client.get_system_shared_memory_status()
            assert all(
                "shared_memory_region" in r.get_output("OUTPUT0").parameters for r in results
            )
            return results[-1]["OUTPUT0"].copy(), [r["name"] for r in regions]

    out, regions = asyncio.run(main())
    np.testing.assert_array_equal(out, data["INPUT0"] + data["INPUT1"])
    assert any(f"{PREFIX}{os.getpid()}_" in name for name in regions)
    with nbinfer.Client(url, shared_memory=False) as check:
        assert _ours(check) == []


def test_concurrent_async_infer_threads_each_get_their_own_regions(server: LocalServer) -> None:
    batches = [_inputs(10 + i) for i in range(6)]
    with nbinfer.Client(server.http_url, max_workers=6) as client:
        client.infer("add_sub", batches[0])
        futures = [client.async_infer("add_sub", b) for b in batches]
        for batch, future in zip(batches, futures, strict=True):
            result = future.result(timeout=60)
            np.testing.assert_array_equal(result["OUTPUT0"], batch["INPUT0"] + batch["INPUT1"])


def test_concurrent_first_calls_share_one_registration_and_regions_stay_usable(
    server: LocalServer,
) -> None:
    # No call before: the pool's first probes run at once. A second memfd channel replacing the
    # first once closed it, and the server dropped the regions registered over it ("not
    # registered" when the pool reused them).
    batches = [_inputs(40 + i, rows=ROWS // 2) for i in range(8)]
    with nbinfer.Client(server.http_url, max_workers=8) as client:
        client.infer("add_sub", {k: v[:2] for k, v in batches[0].items()})  # small: no probe
        for _ in range(3):  # the later rounds lease the regions the first registered
            futures = [client.async_infer("add_sub", b) for b in batches]
            for batch, future in zip(batches, futures, strict=True):
                result = future.result(timeout=60)
                np.testing.assert_array_equal(result["OUTPUT1"], batch["INPUT0"] - batch["INPUT1"])
                del result


def _no_extension(handler: BaseHTTPRequestHandler) -> tuple[int, bytes]:
    if handler.path == "/v2":
        return 200, json.dumps({"name": "x", "version": "1", "extensions": []}).encode()
    if handler.path.endswith("/infer"):
        out = {"name": "OUT", "datatype": "FP32", "shape": [1], "data": [1.0]}
        return 200, json.dumps({"model_name": "m", "outputs": [out]}).encode()
    return 404, b'{"error": "no such route"}'


def _refuses_regions(handler: BaseHTTPRequestHandler) -> tuple[int, bytes]:
    if handler.path == "/v2":
        body = {"name": "x", "version": "1", "extensions": ["system_shared_memory"]}
        return 200, json.dumps(body).encode()
    if "sharedmemory" in handler.path and handler.path.endswith("/register"):
        return 400, b'{"error": "unable to open shared memory key: no such object"}'
    return _no_extension(handler)


def test_auto_falls_back_to_the_wire_when_the_server_cannot_use_it(
    scripted: Callable[[Callable[[BaseHTTPRequestHandler], tuple[int, bytes]]], Any],
) -> None:
    big = {"X": np.ones(SHM_THRESHOLD // 4, np.float32)}
    for script in (_no_extension, _refuses_regions):
        srv = scripted(script)
        with nbinfer.Client(srv.url) as client:
            for _ in range(2):
                assert client.infer("m", big)["OUT"].tolist() == [1.0]
        sent = zip(srv.requests, srv.bodies, strict=True)
        infers = [body for (_, path, _), body in sent if "/infer" in path]
        assert len(infers) == 2 and all(len(body) >= SHM_THRESHOLD for body in infers)
        assert _names_in_dev_shm(os.getpid()) == []
    srv = scripted(_no_extension)
    with (
        nbinfer.Client(srv.url, shared_memory=True) as client,
        pytest.raises(UnsupportedError, match="system_shared_memory"),
    ):
        client.infer("m", big)


_KILLED_CLIENT = """
import sys
import numpy as np
import nbinfer
client = nbinfer.Client(sys.argv[1])
data = {"INPUT0": np.ones((65536, 16), np.float32), "INPUT1": np.ones((65536, 16), np.float32)}
client.infer("add_sub", data)
kept = client.infer("add_sub", data)
print("ready", flush=True)
import time
time.sleep(120)
"""


def test_a_killed_client_leaves_no_shared_memory_segment(server: LocalServer) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED_CLIENT), server.http_url],
        stdout=subprocess.PIPE,
        text=True,
        # another process: given the server's token as a user would (the registry is ours)
        env={**os.environ, "NBINFER_TOKEN": server.auth_token or ""},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with nbinfer.Client(server.http_url, shared_memory=False) as client:
            theirs = [
                r
                for r in client.get_system_shared_memory_status()
                if r["name"].startswith(f"{PREFIX}{child.pid}_")
            ]
            assert len(theirs) == 4  # in use by the child...
            assert _names_in_dev_shm(child.pid) == []  # ...and already nameless
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            assert _names_in_dev_shm(child.pid) == []
            # the (standalone) server still holds them until someone unregisters; ours dies
            # with its kernel
            for region in theirs:
                client.unregister_system_shared_memory(region["name"])
    finally:
        child.kill()
        child.wait(10)
        assert child.stdout is not None
        child.stdout.close()


def test_an_orphan_of_a_dead_process_is_swept() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    orphan = SHM / f"{PREFIX}{dead.pid}_deadbeef_1"
    orphan.write_bytes(b"\0" * 64)
    os.chmod(orphan, 0o600)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and orphan.name not in sweep_orphans():
            time.sleep(0.05)  # pragma: no cover - the pid is gone at once
        assert not orphan.exists()
        live = SHM / f"{PREFIX}{os.getpid()}_cafe_1"
        live.write_bytes(b"\0" * 64)
        try:
            assert live.name not in sweep_orphans()  # a live process keeps its own
            assert live.exists()
        finally:
            live.unlink()
    finally:
        orphan.unlink(missing_ok=True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_sends_its_tensors_instead_of_sharing_its_parents_regions(
    server: LocalServer,
) -> None:
    data = _inputs(20)
    expected = data["INPUT0"] + data["INPUT1"]
    with nbinfer.Client(server.http_url) as client:
        client.infer("add_sub", data)
        client.infer("add_sub", data)
        before = len(_ours(client))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit code
            os.close(read)
            try:
                result = client.infer("add_sub", data)
                ok = np.array_equal(result["OUTPUT0"], expected)
                params = result.get_output("OUTPUT0").parameters
                os.write(write, b"1" if ok and "shared_memory_region" not in params else b"0")
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            assert answer.read() == b"1"
        os.waitpid(pid, 0)
        assert len(_ours(client)) == before
