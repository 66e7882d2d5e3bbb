"""A raw client of the server's memfd socket (``nbinfer/server/fdpass.py``), and child modes.

Imported by the tests, and run as a child process (``python -m tests.server.memfd_peer ARGS``):

* ``{"mode": "killed", ...}``: registers two regions, prints ``sent``, then sends an infer to a
  slow model naming them, and waits to be killed;
* ``{"mode": "other_user", "uid": N, ...}``: imports everything as root, drops to ``uid``, tries
  the socket, and (if it gets in) registers a region and infers with it; prints a JSON report
  and keeps its connection (so its region) until its stdin closes.

Only the standard library and NumPy: the protocol is spelled out here on purpose, so that
the tests do not lean on the client pool they check.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import socket
import sys
import urllib.error
import urllib.request
from typing import Any

import numpy as np

#: What a child keeps alive until its parent lets it go (its socket holds its regions).
_KEEP: list[Any] = []
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def memfd(size: int, *, seals: int = SEALS) -> int:
    """A memfd of ``size`` bytes carrying ``seals``."""
    fd = os.memfd_create("memfd_peer", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(30.0)
    sock.connect(path)
    return sock


def ask(sock: socket.socket, body: Any, fds: list[int] | None = None) -> dict[str, Any]:
    """Send one request (``body`` as JSON unless bytes) with ``fds``; the server's reply."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    socket.send_fds(sock, [payload], fds or [])
    reply: dict[str, Any] = json.loads(sock.recv(65536))
    return reply


def infer_json(http: str, model: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    """A v2 JSON infer over HTTP (``http``: ``host:port``): the reply, or its error body."""
    body = json.dumps({"inputs": inputs, "outputs": outputs}).encode()
    request = urllib.request.Request(
        f"http://{http}/v2/models/{model}/infer",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer: dict[str, Any] = json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        answer = {"status": exc.code, **json.loads(exc.read() or b"{}")}
    return answer


def shm_tensor(name: str, region: str, shape: list[int], nbytes: int, offset: int = 0) -> Any:
    params = {
        "shared_memory_region": region,
        "shared_memory_byte_size": nbytes,
        "shared_memory_offset": offset,
    }
    return {"name": name, "datatype": "FP32", "shape": shape, "parameters": params}


def _killed(args: dict[str, Any]) -> None:
    sock = connect(args["socket"])
    n = args["elements"]
    fds = {name: memfd(4 * n) for name in ("k_in", "k_out")}
    maps = {name: mmap.mmap(fd, 4 * n) for name, fd in fds.items()}
    for name, fd in fds.items():
        assert ask(sock, {"op": "register", "name": name}, [fd]).get("ok"), name
    np.frombuffer(maps["k_in"], np.float32)[:] = 7.0
    print("sent", flush=True)
    out = shm_tensor("y", "k_out", [n], 4 * n)
    del out["datatype"], out["shape"]
    infer_json(args["http"], args["model"], [shm_tensor("x", "k_in", [n], 4 * n)], [out])


def _other_user(args: dict[str, Any]) -> dict[str, Any]:
    # every lazy import happens now, as root (the interpreter's files may be unreadable to the
    # other user)
    urllib.request.urlopen(f"http://{args['http']}/v2/health/ready", timeout=60).close()
    infer_json(args["http"], "no_such_model", [], [])
    os.setgroups([])
    os.setgid(args["uid"])
    os.setuid(args["uid"])
    report: dict[str, Any] = {"uid": os.getuid()}
    try:
        sock = connect(args["socket"])
    except OSError as exc:
        report["connect"] = exc.errno
        return report
    report["connect"] = 0
    _KEEP.append(sock)
    size = 2 * 64
    fd = memfd(size)
    mapping = mmap.mmap(fd, size)
    report["register"] = ask(sock, {"op": "register", "name": args["region"]}, [fd])
    a = np.arange(16, dtype=np.float32)
    np.frombuffer(mapping, np.float32, 16)[:] = a
    np.frombuffer(mapping, np.float32, 16, 64)[:] = 2 * a
    out = shm_tensor("OUTPUT0", args["region"], [1, 16], 64, 0)
    del out["datatype"], out["shape"]
    inputs = [
        shm_tensor("INPUT0", args["region"], [1, 16], 64, 0),
        shm_tensor("INPUT1", args["region"], [1, 16], 64, 64),
    ]
    reply = infer_json(args["http"], "add_sub", inputs, [out])
    report["infer"] = reply.get("error") or "ok"
    report["output"] = np.frombuffer(mapping, np.float32, 16).tolist()  # 3 * a
    return report


def main() -> None:
    args = json.loads(sys.argv[1])
    if args["mode"] == "killed":
        _killed(args)
    else:
        print(json.dumps(_other_user(args)), flush=True)
        sys.stdin.read()  # the parent checks while this connection (and its region) lives


if __name__ == "__main__":
    main()
