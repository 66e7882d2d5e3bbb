"""Shared-memory regions belong to the local user who registered them (issue 11, item 1).

A region is usable from any connection of the user that registered it (the client's pool
registers on one connection and infers on another), and from no other user's: a request,
status call or unregister naming it from another uid answers exactly as for an unknown name.
The other user is a real second process: a child that imports its clients as root, then
``setuid``-s to an unused uid (``tests.children.OTHER_UID``) before it connects over HTTP and
gRPC; the server finds each connection's uid in ``/proc/net/tcp``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
import tritonclient.utils.shared_memory as shm

from nbinfer.server.launcher import LocalServer
from nbinfer.server.peers import REMOTE, PeerIdentities, socket_uid
from tests.children import OTHER_UID, python_json
from tests.server import test_shm

SIZE = 64  # one [1, 16] FP32 tensor
#: POSIX regions destroyed after use (test_shm.py's fixture).
regions = test_shm.regions


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A demo server without a token: these tests are about who a caller is, not credentials."""
    with LocalServer(demo=True, device="cpu", auth_token=None) as srv:
        yield srv


pytestmark = pytest.mark.skipif(
    not Path("/dev/shm").is_dir() or not Path("/proc/net/tcp").exists(),
    reason="needs POSIX shared memory and /proc/net/tcp (Linux)",
)

#: The other user: imports as root, drops to an unused uid, then tries the owner's regions.
_OTHER_USER = r"""
import json, os, sys
import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

args = json.loads(sys.argv[1])
SIZE = 64


def attempt(call):
    try:
        out = call()
    except InferenceServerException as exc:
        return {"error": str(exc), "status": str(exc.status())}
    return {"ok": True, "value": out}


def infer(c, mod, in_region, out_region):
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    if in_region:
        inputs[0].set_shared_memory(in_region, SIZE, offset=0)
        inputs[1].set_shared_memory(in_region, SIZE, offset=SIZE)
    else:
        inputs[0].set_data_from_numpy(np.zeros((1, 16), np.float32))
        inputs[1].set_data_from_numpy(np.zeros((1, 16), np.float32))
    out = mod.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory(out_region, SIZE, offset=0)
    c.infer("add_sub", inputs, outputs=[out])


def names(status):
    return sorted(r["name"] for r in status) if isinstance(status, list) else sorted(status.regions)


def run(region_in, region_out, everything):
    report = {"uid": os.getuid()}
    for proto in ("http", "grpc"):
        if proto == "http":
            c, mod = th.InferenceServerClient(args["http"]), th
        else:
            # a channel of its own subchannels: grpc's global pool could otherwise hand the
            # other user the root warm-up's connection (a socket root owns) to the same target
            local = [("grpc.use_local_subchannel_pool", 1)]
            c, mod = tg.InferenceServerClient(args["grpc"], channel_args=local), tg
        report[proto] = calls(c, mod, region_in, region_out, everything)
        c.close()
    return report


def calls(c, mod, region_in, region_out, everything):
    r = {}
    r["read"] = attempt(lambda: infer(c, mod, region_in, region_out))
    r["read_unknown"] = attempt(lambda: infer(c, mod, "no_such_region", "no_such_region"))
    r["write"] = attempt(lambda: infer(c, mod, "", region_out))
    r["write_unknown"] = attempt(lambda: infer(c, mod, "", "no_such_region"))
    r["status"] = attempt(lambda: names(c.get_system_shared_memory_status()))
    r["status_one"] = attempt(lambda: names(c.get_system_shared_memory_status(region_in)))
    unknown = "no_such_region"
    r["status_unknown"] = attempt(lambda: names(c.get_system_shared_memory_status(unknown)))
    r["unregister"] = attempt(lambda: c.unregister_system_shared_memory(region_in))
    if everything:
        r["unregister_all"] = attempt(lambda: c.unregister_system_shared_memory())
    return r


# every lazy import happens now, as root (the interpreter's files may be unreadable to the
# other user); these connections are closed, the other user's are its own
run("warm_up_in", "warm_up_out", everything=False)
os.setgroups([])
os.setgid(args["uid"])
os.setuid(args["uid"])
print(json.dumps(run(args["in"], args["out"], everything=True)))
"""


def _shm_request(mod: Any, in_region: str, out_region: str) -> tuple[list[Any], list[Any]]:
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    inputs[0].set_shared_memory(in_region, SIZE, offset=0)
    inputs[1].set_shared_memory(in_region, SIZE, offset=SIZE)
    outputs = [mod.InferRequestedOutput("OUTPUT0")]
    outputs[0].set_shared_memory(out_region, SIZE, offset=0)
    return inputs, outputs


def _names(status: Any) -> set[str]:
    if isinstance(status, list):
        return {r["name"] for r in status}
    return set(status.regions)


def test_a_region_is_usable_from_every_connection_of_the_same_user(
    server: LocalServer, regions: Any
) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 3, np.float32)
    in_handle, in_key = regions("in", 2 * SIZE)
    out_handle, out_key = regions("out", 2 * SIZE)
    shm.set_shared_memory_region(in_handle, [a, b])
    registrar = th.InferenceServerClient(server.http_url.removeprefix("http://"))
    by_grpc = tg.InferenceServerClient(server.grpc_address)
    try:
        registrar.register_system_shared_memory("same_in", in_key, 2 * SIZE)
        by_grpc.register_system_shared_memory("same_out", out_key, 2 * SIZE)
        # other connections of the same user: a fresh HTTP client and the gRPC one
        for client, mod in (
            (th.InferenceServerClient(server.http_url.removeprefix("http://")), th),
            (by_grpc, tg),
        ):
            shm.set_shared_memory_region(out_handle, [np.zeros((1, 16), np.float32)])
            inputs, outputs = _shm_request(mod, "same_in", "same_out")
            client.infer("add_sub", inputs, outputs=outputs)
            np.testing.assert_array_equal(
                shm.get_contents_as_numpy(out_handle, np.float32, [1, 16]), a + b
            )
            assert {"same_in", "same_out"} <= _names(client.get_system_shared_memory_status())
    finally:
        registrar.unregister_system_shared_memory()
        registrar.close()
        by_grpc.close()


def _run_as_other_user(server: LocalServer, in_region: str, out_region: str) -> dict[str, Any]:
    args = {
        "uid": OTHER_UID,
        "http": server.http_url.removeprefix("http://"),
        "grpc": server.grpc_address,
        "in": in_region,
        "out": out_region,
    }
    report = python_json(["-c", _OTHER_USER, json.dumps(args)])
    assert report["uid"] == OTHER_UID
    return report


def _same_answer(real: dict[str, Any], unknown: dict[str, Any], name: str) -> None:
    """The refusal for another user's region is the one for a name nobody registered."""
    assert "error" in real, (real, unknown)
    assert real["status"] == unknown["status"], (real, unknown)
    assert real["status"] in ("400", "StatusCode.INVALID_ARGUMENT", "StatusCode.NOT_FOUND")
    assert real["error"].replace(name, "no_such_region") == unknown["error"], (real, unknown)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")
def test_another_user_cannot_use_see_or_unregister_a_region(
    server: LocalServer, regions: Any
) -> None:
    a = np.ones((1, 16), np.float32)
    sentinel = np.full((1, 16), 7, np.float32)
    in_handle, in_key = regions("in", 2 * SIZE)
    out_handle, out_key = regions("out", 2 * SIZE)
    shm.set_shared_memory_region(in_handle, [a, a])
    shm.set_shared_memory_region(out_handle, [sentinel])
    owner = th.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        owner.register_system_shared_memory("mine_in", in_key, 2 * SIZE)
        owner.register_system_shared_memory("mine_out", out_key, 2 * SIZE)
        report = _run_as_other_user(server, "mine_in", "mine_out")
        for proto in ("http", "grpc"):
            r = report[proto]
            _same_answer(r["read"], r["read_unknown"], "mine_in")
            _same_answer(r["write"], r["write_unknown"], "mine_out")
            _same_answer(r["status_one"], r["status_unknown"], "mine_in")
            assert r["status"] == {"ok": True, "value": []}, report
            # unregistering a name that is not yours is a no-op, as for an unknown name
            assert r["unregister"].get("ok") and r["unregister_all"].get("ok"), report
        # the owner's regions are intact and still work
        mine = _names(owner.get_system_shared_memory_status())
        assert {"mine_in", "mine_out"} <= mine, (mine, report)
        np.testing.assert_array_equal(
            shm.get_contents_as_numpy(out_handle, np.float32, [1, 16]), sentinel
        )
        inputs, outputs = _shm_request(th, "mine_in", "mine_out")
        owner.infer("add_sub", inputs, outputs=outputs)
        np.testing.assert_array_equal(
            shm.get_contents_as_numpy(out_handle, np.float32, [1, 16]), a + a
        )
    finally:
        owner.unregister_system_shared_memory()
        owner.close()


def test_a_loopback_connection_is_owned_by_its_process_uid() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        here = listener.getsockname()
        with socket.create_connection(here) as conn:
            peer = conn.getsockname()
            assert socket_uid(peer, here) == os.getuid()
            assert socket_uid(peer) == os.getuid()  # gRPC: the peer only
            peers = PeerIdentities()
            assert peers.of_addresses(peer, here) == f"uid:{os.getuid()}"
            assert peers.of_grpc_peer(f"ipv4:127.0.0.1:{peer[1]}") == f"uid:{os.getuid()}"
    # the connection is gone: nothing to find, the caller is remote
    assert PeerIdentities(max_age=0).of_addresses(peer, here) == REMOTE


def _netlink_missing() -> bool:
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4).close()  # NETLINK_SOCK_DIAG
    except (OSError, AttributeError):
        return True
    return False


#: Paths opened while a test records them (an audit hook cannot be removed: it stays idle).
_opened: list[str] | None = None


def _record_open(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None:
        _opened.append(str(args[0]))


@pytest.mark.skipif(_netlink_missing(), reason="no NETLINK_SOCK_DIAG here: /proc is the way")
def test_a_grpc_peer_with_the_servers_address_is_found_without_reading_proc() -> None:
    global _opened
    sys.addaudithook(_record_open)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        here = listener.getsockname()
        with socket.create_connection(here) as conn:
            peer = f"ipv4:127.0.0.1:{conn.getsockname()[1]}"
            peers = PeerIdentities()
            _opened = []
            try:
                assert peers.of_grpc_peer(peer, here) == f"uid:{os.getuid()}"
                assert peers.grpc_caller(lambda: peer, here)() == f"uid:{os.getuid()}"
                with_address = list(_opened)
                peers.of_grpc_peer(peer)  # without it: the server's address comes from /proc
                without = _opened[len(with_address) :]
            finally:
                _opened = None
    assert not [p for p in with_address if p.startswith("/proc")], with_address
    assert "/proc/net/tcp" in without  # the recorder sees /proc reads when they happen
    # a wrong server address is not the peer's connection: remote, still without /proc
    assert PeerIdentities().of_grpc_peer(peer, ("127.0.0.1", 1)) == REMOTE


def test_non_loopback_and_unknown_peers_are_remote() -> None:
    peers = PeerIdentities()
    assert peers.of_addresses(("10.1.2.3", 40000), ("10.1.2.4", 8000)) == REMOTE
    assert peers.of_addresses(None, None) == REMOTE
    assert peers.of_grpc_peer("ipv4:192.0.2.1:5000") == REMOTE
    assert peers.of_grpc_peer("unix:/tmp/socket") == REMOTE
    assert peers.of_grpc_peer("ipv6:%5B::1%5D:1") == REMOTE  # no such connection
