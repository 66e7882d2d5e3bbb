"""Every attack of issue 25 at once against one server, from a process of its own.

Run as ``python attackers.py HTTP_URL GRPC_ADDRESS SECONDS [ATTACK,...]``: one thread per
attack (all, or those named), each repeating its attack until the time is up; prints one JSON
line ``{attack: {"tries": n, "harm": [..]}}`` where ``harm`` lists every answer that did what
the server must refuse (empty when the defence held). Kept out of the test process so that the
attackers' own CPU work never holds the checking client's GIL.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import grpc
import httpx

from nbinfer.protocol.grpc import SERVICE_NAME, pb

MiB = 1 << 20


def _swapped_add_sub() -> bytes:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from tests.server.repo_calls import swapped_add_sub_onnx

    return swapped_add_sub_onnx()


def _gzip_bomb(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join([*(c.compress(block) for _ in range(size // MiB)), c.flush()])


class Attacks:
    """The attacks; each method makes one attempt and returns a harm description or None."""

    def __init__(self, http_url: str, grpc_address: str) -> None:
        self.url = http_url
        # One HTTP client per attacking thread: the attacks run at once, and a connection pool
        # shared by ten threads (some of whose requests the server cuts off mid-body) once
        # failed a read with EBADF in the attacker itself, not in the server.
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()
        self.channel = grpc.insecure_channel(grpc_address)
        self.swapped = base64.b64encode(_swapped_add_sub()).decode()
        self.bomb = _gzip_bomb(320 * MiB)  # past the 256 MiB body limit
        self.models = 0
        self.sequences = 0
        key = f"/nbinfer_victim_{secrets.token_hex(8)}"
        from multiprocessing import shared_memory

        self.victim = shared_memory.SharedMemory(create=True, size=4096)  # 0600, ours (root)
        self.victim.buf[:6] = b"secret"
        self.own_key = key
        self.own = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=4096)
        params = pb.ModelInferRequest(model_name="add_sub")
        for i in range(500_000):
            params.parameters[f"p{i}"].int64_param = i
        self.param_bomb = params.SerializeToString()

    @property
    def http(self) -> httpx.Client:
        """This thread's HTTP client."""
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(base_url=self.url, timeout=60)
            with self._clients_lock:
                self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self.channel.close()
        for region in (self.victim, self.own):
            region.close()
            region.unlink()

    def _post(self, path: str, body: Any, **headers: str) -> httpx.Response:
        return self.http.post(path, content=json.dumps(body).encode(), headers=headers)

    def replace_add_sub(self) -> str | None:
        body = {
            "parameters": {
                "file:1/model.onnx": self.swapped,
                "config": '{"platform": "onnxruntime_onnx", "max_batch_size": 0}',
            }
        }
        r = self._post("/v2/repository/models/add_sub/load", body)
        return None if r.status_code == 403 else f"load over add_sub: {r.status_code}"

    def unload_iris(self) -> str | None:
        r = self._post("/v2/repository/models/iris/unload", {})
        return None if r.status_code == 403 else f"unload iris: {r.status_code}"

    def web_page(self) -> str | None:
        body = {"parameters": {"file:1/model.onnx": self.swapped}}
        for headers in (
            {"Host": "evil.example", "Content-Type": "text/plain"},
            {"Origin": "http://evil.example", "Content-Type": "text/plain"},
            {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
        ):
            for path, payload in (
                ("/v2/repository/models/add_sub/load", body),
                ("/v2/repository/models/iris/unload", {}),
                ("/v2/logging", {"log_verbose_level": 1}),
            ):
                r = self._post(path, payload, **headers)
                if r.status_code != 403:
                    return f"{path} with {headers}: {r.status_code}"
        return None

    def other_uid_shm(self) -> str | None:
        # imports as root (the interpreter lives under /root), then becomes another user
        script = (
            "import os, sys, httpx\n"
            "client = httpx.Client(timeout=60)\n"
            "client.get(sys.argv[1] + '/v2/health/live')  # every lazy import, as root\n"
            "client.close()  # its socket is root's: the attack opens one as the other user\n"
            "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
            "client = httpx.Client(timeout=60)\n"
            "r = client.post(sys.argv[1] + '/v2/systemsharedmemory/region/stolen/register',"
            " json={'key': sys.argv[2], 'offset': 0, 'byte_size': 64})\n"
            "print(r.status_code)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, self.url, "/" + self.victim.name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        status = done.stdout.strip()
        if status == "400":
            return None
        return f"another uid registered the victim: {status or done.stderr.strip()[-300:]}"

    def shm_flood(self) -> str | None:
        accepted = 0
        for i in range(200):
            r = self._post(
                f"/v2/systemsharedmemory/region/flood{i}/register",
                {"key": self.own_key, "offset": 0, "byte_size": 64},
            )
            accepted += r.status_code == 200
            if r.status_code not in (200, 429):
                return f"shm register: {r.status_code} {r.text}"
        self._post("/v2/systemsharedmemory/unregister", {})
        return None if accepted <= 64 else f"{accepted} regions accepted past the cap"

    def gzip_bomb(self) -> str | None:
        r = self.http.post(
            "/v2/models/add_sub/infer",
            content=self.bomb,
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )
        return None if r.status_code == 413 else f"bomb: {r.status_code}"

    def parameter_bomb(self) -> str | None:
        call = self.channel.unary_unary(
            f"/{SERVICE_NAME}/ModelInfer",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            call(self.param_bomb, timeout=60)
        except grpc.RpcError as exc:
            return None if exc.code() == grpc.StatusCode.INVALID_ARGUMENT else str(exc.code())
        return "500k parameters accepted"

    def new_models(self) -> str | None:
        self.models += 1
        config = '{"platform": "onnxruntime_onnx", "max_batch_size": 0}'
        body = {"parameters": {"file:1/model.onnx": self.swapped, "config": config}}
        r = self._post(f"/v2/repository/models/junk_{self.models}/load", body)
        return None if r.status_code in (200, 429) else f"junk load: {r.status_code} {r.text}"

    def sequences_and_ids(self) -> str | None:
        for _ in range(50):
            self.sequences += 1
            r = self._post(
                "/v2/models/accumulate/infer",
                {
                    "parameters": {"sequence_id": self.sequences, "sequence_start": True},
                    "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1], "data": [1]}],
                },
            )
            if r.status_code not in (200, 503):
                return f"sequence start: {r.status_code} {r.text}"
        r = self._post(
            "/v2/models/accumulate/infer",
            {
                "parameters": {"sequence_id": "x" * (5 * MiB), "sequence_start": True},
                "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1], "data": [1]}],
            },
        )
        return None if r.status_code == 400 else f"5 MB sequence id: {r.status_code}"

    def v1_bad_values(self) -> str | None:
        for value in ("nan", "1.5", True, None, 1e39):
            r = self._post("/v1/models/iris:predict", {"instances": [[value, 3.5, 1.4, 0.2]]})
            if r.status_code != 400:
                return f"v1 accepted {value!r}: {r.status_code} {r.text}"
        return None


def main() -> None:
    http_url, grpc_address, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    attacks = Attacks(http_url, grpc_address)
    names = [
        "replace_add_sub",
        "unload_iris",
        "web_page",
        "other_uid_shm",
        "shm_flood",
        "gzip_bomb",
        "parameter_bomb",
        "new_models",
        "sequences_and_ids",
        "v1_bad_values",
    ]
    if len(sys.argv) > 4:  # a subset, to find which attack costs what
        names = [n for n in names if n in sys.argv[4].split(",")]
    report: dict[str, dict[str, Any]] = {n: {"tries": 0, "harm": []} for n in names}
    print("ATTACKING", flush=True)
    deadline = time.monotonic() + seconds

    def loop(name: str, attack: Callable[[], str | None]) -> None:
        while time.monotonic() < deadline:
            try:
                harm = attack()
            except Exception as exc:  # an attack that breaks is reported, never hidden
                harm = f"attack raised {type(exc).__name__}: {exc}"
            report[name]["tries"] += 1
            if harm:
                report[name]["harm"].append(harm)

    threads = [threading.Thread(target=loop, args=(n, getattr(attacks, n))) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    attacks.close()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
