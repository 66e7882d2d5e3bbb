"""Every attack of issue 25 at once against one server, from a process of its own.

Run as ``python attackers.py HTTP_URL GRPC_ADDRESS TOKEN_URL TOKEN_GRPC SECONDS [ATTACK,...]``
(``TOKEN_*``: a second server of the same user, with its token, as ``Session()`` starts it):
one thread per attack (all, or those named), each repeating its attack until the time is up;
prints one JSON line ``{attack: {"tries": n, "harm": [..]}}`` where ``harm`` lists every answer
that did what the server must refuse (empty when the defence held). Kept out of the test process
so that the attackers' own CPU work never holds the checking client's GIL.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
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


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.children import OTHER_UID  # noqa: E402
from tests.server.repo_calls import SECRET, swapped_add_sub_onnx  # noqa: E402


def _gzip_bomb(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join([*(c.compress(block) for _ in range(size // MiB)), c.flush()])


class Attacks:
    """The attacks; each method makes one attempt and returns a harm description or None."""

    def __init__(self, http_url: str, grpc_address: str, token_url: str, token_grpc: str) -> None:
        self.url = http_url
        self.token_url, self.token_grpc = token_url, token_grpc
        # One HTTP client per attacking thread: the attacks run at once, and a connection pool
        # shared by ten threads (some of whose requests the server cuts off mid-body) once
        # failed a read with EBADF in the attacker itself, not in the server.
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()
        self.channel = grpc.insecure_channel(grpc_address)
        self.swapped = base64.b64encode(swapped_add_sub_onnx()).decode()
        self.bomb = _gzip_bomb(320 * MiB)  # past the body limits (JSON: 64 MiB, any: 256 MiB)
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
        iris = pb.ModelInferRequest(model_name="iris")
        flower = iris.inputs.add(name="input", datatype="FP32", shape=[1, 4])
        flower.contents.fp32_contents.extend([5.1, 3.5, 1.4, 0.2])
        self.iris_request = iris.SerializeToString()
        tiny = {f"file:f{i}.txt": "eA==" for i in range(30_000)}
        self.tiny_load = json.dumps({"parameters": tiny}).encode()
        huge = base64.b64encode(bytes(180 * MiB)).decode()  # 240 MB of base64
        self.huge_load = json.dumps({"parameters": {"file:1/model.onnx": huge}}).encode()
        self.big_body = b"x" * (200 * MiB)
        label = {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1, 16]}
        label["label_filename"] = "ext/secret.txt"
        config = {"platform": "onnxruntime_onnx", "max_batch_size": 0, "output": [label]}
        self.symlink_load = {"parameters": {"file:dummy.txt": "eAo=", "config": json.dumps(config)}}

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

    @staticmethod
    def _as_other_uid(attack: str, *args: str) -> str:
        """Run ``attack`` (Python code; ``sys.argv[1:]`` are ``args``) as another user (an unused
        uid, no groups) in a child; what it printed. Imports happen as root first (the
        interpreter lives under /root), and their sockets close before the uid drops."""
        script = (
            "import os, sys, grpc, httpx\n"
            "client = httpx.Client(timeout=60)\n"
            "client.get(sys.argv[1] + '/v2/health/live')  # every lazy import, as root\n"
            "client.close()  # its socket is root's: the attack opens one as the other user\n"
            f"os.setgroups([]); os.setgid({OTHER_UID}); os.setuid({OTHER_UID})\n"
        ) + attack
        done = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60
        )
        return done.stdout.strip() or done.stderr.strip()[-300:]

    def other_uid_shm(self) -> str | None:
        status = self._as_other_uid(
            "r = httpx.Client(timeout=60).post(sys.argv[1] + "
            "'/v2/systemsharedmemory/region/stolen/register',"
            " json={'key': sys.argv[2], 'offset': 0, 'byte_size': 64})\n"
            "print(r.status_code)\n",
            self.url,
            "/" + self.victim.name,
        )
        return None if status == "400" else f"another uid registered the victim: {status}"

    def other_uid_no_token(self) -> str | None:
        # item 2: another user found the port of a Session's server (in /proc/net/tcp) and calls
        # a model served from the notebook without the token, over HTTP and gRPC
        answer = self._as_other_uid(
            "body = {'inputs': [{'name': 'input', 'datatype': 'FP32', 'shape': [1, 4],"
            " 'data': [5.1, 3.5, 1.4, 0.2]}]}\n"
            "r = httpx.Client(timeout=60).post(sys.argv[1] + '/v2/models/iris/infer', json=body)\n"
            "with grpc.insecure_channel(sys.argv[2]) as channel:\n"
            "    call = channel.unary_unary(sys.argv[3])\n"
            "    try:\n"
            "        call(bytes.fromhex(sys.argv[4]), timeout=60)\n"
            "        code = 'OK'\n"
            "    except grpc.RpcError as exc:\n"
            "        code = exc.code().name\n"
            "print(r.status_code, code)\n",
            self.token_url,
            self.token_grpc,
            f"/{SERVICE_NAME}/ModelInfer",
            self.iris_request.hex(),
        )
        if answer == "401 UNAUTHENTICATED":
            return None
        return f"another uid without the token got: {answer}"

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
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                return None
            return f"{exc.code()}: {exc.details()}"
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

    def tiny_files(self) -> str | None:
        # item 6: one 1.5 MB load of 30,000 tiny files (it froze the server for 17 s)
        r = self.http.post(
            "/v2/repository/models/tiny/load",
            content=self.tiny_load,
            headers={"Content-Type": "application/json"},
        )
        if r.status_code == 413 and "--max-upload-files" in r.text:
            return None
        return f"30,000 files: {r.status_code} {r.text[:200]}"

    def _raw_post(self, path: str, body: bytes) -> int | str:
        """POST ``body`` in one ``sendall`` (httpx writes a big body 64 KiB at a time, ~70 MB/s);
        the status, or ``"closed"`` when the server answered and closed before reading it all."""
        host, port = self.url.split("//")[1].rsplit(":", 1)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            try:
                sock.sendall(head)
                sock.sendall(body)
            except OSError:
                pass  # refused early: the answer, if any, is already on its way
            try:
                status_line = sock.makefile("rb").readline()
            except OSError:
                return "closed"
        return int(status_line.split()[1]) if status_line else "closed"

    def big_upload(self) -> str | None:
        # item 6: a 240 MB upload (3.8 s of a frozen loop and 934 MB at its peak, before): past
        # what --max-upload-bytes of base64 and --max-json-bytes allow, refused unread
        status = self._raw_post("/v2/repository/models/huge/load", self.huge_load)
        return None if status in (413, "closed") else f"240 MB upload: {status}"

    def big_bodies(self) -> str | None:
        # item 8: four 200 MB bodies at once (1.44 GB at the peak, before: no in-flight bound);
        # JSON bodies past --max-json-bytes are refused unread (parsing one held the GIL)
        statuses: list[int | str] = []

        def post() -> None:
            statuses.append(self._raw_post("/v2/models/add_sub/infer", self.big_body))

        posts = [threading.Thread(target=post) for _ in range(4)]
        for t in posts:
            t.start()
        for t in posts:
            t.join()
        wrong = [s for s in statuses if s not in (413, "closed")]
        return f"four 200 MB bodies: {statuses}" if wrong else None

    def symlink_upload(self) -> str | None:
        # item 7: an overlay of the operator's model whose label file sits behind the operator's
        # link out of the repository, with one dummy file (the server copied through the link).
        # By default the overlay is a replacement, refused (403); with --allow-model-replace the
        # link rule refuses it (400, tests/server/test_upload_paths.py).
        r = self._post("/v2/repository/models/labeled/load", self.symlink_load)
        config = self.http.get("/v2/models/labeled/config").text
        if r.status_code in (400, 403) and SECRET not in r.text + config:
            return None
        return f"overlay through the link: {r.status_code} {r.text[:200]}"

    def v1_bad_values(self) -> str | None:
        for value in ("nan", "1.5", True, None, 1e39):
            r = self._post("/v1/models/iris:predict", {"instances": [[value, 3.5, 1.4, 0.2]]})
            if r.status_code != 400:
                return f"v1 accepted {value!r}: {r.status_code} {r.text}"
        return None


#: The attacks the test runs at once.
AT_ONCE = (
    "replace_add_sub",
    "unload_iris",
    "web_page",
    "other_uid_shm",
    "other_uid_no_token",
    "shm_flood",
    "gzip_bomb",
    "parameter_bomb",
    "new_models",
    "sequences_and_ids",
    "v1_bad_values",
    "tiny_files",
    "symlink_upload",
    "big_upload",
    "big_bodies",
)
#: The heavy attacks (hundreds of MB each): the seconds between the starts of their tries, as
#: reported (a 240 MB upload; four 200 MB bodies at once), not a flood of refused connections
#: (the connection cap's matter). None starts later than this before the end of the window.
HEAVY = {"big_upload": 0.5, "big_bodies": 0.5}


def main() -> None:
    http_url, grpc_address, token_url, token_grpc = sys.argv[1:5]
    seconds = float(sys.argv[5])
    attacks = Attacks(http_url, grpc_address, token_url, token_grpc)
    names = list(AT_ONCE)
    if len(sys.argv) > 6:  # a subset, to find which attack costs what
        names = [n for n in names if n in sys.argv[6].split(",")]
    report: dict[str, dict[str, Any]] = {n: {"tries": 0, "harm": []} for n in names}
    print("ATTACKING", flush=True)
    deadline = time.monotonic() + seconds

    def loop(name: str, attack: Callable[[], str | None]) -> None:
        pace = HEAVY.get(name, 0.0)
        end = deadline - pace
        while time.monotonic() < end or report[name]["tries"] == 0:
            started = time.monotonic()
            try:
                harm = attack()
            except Exception as exc:  # an attack that breaks is reported, never hidden
                harm = f"attack raised {type(exc).__name__}: {exc}"
            report[name]["tries"] += 1
            if harm:
                report[name]["harm"].append(harm)
            time.sleep(max(0.0, started + pace - time.monotonic()))

    threads = [threading.Thread(target=loop, args=(n, getattr(attacks, n))) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    attacks.close()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
