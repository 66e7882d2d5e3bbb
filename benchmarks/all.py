"""Every row of the performance table in one command, each beside its peer from the same run.

Runs, one after another (never in parallel: they share the machine's cores):

* ``client.py`` — nbinfer's client vs tritonclient, HTTP and gRPC, small requests at concurrency
  1 and 8 (sync and asyncio) and 16 MB each way over the wire;
* ``server.py`` — the embedded server vs KServe's ModelServer under the same tritonclient load,
  and a do-nothing grpc.aio server beside them (``--floor``: the ceiling of the gRPC row);
* ``grpc_big.py`` — the 16 MB gRPC row with the server's CPU per call;
* ``local_shm.py`` — the zero-copy local path vs HTTP binary (and tritonclient's own shm);
* ``streaming.py`` — the generate extension's token stream: per-token and time-to-first-token
  overhead of nbinfer's clients + server, beside a hand-written ``requests`` SSE loop;
* ``profiler.py`` — ``profile()`` at concurrency 1 vs a tritonclient sync loop against the same
  server (throughput and p50 latency, HTTP and gRPC);
* a fresh kernel: ``import pandas`` then ``import nbinfer`` + ``Session()`` + the first ``infer``.

Usage::

    python benchmarks/all.py [--quick] [--json DIR] [--plot FILE.png]

``--quick`` shortens every measurement (a smoke run, not figures to quote). At the end it prints
the target rows (issue 11's table) with each measured figure beside its target, keeps every
script's raw figures as JSON in ``--json DIR`` (a temporary directory otherwise) and, with
``--plot``, draws the same rows as a chart (docs/img/performance.png comes from a full run). The
figures in docs/performance.md come from full runs on the machine it names; each script's own
docstring says what it measures and how.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent

#: script -> (full arguments, quick arguments)
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "client.py": ([], ["--seconds", "0.5", "--rounds", "1", "--median-rounds", "1"]),
    "server.py": (["--rounds", "3", "--duration", "5", "--floor"], ["--duration", "1", "--floor"]),
    "grpc_big.py": ([], ["--seconds", "1", "--rounds", "1"]),
    "local_shm.py": ([], ["--seconds", "1", "--rounds", "1"]),
    "streaming.py": ([], ["--tokens", "50", "--rounds", "1"]),
    "profiler.py": ([], ["--seconds", "1", "--rounds", "1"]),
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


class Row(NamedTuple):
    """One target row: what was measured, the target, and whether higher is better."""

    name: str
    value: float
    target: float
    unit: str  # "x" for a ratio against the peer of the same run
    higher_is_better: bool = True
    peer: float | None = None  # the peer's absolute figure, where the row has one

    @property
    def met(self) -> bool:
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


def target_rows(out: Path, fresh_kernel_s: float | None) -> list[Row]:
    """The target table's rows from the scripts' JSON (a failed script's rows are left out)."""

    def load(name: str) -> Any:
        path = out / name
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    rows: list[Row] = []
    client = load("client.json")
    if client:
        by = {r["scenario"]: r["ratio"] for r in client}
        for scenario, target in (
            ("http sync  c=1 add_sub main", 1.3),
            ("grpc sync  c=1 add_sub main", 1.0),
            ("grpc sync  c=1 add_sub", 1.05),
            ("http sync  16MB each way", 1.4),
            ("grpc sync  c=8 add_sub", 1.0),
            ("grpc async c=1 add_sub", 1.0),
            ("grpc async c=8 add_sub", 1.0),
            ("grpc sync  c=1 raw grpcio floor", 1.0),  # the ceiling of the gRPC rows
            ("grpc sync  c=8 raw grpcio floor", 1.0),
        ):
            if scenario in by:
                label = "client " + " ".join(scenario.replace(" add_sub", "").split())
                label = label.replace(" c=1 main", " c=1 main thread")
                if scenario == "grpc sync  c=1 add_sub":
                    label += " worker thread"
                label = label.replace("client grpc sync c=1 raw grpcio floor", "raw grpcio c=1")
                label = label.replace("client grpc sync c=8 raw grpcio floor", "raw grpcio c=8")
                label = label.replace(" sync 16MB each way", " 16 MB each way")
                rows.append(Row(f"{label} vs tritonclient", by[scenario], target, "x"))
    server = load("server.json")
    if server:
        rps = {(c["server"], c["protocol"], c["concurrency"]): c["rps"] for c in server}
        for proto, conc, target in (("grpc", 8, 1.4),):
            ours, theirs = rps.get(("nbinfer", proto, conc)), rps.get(("kserve", proto, conc))
            if ours and theirs:
                rows.append(Row(f"server {proto} c={conc} vs KServe", ours / theirs, target, "x"))
            floor = rps.get(("floor", proto, conc))
            if floor and theirs:  # the ceiling: a grpc.aio server doing no work at all
                name = f"do-nothing grpc.aio c={conc} vs KServe"
                rows.append(Row(name, floor / theirs, target, "x"))
    shm = load("local_shm.json")
    if shm:
        medians = shm["medians"]
        ratio = medians["nbinfer shm (http)"] / medians["nbinfer http binary"]
        rows.append(Row("local shm vs HTTP binary, 16 MB", ratio, 3.0, "x"))
    big = load("grpc_big.json")
    if big:
        peer = big.get("tritonclient", {}).get("mb_s")
        rows.append(Row("gRPC 16 MB each way", big["nbinfer"]["mb_s"], 450.0, "MB/s", peer=peer))
    stream = load("streaming.json")
    if stream:  # the requests loop of the same run is the peer figure
        ours, peer = stream["nbinfer http"], stream["requests"]
        for key, name, target in (
            ("per_token_ms", "generate_stream per token", 0.2),
            ("ttft_overhead_ms", "generate_stream TTFT overhead", 2.0),
        ):
            rows.append(Row(name, ours[key], target, "ms", False, peer=peer[key]))
    rows += profiler_rows(load("profiler.json"))
    if fresh_kernel_s is not None:
        rows.append(Row("fresh kernel to first result", fresh_kernel_s, 0.5, "s", False))
    return rows


def profiler_rows(prof: dict[str, Any] | None) -> list[Row]:
    """Within 10 % of a tritonclient loop: the profiler measures the server, not itself."""
    rows = []
    for proto, figures in (prof or {}).items():
        name = f"profile c=1 {proto} vs tritonclient loop"
        rows.append(Row(f"{name}, throughput", figures["throughput_ratio"], 0.9, "x"))
        rows.append(Row(f"{name}, p50", figures["p50_ratio"], 1.1, "x", False))
    return rows


def print_rows(rows: list[Row]) -> None:
    """The target table as text: measured, target, met."""
    print(f"\n{'row':<52} {'measured':>12} {'target':>13}  met")
    for row in rows:
        sign = ">=" if row.higher_is_better else "<="
        unit = "x" if row.unit == "x" else f" {row.unit}"
        print(
            f"{row.name:<52} {f'{row.value:.2f}{unit}':>12} {f'{sign} {row.target:g}{unit}':>13}"
            f"  {'yes' if row.met else 'NO'}"
        )


def plot_rows(rows: list[Row], path: Path, title: str) -> None:
    """Draw the rows: ratios against their peers on the left, absolute rows on the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = [r for r in rows if r.unit == "x"]
    absolute = [r for r in rows if r.unit != "x"]
    fig, axes = plt.subplots(
        1,
        2,
        figsize=(11, 0.42 * max(len(ratios), 4) + 1.4),
        gridspec_kw={"width_ratios": [3, 1.4]},
    )
    left, right = axes
    names = [r.name for r in ratios][::-1]
    values = [r.value for r in ratios][::-1]
    colors = ["#3b82c4" if r.met else "#d9822b" for r in ratios][::-1]
    left.barh(names, values, color=colors)
    for i, row in enumerate(ratios[::-1]):
        left.plot([row.target, row.target], [i - 0.4, i + 0.4], color="black", lw=2)
        left.text(row.value, i, f" {row.value:.2f}x", va="center", fontsize=8)
    left.axvline(1.0, color="grey", lw=0.8, ls="--")
    left.set_xlabel("nbinfer / peer in the same run (black tick: target; orange: not met)")
    left.set_xlim(0, max([*values, *(r.target for r in ratios), 1.0]) * 1.18)
    for ax, row in zip([right], absolute[:1], strict=False):
        labels, heights = ["nbinfer"], [row.value]
        if row.peer is not None:
            labels.append("tritonclient")
            heights.append(row.peer)
        ax.bar(
            labels, heights, color=["#3b82c4" if row.met else "#d9822b", "#9aa5b1"][: len(labels)]
        )
        ax.axhline(row.target, color="black", lw=2)
        ax.set_ylabel(f"{row.name} ({row.unit}; black line: target)")
        for i, height in enumerate(heights):
            ax.text(i, height, f"{height:.0f}", ha="center", va="bottom", fontsize=8)
    if not absolute:
        right.axis("off")
    extra = absolute[1:]
    if extra:
        right.set_title(
            "\n".join(f"{r.name}: {r.value:.2f} {r.unit} (target {r.target:g})" for r in extra),
            fontsize=8,
        )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke settings")
    parser.add_argument("--json", metavar="DIR", default=None, help="keep the raw figures here")
    parser.add_argument("--plot", metavar="FILE", default=None, help="draw the target rows here")
    args = parser.parse_args(argv)
    out = Path(args.json or tempfile.mkdtemp(prefix="nbinfer-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for script, (full, quick) in RUNS.items():
        options = [
            *(quick if args.quick else full),
            "--json",
            str(out / script.replace(".py", ".json")),
        ]
        print(f"\n=== {script} {' '.join(options)}", flush=True)
        done = subprocess.run([sys.executable, str(HERE / script), *options])
        if done.returncode:
            failed.append(script)
    print("\n=== fresh kernel", flush=True)
    best = []
    for _ in range(1 if args.quick else 3):
        line = subprocess.run(
            [sys.executable, "-c", FRESH_KERNEL], capture_output=True, text=True, check=True
        ).stdout.strip()
        best.append(line)

    def total(line: str) -> float:  # "... = 0.345 s (target <= 0.5 s)"
        return float(line.split(" = ")[-1].split()[0])

    fastest = min(best, key=total)
    print(fastest)
    rows = target_rows(out, total(fastest))
    print_rows(rows)
    print(f"raw figures: {out}")
    if args.plot:
        kind = "quick smoke run" if args.quick else "full run"
        plot_rows(rows, Path(args.plot), f"benchmarks/all.py, {kind}")
        print(f"plot: {args.plot}")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
