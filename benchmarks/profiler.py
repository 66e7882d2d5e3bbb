"""The load profiler at concurrency 1 vs a tritonclient sync loop against the same server.

A profiler must measure the server, not itself: at concurrency 1 its throughput and p50 latency
should be a plain client loop's. Against the embedded server's demo ``add_sub`` model, each
round runs ``nbinfer.profiling.profile(url, "add_sub", concurrency=1)`` (fixed windows) and,
for the same measured time, a tritonclient sync loop (prebuilt ``InferInput`` objects, outputs
read as NumPy arrays) timing every call; the rounds alternate which goes first. Prints, per
protocol, the median over rounds of the throughput ratio and the p50 latency ratio (nbinfer /
tritonclient), the profiler's own ``generator_busy`` and ``client_saturated``, and the load
generator's CPU per request beside tritonclient's.

Usage::

    python benchmarks/profiler.py [--seconds 2] [--rounds 5] [--only http,grpc] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from typing import Any

import numpy as np

from nbinfer.profiling import profile
from nbinfer.server.launcher import LocalServer

DATA = {
    "INPUT0": np.arange(16, dtype=np.float32).reshape(1, 16),
    "INPUT1": np.ones((1, 16), dtype=np.float32),
}


def tritonclient_loop(protocol: str, address: str, seconds: float) -> dict[str, float]:
    """Throughput, p50 latency (ms) and CPU us per call of a tritonclient sync loop (a thread)."""
    if protocol == "http":
        import tritonclient.http as tc
    else:
        import tritonclient.grpc as tc  # type: ignore[no-redef]
    out: dict[str, float] = {}

    def run() -> None:
        client = tc.InferenceServerClient(address)
        inputs = []
        for name, arr in DATA.items():
            inp = tc.InferInput(name, list(arr.shape), "FP32")
            if protocol == "http":
                inp.set_data_from_numpy(arr, binary_data=True)
            else:
                inp.set_data_from_numpy(arr)
            inputs.append(inp)
        outputs = [tc.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
        for _ in range(20):  # warm up
            client.infer("add_sub", inputs, outputs=outputs)
        latencies = []
        start, cpu = time.perf_counter(), time.thread_time()
        stop = start + seconds
        while (t0 := time.perf_counter()) < stop:
            result = client.infer("add_sub", inputs, outputs=outputs)
            result.as_numpy("OUTPUT0")
            result.as_numpy("OUTPUT1")
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        out["throughput"] = len(latencies) / elapsed
        out["p50_ms"] = float(np.percentile(latencies, 50)) * 1e3
        out["cpu_us"] = (time.thread_time() - cpu) / len(latencies) * 1e6
        client.close()

    thread = threading.Thread(target=run)  # a thread, as the profiler's load threads
    thread.start()
    thread.join()
    return out


def nbinfer_profile(url: str, seconds: float) -> dict[str, Any]:
    windows = 3
    frame = profile(
        url,
        "add_sub",
        DATA,
        concurrency=1,
        window=seconds / windows,
        max_windows=windows,
        warmup=0.3,
        stability=10.0,  # always the same number of windows: equal time with the peer
        progress=False,
    )
    row = frame.iloc[0]
    return {
        "throughput": float(row["throughput"]),
        "p50_ms": float(row["latency_p50_ms"]),
        "generator_busy": float(row.get("generator_busy", float("nan"))),  # absent before 29
        "client_cpu": float(row["client_cpu"]),
        "client_saturated": bool(row["client_saturated"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="http,grpc")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with LocalServer(demo=True, auth_token=None) as server:
        for proto in [p for p in args.only.split(",") if p]:
            url = server.http_url if proto == "http" else server.grpc_url
            address = url.split("://", 1)[-1]
            rounds = []
            for i in range(args.rounds):
                if i % 2 == 0:
                    ours = nbinfer_profile(url, args.seconds)
                    theirs = tritonclient_loop(proto, address, args.seconds)
                else:
                    theirs = tritonclient_loop(proto, address, args.seconds)
                    ours = nbinfer_profile(url, args.seconds)
                rounds.append((ours, theirs))
            thr = statistics.median(o["throughput"] / t["throughput"] for o, t in rounds)
            p50 = statistics.median(o["p50_ms"] / t["p50_ms"] for o, t in rounds)
            busy = statistics.median(o["generator_busy"] for o, _ in rounds)
            saturated = sum(o["client_saturated"] for o, _ in rounds)
            ours_cpu = statistics.median(o["client_cpu"] / o["throughput"] * 1e6 for o, _ in rounds)
            theirs_cpu = statistics.median(t["cpu_us"] for _, t in rounds)
            results[proto] = {
                "throughput_ratio": thr,
                "p50_ratio": p50,
                "generator_busy": busy,
                "saturated_rounds": saturated,
                "nbinfer_cpu_us_per_request": ours_cpu,
                "tritonclient_cpu_us_per_call": theirs_cpu,
                "rounds": rounds,
            }
            print(
                f"{proto}: profile c=1 / tritonclient loop: throughput {thr:.2f}x, p50 {p50:.2f}x"
                f" (median of {args.rounds}); profiler process CPU {ours_cpu:.0f} us/request,"
                f" tritonclient thread CPU {theirs_cpu:.0f} us/call; generator_busy {busy:.0%},"
                f" client_saturated in {saturated}/{args.rounds} rounds",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
