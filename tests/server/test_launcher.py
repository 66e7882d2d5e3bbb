"""LocalServer lifecycle: start / stop, logs, start failures, readiness time, parent death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

import nbinfer
from nbinfer.errors import ServerStartError
from nbinfer.server.launcher import LocalServer, parse_ready_line
from tests.waiting import exited, parent_of, wait_until


def test_parse_ready_line_extracts_urls() -> None:
    line = "NBINFER READY http=http://127.0.0.1:1234 grpc=127.0.0.1:5678 pid=9\n"
    assert parse_ready_line(line) == ("http://127.0.0.1:1234", "127.0.0.1:5678")
    assert parse_ready_line("some other log line") is None


def test_start_is_ready_stop_is_idempotent_and_logs_are_readable() -> None:
    server = LocalServer(demo=True)
    assert not server.running
    server.stop()  # stop before start: a no-op
    with pytest.raises(ServerStartError):
        _ = server.http_url
    t0 = time.perf_counter()
    assert server.start() is server
    elapsed = time.perf_counter() - t0
    print(f"\n[LocalServer(demo=True) ready in {elapsed:.2f} s]")
    try:
        assert server.running
        pid = server.pid
        assert pid is not None
        assert server.http_url.startswith("http://127.0.0.1:")
        assert server.grpc_address.startswith("127.0.0.1:")
        assert server.grpc_url == "grpc://" + server.grpc_address
        for url, protocol in ((server.grpc_url, None), (server.grpc_address, "grpc")):
            with nbinfer.Client(url, protocol=protocol) as client:  # gRPC, not HTTP/0.9
                assert client.protocol == "grpc" and client.is_server_ready()
        assert server.startup_seconds is not None and server.startup_seconds < 30
        # a token by default: required on readiness, sent by whoever is given server.auth_token
        assert server.auth_token is not None
        assert httpx.get(server.http_url + "/v2/health/ready").status_code == 401
        bearer = {"Authorization": f"Bearer {server.auth_token}"}
        r = httpx.get(server.http_url + "/v2/health/ready", headers=bearer)
        assert r.status_code == 200
        server.start()  # already running: a no-op
        assert server.pid == pid
        logs = server.logs()
        assert "NBINFER READY" in logs
        assert server.logs(tail=1).count("\n") <= 1
    finally:
        server.stop()
        server.stop()  # idempotent
    assert not server.running
    wait_until(lambda: exited(pid), 5, f"server {pid} exiting")
    with pytest.raises(ServerStartError):
        _ = server.http_url
    # The log survives stop() for post-mortems.
    assert "NBINFER READY" in server.logs()


def test_context_manager_starts_and_stops() -> None:
    with LocalServer(demo=False) as server:
        pid = server.pid
        assert pid is not None
        assert httpx.get(server.http_url + "/v2/health/live").status_code == 200
    assert not server.running
    wait_until(lambda: exited(pid), 5, f"server {pid} exiting")


def test_restart_after_stop_gets_a_new_process() -> None:
    server = LocalServer(demo=False)
    token = server.auth_token
    server.start()
    first = server.pid
    server.stop()
    server.start()
    try:
        assert server.pid != first
        assert token is not None and server.auth_token == token  # a restart keeps the token
        bearer = {"Authorization": f"Bearer {token}"}
        assert httpx.get(server.http_url + "/v2/health/ready", headers=bearer).status_code == 200
        assert httpx.get(server.http_url + "/v2/health/ready").status_code == 401
    finally:
        server.stop()


def test_bad_repository_path_raises_server_start_error_with_log_tail(tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    server = LocalServer(model_repository=missing, demo=False)
    with pytest.raises(ServerStartError) as info:
        server.start()
    message = str(info.value)
    assert "does-not-exist" in message
    assert "server log" in message
    assert not server.running


def test_startup_timeout_raises_and_kills_the_process(tmp_path: Path) -> None:
    # A model whose load() sleeps keeps the server from getting ready.
    model_dir = tmp_path / "repo" / "slow" / "1"
    model_dir.mkdir(parents=True)
    (model_dir / "model.py").write_text(
        textwrap.dedent(
            """
            import time
            from nbinfer.server.model import Model

            class Slow(Model):
                name = "slow"
                inputs = [("X", "FP32", [-1])]
                outputs = [("Y", "FP32", [-1])]

                def load(self):
                    time.sleep(60)

                def predict(self, inputs, context):
                    return {"Y": inputs["X"]}
            """
        )
    )
    server = LocalServer(model_repository=tmp_path / "repo", demo=False, startup_timeout=2.0)
    with pytest.raises(ServerStartError, match="not ready after"):
        server.start()
    pid = server.pid
    assert pid is not None
    wait_until(lambda: exited(pid), 5, f"server {pid} exiting")


def test_sigterm_shuts_the_server_down_gracefully() -> None:
    server = LocalServer(demo=False).start()
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    assert server.wait(timeout=10) == 0
    assert not server.running
    server.stop()


_PARENT = textwrap.dedent(
    """
    import sys, time
    from nbinfer.server.launcher import LocalServer

    server = LocalServer(demo=False).start()
    print(server.pid, flush=True)
    time.sleep(120)
    """
)


@pytest.mark.parametrize("forked", [False, True], ids=["spawned", "forked"])
@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "worker-thread"])
def test_server_exits_when_its_parent_is_killed(
    tmp_path: Path, from_thread: bool, forked: bool
) -> None:
    script = _PARENT
    if forked:  # the second start forks the fork server, which must end too
        script = script.replace(
            "print(server.pid, flush=True)",
            "server.stop()\n"
            "server = LocalServer(demo=False).start()\n"
            "assert server.forked\n"
            "print(server.pid, flush=True)",
        )
    if from_thread:
        # Spawned from a thread: PR_SET_PDEATHSIG is not used, the getppid watchdog must act.
        script = script.replace(
            "server = LocalServer(demo=False).start()",
            "import threading\n"
            "box = []\n"
            "t = threading.Thread(target=lambda: box.append(LocalServer(demo=False).start()))\n"
            "t.start(); t.join()\n"
            "server = box[0]",
        )
    path = tmp_path / "parent.py"
    path.write_text(script)
    parent = subprocess.Popen(
        [sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), parent.stderr.read() if parent.stderr else line
        child = int(line)
        assert not exited(child)
        ppid = parent_of(child)
        assert (ppid != parent.pid) == forked
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        gone_in = wait_until(lambda: exited(child), 8, f"server {child} ending with its parent")
        print(f"\n[server {child} exited {gone_in:.2f} s after its parent died]")
        if forked:
            wait_until(lambda: exited(ppid), 8, f"fork server {ppid} ending with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pipe in (parent.stdout, parent.stderr):
            if pipe is not None:
                pipe.close()
        if "child" in locals() and not exited(child):
            os.kill(child, signal.SIGKILL)


def test_serve_blocks_until_the_server_exits() -> None:
    server = LocalServer(demo=False)
    done = threading.Event()

    def run() -> None:
        server.serve()
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.running
    assert not done.is_set()
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    assert done.wait(10)
    assert not server.running


def test_interpreter_exit_stops_a_server_that_was_never_stopped(tmp_path: Path) -> None:
    path = tmp_path / "leaky.py"
    path.write_text(
        "from nbinfer.server.launcher import LocalServer\n"
        "server = LocalServer(demo=False).start()\n"
        "print(server.pid, flush=True)\n"
    )
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    child = int(proc.stdout.strip())
    what = f"server {child} ending with the interpreter that started it"
    wait_until(lambda: exited(child), 5, what)


def test_at_exit_every_live_server_is_told_first_then_each_ends_gracefully(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import weakref

    from nbinfer.server import launcher

    servers = [LocalServer(demo=False, auth_token=None) for _ in range(3)]
    for server in servers:
        server.start()
    procs = [server._proc for server in servers]
    assert all(p is not None and p.poll() is None for p in procs)
    # only these three: the servers other tests of this worker share stay up
    monkeypatch.setattr(launcher, "_LIVE", weakref.WeakSet(servers))
    launcher._stop_all()
    # each child got SIGTERM once (before any was waited for) and shut down on its own: exit 0
    assert [p.returncode for p in procs if p is not None] == [0, 0, 0]
    assert [s._terminated_pid for s in servers] == [p.pid for p in procs if p is not None]
    assert not {s for s in servers if s in launcher._LIVE}
    assert not any(s.running for s in servers)
