"""The 16 MB-each-way gRPC row alone: nbinfer's client vs tritonclient, and the server's CPU.

The same row as ``benchmarks/client.py`` (two 8 MB FP32 inputs to the demo ``add_sub``, both
8 MB outputs back, one thread), without the small-request rows, so a change to the gRPC codec or
servicer can be measured in a few seconds. Prints MB/s (in + out) per client, client CPU and
server CPU (ms per call), best of ``--rounds`` alternating rounds.

Usage::

    python benchmarks/grpc_big.py [--seconds 3] [--rounds 3]

To compare two checkouts, run it from each checkout's directory with ``PYTHONPATH`` pointing
at it (``cd A && PYTHONPATH=A python /path/to/grpc_big.py``): the embedded server is a
``python -m`` subprocess, which puts its working directory first on its path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client as bench  # benchmarks/client.py: the drivers and adapters

import nbinfer.client as nbc
from nbinfer.server.launcher import LocalServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    with LocalServer(demo=True, auth_token=None) as server:  # tritonclient drives it too
        import psutil

        bench.SERVER[:] = [psutil.Process(server.pid)]
        address = server.grpc_address
        client = nbc.Client(f"grpc://{address}", shared_memory=False)  # the wire, not shm

        def nb_make() -> Any:
            def infer(data: dict[str, Any]) -> Any:
                result = client.infer("add_sub", data)
                return result["OUTPUT0"], result["OUTPUT1"]

            return infer

        tc_make = bench.triton_sync("grpc", address)
        ours: list[bench.Measured] = []
        theirs: list[bench.Measured] = []
        for _ in range(args.rounds):
            ours.append(bench.run_threads(nb_make, bench.BIG, 1, args.seconds))
            theirs.append(bench.run_threads(tc_make, bench.BIG, 1, args.seconds))
        client.close()
    print(f"grpc 16MB each way, best of {args.rounds} x {args.seconds:g}s (MB/s in + out)")
    print(f"{'client':<13} {'MB/s':>7} {'cpu ms/call':>12} {'srv ms/call':>12}")
    figures = {}
    for name, runs in (("nbinfer", ours), ("tritonclient", theirs)):
        rate, cpu, srv = max(runs)
        print(f"{name:<13} {rate * bench.BIG_MB:>7.0f} {cpu / 1e3:>12.1f} {srv / 1e3:>12.1f}")
        figures[name] = {
            "mb_s": rate * bench.BIG_MB,
            "cpu_ms": cpu / 1e3,
            "server_cpu_ms": srv / 1e3,
        }
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
