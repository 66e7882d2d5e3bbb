"""The zero-copy local path vs the wire, against the embedded server, measured in the same run.

Moves 16 MB each way through the demo ``add_sub`` model (two 8 MB FP32 inputs in, two 8 MB
outputs back; both outputs read as NumPy arrays) with:

* ``nbinfer Session``: ``Session(url).infer`` on the server this process started: sealed memfd
  regions handed over the server's Unix socket, mapped by both ends (the zero-copy local path:
  the client copies the inputs into its regions, the server reads them in place and ``add_sub``
  computes its outputs straight into the client's output regions with
  ``context.output_array``); over HTTP (the Session's default) and over gRPC;
* ``nbinfer shm``: ``Client(url)`` with its default ``shared_memory="auto"`` (HTTP, and gRPC),
  the same memfd path;
* ``nbinfer shm posix``: the same client on the POSIX shm path (regions registered over HTTP,
  copied in and out by the server with ``pread`` / ``pwrite``): what a server started by
  another process gets;
* ``nbinfer http``: ``Client(url, shared_memory=False)``, the HTTP binary path;
* ``tritonclient shm``: tritonclient.http with its own ``tritonclient.utils.shared_memory``
  utilities, regions created and registered once, inputs copied in with
  ``set_shared_memory_region`` and outputs read with ``get_contents_as_numpy`` (what its
  examples do);
* ``tritonclient http``: tritonclient.http binary.

Prints MB/s (in + out) for each, and the ratios of the Session to the others (the row of
``benchmarks/all.py``: vs tritonclient HTTP binary, target >= 10x, and vs tritonclient shm).
Rounds alternate the clients, so each ratio pairs figures of the same run; the figure of a
client is the median of its rounds (the machine may be shared). Beside it, the CPU time per
call of this process and of the server process (psutil), which a loaded machine disturbs far
less than the wall time: on a quiet machine, one client calling in a loop spends about their
sum per call.

Usage::

    python benchmarks/local_shm.py [--seconds 2] [--rounds 5] [--json out.json]
        [--clients "nbinfer Session,tritonclient http binary"]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import nbinfer.client as nbc
from nbinfer.server.launcher import LocalServer

ROWS = 8 * 1024 * 1024 // (16 * 4)  # 8 MB per tensor
DATA = {
    "INPUT0": np.random.default_rng(0).standard_normal((ROWS, 16)).astype(np.float32),
    "INPUT1": np.random.default_rng(1).standard_normal((ROWS, 16)).astype(np.float32),
}
NBYTES = DATA["INPUT0"].nbytes
MB_PER_CALL = 2 * sum(a.nbytes for a in DATA.values()) / 1e6  # in + out

Infer = Callable[[], Any]


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) of process ``pid`` so far, by psutil as the
    other benchmarks measure the server (0.0 without psutil)."""
    try:
        import psutil
    except ImportError:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def rate(infer: Infer, seconds: float, server_pid: int | None = None) -> tuple[float, float, float]:
    """MB/s (in + out) of ``infer`` called in a loop for ``seconds`` (after one warm-up), and
    the CPU ms per call of this process and of ``server_pid``'s."""
    infer()
    calls = 0
    cpu, server = time.process_time(), _process_cpu(server_pid) if server_pid else 0.0
    start = time.perf_counter()
    stop = start + seconds
    while time.perf_counter() < stop:
        infer()
        calls += 1
    wall = time.perf_counter() - start
    cpu = (time.process_time() - cpu) * 1e3 / calls
    server = (_process_cpu(server_pid) - server) * 1e3 / calls if server_pid else 0.0
    return calls * MB_PER_CALL / wall, cpu, server


@contextmanager
def nbinfer_session(url: str) -> Iterator[Infer]:
    import nbinfer

    with nbinfer.Session(url) as session:

        def infer() -> Any:
            result = session.infer("add_sub", DATA)
            return result["OUTPUT0"], result["OUTPUT1"]

        yield infer


@contextmanager
def nbinfer_client(url: str, shared_memory: bool | str, *, posix: bool = False) -> Iterator[Infer]:
    with nbc.Client(url, shared_memory=shared_memory) as client:  # type: ignore[arg-type]
        if posix and client._shm is not None:  # as if another process had started the server
            client._shm._url = ""

        def infer() -> Any:
            result = client.infer("add_sub", DATA)
            return result["OUTPUT0"], result["OUTPUT1"]

        yield infer


@contextmanager
def triton_http(address: str) -> Iterator[Infer]:
    import tritonclient.http as th

    client = th.InferenceServerClient(address)

    def infer() -> Any:
        inputs = []
        for name, arr in DATA.items():
            inp = th.InferInput(name, list(arr.shape), "FP32")
            inp.set_data_from_numpy(arr, binary_data=True)
            inputs.append(inp)
        outputs = [th.InferRequestedOutput(n, binary_data=True) for n in ("OUTPUT0", "OUTPUT1")]
        result = client.infer("add_sub", inputs, outputs=outputs)
        return result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")

    try:
        yield infer
    finally:
        client.close()


@contextmanager
def triton_shm(address: str) -> Iterator[Infer]:
    import tritonclient.http as th
    import tritonclient.utils.shared_memory as tshm

    client = th.InferenceServerClient(address)
    names = ("in0", "in1", "out0", "out1")
    handles = {}
    for name in names:
        handles[name] = tshm.create_shared_memory_region(
            name, f"/bench_tc_{os.getpid()}_{name}", NBYTES
        )
        client.register_system_shared_memory(name, f"/bench_tc_{os.getpid()}_{name}", NBYTES)
    shape = list(DATA["INPUT0"].shape)

    def infer() -> Any:
        inputs = []
        for (name, arr), region in zip(DATA.items(), ("in0", "in1"), strict=True):
            tshm.set_shared_memory_region(handles[region], [arr])
            inp = th.InferInput(name, shape, "FP32")
            inp.set_shared_memory(region, NBYTES)
            inputs.append(inp)
        outputs = []
        for name, region in (("OUTPUT0", "out0"), ("OUTPUT1", "out1")):
            out = th.InferRequestedOutput(name, binary_data=True)
            out.set_shared_memory(region, NBYTES)
            outputs.append(out)
        result = client.infer("add_sub", inputs, outputs=outputs)
        arrays = []
        for name, region in (("OUTPUT0", "out0"), ("OUTPUT1", "out1")):
            out = result.get_output(name)
            arrays.append(tshm.get_contents_as_numpy(handles[region], np.float32, out["shape"]))
        return arrays

    try:
        yield infer
    finally:
        client.unregister_system_shared_memory()
        for handle in handles.values():
            tshm.destroy_shared_memory_region(handle)
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the figures as JSON here")
    parser.add_argument(
        "--clients", default="", help="comma-separated client names to run (default: all)"
    )
    args = parser.parse_args(argv)
    # tritonclient drives it too: no token, as `nbinfer serve` (and the same headers for both)
    with LocalServer(demo=True, auth_token=None) as server:
        address = server.http_url.split("://", 1)[-1]
        grpc = server.grpc_address
        clients: dict[str, Callable[[], Any]] = {
            "nbinfer Session": lambda: nbinfer_session(server.http_url),
            "nbinfer Session (grpc)": lambda: nbinfer_session(f"grpc://{grpc}"),
            "nbinfer shm (http)": lambda: nbinfer_client(server.http_url, "auto"),
            "nbinfer shm (grpc)": lambda: nbinfer_client(f"grpc://{grpc}", "auto"),
            "nbinfer shm posix (http)": lambda: nbinfer_client(server.http_url, "auto", posix=True),
            "nbinfer http binary": lambda: nbinfer_client(server.http_url, False),
            "tritonclient shm": lambda: triton_shm(address),
            "tritonclient http binary": lambda: triton_http(address),
        }
        if args.clients:
            wanted = [name.strip() for name in args.clients.split(",") if name.strip()]
            unknown = sorted(set(wanted) - set(clients))
            if unknown:
                parser.error(f"unknown clients {unknown}; known: {', '.join(clients)}")
            clients = {name: clients[name] for name in wanted}
        figures: dict[str, list[float]] = {name: [] for name in clients}
        cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
        print(f"server: {server.http_url}; {MB_PER_CALL:.1f} MB per call (in + out)")
        print(f"median of {args.rounds} alternating rounds of {args.seconds:g}s each")
        for _ in range(args.rounds):
            for name, make in clients.items():
                with make() as infer:
                    mbs, ours_ms, server_ms = rate(infer, args.seconds, server.pid)
                figures[name].append(mbs)
                cpu[name].append((ours_ms, server_ms))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    cpu_ms = {
        name: {
            "client": statistics.median(c for c, _ in values),
            "server": statistics.median(s for _, s in values),
        }
        for name, values in cpu.items()
    }
    for name, values in figures.items():
        rounds = " ".join(f"{v:.0f}" for v in values)
        spent = cpu_ms[name]
        print(
            f"{name:<26} {medians[name]:>8.0f} MB/s   CPU per call: client "
            f"{spent['client']:.1f} ms + server {spent['server']:.1f} ms   (rounds: {rounds})"
        )
    ratios: dict[str, float] = {}
    for ours, label in (("nbinfer Session", ""), ("nbinfer Session (grpc)", "grpc / ")):
        for peer in (
            "tritonclient http binary",
            "tritonclient shm",
            "nbinfer http binary",
            "nbinfer shm posix (http)",
        ):
            if ours in medians and peer in medians and (not label or "tritonclient" in peer):
                ratios[label + peer] = ratio = medians[ours] / medians[peer]
                print(f"{ours} / {peer + ':':<26} {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"rounds": figures, "medians": medians, "ratios": ratios, "cpu_ms": cpu_ms},
                fh,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
