"""A process's second and later LocalServer starts fork its fork server (nbinfer.server.forkserver):
each forked server is the server a spawn would have made (its own session, stdio, environment,
working directory, descriptors, token), reports exit codes and takes signals like one, and a
new environment retires the fork server, which ends once its children have. (Ending with the
kernel: tests/server/test_launcher.py's parent-killed test, forked.)"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import httpx
import numpy as np
import pytest

from nbinfer import Client
from nbinfer.errors import ServerStartError
from nbinfer.server.launcher import LocalServer
from tests.children import python_json
from tests.waiting import parent_of

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="Linux pidfds only")


def _forked(**kwargs: object) -> LocalServer:
    """A started server that was forked (a first start in this process spawns)."""
    server = LocalServer(demo=True, device="cpu", **kwargs).start()  # type: ignore[arg-type]
    if not server.forked:
        server.stop()
        server = LocalServer(demo=True, device="cpu", **kwargs).start()  # type: ignore[arg-type]
    assert server.forked
    return server


def _argv(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def _fd_targets(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            out.add(os.readlink(fd))
        except OSError:
            continue
    return out


def _answers(server: LocalServer) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    for url in (server.http_url, server.grpc_url):
        with Client(url) as client:
            result = client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)


def test_a_forked_server_is_the_server_a_spawn_makes_and_holds_nothing_of_its_siblings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _forked()
    monkeypatch.chdir(tmp_path)
    second = _forked()
    try:
        assert first.pid is not None and second.pid is not None
        for server in (first, second):
            _answers(server)
        fork_server = parent_of(second.pid)
        assert fork_server == parent_of(first.pid) != os.getpid()
        assert parent_of(fork_server) == os.getpid()
        assert b"nbinfer.server.forkserver" in _argv(fork_server)
        # its own session (a kernel interrupt never reaches it), stdin on /dev/null, the
        # launcher's working directory
        assert os.getsid(second.pid) == second.pid
        assert os.readlink(f"/proc/{second.pid}/fd/0") == os.devnull
        assert Path(os.readlink(f"/proc/{second.pid}/cwd")) == tmp_path.resolve()
        # no descriptor of its sibling (the sibling's log pipe ends when the sibling does)
        assert first._proc is not None
        first_pipe = os.readlink(f"/proc/self/fd/{first._proc.stdout.fileno()}")
        assert first_pipe.startswith("pipe:")
        assert first_pipe in _fd_targets(first.pid)
        assert first_pipe not in _fd_targets(second.pid)
        first.stop(grace=5.0)
        assert first._proc.returncode == 0
        assert first._reader is None  # its log reader saw the end of the pipe
        _answers(second)
    finally:
        first.stop()
        second.stop()


_DRAWS = """
import random

import numpy as np

from nbinfer.server.model import Model


class Draws(Model):
    name = "draws"
    inputs = [("N", "INT32", [1])]
    outputs = [("Y", "FP64", [8])]

    def predict(self, inputs):
        # the generators a model reaches for without seeding: NumPy's global one and Python's
        return {"Y": np.concatenate([np.random.random(4), [random.random() for _ in range(4)]])}
"""


def test_forked_servers_draw_different_random_numbers_as_spawned_ones_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forked from one process, two servers hold the fork server's generator states and would draw
    # the same "random" numbers (spawned servers never do) unless the child reseeds. The fork
    # server has NumPy's global generator once anything imports numpy.random before the fork: a
    # sitecustomize here (a new environment, so a new fork server that runs it).
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text("import numpy.random\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    (tmp_path / "draws" / "1").mkdir(parents=True)
    (tmp_path / "draws" / "1" / "model.py").write_text(_DRAWS)
    first = _forked(model_repository=tmp_path)
    second = _forked(model_repository=tmp_path)
    try:
        draws = []
        for server in (first, second):
            with Client(server.http_url) as client:
                draws.append(client.infer("draws", {"N": np.zeros(1, np.int32)}).as_numpy("Y"))
        assert parent_of(first.pid) == parent_of(second.pid)  # one fork server forked both
        assert not np.isin(draws[0][:4], draws[1][:4]).any(), draws  # NumPy's global generator
        assert not np.isin(draws[0][4:], draws[1][4:]).any(), draws  # Python's random
    finally:
        first.stop()
        second.stop()


def test_exit_codes_and_signals_reach_a_forked_server() -> None:
    _forked().stop()
    bad = LocalServer(demo=False, device="cpu", extra_args=["--no-such-option"])
    with pytest.raises(ServerStartError, match="exited with code 2"):
        bad.start()
    assert bad.forked
    server = _forked()
    try:
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        assert server.wait(timeout=10) == -signal.SIGKILL
        assert not server.running
    finally:
        server.stop()
    server = _forked()
    server.stop(grace=5.0)
    assert server.wait(timeout=0) == 0


def test_the_token_reaches_a_forked_server_and_no_proc_file_shows_it() -> None:
    server = _forked()
    try:
        assert server.pid is not None and server.auth_token is not None
        url = f"{server.http_url}/v2/models/iris"
        assert httpx.get(url).status_code == 401
        bearer = {"Authorization": f"Bearer {server.auth_token}"}
        assert httpx.get(url, headers=bearer).status_code == 200
        token = server.auth_token.encode()
        for pid in (server.pid, parent_of(server.pid)):
            for name in ("cmdline", "environ"):
                assert token not in Path(f"/proc/{pid}/{name}").read_bytes(), (pid, name)
    finally:
        server.stop()


def _alone(script: str) -> dict[str, object]:
    """Run ``script`` in a process of its own (here, other tests' servers may be children of
    the same fork server); the JSON object it printed last."""
    return python_json(["-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


_RETIRE = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from nbinfer.server.launcher import LocalServer
    from tests.server.test_forkserver import _answers
    from tests.waiting import exited, parent_of, wait_until

    LocalServer(demo=False, device="cpu").start().stop()  # the first start spawns
    old = LocalServer(demo=True, device="cpu").start()
    new = LocalServer(demo=True, device="cpu", env={"NBINFER_TEST_FORK_ENV": "1"}).start()
    assert old.forked and new.forked
    report = {"old": parent_of(old.pid), "new": parent_of(new.pid)}
    environ = Path(f"/proc/{report['new']}/environ").read_bytes().split(b"\\0")
    report["new_env"] = b"NBINFER_TEST_FORK_ENV=1" in environ
    _answers(old)  # a retired fork server's children keep serving
    report["old_alive_with_child"] = not exited(report["old"])
    old.stop(grace=5.0)
    report["old_ended_in"] = wait_until(lambda: exited(report["old"]), 5, "the retired one ending")
    _answers(new)
    new.stop()
    print(json.dumps(report))
    """
)


def test_another_environment_retires_the_fork_server_which_ends_after_its_children() -> None:
    report = _alone(_RETIRE)
    assert report["new"] != report["old"]
    assert report["new_env"] and report["old_alive_with_child"]


class _OwnCommand(LocalServer):
    def command(self) -> list[str]:
        cmd = super().command()
        return [
            cmd[0],
            "-c",
            "import sys; from nbinfer.server.__main__ import main; sys.exit(main(sys.argv[1:]))",
            *cmd[3:],
        ]


def test_a_subclass_command_and_forkserver_off_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    _forked().stop()
    with _OwnCommand(demo=False, device="cpu") as own:
        assert not own.forked
        assert own.pid is not None and parent_of(own.pid) == os.getpid()
    monkeypatch.setenv("NBINFER_FORKSERVER", "0")
    with LocalServer(demo=False, device="cpu") as off:
        assert not off.forked
        assert off.pid is not None and parent_of(off.pid) == os.getpid()


_STALE = textwrap.dedent(
    """
    import json, os
    from pathlib import Path
    import nbinfer.server.demo
    from nbinfer.server.launcher import LocalServer
    from tests.waiting import parent_of

    LocalServer(demo=False, device="cpu").start().stop()  # the first start spawns
    first = LocalServer(demo=False, device="cpu").start()
    old = parent_of(first.pid)
    first.stop()
    path = Path(nbinfer.server.demo.__file__)  # a module the fork server imported
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # as an upgrade would
    try:
        second = LocalServer(demo=True, device="cpu").start()
        third = LocalServer(demo=True, device="cpu").start()
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = {
        "first": first.forked,
        "second": second.forked,
        "third": third.forked,
        "third_from_another": parent_of(third.pid) != old,
    }
    second.stop()
    third.stop()
    print(json.dumps(report))
    """
)


def test_a_fork_server_whose_imports_changed_on_disk_is_replaced() -> None:
    # An upgraded package or an edited source: the start spawns, the next forks a fresh one.
    report = _alone(_STALE)
    assert report == {"first": True, "second": False, "third": True, "third_from_another": True}
