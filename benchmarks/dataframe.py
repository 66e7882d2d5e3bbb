"""DataFrame -> DataFrame inference on the demo ``iris`` model: nbinfer vs a tritonclient loop.

The same frame (by default 10 million rows of 4 float64 feature columns under a shuffled index,
as a CSV would give) goes through the embedded server's ``iris`` model three ways, in the same
run against the same server process, and comes back as a DataFrame of the three class
probabilities aligned with the input index:

* **nbinfer**: ``session.infer("iris", frame)`` (chunked, 8 requests in flight over HTTP);
* **tritonclient loop**: the loop people write by hand with ``tritonclient.http``: split the
  frame into chunks of the same size as nbinfer's, convert each to a float32 matrix, binary infer,
  ``as_numpy``, then concatenate and wrap in a DataFrame with the frame's index;
* **tritonclient async_infer** (for reference): the same loop with ``async_infer`` and 4
  requests in flight, the most a hand-written loop usually adds.

Each way runs ``--rounds`` times, alternating; medians are reported with the nbinfer / tritonclient
ratios, and each way's client CPU time per row (this process, all threads; the server is another
process). The outputs of the ways are checked to agree.

The server side: the shipped demo ``iris`` runs its (cheap, NumPy) forward pass inline on the
server's event loop, one request at a time, so the server's single core is the bottleneck and no
client can be more than a little faster than another. ``--instances N`` (default 2, one per core
of a 2-core machine) replaces it, in the same server, with the same model (same class, weights
and forward pass) configured like a Triton deployment would be: ``N`` instances run in threads
(``instance_group`` count ``N``). ``--instances 0`` keeps the demo as shipped. Usage::

    python benchmarks/dataframe.py                 # 10 M rows, 3 rounds, iris with 2 instances
    python benchmarks/dataframe.py --instances 0   # the demo iris as shipped
    python benchmarks/dataframe.py --rows 2000000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
import tritonclient.http as httpclient

import nbinfer
from nbinfer.interop.chunks import DEFAULT_CHUNK_BYTES
from nbinfer.server.demo.nets import IRIS_LABELS

COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
OUT_COLUMNS = [f"probabilities[{label}]" for label in IRIS_LABELS]


def make_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    """``rows`` iris-like rows (float64 columns) under a shuffled integer index."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        rng.uniform(0.1, 8.0, (rows, 4)), columns=COLUMNS, index=rng.permutation(rows)
    )


#: The session server's token header (``Session()`` starts its server with a token).
HEADERS: dict[str, str] = {}


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


def main() -> None:
    """Run the comparison and print rows/s and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instances", type=int, default=2, help="0: the demo iris as shipped")
    args = parser.parse_args()

    frame = make_frame(args.rows)
    chunk = DEFAULT_CHUNK_BYTES // (4 * 4)  # nbinfer's chunk for iris (16 bytes per row)
    with nbinfer.Session(device="cpu") as session:
        assert session.server is not None
        if args.instances:
            from nbinfer.server.demo.models import Iris

            session.serve(Iris(run_in_thread=True, max_concurrency=args.instances))
        url = session.server.http_url.removeprefix("http://")
        HEADERS["Authorization"] = f"Bearer {session.token}"
        triton = httpclient.InferenceServerClient(url, concurrency=4, network_timeout=600)
        ways: dict[str, Callable[[], pd.DataFrame]] = {
            "nbinfer": lambda: session.infer("iris", frame, progress=False),
            "tritonclient loop": lambda: tritonclient_loop(triton, frame, chunk),
            "tritonclient async_infer": lambda: tritonclient_async(triton, frame, chunk),
        }
        small = frame.head(1000)
        reference = session.infer("iris", small)
        for name in ways:  # warm up, and check the ways agree
            if name != "nbinfer":
                got = (
                    tritonclient_loop(triton, small, 100)
                    if name == "tritonclient loop"
                    else tritonclient_async(triton, small, 100)
                )
                pd.testing.assert_frame_equal(got, reference, check_exact=False, rtol=1e-5)
        times: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, way in ways.items():
                started, cpu_started = time.perf_counter(), time.process_time()
                out = way()
                times[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - cpu_started)
                assert out.shape == (len(frame), 3) and out.index.equals(frame.index)
        triton.close()

    served = f"{args.instances} instances in threads" if args.instances else "demo as shipped"
    print(
        f"iris ({served}), {args.rows:,} rows, chunks of {chunk:,} rows, "
        f"median of {args.rounds} rounds"
    )
    rates = {name: args.rows / statistics.median(t) for name, t in times.items()}
    for name, rate in rates.items():
        client_ns = statistics.median(cpu[name]) / args.rows * 1e9
        print(f"  {name:26s} {rate / 1e6:6.2f} M rows/s   client CPU {client_ns:5.1f} ns/row")
    for name in ("tritonclient loop", "tritonclient async_infer"):
        print(f"  nbinfer / {name:24s} {rates['nbinfer'] / rates[name]:5.2f}x")


if __name__ == "__main__":
    main()
