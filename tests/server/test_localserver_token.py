"""``LocalServer()`` wants a token by default, and hands it to nbinfer's clients in this process.

Issue 25, "a token by default where nbinfer controls both ends": a bare ``LocalServer()``
generates a random token (passed to the child through its environment only). nbinfer's own
clients made in the same process for the server's exact address (``Client``, ``AsyncClient``,
``Session``, ``%nbinfer connect``, the tritonclient- and KServe-shaped compat faces) send it
without being told, through an in-process registry the server fills when it is ready and
empties when it stops. Anyone else (a same-uid process, another uid) is refused unless given
:attr:`LocalServer.auth_token`. ``auth_token=None`` is the explicit opt-out.

The attackers are the real processes of ``tests/session/test_session_token.py`` (a child that
imports its clients, optionally drops to an unused uid, and calls over HTTP and gRPC).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

import nbinfer
from nbinfer import AsyncClient, Client, Session
from nbinfer.compat import kserve
from nbinfer.compat.tritonclient import grpc as tgrpc
from nbinfer.compat.tritonclient import http as thttp
from nbinfer.config import GENERATE_TOKEN, local_server_token
from nbinfer.errors import UnauthenticatedError
from nbinfer.server.launcher import LocalServer
from tests.children import OTHER_UID
from tests.session.test_session_token import ROWS, _attack, _refused, needs_root

ONES = np.ones((1, 16), np.float32)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A bare ``LocalServer`` (demo models), as a notebook user starts one without a Session."""
    with LocalServer(demo=True, device="cpu") as srv:
        yield srv


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _add_sub_ok(client: Client) -> None:
    out = client.infer("add_sub", ROWS).as_numpy("OUTPUT0")
    assert out.tolist()[0][:2] == [2.0, 2.0]


def test_a_bare_localserver_generates_a_token(server: LocalServer) -> None:
    token = server.auth_token
    assert isinstance(token, str) and len(token) >= 40  # secrets.token_urlsafe(32)
    other = LocalServer(demo=False)
    assert other.auth_token is not None and other.auth_token != token  # one per server
    assert LocalServer(auth_token=GENERATE_TOKEN).auth_token not in (None, token)


def test_a_same_uid_process_without_the_token_is_refused(server: LocalServer) -> None:
    report = _attack(server)
    assert report["uid"] == os.getuid()
    _refused(report)


@needs_root
def test_another_uid_is_refused_and_cannot_read_the_token(server: LocalServer) -> None:
    report = _attack(server, uid=OTHER_UID)
    assert report["uid"] == OTHER_UID
    _refused(report)
    assert server.auth_token is not None and server.auth_token not in report["cmdline"]["text"]
    assert "denied" in report["environ"], report["environ"]


def test_another_process_given_the_token_is_served(server: LocalServer) -> None:
    """What tritonclient / curl users do: pass ``server.auth_token`` as the bearer token."""
    report = _attack(server, token=server.auth_token)
    assert report["infer"]["status"] == 200
    assert report["infer"]["body"]["outputs"][0]["data"][:2] == [3.0, 3.0]
    assert report["grpc"] == {"ok": [3.0, 3.0]}


def test_the_token_travels_in_the_environment_never_in_argv(server: LocalServer) -> None:
    token = server.auth_token
    assert token is not None and server.pid is not None
    assert token.encode() not in Path(f"/proc/{server.pid}/cmdline").read_bytes()
    assert token not in " ".join(server.command())
    environ = Path(f"/proc/{server.pid}/environ").read_bytes()
    if server.forked:  # handed over the fork server's socket: not even in /proc/PID/environ
        assert token.encode() not in environ
    else:
        assert f"NBINFER_AUTH_TOKEN={token}".encode() in environ.split(b"\0")
    assert token not in repr(server)


def test_nbinfer_clients_in_this_process_need_no_token(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NBINFER_TOKEN", raising=False)
    http_port, grpc_port = _port(server.http_url), _port(server.grpc_url)
    for url, protocol in (
        (server.http_url, None),
        (server.http_url + "/", None),
        (f"localhost:{http_port}", None),
        (f"http://localhost:{http_port}", None),
        (server.grpc_url, None),
        (f"grpc://localhost:{grpc_port}", None),
        (server.grpc_address, "grpc"),  # host:port with protocol="grpc"
    ):
        with Client(url, protocol=protocol) as client:
            _add_sub_ok(client)

    async def both() -> list[float]:
        async with AsyncClient(server.http_url) as a, AsyncClient(server.grpc_url) as g:
            x = await a.infer("add_sub", ROWS)
            y = await g.infer("add_sub", ROWS)
            return [float(x.as_numpy("OUTPUT1")[0][0]), float(y.as_numpy("OUTPUT1")[0][0])]

    assert asyncio.run(both()) == [0.0, 0.0]
    with Session(server.http_url) as session:
        assert session.server is None and "add_sub" in set(session.models["name"])
        assert session.infer("add_sub", ROWS).as_numpy("OUTPUT0").tolist()[0][:2] == [2.0, 2.0]


def test_the_compat_faces_in_this_process_need_no_token(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NBINFER_TOKEN", raising=False)
    http_hostport = server.http_url.split("://", 1)[1]
    for module, url in ((thttp, http_hostport), (tgrpc, server.grpc_address)):
        triton = module.InferenceServerClient(url=url)
        try:
            inputs = [
                module.InferInput("INPUT0", [1, 16], "FP32"),
                module.InferInput("INPUT1", [1, 16], "FP32"),
            ]
            for tensor in inputs:
                tensor.set_data_from_numpy(ONES)
            assert triton.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist()[0][:2] == [2, 2]
        finally:
            triton.close()

    def request() -> kserve.InferRequest:
        inputs = [kserve.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(ONES)
        return kserve.InferRequest("add_sub", inputs)

    async def both() -> list[float]:
        rest = kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2"))
        grpc = kserve.InferenceGRPCClient(server.grpc_url)
        try:
            a = await rest.infer(server.http_url, request(), model_name="add_sub")
            b = await grpc.infer(request())
        finally:
            await rest.close()
            await grpc.close()
        assert isinstance(a, kserve.InferResponse)
        return [float(a.outputs[0].as_numpy()[0][0]), float(b.outputs[0].as_numpy()[0][0])]

    assert asyncio.run(both()) == [2.0, 2.0]


def test_nbinfer_connect_needs_no_token(server: LocalServer) -> None:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbinfer")
    magics = type(ip.magics_manager.registry["NbinferMagics"])(ip)  # a session of its own
    session = magics.nbinfer(f"connect {server.http_url}")
    try:
        assert session.server is None and "iris" in set(session.models["name"])
    finally:
        magics.nbinfer("stop")


def test_credentials_in_another_header_travel_with_the_token(server: LocalServer) -> None:
    """An API-key style ``HeaderAuth`` is not an Authorization: the server's token goes along."""
    config = nbinfer.ClientConfig(auth=nbinfer.HeaderAuth("x-team", "vision"))
    for url in (server.http_url, server.grpc_url):
        with Client(url, config=config) as client:
            _add_sub_ok(client)
            assert client.config.auth == nbinfer.HeaderAuth("x-team", "vision")
    with Session(server.http_url, config=config) as session:
        assert "iris" in set(session.models["name"])


def test_explicit_credentials_win_over_the_registry(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client given its own credentials sends those: a wrong token is refused."""
    monkeypatch.delenv("NBINFER_TOKEN", raising=False)
    for url in (server.http_url, server.grpc_url):
        with Client(url, auth="not-the-token") as client, pytest.raises(UnauthenticatedError):
            client.infer("add_sub", ROWS)
        with (
            Client(url, headers={"Authorization": "Bearer not-the-token"}) as client,
            pytest.raises(UnauthenticatedError),
        ):
            client.infer("add_sub", ROWS)
    monkeypatch.setenv("NBINFER_TOKEN", "not-the-token")
    with Client(server.http_url) as client, pytest.raises(UnauthenticatedError):
        client.infer("add_sub", ROWS)
    with Client(server.http_url, auth=server.auth_token) as client:  # the right one, explicitly
        _add_sub_ok(client)


def test_the_registry_matches_only_this_servers_exact_loopback_addresses(
    server: LocalServer,
) -> None:
    token = server.auth_token
    http_port, grpc_port = _port(server.http_url), _port(server.grpc_url)
    for url in (
        server.http_url,
        f"127.0.0.1:{http_port}",
        f"LOCALHOST:{http_port}/",
        f"grpc://127.0.0.1:{grpc_port}",
        server.grpc_url,
        server.grpc_address,
    ):
        assert local_server_token(url) == token, url
    for url in (
        f"https://127.0.0.1:{http_port}",  # another scheme: not this server
        f"grpcs://127.0.0.1:{grpc_port}",
        f"http://127.0.0.2:{http_port}",  # another address
        f"http://[::1]:{http_port}",
        f"http://127.0.0.1:{http_port}/v2/models",  # not a bare address
        "http://127.0.0.1:1",  # another port
        "http://127.0.0.1",
    ):
        assert local_server_token(url) is None, url


def test_after_stop_or_death_the_registry_hands_out_nothing() -> None:
    server = LocalServer(demo=False, device="cpu").start()
    http_url, grpc_url = server.http_url, server.grpc_url
    try:
        assert local_server_token(http_url) == server.auth_token
        assert local_server_token(grpc_url) == server.auth_token
    finally:
        server.stop()
    assert local_server_token(http_url) is None and local_server_token(grpc_url) is None
    with Client(http_url) as client:
        assert client.config.auth is None

    # a server that died without stop(): its entry is no longer handed out either
    dead = LocalServer(demo=False, device="cpu").start()
    try:
        url = dead.http_url
        assert local_server_token(url) == dead.auth_token and dead.pid is not None
        os.kill(dead.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while dead.running and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not dead.running
        assert local_server_token(url) is None
    finally:
        dead.stop()


_FORKED = """
import os
from nbinfer.config import local_server_token
from nbinfer.server.launcher import LocalServer

with LocalServer(demo=False, device="cpu") as server:
    parent = local_server_token(server.http_url) == server.auth_token
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, b"token" if local_server_token(server.http_url) else b"none")
        os._exit(0)
    os.close(write)
    child = os.read(read, 16).decode()
    os.waitpid(pid, 0)
print(parent, child)
"""


def test_a_forked_child_finds_no_token() -> None:
    """The registry is the starting process's: a child forked from it (another pid) finds nothing.

    Run in a process of its own: forking this multi-threaded test process is not safe.
    """
    out = subprocess.run(
        [sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["True", "none"], out.stderr


def test_env_token_is_the_servers_token() -> None:
    """An ``NBINFER_AUTH_TOKEN`` given in ``env=`` is the token (not a generated one)."""
    server = LocalServer(demo=False, env={"NBINFER_AUTH_TOKEN": "from-env-token"})
    assert server.auth_token == "from-env-token"
    assert LocalServer(demo=False, env={"NBINFER_AUTH_TOKEN": "x"}, auth_token="y").auth_token == (
        "y"
    )


def test_auth_token_none_opts_out() -> None:
    """The documented opt-out: no token; the same-uid attacker is served (the attack is real)."""
    with LocalServer(demo=True, device="cpu", auth_token=None) as open_server:
        assert open_server.auth_token is None
        assert local_server_token(open_server.http_url) is None
        report = _attack(open_server)
        with nbinfer.Client(open_server.http_url) as client:
            assert client.config.auth is None
            _add_sub_ok(client)
    assert report["infer"]["status"] == 200
    assert report["infer"]["body"]["outputs"][0]["data"][:2] == [3.0, 3.0]
    assert report["grpc"] == {"ok": [3.0, 3.0]}
