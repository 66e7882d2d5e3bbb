"""nbinfer's embedded server vs KServe's Python ModelServer, same model, same tritonclient load.

Both servers serve ``add_sub`` (FP32 [1, 16] INPUT0, INPUT1 -> OUTPUT0 = sum, OUTPUT1 = difference)
on 127.0.0.1; the same tritonclient loops (one client per thread) drive each over HTTP and gRPC at
concurrency 1 and 8. Prints req/s, p50 / p99 latency and nbinfer / KServe ratios measured in the
same run.

KServe runs from its own virtualenv (default /work/kserve-venv, created on first use with
``python -m venv`` + ``pip install kserve==0.21.*``); pass ``--no-kserve`` to measure nbinfer only.

``--floor`` adds a third gRPC server, the ceiling of any grpc.aio server: a grpc.aio process on
the same event loop as nbinfer's (uvloop) that answers every ModelInfer with the bytes nbinfer
answered once, doing no work at all. Its ratio to KServe is the best a Python grpc.aio server
can show against KServe under this load on this machine.

    python benchmarks/server.py --duration 10 [--floor]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

KSERVE_VENV = Path(os.environ.get("NBINFER_KSERVE_VENV", "/work/kserve-venv"))
KSERVE_SPEC = "kserve==0.21.*"

_KSERVE_SCRIPT = r"""
import sys

http_port, grpc_port = int(sys.argv[1]), int(sys.argv[2])
# kserve parses sys.argv at import time.
sys.argv = [sys.argv[0], f"--http_port={http_port}", f"--grpc_port={grpc_port}",
            "--enable_latency_logging=false", "--configure_logging=false",
            "--grpc_max_send_message_length=268435456",
            "--grpc_max_receive_message_length=268435456"]

# Keep benchmark traffic on loopback: kserve hard-codes 0.0.0.0 / [::].
import uvicorn

_Config = uvicorn.Config


class _LoopbackConfig(_Config):
    def __init__(self, app, **kw):
        kw["host"] = "127.0.0.1"
        kw["access_log"] = False
        super().__init__(app, **kw)


uvicorn.Config = _LoopbackConfig
from grpc.aio import _server as _grpc_server

_orig_add = _grpc_server.Server.add_insecure_port


def _add_insecure_port(self, address):
    return _orig_add(self, address.replace("[::]", "127.0.0.1"))


_grpc_server.Server.add_insecure_port = _add_insecure_port

import kserve
from kserve import InferOutput, InferResponse, Model, ModelServer


class AddSub(Model):
    def __init__(self):
        super().__init__("add_sub")
        self.ready = True

    async def predict(self, payload, headers=None, response_headers=None):
        a = payload.inputs[0].as_numpy()
        b = payload.inputs[1].as_numpy()
        out0 = InferOutput("OUTPUT0", list(a.shape), "FP32")
        out0.set_data_from_numpy(a + b)
        out1 = InferOutput("OUTPUT1", list(a.shape), "FP32")
        out1.set_data_from_numpy(a - b)
        return InferResponse(
            payload.id or "", self.name, [out0, out1], from_grpc=payload.from_grpc
        )


if __name__ == "__main__":
    ModelServer(http_port=http_port, grpc_port=grpc_port).start([AddSub()])
"""

# The nbinfer side: the same model as a model repository entry.
_NBINFER_MODEL = """
import numpy as np
from nbinfer.server.model import Model


class AddSub(Model):
    name = "add_sub"
    inputs = [("INPUT0", "FP32", [-1, -1]), ("INPUT1", "FP32", [-1, -1])]
    outputs = [("OUTPUT0", "FP32", [-1, -1]), ("OUTPUT1", "FP32", [-1, -1])]
    run_in_thread = False

    def predict(self, inputs, context):
        a, b = inputs["INPUT0"], inputs["INPUT1"]
        return {"OUTPUT0": a + b, "OUTPUT1": a - b}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> float:
    import urllib.request

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v2/models/add_sub/ready", timeout=1) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server at {url} not ready after {timeout} s")


def ensure_kserve_venv(log: Callable[[str], None]) -> Path | None:
    """Return the venv's python, creating the venv on first use; None if impossible."""
    py = KSERVE_VENV / "bin" / "python"
    if py.exists():
        check = subprocess.run([str(py), "-c", "import kserve"], capture_output=True)
        if check.returncode == 0:
            return py
    log(f"creating {KSERVE_VENV} and installing {KSERVE_SPEC} (one-off, a few minutes)...")
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(KSERVE_VENV)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", KSERVE_SPEC],
            check=True,
            timeout=1800,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        log(f"could not set up KServe: {exc}")
        return None
    return py


def inputs(kind: str, shape: list[int]) -> tuple[Any, Any]:
    a = np.random.default_rng(0).random(shape, dtype=np.float32)
    b = np.ones(shape, dtype=np.float32)
    if kind == "http":
        import tritonclient.http as th

        ins = [th.InferInput("INPUT0", shape, "FP32"), th.InferInput("INPUT1", shape, "FP32")]
        ins[0].set_data_from_numpy(a, binary_data=True)
        ins[1].set_data_from_numpy(b, binary_data=True)
        outs = [
            th.InferRequestedOutput("OUTPUT0", binary_data=True),
            th.InferRequestedOutput("OUTPUT1", binary_data=True),
        ]
    else:
        import tritonclient.grpc as tg

        ins = [tg.InferInput("INPUT0", shape, "FP32"), tg.InferInput("INPUT1", shape, "FP32")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(b)
        outs = [tg.InferRequestedOutput("OUTPUT0"), tg.InferRequestedOutput("OUTPUT1")]
    return ins, outs


def make_client(kind: str, http_url: str, grpc_url: str) -> Any:
    if kind == "http":
        import tritonclient.http as th

        return th.InferenceServerClient(
            http_url.removeprefix("http://"), connection_timeout=60, network_timeout=60
        )
    import tritonclient.grpc as tg

    return tg.InferenceServerClient(grpc_url)


def drive(
    kind: str, http_url: str, grpc_url: str, concurrency: int, duration: float, shape: list[int]
) -> dict[str, float]:
    """Run ``concurrency`` threads of back-to-back infers for ``duration`` s."""
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[BaseException] = []
    start = threading.Barrier(concurrency + 1)
    stop_at = [0.0]

    def worker(i: int) -> None:
        try:
            client = make_client(kind, http_url, grpc_url)
            ins, outs = inputs(kind, shape)
            for _ in range(20):  # warm-up
                client.infer("add_sub", ins, outputs=outs)
        except BaseException as exc:
            errors.append(exc)
            start.abort()
            return
        try:
            start.wait()
        except threading.BrokenBarrierError:
            return
        lat = latencies[i]
        pc = time.perf_counter
        try:
            while True:
                t = pc()
                if t >= stop_at[0]:
                    break
                client.infer("add_sub", ins, outputs=outs)
                lat.append(pc() - t)
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    try:
        stop_at[0] = time.perf_counter() + 1e9
        start.wait()
        t0 = time.perf_counter()
        stop_at[0] = t0 + duration
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{kind} load failed: {errors[0]!r}")
    elapsed = time.perf_counter() - t0
    all_lat = sorted(x for lat in latencies for x in lat)
    n = len(all_lat)
    return {
        "rps": n / elapsed,
        "p50_ms": 1000 * statistics.median(all_lat),
        "p99_ms": 1000 * all_lat[min(n - 1, int(0.99 * n))],
        "n": n,
    }


def start_nbinfer(tmp: Path) -> tuple[Any, str, str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nbinfer.server.launcher import LocalServer

    repo = tmp / "repo"
    (repo / "add_sub" / "1").mkdir(parents=True)
    (repo / "add_sub" / "1" / "model.py").write_text(_NBINFER_MODEL)
    # tritonclient drives it too: no token, as `nbinfer serve` (and the same headers for both)
    server = LocalServer(
        model_repository=repo, demo=False, device="cpu", log_level="warning", auth_token=None
    ).start()
    return server, server.http_url, server.grpc_address


_FLOOR_SCRIPT = r"""
import asyncio, sys
import grpc
import uvloop

port, answer = int(sys.argv[1]), open(sys.argv[2], "rb").read()


def model_infer(request, context):
    return answer


async def main():
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_insecure_port(f"127.0.0.1:{port}")
    handler = grpc.unary_unary_rpc_method_handler(model_infer)  # bytes in, bytes out
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("inference.GRPCInferenceService",
                                              {"ModelInfer": handler}),)
    )
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


uvloop.run(main())
"""


def start_floor(tmp: Path, nb_grpc: str, shape: list[int]) -> tuple[subprocess.Popen[str], str]:
    """Start the do-nothing grpc.aio server answering nbinfer's own ModelInfer reply."""
    import grpc
    import tritonclient.grpc as tg

    ins, _ = inputs("grpc", shape)
    request = tg.service_pb2.ModelInferRequest(model_name="add_sub")
    request.inputs.extend(i._get_tensor() for i in ins)
    request.raw_input_contents.extend(i._get_content() for i in ins)
    with grpc.insecure_channel(nb_grpc) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        answer = call(request.SerializeToString(), timeout=30)
    (tmp / "answer.bin").write_bytes(answer)
    (tmp / "floor.py").write_text(_FLOOR_SCRIPT)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(tmp / "floor.py"), str(port), str(tmp / "answer.bin")],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError("the grpc.aio floor server did not start")
    return proc, f"127.0.0.1:{port}"


def start_kserve(py: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], str, str, float]:
    script = tmp / "kserve_add_sub.py"
    script.write_text(_KSERVE_SCRIPT)
    hp, gp = free_port(), free_port()
    log = open(tmp / "kserve.log", "wb")  # noqa: SIM115
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(py), str(script), str(hp), str(gp)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp,
        start_new_session=True,
    )
    http_url = f"http://127.0.0.1:{hp}"
    try:
        wait_ready(http_url, proc)
    except RuntimeError:
        proc.kill()
        log.close()
        sys.stderr.write((tmp / "kserve.log").read_text()[-3000:])
        raise
    return proc, http_url, f"127.0.0.1:{gp}", time.perf_counter() - t0


def _add_kserve(
    tmp: Path,
    servers: list[tuple[str, str, str]],
    cleanups: list[Callable[[], None]],
    log: Callable[[str], None],
) -> str:
    """Start KServe and register it; return why it was skipped ("" when it runs)."""
    py = ensure_kserve_venv(log)
    if py is None:
        return f"could not create the KServe venv at {KSERVE_VENV}"
    try:
        proc, k_http, k_grpc, k_ready = start_kserve(py, tmp)
    except RuntimeError as exc:
        return f"KServe did not start: {exc}"
    log(f"kserve ready in {k_ready:.2f} s ({k_http}, {k_grpc})")
    servers.append(("kserve", k_http, k_grpc))

    def _stop_kserve() -> None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    cleanups.append(_stop_kserve)
    return ""


def _print_table(results: dict[tuple[str, str, int], dict[str, float]], args: Any) -> None:
    print(
        f"\nadd_sub FP32 {args.shape}, tritonclient load, {args.duration:.0f} s per cell, "
        f"median of {args.rounds} round(s)"
    )
    print(
        f"{'protocol':8s} {'conc':>4s} {'server':8s} {'req/s':>9s} {'p50 ms':>8s} "
        f"{'p99 ms':>8s} {'ratio':>6s}"
    )
    for proto in args.protocols:
        for conc in args.concurrency:
            base = results.get(("kserve", proto, conc))
            for name in ("nbinfer", "kserve", "floor"):
                r = results.get((name, proto, conc))
                if r is None:
                    continue
                ratio = f"{r['rps'] / base['rps']:.2f}x" if base else "-"
                print(
                    f"{proto:8s} {conc:4d} {name:8s} {r['rps']:9.0f} {r['p50_ms']:8.2f} "
                    f"{r['p99_ms']:8.2f} {ratio:>6s}"
                )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--protocols", nargs="+", default=["http", "grpc"], choices=["http", "grpc"])
    ap.add_argument("--shape", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds; median kept")
    ap.add_argument("--no-kserve", action="store_true", help="measure nbinfer only")
    ap.add_argument("--json", default=None, help="write the cells as JSON here")
    ap.add_argument(
        "--floor", action="store_true", help="also measure a do-nothing grpc.aio server (gRPC)"
    )
    args = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: dict[tuple[str, str, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="nbinfer-bench-") as tmpdir:
        tmp = Path(tmpdir)
        servers: list[tuple[str, str, str]] = []
        cleanups: list[Callable[[], None]] = []
        t0 = time.perf_counter()
        nb, nb_http, nb_grpc = start_nbinfer(tmp)
        log(f"nbinfer ready in {time.perf_counter() - t0:.2f} s ({nb_http}, {nb_grpc})")
        servers.append(("nbinfer", nb_http, nb_grpc))
        cleanups.append(nb.stop)
        skipped = (
            "--no-kserve given" if args.no_kserve else _add_kserve(tmp, servers, cleanups, log)
        )
        if args.floor:
            floor, floor_grpc = start_floor(tmp, nb_grpc.removeprefix("grpc://"), args.shape)
            servers.append(("floor", "", floor_grpc))
            cleanups.append(floor.kill)
        try:
            for proto in args.protocols:
                for conc in args.concurrency:
                    runs: dict[str, list[dict[str, float]]] = {}
                    for _ in range(args.rounds):  # alternate servers: shared noise cancels
                        for name, http_url, grpc_url in servers:
                            if not http_url and proto == "http":
                                continue  # the floor server speaks gRPC only
                            r = drive(proto, http_url, grpc_url, conc, args.duration, args.shape)
                            runs.setdefault(name, []).append(r)
                            log(
                                f"{name:8s} {proto:4s} c={conc}: {r['rps']:8.0f} req/s  "
                                f"p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms"
                            )
                    for name, rs in runs.items():
                        # The median round by throughput.
                        results[(name, proto, conc)] = sorted(rs, key=lambda x: x["rps"])[
                            len(rs) // 2
                        ]
        finally:
            for fn in cleanups:
                fn()

    _print_table(results, args)
    if skipped:
        print(f"\nKServe side skipped: {skipped}")
    if args.json:
        cells = [
            {"server": name, "protocol": proto, "concurrency": conc, **figures}
            for (name, proto, conc), figures in results.items()
        ]
        Path(args.json).write_text(json.dumps(cells, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
