"""Sealed memfd regions handed over the server's Unix socket (issue 29, the zero-copy local path).

Real processes throughout: a :class:`LocalServer`, nbinfer and tritonclient clients, children
that are killed mid-request or drop to another uid (``memfd_peer.py``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import mmap
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

from nbinfer.client import Client
from nbinfer.errors import InferenceError as InferenceServerError
from nbinfer.server import fdpass, malloc
from nbinfer.server.launcher import LocalServer
from nbinfer.server.model import Model
from tests.children import OTHER_UID
from tests.server import memfd_peer
from tests.server.memfd_peer import ask, connect, memfd

pytestmark = pytest.mark.skipif(not fdpass.supported(), reason="memfd sealing is Linux-only")

REPO = str(Path(__file__).resolve().parents[2])


class IntoRegion(Model):
    """y = x + 1 computed into ``output_array``; ``mapped`` says whether that was a region;
    refuses a negative first value (a request that fails once its output regions are leased)."""

    name = "into_region"
    inputs = (("x", "FP32", [-1, 16]),)
    outputs = (("y", "FP32", [-1, 16]), ("mapped", "INT32", [1]))

    def predict(self, inputs: dict[str, Any], context: Any) -> Any:
        x = inputs["x"]
        if x[0, 0] < 0:
            raise ValueError("a negative first value")
        y = np.add(x, 1, out=context.output_array("y", x.shape, np.float32))
        base = y
        while isinstance(base, np.ndarray):
            base = base.base
        mapped = isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
        return {"y": y, "mapped": np.array([int(mapped)], np.int32)}


class MarkedSleeper(Model):
    """Touches ``marker`` when a request starts, then sleeps (a request to kill a client in)."""

    name = "marked_sleeper"
    inputs = (("x", "FP32", [-1]),)
    outputs = (("y", "FP32", [-1]),)
    marker = ""

    def predict(self, inputs: dict[str, Any]) -> Any:  # type: ignore[override]
        Path(self.marker).touch()
        time.sleep(2.0)
        return {"y": inputs["x"] + 1}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A demo server without a token (tritonclient and raw children drive it too)."""
    with LocalServer(demo=True, device="cpu", auth_token=None, control=True) as srv:
        yield srv


def _regions(srv: LocalServer) -> list[str]:
    client = th.InferenceServerClient(srv.http_url.removeprefix("http://"))
    try:
        return sorted(r["name"] for r in client.get_system_shared_memory_status())
    finally:
        client.close()


def test_the_launcher_advertises_a_private_socket(server: LocalServer) -> None:
    assert server.shm_socket is not None
    directory = os.stat(os.path.dirname(server.shm_socket))
    assert stat.S_IMODE(directory.st_mode) == 0o700
    assert directory.st_uid == os.geteuid()
    assert stat.S_ISSOCK(os.stat(server.shm_socket).st_mode)


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_local_client_moves_tensors_through_sealed_memfds(
    server: LocalServer, transport: str
) -> None:
    url = server.http_url if transport == "http" else server.grpc_url
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1 << 15, 16)).astype(np.float32)  # 2 MB each
    b = rng.standard_normal((1 << 15, 16)).astype(np.float32)
    with Client(url) as client:
        for _ in range(3):  # the second call on sends the outputs through regions too
            result = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})
            np.testing.assert_array_equal(result["OUTPUT0"], a + b)
            np.testing.assert_array_equal(result["OUTPUT1"], a - b)
        pool = client._shm
        assert pool is not None and pool._channel is not None
        mine = {name for name, region in pool._regions.items() if region.memfd}
        assert len(mine) >= 4  # two inputs, two outputs
        assert mine <= set(_regions(server))
        statuses = th.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            keys = {
                r["key"] for r in statuses.get_system_shared_memory_status() if r["name"] in mine
            }
        finally:
            statuses.close()
        assert keys == {"memfd"}
    # closing the client closed its socket: the server dropped its regions
    _wait_until(lambda: not mine & set(_regions(server)))


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_model_computes_its_output_in_the_clients_region(
    server: LocalServer, transport: str
) -> None:
    """``output_array`` is the client's own memfd region once its outputs go there (the
    second call on); over the wire it is a fresh array; the values are the same."""
    server.add_model(IntoRegion())
    url = server.http_url if transport == "http" else server.grpc_url
    x = np.abs(np.random.default_rng(5).standard_normal((1 << 15, 16))).astype(np.float32)  # 2 MB
    with Client(url) as client:
        seen = []
        for _ in range(3):
            result = client.infer("into_region", {"x": x})
            np.testing.assert_array_equal(result["y"], x + 1)
            seen.append(int(result["mapped"][0]))
        assert seen == [0, 1, 1]  # the first reply tells the client the output's size
    with Client(url, shared_memory=False) as client:
        result = client.infer("into_region", {"x": x})
        np.testing.assert_array_equal(result["y"], x + 1)
        assert result["mapped"][0] == 0


def test_a_failed_requests_output_region_is_never_leased_again(server: LocalServer) -> None:
    """A model thread the server gave up on may still write into the region it was handed:
    after a failure the client unregisters that region instead of leasing it again."""
    server.add_model(IntoRegion())
    x = np.ones((1 << 15, 16), np.float32)
    with Client(server.http_url) as client:
        for _ in range(2):  # the first reply tells the output's size; the second leases it
            client.infer("into_region", {"x": x})
        pool = client._shm
        assert pool is not None
        before = set(pool._regions)
        with pytest.raises(InferenceServerError, match="negative first value"):
            client.infer("into_region", {"x": -x})
        after = set(pool._regions)
        assert len(after) == len(before) - 1 and after < before  # the output's region went
        (dropped,) = before - after
        assert dropped not in _regions(server)
        result = client.infer("into_region", {"x": x})  # a fresh region for the output
        np.testing.assert_array_equal(result["y"], x + 1)
        assert result["mapped"][0] == 1
        assert dropped not in pool._regions


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[7])


def test_the_server_reuses_freed_memory_for_big_tensors(server: LocalServer) -> None:
    """Without ``malloc.keep_freed_memory`` every 2 MB request body and output is faulted in
    afresh (~5,000 page faults per call over HTTP binary here); with it, next to none (~30)."""
    pid = server.pid
    assert pid is not None
    a = np.ones((1 << 15, 16), np.float32)  # 2 MB
    with Client(server.http_url, shared_memory=False) as client:
        for _ in range(2):  # the heap grows to the working set once
            client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
        before = _minor_faults(pid)
        for _ in range(3):
            result = client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
            np.testing.assert_array_equal(result["OUTPUT1"], np.zeros_like(a))
        per_call = (_minor_faults(pid) - before) / 3
    assert per_call < 1000, per_call  # 4 KiB pages: the two 2 MB outputs alone are 1,024


def test_the_operators_malloc_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert malloc.keep_freed_memory() is False


def _wait_until(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def test_tritonclient_requests_name_a_memfd_region_as_usual(server: LocalServer) -> None:
    sock = connect(server.shm_socket or "")
    fd = memfd(3 * 64)
    try:
        assert ask(sock, {"op": "register", "name": "tc_memfd"}, [fd]) == {
            "ok": True,
            "byte_size": 192,
        }
        mapping = mmap.mmap(fd, 192)
        a = np.arange(16, dtype=np.float32).reshape(1, 16)
        mapping[:64] = a.tobytes()
        mapping[64:128] = (a * 10).tobytes()
        for mod, client in (
            (th, th.InferenceServerClient(server.http_url.removeprefix("http://"))),
            (tg, tg.InferenceServerClient(server.grpc_address)),
        ):
            mapping[128:] = bytes(64)
            inputs = [mod.InferInput(f"INPUT{i}", [1, 16], "FP32") for i in (0, 1)]
            inputs[0].set_shared_memory("tc_memfd", 64, offset=0)
            inputs[1].set_shared_memory("tc_memfd", 64, offset=64)
            out = mod.InferRequestedOutput("OUTPUT1")
            out.set_shared_memory("tc_memfd", 64, offset=128)
            client.infer("add_sub", inputs, outputs=[out])
            client.close()
            np.testing.assert_array_equal(np.frombuffer(mapping, np.float32, 16, 128), -9 * a[0])
        assert ask(sock, {"op": "unregister", "name": "tc_memfd"}) == {"ok": True}
        assert "tc_memfd" not in _regions(server)
    finally:
        sock.close()
        os.close(fd)


def test_a_sealed_region_cannot_be_truncated_and_the_server_is_unaffected(
    server: LocalServer,
) -> None:
    sock = connect(server.shm_socket or "")
    fd = memfd(128)
    try:
        assert ask(sock, {"op": "register", "name": "cut"}, [fd])["ok"]
        mapping = mmap.mmap(fd, 128)
        mapping[:] = np.ones(32, np.float32).tobytes()
        for size in (0, 64, 4096):
            with pytest.raises(PermissionError) as caught:
                os.ftruncate(fd, size)
            assert caught.value.errno == errno.EPERM
        with pytest.raises(PermissionError):  # nor can the seals be taken back or changed
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        client = th.InferenceServerClient(server.http_url.removeprefix("http://"))
        inputs = [th.InferInput(f"INPUT{i}", [1, 16], "FP32") for i in (0, 1)]
        inputs[0].set_shared_memory("cut", 64, offset=0)
        inputs[1].set_shared_memory("cut", 64, offset=64)
        out = th.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("cut", 64, offset=64)
        client.infer("add_sub", inputs, outputs=[out])
        client.close()
        np.testing.assert_array_equal(np.frombuffer(mapping, np.float32, 16, 64), 2.0)
        assert server.running
    finally:
        sock.close()
        os.close(fd)


def test_descriptors_that_are_not_sealed_memfds_are_refused(
    server: LocalServer, tmp_path: Path
) -> None:
    sock = connect(server.shm_socket or "")
    unsealed = memfd(64, seals=0)
    shrink_only = memfd(64, seals=memfd_peer.SEALS & ~fcntl.F_SEAL_GROW)
    plain = os.open(tmp_path / "plain", os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(plain, 64)
    shm_key = f"/memfd_test_{os.getpid()}"
    import _posixshmem

    posix = _posixshmem.shm_open(shm_key, os.O_CREAT | os.O_RDWR, mode=0o600)
    os.ftruncate(posix, 64)
    try:
        for name, fd, words in (
            ("unsealed", unsealed, "not sealed against resizing"),
            ("shrink_only", shrink_only, "not sealed against resizing"),
            ("file", plain, "is not a memfd"),
            ("posix", posix, "is not a memfd"),
        ):
            reply = ask(sock, {"op": "register", "name": name}, [fd])
            assert reply["status"] == 400 and words in reply["error"], reply
            assert repr(name) in reply["error"]
        for body, fds, words in (
            ({"op": "register", "name": "none"}, [], "exactly one descriptor"),
            ({"op": "register", "name": "two"}, [unsealed, posix], "exactly one descriptor"),
            (b"not json", [], "not JSON"),
            ({"op": "chmod", "name": "x"}, [], "unknown op"),
            ({"op": "register"}, [], "'name' must be"),
            (b"x" * (fdpass.MAX_MESSAGE + 10), [], "at most"),
        ):
            reply = ask(sock, body, fds)
            assert reply["status"] == 400 and words in reply["error"], reply
        assert not {"unsealed", "shrink_only", "file", "posix", "none", "two"} & set(
            _regions(server)
        )
        # the same connection still registers a proper region
        good = memfd(64)
        assert ask(sock, {"op": "register", "name": "good"}, [good])["ok"]
        os.close(good)
    finally:
        sock.close()
        for fd in (unsealed, shrink_only, posix, plain):
            os.close(fd)
        _posixshmem.shm_unlink(shm_key)
    _wait_until(lambda: "good" not in _regions(server))


def test_a_client_killed_mid_request_frees_its_regions(server: LocalServer, tmp_path: Path) -> None:
    sleeper = MarkedSleeper()
    sleeper.marker = str(tmp_path / "started")
    server.add_model(sleeper)
    args = {
        "mode": "killed",
        "socket": server.shm_socket,
        "http": server.http_url.removeprefix("http://"),
        "model": "marked_sleeper",
        "elements": 1 << 16,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.server.memfd_peer", json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "sent"
        assert {"k_in", "k_out"} <= set(_regions(server))
        _wait_until(lambda: Path(sleeper.marker).exists())  # the model is running on k_in
        child.kill()
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    _wait_until(lambda: not {"k_in", "k_out"} & set(_regions(server)))
    # the request in flight ends (its output region is gone: an error nobody reads) and the
    # server keeps serving, through memfd regions as before
    a = np.ones((1 << 15, 16), np.float32)
    with Client(server.http_url) as client:
        for _ in range(2):
            np.testing.assert_array_equal(
                client.infer("add_sub", {"INPUT0": a, "INPUT1": a})["OUTPUT0"], 2 * a
            )
        y = client.infer("marked_sleeper", {"x": np.zeros(4, np.float32)})["y"]
        np.testing.assert_array_equal(y, np.ones(4, np.float32))
    assert server.running


@contextlib.contextmanager
def _other_user(srv: LocalServer, region: str) -> Iterator[dict[str, Any]]:
    """Run the other user's child; its report, its connection open until the block ends."""
    args = {
        "mode": "other_user",
        "uid": OTHER_UID,
        "socket": srv.shm_socket,
        "http": srv.http_url.removeprefix("http://"),
        "region": region,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.server.memfd_peer", json.dumps(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline()
        assert line, "the other user's child printed no report"
        report: dict[str, Any] = json.loads(line)
        assert report["uid"] == OTHER_UID
        yield report
    finally:
        child.stdin.close()
        child.wait(timeout=60)
        child.stdout.close()
    assert child.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")
def test_another_user_cannot_reach_the_socket(server: LocalServer) -> None:
    with _other_user(server, "theirs") as report:
        assert report["connect"] == errno.EACCES, report


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")
def test_a_region_handed_over_by_another_user_is_invisible_to_others() -> None:
    """Even with the directory opened to it, another user's region is its own (SO_PEERCRED)."""
    with LocalServer(demo=True, device="cpu", auth_token=None) as srv:
        assert srv.shm_socket is not None
        os.chmod(os.path.dirname(srv.shm_socket), 0o711)
        os.chmod(srv.shm_socket, 0o666)
        with _other_user(srv, "theirs") as report:
            _theirs_is_theirs(srv, report)


def _theirs_is_theirs(srv: LocalServer, report: dict[str, Any]) -> None:
    """Checks made while the other user's connection, so its region, is alive."""
    assert report["connect"] == 0
    assert report["register"]["ok"], report
    # its owner uses it (its inputs copied out, being another user's): values exact
    assert report["infer"] == "ok", report
    assert report["output"] == [3.0 * i for i in range(16)]
    # this user (root) does not see it, and naming it answers as an unknown name
    assert "theirs" not in _regions(srv)
    client = th.InferenceServerClient(srv.http_url.removeprefix("http://"))
    try:
        replies = []
        for name in ("theirs", "nobody_registered_this"):
            inputs = [th.InferInput(f"INPUT{i}", [1, 16], "FP32") for i in (0, 1)]
            for i, inp in enumerate(inputs):
                inp.set_shared_memory(name, 64, offset=64 * i)
            with pytest.raises(InferenceServerException) as caught:
                client.infer("add_sub", inputs)
            replies.append(str(caught.value).replace(name, "NAME"))
        assert replies[0] == replies[1]
    finally:
        client.close()
