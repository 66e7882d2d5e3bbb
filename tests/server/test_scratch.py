"""A server killed with SIGKILL leaves its files behind (uploaded model copies, the memfd
socket's directory); the next server of the same user removes them, and never touches a live
server's files or another user's directories (``nbinfer/server/scratch.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from nbinfer.server.launcher import LocalServer
from nbinfer.server.scratch import OWNER, PREFIX, Scratch, sweep_stale
from tests.server.repo_calls import ONNX_CONFIG, http_load, swapped_add_sub_onnx
from tests.waiting import exited, wait_until

HOLDER = textwrap.dedent(
    """
    import sys, time
    from nbinfer.server.scratch import Scratch
    scratch = Scratch(sys.argv[1])
    (scratch.directory("nbinfer-model-") / "model.onnx").write_bytes(b"x" * 4096)
    print(scratch.root, flush=True)
    time.sleep(600)
    """
)


def _roots(base: Path) -> list[Path]:
    return sorted(base.glob(f"{PREFIX}*"))


def _aged(root: Path, seconds: float = 3600) -> None:
    """As if ``root`` were last changed ``seconds`` ago (the sweep skips fresh roots)."""
    then = time.time() - seconds
    os.utime(root, (then, then))


def _end(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: nothing of the process runs to clean up."""
    proc.kill()
    proc.wait(10)
    assert proc.stdout is not None
    proc.stdout.close()


def _holder(base: Path) -> tuple[subprocess.Popen[str], Path]:
    """Another process with a scratch root (and a copy in it) in ``base``, alive."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(base)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_root_is_made_on_first_use_kept_while_its_owner_lives_and_removed_at_close(
    tmp_path: Path,
) -> None:
    scratch = Scratch(tmp_path)
    assert _roots(tmp_path) == []  # nothing on disk until something is written
    copy = scratch.directory("nbinfer-model-")
    root = scratch.root
    assert copy.parent == root and root.parent == tmp_path and root.name.startswith(PREFIX)
    assert (root / OWNER).is_file()
    assert root.stat().st_mode & 0o777 == 0o700
    _aged(root)
    assert sweep_stale(tmp_path, min_age=0) == []  # its lock is held (by this process)
    assert copy.is_dir()
    scratch.close()
    scratch.close()
    assert _roots(tmp_path) == []


def test_the_sweep_removes_the_roots_of_killed_processes_only(tmp_path: Path) -> None:
    live, live_root = _holder(tmp_path)
    dead, dead_root = _holder(tmp_path)
    try:
        _end(dead)
        assert dead_root.is_dir()  # SIGKILL: nothing ran to clean up
        for root in (live_root, dead_root):
            _aged(root)
        fresh = Scratch(tmp_path)
        fresh.directory("nbinfer-model-")
        assert sweep_stale(tmp_path, min_age=0) == [dead_root]
        assert not dead_root.exists()
        assert live_root.is_dir() and fresh.root.is_dir()
        fresh.close()
    finally:
        _end(live)
    _aged(live_root)
    assert sweep_stale(tmp_path, min_age=60) == [live_root]  # old enough, owner gone


def test_the_sweep_skips_fresh_roots_links_and_anything_not_made_by_a_server(
    tmp_path: Path,
) -> None:
    dead, dead_root = _holder(tmp_path)
    _end(dead)
    assert sweep_stale(tmp_path) == []  # younger than MIN_AGE: maybe between mkdtemp and lock
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / OWNER).touch()
    (tmp_path / f"{PREFIX}link").symlink_to(outside)
    (tmp_path / f"{PREFIX}file").write_text("not a directory")
    unlocked = tmp_path / f"{PREFIX}nolock"
    unlocked.mkdir()
    for path in (dead_root, outside, unlocked):
        _aged(path)
    assert sweep_stale(tmp_path, min_age=60) == [dead_root]
    assert (outside / "keep").is_dir() and (tmp_path / f"{PREFIX}link").is_symlink()
    assert (tmp_path / f"{PREFIX}file").is_file() and unlocked.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another uid needs root")
def test_the_sweep_never_touches_another_users_root(tmp_path: Path) -> None:
    """A root of another user (an unused uid) whose server is gone stays: not ours to delete."""
    dead, theirs = _holder(tmp_path)
    _end(dead)
    for path in (theirs, *theirs.rglob("*")):
        os.chown(path, 65533, 65533, follow_symlinks=False)
    _aged(theirs)
    assert sweep_stale(tmp_path, min_age=0) == []
    assert [p.name for p in theirs.glob("nbinfer-model-*/*")] == ["model.onnx"]


def _env(tmp_path: Path) -> dict[str, str]:
    """The server's temporary directory is ``tmp_path``, and no usable ``XDG_RUNTIME_DIR``."""
    return {"TMPDIR": str(tmp_path), "XDG_RUNTIME_DIR": ""}


UPLOAD = {"1/model.onnx": swapped_add_sub_onnx()}


def _killed_with_an_upload(tmp_path: Path) -> tuple[LocalServer, Path]:
    """A server in TMPDIR=tmp_path that uploaded a model, then was killed with SIGKILL."""
    # no usable XDG_RUNTIME_DIR (as on this kind of machine): the memfd socket goes into the
    # scratch root too
    killed = LocalServer(demo=False, device="cpu", env=_env(tmp_path), auth_token=None)
    killed.start()
    status, text = http_load(killed, "uploaded", UPLOAD, ONNX_CONFIG)
    assert status == 200, text
    (root,) = _roots(tmp_path)
    assert [p.name for p in root.glob("nbinfer-model-*/uploaded/1/*")] == ["model.onnx"]
    assert killed.shm_socket is not None and Path(killed.shm_socket).parent == root
    assert [p.name for p in tmp_path.glob("nbinfer-*")] == [root.name]  # no other directory
    assert killed.pid is not None
    os.kill(killed.pid, signal.SIGKILL)
    pid = killed.pid
    wait_until(lambda: exited(pid), 10, f"the killed server {pid} exiting")
    assert root.is_dir()  # nothing ran to clean up
    return killed, root


def test_the_next_server_removes_what_a_killed_server_left(tmp_path: Path) -> None:
    """The kernel that started the killed server has not noticed yet: the next server sweeps."""
    killed, root = _killed_with_an_upload(tmp_path)
    _aged(root)
    try:
        with LocalServer(demo=False, device="cpu", env=_env(tmp_path), auth_token=None) as server:
            deadline = time.monotonic() + 10
            while root.exists() and time.monotonic() < deadline:
                time.sleep(0.05)  # the sweep runs beside the start, not before it
            assert not root.exists()
            status, text = http_load(server, "uploaded", UPLOAD, ONNX_CONFIG)
            assert status == 200, text
            (live,) = _roots(tmp_path)
        assert not live.exists()  # a normal stop removes its own
    finally:
        killed.stop()


def test_stopping_a_killed_server_removes_what_it_left_at_once(tmp_path: Path) -> None:
    """``LocalServer.stop()`` after the server died removes its socket's directory: the root."""
    killed, root = _killed_with_an_upload(tmp_path)
    killed.stop()
    assert not root.exists()


HANGING = """
import pathlib, time
from nbinfer.server.model import Model

class Hanging(Model):
    def predict(self, inputs):
        pathlib.Path(__file__).with_name("started").touch()  # the request is in flight
        time.sleep(60)
        return {"Y": inputs["X"]}
"""


def _send(url: str, body: bytes) -> None:
    """POST ``body`` to ``url``; the answer, or the server going away, ends it."""
    with contextlib.suppress(OSError):
        urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=120)


def test_a_server_told_twice_to_stop_exits_at_once_and_still_removes_its_root(
    tmp_path: Path,
) -> None:
    """The second SIGTERM while the first waits for a stuck request: exit now, files gone."""
    repo, base = tmp_path / "repo", tmp_path / "tmp"
    (repo / "hanging" / "1").mkdir(parents=True)
    base.mkdir()
    (repo / "hanging" / "config.pbtxt").write_text(
        'name: "hanging"\n'
        'input [{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }]\n'
    )
    (repo / "hanging" / "1" / "model.py").write_text(HANGING)
    started = repo / "hanging" / "1" / "started"
    server = LocalServer(
        model_repository=repo,
        demo=False,
        device="cpu",
        env=_env(base),
        auth_token=None,
        log_level="info",
    )
    server.start()
    try:
        (root,) = _roots(base)  # the memfd socket's directory, made at start
        body = b'{"inputs":[{"name":"X","datatype":"FP32","shape":[1],"data":[1]}]}'
        url = f"{server.http_url}/v2/models/hanging/infer"
        threading.Thread(target=_send, args=(url, body), daemon=True).start()  # stuck
        wait_until(started.exists, 30, "the request reaching the model")
        assert server.pid is not None
        os.kill(server.pid, signal.SIGTERM)  # waits for the stuck request (its grace period)
        # (a signal still pending absorbs a second one: wait until this one was handled)
        wait_until(lambda: "signal 15 received" in server.logs(), 30, "the first SIGTERM")
        os.kill(server.pid, signal.SIGTERM)  # ... no longer
        assert server.wait(10) == 1  # exited at once (a graceful stop ends with 0)
        assert not root.exists(), sorted(p.name for p in root.iterdir())
    finally:
        server.stop()
