"""Shared memory that proves ownership, and caps on regions (issue 25, items 1, 2 and 5).

1. *Confused deputy.* The server opens a key with its own rights: another local user, refused
   when it opens a victim's 0600 object itself, once read it through ``add_sub`` and overwrote
   it by registering the victim's key. Now the object must belong to the caller's uid (``fstat``
   of the descriptor the server opened), and a caller whose uid is unknown is refused unless the
   operator allowed it (``--allow-remote-shm``).
2. *The Session's pool raced.* Its objects' names sit in ``/dev/shm`` until the server has
   opened them; another user scanning the directory must neither open one nor get the server to.
5. *Descriptor exhaustion.* One connection registering the same 4 KiB object 1,000 times at
   ``ulimit -n 1024`` left every new client failing and loads failing; now regions are capped per
   caller and in all (429 / RESOURCE_EXHAUSTED naming the limit and its flag), the caller's
   status lists them and unregistering frees their descriptors.

The other user is a real second process: a child that imports its clients as root, then drops
to an unused uid (``tests.children.OTHER_UID``) before it connects (as in ``test_shm_owner.py``).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

import nbinfer
from nbinfer.errors import InvalidInputError, LimitExceededError
from nbinfer.server.launcher import LocalServer
from nbinfer.server.peers import IN_PROCESS, REMOTE
from nbinfer.server.shm import SharedMemoryManager
from tests.children import OTHER_UID, python_json
from tests.server.repo_calls import ONNX_CONFIG, swapped_add_sub_onnx

SIZE = 64  # one [1, 16] FP32 tensor
SHM = Path("/dev/shm")

pytestmark = pytest.mark.skipif(
    not SHM.is_dir() or not Path("/proc/net/tcp").exists(),
    reason="needs POSIX shared memory and /proc (Linux)",
)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A demo server without a token: these tests are about who a caller is, not credentials.

    Without its memfd socket: this process's pools then use POSIX objects in ``/dev/shm``, the
    path these attacks aim at (test_shm_memfd.py attacks the memfd path).
    """
    with LocalServer(demo=True, device="cpu", auth_token=None, shm_socket=False) as srv:
        yield srv


@pytest.fixture
def regions() -> Iterator[Any]:
    """tritonclient shm regions of this (root) process, mode 0600; destroyed after the test."""
    made: list[Any] = []

    def make(byte_size: int) -> tuple[Any, str]:
        name = uuid.uuid4().hex[:12]
        key = f"/nbinfer_attack_{name}"
        handle = shm.create_shared_memory_region(name, key, byte_size)
        made.append(handle)
        os.chmod(SHM / key[1:], 0o600)
        return handle, key

    yield make
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def _http(server: LocalServer) -> Any:
    return th.InferenceServerClient(server.http_url.removeprefix("http://"))


def _run_as_other_user(script: str, args: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    """Run ``script`` (imports as root, then it drops to ``OTHER_UID``); its last stdout line."""
    report = python_json(
        ["-c", _PRELUDE + textwrap.dedent(script), json.dumps(args)], timeout=timeout
    )
    assert report["uid"] == OTHER_UID, report
    return report


#: Common to every other-user child: its clients, imported as root, and how to become nobody.
_PRELUDE = r"""
import json, mmap, os, sys, time
import _posixshmem
import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

args = json.loads(sys.argv[1])
SIZE = 64


def clients():
    # a channel of its own subchannels: grpc's global pool could otherwise hand this user
    # the root warm-up's connection (a socket root owns) to the same target
    local = [("grpc.use_local_subchannel_pool", 1)]
    return [
        ("http", th, th.InferenceServerClient(args["http"])),
        ("grpc", tg, tg.InferenceServerClient(args["grpc"], channel_args=local)),
    ]


def attempt(call):
    try:
        return {"ok": True, "value": call()}
    except InferenceServerException as exc:
        return {"error": str(exc), "status": str(exc.status())}


def add_sub(c, mod, in_region=None, out_region=None):
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    if in_region:
        inputs[0].set_shared_memory(in_region, SIZE, offset=0)
        inputs[1].set_shared_memory(in_region, SIZE, offset=SIZE)
    else:
        inputs[0].set_data_from_numpy(np.full((1, 16), 5, np.float32))
        inputs[1].set_data_from_numpy(np.full((1, 16), 5, np.float32))
    outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
    if out_region:
        outputs[0].set_shared_memory(out_region, SIZE, offset=0)
        outputs[1].set_shared_memory(out_region, SIZE, offset=SIZE)
    result = c.infer("add_sub", inputs, outputs=outputs)
    if out_region:
        return "written"
    return [result.as_numpy("OUTPUT0").tolist(), result.as_numpy("OUTPUT1").tolist()]


def own_object(key, size):
    # a 0600 object of this user, mapped (tritonclient's helper needs a resource tracker)
    fd = _posixshmem.shm_open(key, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def count(status):
    return len(status) if isinstance(status, list) else len(status.regions)


def become_nobody():
    for _, _, c in clients():  # every lazy import now, as root; these connections close
        c.get_server_metadata()
        c.close()
    os.setgroups([])
    os.setgid(args["uid"])
    os.setuid(args["uid"])
"""


# -- 1. the confused deputy ---------------------------------------------------------------------

_DEPUTY = r"""
become_nobody()
report = {"uid": os.getuid()}
try:
    os.close(os.open("/dev/shm" + args["key"], os.O_RDONLY))
    report["direct"] = "opened"
except PermissionError:
    report["direct"] = "EACCES"
for proto, mod, c in clients():
    r = report[proto] = {}
    key = args["key"]
    r["register"] = attempt(lambda: c.register_system_shared_memory("stolen", key, 2 * SIZE))
    # the attack goes on as it did before: read the victim's tensors through add_sub (its two
    # outputs give both inputs back), then overwrite the victim's object
    r["read"] = attempt(lambda: add_sub(c, mod, in_region="stolen"))
    r["write"] = attempt(lambda: add_sub(c, mod, out_region="stolen"))
    r["status"] = attempt(lambda: count(c.get_system_shared_memory_status()))
    attempt(lambda: c.unregister_system_shared_memory("stolen"))
    c.close()
print(json.dumps(report))
"""


@as_root
def test_another_user_cannot_read_or_overwrite_a_victims_object_through_the_server(
    server: LocalServer, regions: Any
) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16) + 1000
    b = np.arange(16, dtype=np.float32).reshape(1, 16) + 2000
    handle, key = regions(2 * SIZE)
    shm.set_shared_memory_region(handle, [a, b])
    before = (SHM / key[1:]).read_bytes()
    args = {"uid": OTHER_UID, "http": server.http_url.removeprefix("http://")}
    report = _run_as_other_user(_DEPUTY, {**args, "grpc": server.grpc_address, "key": key})
    assert report["direct"] == "EACCES", report  # the object is the victim's alone
    for proto in ("http", "grpc"):
        r = report[proto]
        refused = r["register"]
        assert refused["status"] in ("400", "StatusCode.INVALID_ARGUMENT"), report
        assert "belongs to another user" in refused["error"], report
        assert f"uid {OTHER_UID}" in refused["error"], report
        assert "error" in r["read"] and "error" in r["write"], report
        assert r["status"] == {"ok": True, "value": 0}, report
    # nothing was read (the secret never reached the other user), nothing was written
    assert "1000.0" not in json.dumps(report) and "2000.0" not in json.dumps(report)
    assert (SHM / key[1:]).read_bytes() == before
    # the victim itself still registers and uses its object
    owner = _http(server)
    try:
        owner.register_system_shared_memory("mine", key, 2 * SIZE)
        inputs = [th.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_shared_memory("mine", SIZE, offset=0)
        inputs[1].set_shared_memory("mine", SIZE, offset=SIZE)
        out = owner.infer("add_sub", inputs).as_numpy("OUTPUT0")
        np.testing.assert_array_equal(out, a + b)
    finally:
        owner.unregister_system_shared_memory()
        owner.close()


_OWN_OBJECT = r"""
become_nobody()
report = {"uid": os.getuid()}
a = np.arange(16, dtype=np.float32).reshape(1, 16)
for proto, mod, c in clients():
    key = "/nbinfer_nobody_%s_%d" % (proto, os.getpid())
    mm = own_object(key, 4 * SIZE)
    try:
        whole = np.ndarray((4, 16), np.float32, mm)
        whole[0], whole[1] = a, a * 3
        c.register_system_shared_memory("own", key, 4 * SIZE)
        report[proto] = add_sub(c, mod, in_region="own")
        inputs = [mod.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_shared_memory("own", SIZE, offset=0)
        inputs[1].set_shared_memory("own", SIZE, offset=SIZE)
        out = mod.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("own", SIZE, offset=2 * SIZE)
        c.infer("add_sub", inputs, outputs=[out])
        report[proto + "_written"] = whole[2].tolist()
        c.unregister_system_shared_memory("own")
        del whole
    finally:
        mm.close()
        _posixshmem.shm_unlink(key)
        c.close()
print(json.dumps(report))
"""


@as_root
def test_another_user_registers_and_uses_objects_it_owns(server: LocalServer) -> None:
    args = {"uid": OTHER_UID, "http": server.http_url.removeprefix("http://")}
    report = _run_as_other_user(_OWN_OBJECT, {**args, "grpc": server.grpc_address})
    a = np.arange(16, dtype=np.float32)
    for proto in ("http", "grpc"):
        np.testing.assert_array_equal(report[proto][0][0], a * 4)
        np.testing.assert_array_equal(report[proto][1][0], a - a * 3)
        np.testing.assert_array_equal(report[proto + "_written"], a * 4)


def test_the_owner_check_reads_the_opened_descriptor(regions: Any) -> None:
    """In-process: the object's uid must be the caller's; an unknown caller is refused."""
    _, key = regions(2 * SIZE)
    manager = SharedMemoryManager()
    try:
        manager.register("mine", key, byte_size=2 * SIZE, owner=IN_PROCESS)  # the server's uid
        manager.register("same", key, byte_size=2 * SIZE, owner=f"uid:{os.geteuid()}")
        with pytest.raises(InvalidInputError, match=r"belongs to another user.*uid 4242"):
            manager.register("theirs", key, byte_size=2 * SIZE, owner="uid:4242")
        with pytest.raises(InvalidInputError, match="--allow-remote-shm"):
            manager.register("unknown", key, byte_size=2 * SIZE, owner=REMOTE)
        assert [r["name"] for r in manager.status(owner="uid:4242")] == []
        assert manager.status(owner=REMOTE) == []
    finally:
        manager.close()
    trusting = SharedMemoryManager(allow_remote=True)
    try:
        trusting.register("remote", key, byte_size=2 * SIZE, owner=REMOTE)
        assert [r["name"] for r in trusting.status(owner=REMOTE)] == ["remote"]
    finally:
        trusting.close()


def _count(status: Any) -> int:
    """Regions in a tritonclient status answer (HTTP: a list; gRPC: a message)."""
    return len(status) if isinstance(status, list) else len(status.regions)


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback (a peer from it is not a local uid)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # no packet is sent: only the route is chosen
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.mark.skipif(_non_loopback_address() is None, reason="no non-loopback address here")
@pytest.mark.parametrize("allow", [False, True], ids=["default", "allow-remote-shm"])
def test_a_caller_of_unknown_uid_is_refused_unless_the_operator_allows_it(
    allow: bool, regions: Any
) -> None:
    address = _non_loopback_address()
    token = uuid.uuid4().hex
    handle, key = regions(2 * SIZE)
    a = np.ones((1, 16), np.float32)
    shm.set_shared_memory_region(handle, [a, a])
    headers = {"authorization": f"Bearer {token}"}
    with LocalServer(
        host=str(address), demo=True, device="cpu", auth_token=token, allow_remote_shm=allow
    ) as srv:
        http = th.InferenceServerClient(srv.http_url.removeprefix("http://"))
        grpc = tg.InferenceServerClient(srv.grpc_address)
        try:
            for client in (http, grpc):
                if not allow:
                    with pytest.raises(InferenceServerException, match="--allow-remote-shm") as e:
                        client.register_system_shared_memory("r", key, 2 * SIZE, headers=headers)
                    assert str(e.value.status()) in ("400", "StatusCode.INVALID_ARGUMENT")
                    assert _count(client.get_system_shared_memory_status(headers=headers)) == 0
                    continue
                client.register_system_shared_memory("r", key, 2 * SIZE, headers=headers)
                assert _count(client.get_system_shared_memory_status(headers=headers)) == 1
                client.unregister_system_shared_memory("r", headers=headers)
        finally:
            http.close()
            grpc.close()


# -- 2. the Session's pool, raced ---------------------------------------------------------------

_SCANNER = r"""
import ctypes, http.client, select, struct
become_nobody()
report = {"uid": os.getuid(), "seen": [], "opened": [], "registered": [], "refusals": []}
host, port = args["http"].rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port))
conn.connect()
# told by the kernel the moment a name appears (inotify), so the race is run at full speed
libc = ctypes.CDLL(None, use_errno=True)
watch = libc.inotify_init1(0)
assert watch >= 0 and libc.inotify_add_watch(watch, b"/dev/shm", 0x100) >= 0  # IN_CREATE
print("watching", flush=True)
deadline = time.monotonic() + args["seconds"]
while time.monotonic() < deadline and len(report["seen"]) < args["want"]:
    if not select.select([watch], [], [], 0.2)[0]:
        continue
    data = os.read(watch, 65536)
    names, at = [], 0
    while at < len(data):
        _, _, _, size = struct.unpack_from("iIII", data, at)
        names.append(data[at + 16 : at + 16 + size].rstrip(b"\0").decode())
        at += 16 + size
    for name in names:
        if not name.startswith("nbinfer_shm_"):
            continue
        report["seen"].append(name)
        body = json.dumps({"key": "/" + name, "offset": 0, "byte_size": 64})
        region = "x%d" % len(report["seen"])
        conn.request("POST", "/v2/systemsharedmemory/region/%s/register" % region, body)
        reply = conn.getresponse()
        text = reply.read().decode()
        if reply.status == 200:
            report["registered"].append(name)
        else:
            report["refusals"].append(text)
        try:
            os.close(os.open("/dev/shm/" + name, os.O_RDONLY))
            report["opened"].append(name)
        except (FileNotFoundError, PermissionError):
            pass  # 0600, or unlinked already (the server holds it)
print(json.dumps(report))
"""


@as_root
def test_another_user_scanning_dev_shm_cannot_open_or_register_a_pools_objects(
    server: LocalServer,
) -> None:
    args = {
        "uid": OTHER_UID,
        "http": server.http_url.removeprefix("http://"),
        "grpc": server.grpc_address,
    }
    args |= {"seconds": 60, "want": 40}
    child = subprocess.Popen(
        [sys.executable, "-c", _PRELUDE + _SCANNER, json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 16)).astype(np.float32)
    rounds = 0
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "watching", child.stderr
        # fresh clients keep creating fresh pool objects while the other user watches
        while child.poll() is None:
            with nbinfer.Client(server.http_url, shared_memory=True) as client:
                out = client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
                np.testing.assert_array_equal(out["OUTPUT0"], a + a)
            rounds += 1
        stdout, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, stderr
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["uid"] == OTHER_UID
    assert report["seen"], f"the scanner saw no pool object in {rounds} rounds"
    assert report["opened"] == [], report  # 0600: EACCES (or already unlinked)
    assert report["registered"] == [], report  # the server refuses to be the deputy
    for refusal in report["refusals"]:  # another user's object, or already unlinked
        assert "belongs to another user" in refusal or "no such shared memory" in refusal, refusal


def test_pool_object_names_are_random_per_region(server: LocalServer) -> None:
    """Seeing one pool name tells nothing of the next one (no counter to predict)."""
    names: set[str] = set()
    sizes = [1 << 16, 1 << 17, 1 << 18]
    with nbinfer.Client(server.http_url, shared_memory=True) as client:
        for n in sizes:
            a = np.zeros((n // 64, 16), np.float32)
            client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
        names = {r["name"] for r in client.get_system_shared_memory_status()}
    mine = sorted(n for n in names if n.startswith(f"nbinfer_shm_{os.getpid()}_"))
    assert len(mine) >= len(sizes)
    tails = [n.rsplit("_", 1)[-1] for n in mine]
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in tails), mine
    assert len({t[:8] for t in tails}) == len(tails), mine  # no shared prefix, no counter


# -- 5. caps on regions -------------------------------------------------------------------------

_CAPPED = r"""
become_nobody()
report = {"uid": os.getuid(), "answers": []}
key = "/nbinfer_nobody_cap_%d" % os.getpid()
mm = own_object(key, 4096)
try:
    _, _, c = clients()[0]
    for i in range(3):
        name = "n%d" % i
        report["answers"].append(attempt(lambda: c.register_system_shared_memory(name, key, 4096)))
    c.unregister_system_shared_memory()
    c.close()
finally:
    mm.close()
    _posixshmem.shm_unlink(key)
print(json.dumps(report))
"""


@as_root
def test_regions_are_capped_per_caller_and_in_all_with_429_naming_the_flag(
    regions: Any,
) -> None:
    limits = {"max_shm_regions": 6, "max_shm_regions_per_caller": 4}
    _, key = regions(4096)
    with LocalServer(demo=True, device="cpu", limits=limits, auth_token=None) as srv:
        http, grpc = _http(srv), tg.InferenceServerClient(srv.grpc_address)
        try:
            for i in range(4):
                (http if i % 2 else grpc).register_system_shared_memory(f"r{i}", key, 4096)
            with pytest.raises(InferenceServerException, match="--max-shm-regions-per-caller") as e:
                http.register_system_shared_memory("r4", key, 4096)
            assert str(e.value.status()) == "429"
            with pytest.raises(InferenceServerException, match="--max-shm-regions-per-caller") as e:
                grpc.register_system_shared_memory("r4", key, 4096)
            assert str(e.value.status()) == "StatusCode.RESOURCE_EXHAUSTED"
            # nbinfer's clients raise the typed error on both transports
            for url in (srv.http_url, srv.grpc_url):
                with nbinfer.Client(url, shared_memory=False) as client:
                    with pytest.raises(LimitExceededError) as err:
                        client.register_system_shared_memory("r4", key, 4096)
                    assert err.value.status == 429
            # the caller sees what it holds, from either transport
            assert len(http.get_system_shared_memory_status()) == 4
            # another user has its own share, within the server's total of 6
            args = {"uid": OTHER_UID, "http": srv.http_url.removeprefix("http://")}
            report = _run_as_other_user(_CAPPED, {**args, "grpc": srv.grpc_address})
            first, second, third = report["answers"]
            assert first.get("ok") and second.get("ok"), report
            assert third["status"] == "429" and "--max-shm-regions)" in third["error"], report
            # unregistering frees the caller's share
            http.unregister_system_shared_memory("r0")
            http.register_system_shared_memory("r4", key, 4096)
        finally:
            http.unregister_system_shared_memory()
            http.close()
            grpc.close()


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


MODEL = """
from nbinfer.server import Model


class Add(Model):
    inputs = [("A", "INT32", [-1]), ("B", "INT32", [-1])]
    outputs = [("SUM", "INT32", [-1])]

    def predict(self, inputs, context):
        return inputs["A"] + inputs["B"]
"""


def test_registering_one_object_a_thousand_times_at_ulimit_1024_exhausts_nothing(
    tmp_path: Path, regions: Any
) -> None:
    (tmp_path / "add" / "1").mkdir(parents=True)
    (tmp_path / "add" / "1" / "model.py").write_text(MODEL)
    _, key = regions(4096)
    with LocalServer(model_repository=tmp_path, demo=True, device="cpu", auth_token=None) as srv:
        assert srv.pid is not None
        resource.prlimit(srv.pid, resource.RLIMIT_NOFILE, (1024, 1024))
        attacker = _http(srv)
        before = _fds(srv.pid)
        answers: dict[int, int] = {}
        for i in range(1000):  # one connection, the same 4 KiB object
            try:
                attacker.register_system_shared_memory(f"r{i}", key, 4096)
                answers[200] = answers.get(200, 0) + 1
            except InferenceServerException as exc:
                answers[int(exc.status())] = answers.get(int(exc.status()), 0) + 1
                last = str(exc)
        assert answers == {200: 64, 429: 936}, answers
        assert "--max-shm-regions-per-caller" in last
        grpc_attacker = tg.InferenceServerClient(srv.grpc_address)
        with pytest.raises(InferenceServerException, match="per caller"):
            grpc_attacker.register_system_shared_memory("g", key, 4096)  # the same uid
        grpc_attacker.close()
        held = _fds(srv.pid)
        assert held - before <= 1 + 3, (before, held)  # one object: one descriptor for all 64
        # everybody else keeps working: fresh clients on both transports, and a load that
        # copies the model to a temporary directory
        a = np.arange(16, dtype=np.float32).reshape(1, 16)
        for _ in range(20):
            for url in (srv.http_url, srv.grpc_url):
                with nbinfer.Client(url) as client:
                    out = client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
                    np.testing.assert_array_equal(out["OUTPUT0"], a + a)
        with nbinfer.Client(srv.http_url) as client:  # a new model, uploaded: a temp copy
            onnx = swapped_add_sub_onnx()
            client.load_model("add_copy", config=ONNX_CONFIG, files={"1/model.onnx": onnx})
            out = client.infer("add_copy", {"INPUT0": a, "INPUT1": a})
            np.testing.assert_array_equal(out["OUTPUT1"], a + a)  # the swapped graph's sum
        # the attacker's own status lists what it holds; unregistering frees the descriptors
        assert len(attacker.get_system_shared_memory_status()) == 64
        attacker.unregister_system_shared_memory()
        assert attacker.get_system_shared_memory_status() == []
        keys = [regions(4096)[1] for _ in range(40)]  # now 40 objects: 40 descriptors
        for i, other in enumerate(keys):
            attacker.register_system_shared_memory(f"o{i}", other, 4096)
        assert len(attacker.get_system_shared_memory_status()) == 40
        holding = _fds(srv.pid)
        assert holding - before >= 40 - 3, (before, holding)
        attacker.unregister_system_shared_memory()
        deadline = time.monotonic() + 5
        while _fds(srv.pid) > holding - 38 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _fds(srv.pid) <= holding - 38, (before, held, holding, _fds(srv.pid))
        attacker.close()


def test_regions_of_one_object_share_one_descriptor_until_the_last_goes(regions: Any) -> None:
    handle, key = regions(2 * SIZE)
    shm.set_shared_memory_region(handle, [np.full((1, 16), 3, np.float32)])
    manager = SharedMemoryManager()
    fds = len(os.listdir("/proc/self/fd"))
    try:
        for name in ("a", "b", "c"):
            manager.register(name, key, byte_size=2 * SIZE, owner=IN_PROCESS)
        assert len(os.listdir("/proc/self/fd")) == fds + 1
        manager.unregister("a", owner=IN_PROCESS)
        manager.unregister("b", owner=IN_PROCESS)
        read = manager.read(
            "c", offset=0, byte_size=SIZE, datatype="FP32", shape=[16], tensor="X", what="X"
        )
        np.testing.assert_array_equal(read, np.full(16, 3, np.float32))
        manager.unregister(owner=IN_PROCESS)
        assert len(os.listdir("/proc/self/fd")) == fds
    finally:
        manager.close()


def test_concurrent_registrations_never_pass_the_cap(regions: Any) -> None:
    _, key = regions(4096)
    manager = SharedMemoryManager(max_regions=100, max_regions_per_caller=10)
    outcomes: list[str] = []

    def register(i: int) -> None:
        try:
            manager.register(f"r{i}", key, byte_size=4096, owner=IN_PROCESS)
            outcomes.append("ok")
        except LimitExceededError:
            outcomes.append("capped")

    threads = [threading.Thread(target=register, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert outcomes.count("ok") == 10 and outcomes.count("capped") == 30
        assert len(manager.status(owner=IN_PROCESS)) == 10
        manager.unregister(owner=IN_PROCESS)
        manager.register("again", key, byte_size=4096, owner=IN_PROCESS)
    finally:
        manager.close()


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_pool_at_the_servers_cap_sends_the_rest_in_the_request(scheme: str) -> None:
    """The cap never fails a client's infer: what gets no region travels over the network."""
    limits = {"max_shm_regions_per_caller": 1}
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((2, 16)).astype(np.float32) for _ in range(2))
    with LocalServer(demo=True, device="cpu", limits=limits, auth_token=None) as srv:
        url = srv.http_url if scheme == "http" else srv.grpc_url
        with nbinfer.Client(url, shared_memory=True) as client:
            for _ in range(3):
                out = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})
                np.testing.assert_array_equal(out["OUTPUT0"], a + b)
                np.testing.assert_array_equal(out["OUTPUT1"], a - b)
            assert len(client.get_system_shared_memory_status()) == 1  # still in use


def _netlink_works() -> bool:
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4).close()  # NETLINK_SOCK_DIAG
    except (OSError, AttributeError):
        return False
    return True


_EXHAUSTED = r"""
import json, os, resource, socket
from nbinfer.server.peers import PeerIdentities

peers = PeerIdentities()  # opens its netlink socket now, as the server does at start
listener = socket.create_server(("127.0.0.1", 0))
conn = socket.create_connection(listener.getsockname())
peer, here = conn.getsockname(), listener.getsockname()
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    report = {"errno": exc.errno}
report["found"] = peers.of_addresses(peer, here)
peers.close()  # without netlink a lookup needs /proc, which cannot be opened now
held.append(os.open("/dev/null", os.O_RDONLY))  # the socket's slot: none left again
report["without_netlink"] = PeerIdentities(max_age=0).of_addresses(peer, here)
print(json.dumps(report))
"""


def test_the_callers_identity_is_found_with_no_descriptor_left_and_never_guessed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXHAUSTED], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["errno"] == 24  # EMFILE: not one descriptor left
    if _netlink_works():  # the lookup runs on the socket opened beforehand
        assert report["found"] == f"uid:{os.getuid()}"
    # a lookup that cannot be made is an unknown caller (refused shared memory), never a uid
    assert report["without_netlink"] == REMOTE
