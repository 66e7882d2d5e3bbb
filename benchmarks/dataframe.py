"""DataFrame -> DataFrame on the demo ``iris`` model: nbinfer vs in-process and tritonclient.

The same frame (by default 5 million rows of 4 float64 feature columns under a shuffled index,
as a CSV would give) goes through the ``iris`` model, in the same run, and comes back as a
DataFrame of the three class probabilities aligned with the input index:

* **in-process** (the target row's reference): the same model's forward pass called in this
  process on the whole frame, ``pd.DataFrame(iris_predict(weights, frame.to_numpy(float32)),
  index=frame.index)``: no server, no network, what the call costs without nbinfer;
* **in-process, in chunks** (for reference): the same, in pieces of nbinfer's chunk size (a
  NumPy model is faster on cache-sized pieces; nothing else changes);
* **nbinfer**: ``session.infer("iris", frame)`` against the session's own server (chunked,
  8 requests in flight; chunks of 1 MiB and more take the local shared-memory path);
* **tritonclient loop**: the loop people write by hand with ``tritonclient.http``: split the
  frame into chunks of the same size as nbinfer's, convert each to a float32 matrix, binary
  infer, ``as_numpy``, then concatenate and wrap in a DataFrame with the frame's index;
* **tritonclient async_infer** (for reference): the same loop with ``async_infer`` and 4
  requests in flight, the most a hand-written loop usually adds.

Each round runs every way once, in that order; the figures are medians over ``--rounds``, and
the ratios are the median of each round's ratio (both sides of a ratio ran under the same load:
the figure to quote on a shared machine). Each way's client CPU per row (this process, all
threads) and, for the served ways, the server's CPU per row are printed too. Every way's output
is checked against nbinfer's: exactly equal for in-process, close for tritonclient.

The server side: the shipped demo ``iris`` runs its (NumPy) forward pass as two instances on
the server's threads (``instance_group`` count 2), so two chunks compute at once while the event
loop reads the next; that is what ``session.infer("iris", df)`` meets, and the default here.
``--instances N`` replaces it, in the same server, with the same model (same class, weights and
forward pass) at ``N`` instances in threads; ``--instances 0`` serves it inline on the event
loop, one chunk at a time with nothing read meanwhile (the demo as shipped before round five).
Usage::

    python benchmarks/dataframe.py                  # 5 M rows, 5 rounds, the demo iris
    python benchmarks/dataframe.py --instances 0    # iris inline on the server's event loop
    python benchmarks/dataframe.py --rows 10000000 --rounds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import tritonclient.http as httpclient

import nbinfer
from nbinfer.interop.chunks import DEFAULT_CHUNK_BYTES
from nbinfer.server.demo.nets import IRIS_LABELS, iris_predict, load_weights

COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
OUT_COLUMNS = [f"probabilities[{label}]" for label in IRIS_LABELS]
#: nbinfer's chunk for iris (16 bytes of input per row); the loops use the same.
CHUNK = DEFAULT_CHUNK_BYTES // (4 * 4)
#: The way the target row compares nbinfer with.
REFERENCE = "in-process"


def make_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    """``rows`` iris-like rows (float64 columns) under a shuffled integer index."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        rng.uniform(0.1, 8.0, (rows, 4)), columns=COLUMNS, index=rng.permutation(rows)
    )


#: The session server's token header (``Session()`` starts its server with a token).
HEADERS: dict[str, str] = {}


def in_process(weights: Any, frame: pd.DataFrame, chunk: int | None = None) -> pd.DataFrame:
    """The model's own forward pass on the frame, in this process (in pieces of ``chunk``)."""
    x = frame.to_numpy(dtype=np.float32)
    if chunk is None:
        probs = iris_predict(weights, x)
    else:
        probs = np.empty((len(x), len(OUT_COLUMNS)), dtype=np.float32)
        for start in range(0, len(x), chunk):
            probs[start : start + chunk] = iris_predict(weights, x[start : start + chunk])
    return pd.DataFrame(probs, columns=OUT_COLUMNS, index=frame.index, copy=False)


def tritonclient_loop(
    client: httpclient.InferenceServerClient, frame: pd.DataFrame, chunk: int
) -> pd.DataFrame:
    """Split, binary infer one chunk after the other, reassemble into a DataFrame."""
    parts = []
    for start in range(0, len(frame), chunk):
        x = frame.iloc[start : start + chunk].to_numpy(dtype=np.float32)
        inp = httpclient.InferInput("input", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        out = httpclient.InferRequestedOutput("probabilities", binary_data=True)
        result = client.infer("iris", [inp], outputs=[out], headers=HEADERS)
        parts.append(result.as_numpy("probabilities"))
    return pd.DataFrame(np.concatenate(parts), columns=OUT_COLUMNS, index=frame.index)


def tritonclient_async(
    client: httpclient.InferenceServerClient, frame: pd.DataFrame, chunk: int, in_flight: int = 4
) -> pd.DataFrame:
    """The same loop with ``async_infer``, ``in_flight`` requests outstanding."""
    pending, parts = [], []
    for start in range(0, len(frame), chunk):
        x = frame.iloc[start : start + chunk].to_numpy(dtype=np.float32)
        inp = httpclient.InferInput("input", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        out = httpclient.InferRequestedOutput("probabilities", binary_data=True)
        pending.append(client.async_infer("iris", [inp], outputs=[out], headers=HEADERS))
        if len(pending) >= in_flight:
            parts.append(pending.pop(0).get_result().as_numpy("probabilities"))
    parts += [p.get_result().as_numpy("probabilities") for p in pending]
    return pd.DataFrame(np.concatenate(parts), columns=OUT_COLUMNS, index=frame.index)


def server_cpu(process: Any) -> float:
    """CPU seconds the server process has used (0 without psutil)."""
    if process is None:
        return 0.0
    times = process.cpu_times()
    return float(times.user + times.system)


def measure(
    rows: int, rounds: int, instances: int | None, *, tritonclient: bool = True
) -> dict[str, Any]:
    """Run every way ``rounds`` times against one session; the figures as a dict.

    ``instances``: ``None`` serves the demo ``iris`` as shipped; ``N`` >= 1 the same model at
    ``N`` instances in threads; 0 the same model inline on the server's event loop.
    """
    frame = make_frame(rows)
    weights = load_weights("iris")
    with nbinfer.Session(device="cpu") as session:
        assert session.server is not None
        if instances is not None:
            from nbinfer.server.demo.models import Iris

            if instances:
                session.serve(Iris(run_in_thread=True, max_concurrency=instances))
            else:
                session.serve(Iris(run_in_thread=False, max_concurrency=None))
        try:
            import psutil
        except ImportError:  # the server CPU figures then read 0
            process = None
        else:
            process = psutil.Process(session.server.pid)
        url = session.server.http_url.removeprefix("http://")
        HEADERS["Authorization"] = f"Bearer {session.token}"
        triton = httpclient.InferenceServerClient(url, concurrency=4, network_timeout=600)
        ways: dict[str, Callable[[], pd.DataFrame]] = {
            REFERENCE: lambda: in_process(weights, frame),
            "in-process, in chunks": lambda: in_process(weights, frame, CHUNK),
            "nbinfer": lambda: session.infer("iris", frame, progress=False),
        }
        if tritonclient:
            ways["tritonclient loop"] = lambda: tritonclient_loop(triton, frame, CHUNK)
            ways["tritonclient async_infer"] = lambda: tritonclient_async(triton, frame, CHUNK)
        small = frame.head(1000)
        reference = session.infer("iris", small)  # warm up, and check the ways agree
        pd.testing.assert_frame_equal(
            in_process(weights, small), reference, check_exact=True, check_frame_type=False
        )
        if tritonclient:
            for loop in (tritonclient_loop, tritonclient_async):
                got = loop(triton, small, 100)
                pd.testing.assert_frame_equal(
                    got, reference, check_exact=False, rtol=1e-5, check_frame_type=False
                )
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        server: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            outputs = {}
            for name, way in ways.items():
                srv = server_cpu(process)
                started, cpu_started = time.perf_counter(), time.process_time()
                outputs[name] = way()
                seconds[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - cpu_started)
                server[name].append(server_cpu(process) - srv)
            ours = outputs["nbinfer"]
            assert ours.shape == (rows, 3) and ours.index.equals(frame.index)
            np.testing.assert_array_equal(ours.to_numpy(), outputs[REFERENCE].to_numpy())
            del outputs
        triton.close()
    ratios = {
        name: [a / b for a, b in zip(seconds["nbinfer"], seconds[name], strict=True)]
        for name in ways
        if name != "nbinfer"
    }
    return {
        "rows": rows,
        "rounds": rounds,
        "instances": instances,
        "chunk_rows": CHUNK,
        "seconds": seconds,
        "client_cpu_s": cpu,
        "server_cpu_s": server,
        "time_ratios": ratios,  # nbinfer's time / the way's, per round (lower: nbinfer faster)
        "median_time_ratio": {name: statistics.median(r) for name, r in ratios.items()},
    }


def report(figures: dict[str, Any]) -> None:
    """Print rows/s, CPU per row and the median ratios."""
    rows, rounds = figures["rows"], figures["rounds"]
    instances = figures["instances"]
    if instances is None:
        served = "demo as shipped"
    else:
        served = f"{instances} instances in threads" if instances else "inline on the event loop"
    print(
        f"iris ({served}), {rows:,} rows, chunks of {figures['chunk_rows']:,} rows, "
        f"median of {rounds} rounds"
    )
    for name, times in figures["seconds"].items():
        rate = rows / statistics.median(times)
        client_ns = statistics.median(figures["client_cpu_s"][name]) / rows * 1e9
        server_ns = statistics.median(figures["server_cpu_s"][name]) / rows * 1e9
        served_cpu = f"   server CPU {server_ns:5.1f} ns/row" if server_ns > 0.05 else ""
        print(
            f"  {name:26s} {statistics.median(times):6.3f} s  {rate / 1e6:6.2f} M rows/s"
            f"   client CPU {client_ns:5.1f} ns/row{served_cpu}"
        )
    for name, ratio in figures["median_time_ratio"].items():
        each = " ".join(f"{r:.2f}" for r in figures["time_ratios"][name])
        print(f"  nbinfer time / {name:26s} {ratio:5.2f}x   (rounds: {each})")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print it, and write the figures as JSON with ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--instances",
        type=int,
        default=None,
        help="serve iris at N instances in threads (0: inline on the event loop); "
        "default: the demo as shipped",
    )
    parser.add_argument("--no-tritonclient", action="store_true", help="leave out its loops")
    parser.add_argument("--json", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    figures = measure(args.rows, args.rounds, args.instances, tritonclient=not args.no_tritonclient)
    report(figures)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
