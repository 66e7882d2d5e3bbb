"""Every row of the performance targets in one command, each beside its peer from the same run.

Runs, one after another (never in parallel: they share the machine's cores):

* ``client.py`` — nbinfer's client vs tritonclient, HTTP and gRPC, small requests at concurrency
  1 (from the main thread and from a worker thread, against tritonclient with prebuilt inputs,
  median of 5 rounds, beside the engine alone, raw grpcio / nbinfer's socket engine, against
  the same peer: the rows' ceiling, which their notes name; for gRPC also the least a complete
  client on grpcio does, from both threads: the gRPC rows' bound, named in their notes and
  verdicts) and 8 (sync and asyncio) and 16 MB each way over the wire;
* ``server.py`` — the embedded server vs KServe's ModelServer under the same tritonclient load,
  and a do-nothing grpc.aio server beside them (``--floor``: the ceiling of the gRPC row);
* ``grpc_big.py`` — the 16 MB gRPC row with the server's CPU per call;
* ``local_shm.py`` — the zero-copy local path, 16 MB each way, vs tritonclient HTTP binary,
  tritonclient's own shm and nbinfer's HTTP binary;
* ``streaming.py`` — the generate extension's token stream: per-token and time-to-first-token
  overhead of nbinfer's clients + server, beside a hand-written ``requests`` SSE loop;
* ``profiler.py`` — ``profile()`` at concurrency 1 vs a tritonclient sync loop against the same
  server (throughput and p50 latency, HTTP and gRPC);
* ``dataframe.py`` — ``session.infer("iris", df)`` on 5 M rows vs the same model in-process
  (and a tritonclient loop), median of 5 paired rounds;
* a fresh kernel: ``import pandas`` then ``import nbinfer`` + ``Session()`` + the first ``infer``.

Usage::

    python benchmarks/all.py [--quick] [--json DIR] [--plot FILE.png] [--only a.py,b.py]

``--quick`` shortens every measurement (a smoke run in a few minutes, not figures to quote). At
the end it prints the target table: issue 29's rows (one per line of its table) and the earlier
targets (issue 11), each as row, ours, peer, ratio, target and verdict (met / MISSED), with how
it was measured; keeps every script's raw figures as JSON in ``--json DIR`` (a temporary
directory otherwise) and, with ``--plot``, draws the same rows as a chart (docs/img/performance.png
comes from a full run). The figures in docs/performance.md come from full runs on the machine it
names; each script's own docstring says what it measures and how.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
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
    "dataframe.py": ([], ["--rows", "300000", "--rounds", "1", "--no-tritonclient"]),
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
    """One target row: the figure judged, its target, and the absolute figures behind it."""

    name: str
    value: float  # what the target judges: a ratio to the peer of the same run, or absolute
    target: float | None  # None: shown beside the others for reference, no target
    unit: str  # of value and target: "x" (nbinfer / the peer) or an absolute unit
    higher_is_better: bool = True
    peer: float | None = None  # the peer's absolute figure, where the row has one
    ours: float | None = None  # nbinfer's absolute figure (rows judged on a ratio)
    scale: str = ""  # the unit of ours / peer on ratio rows ("req/s", "MB/s", "s", "ms")
    note: str = ""  # how it was measured: "median of 5 rounds", CPU per call, ...
    issue: int = 11  # the issue whose table the row comes from
    bound: float | None = None  # the ceiling measured beside it (a minimal client), as value

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


def _rounds(n: int) -> str:
    return f"{n} round" if n == 1 else f"{n} rounds"


def _load(out: Path, name: str) -> Any:
    path = out / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _client_rows(client: list[dict[str, Any]] | None) -> list[Row]:
    """Issue 29's client rows (c=1, main and worker thread) and issue 11's other client rows."""
    by = {r["scenario"]: r for r in client or []}
    rows: list[Row] = []
    for scenario, name, target, issue in (
        ("grpc sync  c=1 add_sub main", "gRPC sync c=1 add_sub, main thread", 1.0, 29),
        ("grpc sync  c=1 add_sub", "gRPC sync c=1 add_sub, worker thread", 1.05, 29),
        ("http sync  c=1 add_sub main", "HTTP sync c=1 add_sub, main thread", 1.3, 29),
        ("http sync  16MB each way", "HTTP 16 MB each way", 1.4, 11),
        ("grpc sync  c=8 add_sub", "gRPC sync c=8 add_sub", 1.0, 11),
        ("grpc async c=1 add_sub", "gRPC asyncio c=1 add_sub", 1.0, 11),
        ("grpc async c=8 add_sub", "gRPC asyncio c=8 add_sub", 1.0, 11),
        ("grpc sync  c=1 raw grpcio floor", "raw grpcio c=1 (ceiling of the gRPC rows)", 1.0, 11),
        ("grpc sync  c=8 raw grpcio floor", "raw grpcio c=8 (ceiling of the gRPC rows)", 1.0, 11),
    ):
        r = by.get(scenario)
        if r is None:
            continue
        peer = "tritonclient, prebuilt inputs" if issue == 29 else "tritonclient"
        cpu = (
            f"; CPU {r['nbinfer_cpu_us_per_call']:.0f} vs "
            f"{r['tritonclient_cpu_us_per_call']:.0f} us/call"
            if r["unit"] == "req/s"
            else ""
        )
        # the c=1 rows' ceiling: the engine alone (bytes in, bytes out) against the same peer
        raw = by.get(scenario.split(" c=1 ")[0] + " c=1 raw engine vs prebuilt")
        ceiling = f"; engine alone {raw['ratio']:.2f}x" if issue == 29 and raw else ""
        # the gRPC c=1 rows' bound: the least a complete client on grpcio does, the same way
        minimal = by.get(scenario.replace(" add_sub", " minimal client")) if issue == 29 else None
        if minimal:
            ceiling += f"; minimal grpcio client {minimal['ratio']:.2f}x"
        rows.append(
            Row(
                f"client {name} vs {peer}",
                r["ratio"],
                target,
                "x",
                peer=r["tritonclient"],
                ours=r["nbinfer"],
                scale=r["unit"],
                note=f"{r.get('rounds', '')}{cpu}{ceiling}".lstrip("; "),
                issue=issue,
                bound=minimal["ratio"] if minimal else None,
            )
        )
    return rows


def _local_rows(shm: dict[str, Any] | None) -> list[Row]:
    """The local zero-copy path (16 MB each way) vs tritonclient HTTP binary and shm, and HTTP.

    Reads ``local_shm.py``'s medians by the names of its clients (``nbinfer Session``, else
    ``nbinfer shm (http)``; ``tritonclient http``, ``tritonclient shm``, ``nbinfer http
    binary``), whatever their details.
    """
    if not shm:
        return []
    medians: dict[str, float] = shm["medians"]

    def find(*words: str) -> tuple[str, float] | None:
        for key, value in medians.items():
            if all(w in key.lower() for w in words):
                return key, value
        return None

    ours = find("nbinfer", "session") or find("nbinfer", "shm", "(http)") or find("nbinfer", "shm")
    if ours is None:
        return []
    rounds = len(next(iter(shm.get("rounds", {}).values()), []))
    note = f"median of {_rounds(rounds)}; {ours[0]}" if rounds else ours[0]
    rows = []
    for words, name, target, issue in (
        (("tritonclient", "http"), "tritonclient HTTP binary", 10.0, 29),
        (("tritonclient", "shm"), "tritonclient's own shm", None, 29),
        (("nbinfer", "binary"), "nbinfer HTTP binary", 3.0, 11),
    ):
        peer = find(*words)
        if peer is None or peer[0] == ours[0]:
            continue
        label = f"local shared memory 16 MB each way vs {name}"
        ratio = ours[1] / peer[1]
        rows.append(Row(label, ratio, target, "x", True, peer[1], ours[1], "MB/s", note, issue))
    return rows


def _profiler_rows(prof: dict[str, Any] | None) -> list[Row]:
    """Within 10 % of a tritonclient loop: the profiler measures the server, not itself."""
    rows = []
    for proto, figures in (prof or {}).items():
        rounds = figures.get("rounds", [])
        n = len(rounds)
        ours = [o for o, _ in rounds]
        theirs = [t for _, t in rounds]

        def median(items: list[dict[str, Any]], key: str) -> float | None:
            return statistics.median(i[key] for i in items) if items else None

        saturated = figures.get("saturated_rounds")
        note = f"median of {_rounds(n)}" + (
            f"; generator saturated in {saturated}/{n}" if saturated is not None else ""
        )
        name = f"profile() c=1 {proto.upper() if proto == 'http' else 'gRPC'} vs tritonclient loop"
        rows.append(
            Row(
                f"{name}, throughput",
                figures["throughput_ratio"],
                0.9,
                "x",
                peer=median(theirs, "throughput"),
                ours=median(ours, "throughput"),
                scale="req/s",
                note=note,
                issue=29,
            )
        )
        rows.append(
            Row(
                f"{name}, p50 latency",
                figures["p50_ratio"],
                1.1,
                "x",
                False,
                peer=median(theirs, "p50_ms"),
                ours=median(ours, "p50_ms"),
                scale="ms",
                note=note,
                issue=29,
            )
        )
    return rows


def _dataframe_rows(frame: dict[str, Any] | None) -> list[Row]:
    """``session.infer("iris", df)`` vs the same model in-process (time, lower is better)."""
    if not frame:
        return []
    seconds = frame["seconds"]
    rows = []
    for peer, name, target, issue in (
        ("in-process", "the same model in-process", 1.1, 29),
        ("tritonclient loop", "a tritonclient loop", None, 29),
    ):
        if peer not in frame["median_time_ratio"]:
            continue
        rows.append(
            Row(
                f"session.infer('iris', df) {frame['rows'] / 1e6:g} M rows vs {name}",
                frame["median_time_ratio"][peer],
                target,
                "x",
                False,
                peer=statistics.median(seconds[peer]),
                ours=statistics.median(seconds["nbinfer"]),
                scale="s",
                note=f"time ratio, median of {_rounds(frame['rounds'])}, paired",
                issue=issue,
            )
        )
    return rows


def target_rows(out: Path, fresh_kernel_s: float | None) -> list[Row]:
    """The target rows from the scripts' JSON (a failed script's rows are left out).

    Issue 29's rows first (each line of its table), then the earlier targets (issue 11).
    """
    rows = _client_rows(_load(out, "client.json"))
    rows += _profiler_rows(_load(out, "profiler.json"))
    rows += _local_rows(_load(out, "local_shm.json"))
    rows += _dataframe_rows(_load(out, "dataframe.json"))
    server = _load(out, "server.json")
    if server:
        rps = {(c["server"], c["protocol"], c["concurrency"]): c["rps"] for c in server}
        for proto, conc, target in (("grpc", 8, 1.4),):
            ours, theirs = rps.get(("nbinfer", proto, conc)), rps.get(("kserve", proto, conc))
            if ours and theirs:
                name = f"server {proto} c={conc} vs KServe"
                rows.append(Row(name, ours / theirs, target, "x", True, theirs, ours, "req/s"))
            floor = rps.get(("floor", proto, conc))
            if floor and theirs:  # the ceiling: a grpc.aio server doing no work at all
                name = f"do-nothing grpc.aio c={conc} vs KServe (ceiling)"
                rows.append(Row(name, floor / theirs, target, "x", True, theirs, floor, "req/s"))
    big = _load(out, "grpc_big.json")
    if big:
        peer = big.get("tritonclient", {}).get("mb_s")
        rows.append(Row("gRPC 16 MB each way", big["nbinfer"]["mb_s"], 450.0, "MB/s", peer=peer))
    stream = _load(out, "streaming.json")
    if stream:  # the requests loop of the same run is the peer figure
        ours, peer = stream["nbinfer http"], stream["requests"]
        for key, name, target in (
            ("per_token_ms", "generate_stream per token", 0.2),
            ("ttft_overhead_ms", "generate_stream TTFT overhead", 2.0),
        ):
            rows.append(Row(name, ours[key], target, "ms", False, peer=peer[key]))
    if fresh_kernel_s is not None:
        rows.append(Row("fresh kernel to first result", fresh_kernel_s, 0.5, "s", False))
    return sorted(rows, key=lambda r: r.issue != 29)  # stable: each group keeps its order


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "x":
        return f"{value:.2f}x"
    digits = 0 if abs(value) >= 100 else 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f} {unit}"


def print_rows(rows: list[Row], *, quick: bool = False) -> None:
    """The target table as text: row, ours, peer, ratio, target, verdict."""
    if quick:
        print("\n(--quick: a smoke run; these figures are not to quote)")
    header = f"{'row':<78} {'ours':>13} {'peer':>13} {'ratio':>7} {'target':>9}  verdict"
    issue = None
    for row in rows:
        if row.issue != issue:
            issue = row.issue
            title = "issue 29's table" if issue == 29 else "earlier targets (issue 11)"
            print(f"\n{title}\n{header}")
        if row.unit == "x":
            ours, peer = _figure(row.ours, row.scale), _figure(row.peer, row.scale)
            ratio = _figure(row.value, "x")
        else:
            ours, peer = _figure(row.value, row.unit), _figure(row.peer, row.unit)
            ratio = _figure(row.value / row.peer, "x") if row.peer else "-"
        sign = ">=" if row.higher_is_better else "<="
        unit = "x" if row.unit == "x" else f" {row.unit}"
        target = "-" if row.target is None else f"{sign} {row.target:g}{unit}"
        verdict = {True: "met", False: "MISSED", None: "(reference)"}[row.met]
        if row.met is False and row.bound is not None and row.target is not None:
            # missed; whether even the minimal client measured beside it reaches the target
            verdict += " (bound below target)" if row.bound < row.target else " (bound above)"
        note = f"  [{row.note}]" if row.note else ""
        print(f"{row.name:<78} {ours:>13} {peer:>13} {ratio:>7} {target:>9}  {verdict}{note}")


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
        figsize=(13, 0.42 * max(len(ratios), 4) + 1.4),
        gridspec_kw={"width_ratios": [3, 1.4]},
    )
    left, right = axes
    names = [r.name + ("" if r.higher_is_better else " (lower is better)") for r in ratios][::-1]
    values = [r.value for r in ratios][::-1]
    colour = {True: "#3b82c4", False: "#d9822b", None: "#9aa5b1"}
    colors = [colour[r.met] for r in ratios][::-1]
    left.barh(names, values, color=colors)
    for i, row in enumerate(ratios[::-1]):
        if row.target is not None:
            left.plot([row.target, row.target], [i - 0.4, i + 0.4], color="black", lw=2)
        left.text(row.value, i, f" {row.value:.2f}x", va="center", fontsize=8)
    left.axvline(1.0, color="grey", lw=0.8, ls="--")
    left.set_xlabel("nbinfer / peer in the same run (black tick: target; orange: missed)")
    targets = [r.target for r in ratios if r.target is not None]
    left.set_xlim(0, max([*values, *targets, 1.0]) * 1.18)
    for ax, row in zip([right], absolute[:1], strict=False):
        labels, heights = ["nbinfer"], [row.value]
        if row.peer is not None:
            labels.append("tritonclient")
            heights.append(row.peer)
        ax.bar(labels, heights, color=[colour[row.met], "#9aa5b1"][: len(labels)])
        if row.target is not None:
            ax.axhline(row.target, color="black", lw=2)
        ax.set_ylabel(f"{row.name} ({row.unit}; black line: target)")
        for i, height in enumerate(heights):
            ax.text(i, height, f"{height:.0f}", ha="center", va="bottom", fontsize=8)
    if not absolute:
        right.axis("off")
    extra = absolute[1:]
    if extra:
        right.set_title(
            "\n".join(
                textwrap.fill(f"{r.name}: {r.value:.2f} {r.unit} (target {r.target})", 36)
                for r in extra
            ),
            fontsize=7,
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
    parser.add_argument(
        "--only",
        metavar="NAMES",
        default=None,
        help="run only these (comma-separated: client.py,dataframe.py,fresh-kernel); '' runs "
        "none and prints the table of the JSON already in --json DIR",
    )
    args = parser.parse_args(argv)
    out = Path(args.json or tempfile.mkdtemp(prefix="nbinfer-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    chosen = None if args.only is None else {n.strip() for n in args.only.split(",") if n.strip()}
    unknown = (chosen or set()) - {*RUNS, "fresh-kernel"}
    if unknown:
        parser.error(f"--only: unknown {sorted(unknown)}; known: {[*RUNS, 'fresh-kernel']}")
    failed = []
    for script, (full, quick) in RUNS.items():
        if chosen is not None and script not in chosen:
            continue
        options = [
            *(quick if args.quick else full),
            "--json",
            str(out / script.replace(".py", ".json")),
        ]
        print(f"\n=== {script} {' '.join(options)}", flush=True)
        done = subprocess.run([sys.executable, str(HERE / script), *options])
        if done.returncode:
            failed.append(script)
    fresh = out / "fresh_kernel.json"
    if chosen is None or "fresh-kernel" in chosen:
        print("\n=== fresh kernel", flush=True)
        best = []
        # A user's kernel imports compiled bytecode (pip compiles it at install). Where this
        # environment forbids writing any (PYTHONDONTWRITEBYTECODE), every run would compile
        # nbinfer from source, server included (~0.25 s): the runs keep a bytecode cache of
        # their own, outside the tree, as scripts/check does (the first run fills it).
        env = dict(os.environ)
        pycache = None
        if env.pop("PYTHONDONTWRITEBYTECODE", None) and "PYTHONPYCACHEPREFIX" not in env:
            pycache = tempfile.TemporaryDirectory(prefix="nbinfer-pycache-")
            env["PYTHONPYCACHEPREFIX"] = pycache.name
        for _ in range(1 if args.quick else 3):
            line = subprocess.run(
                [sys.executable, "-c", FRESH_KERNEL],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout.strip()
            best.append(line)
        if pycache is not None:
            pycache.cleanup()

        def total(line: str) -> float:  # "... = 0.345 s (target <= 0.5 s)"
            return float(line.split(" = ")[-1].split()[0])

        fastest = min(best, key=total)
        print(fastest)
        fresh.write_text(json.dumps({"line": fastest, "seconds": total(fastest)}), "utf-8")
    kernel = _load(out, fresh.name)
    rows = target_rows(out, kernel["seconds"] if kernel else None)
    print_rows(rows, quick=args.quick)
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
