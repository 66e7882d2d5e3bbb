"""Every row of the performance table in one command, each beside its peer from the same run.

Runs, one after another (never in parallel: they share the machine's cores):

* ``client.py`` — nbinfer's client vs tritonclient, HTTP and gRPC, small requests at concurrency
  1 and 8 (sync and asyncio) and 16 MB each way over the wire;
* ``server.py`` — the embedded server vs KServe's ModelServer under the same tritonclient load;
* ``grpc_big.py`` — the 16 MB gRPC row with the server's CPU per call;
* ``local_shm.py`` — the zero-copy local path vs HTTP binary (and tritonclient's own shm);
* a fresh kernel: ``import pandas`` then ``import nbinfer`` + ``Session()`` + the first ``infer``.

Usage::

    python benchmarks/all.py [--quick]

``--quick`` shortens every measurement (a smoke run, not figures to quote). The figures in
docs/performance.md come from full runs on the machine it names; each script's own docstring
says what it measures and how.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: script -> (full arguments, quick arguments)
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "client.py": ([], ["--seconds", "0.5", "--rounds", "1"]),
    "server.py": (["--rounds", "3", "--duration", "5"], ["--duration", "1"]),
    "grpc_big.py": ([], ["--seconds", "1", "--rounds", "1"]),
    "local_shm.py": ([], ["--seconds", "1", "--rounds", "1"]),
}

FRESH_KERNEL = """
import time
import pandas  # a notebook kernel has it already
import numpy as np
t0 = time.perf_counter()
import nbinfer
t1 = time.perf_counter()
session = nbinfer.Session()
t2 = time.perf_counter()
ones = np.ones((1, 16), np.float32)
session.infer("add_sub", {"INPUT0": ones, "INPUT1": ones})
t3 = time.perf_counter()
session.close()
print(f"fresh kernel: import nbinfer {t1 - t0:.3f} s + Session() {t2 - t1:.3f} s"
      f" + first infer {t3 - t2:.3f} s = {t3 - t0:.3f} s (target <= 0.5 s)")
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke settings")
    args = parser.parse_args(argv)
    failed = []
    for script, (full, quick) in RUNS.items():
        options = quick if args.quick else full
        print(f"\n=== {script} {' '.join(options)}", flush=True)
        done = subprocess.run([sys.executable, str(HERE / script), *options])
        if done.returncode:
            failed.append(script)
    print("\n=== fresh kernel", flush=True)
    best = []
    for _ in range(1 if args.quick else 3):
        out = subprocess.run(
            [sys.executable, "-c", FRESH_KERNEL], capture_output=True, text=True, check=True
        ).stdout.strip()
        best.append(out)
    print(min(best, key=lambda line: float(line.rsplit("=", 1)[1].split()[0])))
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
