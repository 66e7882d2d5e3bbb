"""Faults: raising and stuck models, a killed server, unload in flight, a killed parent, a killed
shared-memory client. Each leaves the server serving (or gone, when that is the point) within
bounded time; the whole module runs in about 20 s.

Each test's docstring reads ``Fault: what happens.``: docs/reliability.md shows them as its table
of fault cases (reliability_report.py), with the figures each test records.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reliability_report

from nbinfer import Session
from nbinfer.client import Client
from nbinfer.errors import (
    InferenceError,
    ModelNotReadyError,
    NbinferError,
    RequestTimeoutError,
    TransportError,
)
from nbinfer.server.launcher import LocalServer
from tests.waiting import exited, wait_until


class _InFlight:
    """Runs one call in a thread and keeps its result or exception."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.result = call()
        except BaseException as exc:  # kept for the test to inspect
            self.error = exc

    def join(self, seconds: float) -> None:
        self.thread.join(seconds)
        assert not self.thread.is_alive(), "the call did not return"


def _test_name() -> str:
    """The running test's name and parameters, the key of its figures."""
    return os.environ["PYTEST_CURRENT_TEST"].split("::")[-1].rsplit(" (", 1)[0]


@pytest.fixture
def own_server(repository: Path) -> Iterator[LocalServer]:
    """A server of the test's own (it may be stopped or killed)."""
    srv = LocalServer(model_repository=repository, demo=False, device="cpu")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_raising_model_is_an_error_on_both_transports_and_the_server_serves_on(
    server: LocalServer, assert_healthy: Callable[[], None]
) -> None:
    """A model raises: 500 / INTERNAL with the model's message; the next requests are served."""
    for url in (server.http_url, server.grpc_url):
        with Client(url) as client, pytest.raises(InferenceError, match="fails on purpose"):
            client.infer("raising", {"X": np.ones(2, np.float32)})
    assert_healthy()


def test_hanging_model_times_the_client_out_and_other_models_are_served(
    server: LocalServer, assert_healthy: Callable[[], None]
) -> None:
    """A model hangs: the client's `timeout` raises `nbinfer.RequestTimeoutError`; other models are
    served meanwhile.
    """
    with Client(server.http_url) as client, pytest.raises(RequestTimeoutError):
        client.infer("hanging", {"X": np.array([3.0], np.float32)}, timeout=0.5)
    assert_healthy()


def test_stop_with_a_stuck_model_ends_within_the_grace_period_and_names_what_it_abandoned(
    own_server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The server is stopped while a model is stuck in `predict`: the stop ends after the 3 s grace
    period (the test allows 8 s on a loaded machine); the server logs `abandoned 1 request(s) of
    model hanging (1)`, `LocalServer.stop()` repeats it as a warning and keeps it in
    `LocalServer.abandoned`; no SIGKILL is needed.
    """
    with Client(own_server.http_url) as client:
        stuck = _InFlight(lambda: client.infer("hanging", {"X": np.array([60.0], np.float32)}))
        time.sleep(0.5)
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="nbinfer"):
            own_server.stop()
        elapsed = time.monotonic() - start
        stuck.join(10)
    print(f"\nstop with a stuck model: {elapsed:.1f} s")
    reliability_report.record("faults", _test_name(), f"the stop took {elapsed:.1f} s")
    assert elapsed < 8.0, f"stop took {elapsed:.1f} s"  # 3 s grace + 1 s close, loaded machines
    assert isinstance(stuck.error, NbinferError)
    assert any("hanging (1)" in line for line in own_server.abandoned), own_server.abandoned
    assert "ignored SIGTERM" not in caplog.text
    assert "abandoned 1 request(s) of model hanging (1)" in caplog.text


def test_server_killed_mid_request_makes_the_client_raise_and_the_session_report_it(
    repository: Path,
) -> None:
    """The server is killed (SIGKILL) mid-request: the pending call raises `TransportError`;
    `Session.server.running` turns false. Through a `Session` (tests/session/test_session.py),
    the pending call and every later one raise `ConnectError` saying the local server is gone,
    how (`killed by SIGKILL`) and the way on; `session.restart()` starts a new one and serves
    the `serve()`d models again (docs/session.md, "When the local server dies").
    """
    session = Session.local(model_repository=str(repository), demo=False, device="cpu")
    try:
        assert session.server is not None
        pid = session.server.pid
        assert pid is not None
        pending = _InFlight(lambda: session.infer("hanging", {"X": np.array([30.0], np.float32)}))
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        pending.join(10)
        assert isinstance(pending.error, TransportError), repr(pending.error)
        wait_until(lambda: not session.server.running, 5)  # type: ignore[union-attr]
        with pytest.raises(TransportError):
            session.infer("identity_fp32", {"INPUT0": np.ones(2, np.float32)})
    finally:
        session.close()


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_unload_with_requests_in_flight_lets_them_finish_and_refuses_new_ones(
    own_server: LocalServer, transport: str
) -> None:
    """A model is unloaded with 8 requests in flight (HTTP and gRPC): they finish with their
    answers and the unload waits for them; a request sent while it waits and one sent after it
    raise `ModelNotReadyError` (`UNLOADING`, then `unloaded`); a reload serves again.
    """
    url = own_server.http_url if transport == "http" else own_server.grpc_url
    with Client(url) as client:
        x = np.array([1.5], np.float32)
        calls = [_InFlight(lambda: client.infer("hanging", {"X": x})) for _ in range(8)]
        time.sleep(0.5)
        unload = _InFlight(lambda: client.unload_model("hanging"))
        wait_until(lambda: not client.is_model_ready("hanging"), 5)
        with pytest.raises(ModelNotReadyError, match="not ready"):
            client.infer("hanging", {"X": np.zeros(1, np.float32)})  # while the unload waits
        for call in calls:
            call.join(20)
            # a call that reached the server only after the unload began (a loaded machine) is
            # refused the same way; nothing else is right
            assert call.error is None or isinstance(call.error, ModelNotReadyError), call.error
        unload.join(20)
        assert unload.error is None, repr(unload.error)
        finished = [c for c in calls if c.error is None]
        assert finished, "no request was in flight when the unload began"
        assert all(np.array_equal(c.result["Y"], x) for c in finished)
        with pytest.raises(ModelNotReadyError, match="not ready"):
            client.infer("hanging", {"X": np.zeros(1, np.float32)})
        reliability_report.record(
            "faults", _test_name(), f"{len(finished)} of 8 finished ({transport})"
        )
        client.load_model("hanging")
        np.testing.assert_array_equal(
            client.infer("hanging", {"X": np.zeros(1, np.float32)})["Y"], [0]
        )


_PARENT = """
import sys, time
from nbinfer.server.launcher import LocalServer
server = LocalServer(demo=True, device="cpu").start()
print(server.pid, flush=True)
time.sleep(120)
"""


def test_killed_parent_takes_the_server_with_it_within_5_seconds() -> None:
    """The parent process is killed: the server is gone within 5 s."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_PARENT)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        assert not exited(server_pid)
        parent.kill()
        parent.wait(5)
        gone_in = wait_until(lambda: exited(server_pid), 5.0)
        reliability_report.record("faults", _test_name(), f"gone in {gone_in:.1f} s")
    finally:
        parent.kill()
        parent.wait(5)
        parent.stdout.close()


_SHM_CLIENT = """
import sys
from multiprocessing import shared_memory
import numpy as np
from nbinfer.client import Client
region = shared_memory.SharedMemory(create=True, size=64, name=sys.argv[2])
np.ndarray((16,), np.float32, buffer=region.buf)[:] = np.arange(16)
with Client(sys.argv[1]) as client:
    client.register_system_shared_memory("killed_client_region", "/" + sys.argv[2], 64)
print("registered", flush=True)
import time
time.sleep(120)
"""


def _server_fds_to(pid: int, key: str) -> list[str]:
    fds = Path(f"/proc/{pid}/fd")
    links = []
    for fd in fds.iterdir():
        try:
            links.append(os.readlink(fd))
        except OSError:
            continue
    return [link for link in links if key in link]


def test_shared_memory_of_a_killed_client_is_cleaned_and_released(
    server: LocalServer, assert_healthy: Callable[[], None]
) -> None:
    """A client that registered shared memory is killed: its object is unlinked (Python's resource
    tracker), the server keeps serving, and unregistering the region releases the server's
    descriptor.
    """
    key = f"nbinfer_killed_{os.getpid()}"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_SHM_CLIENT), server.http_url, key],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "registered"
        child.kill()
        child.wait(5)
        # Python's resource tracker unlinks the dead client's object; the server keeps serving
        wait_until(lambda: not Path(f"/dev/shm/{key}").exists(), 5)
        assert_healthy()
        assert server.pid is not None and _server_fds_to(server.pid, key)  # held, unlinked
        with Client(server.http_url) as client:
            names = [r["name"] for r in client.get_system_shared_memory_status()]
            assert "killed_client_region" in names
            client.unregister_system_shared_memory("killed_client_region")
            names = [r["name"] for r in client.get_system_shared_memory_status()]
            assert "killed_client_region" not in names
        assert _server_fds_to(server.pid, key) == []  # the memory is released
    finally:
        child.kill()
        child.wait(5)
        child.stdout.close()
        Path(f"/dev/shm/{key}").unlink(missing_ok=True)
