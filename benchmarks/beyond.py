"""Beyond one machine: rows/s of a Dask frame over 1, 2 and 4 servers, and Dask's overhead.

Scaling: a stand-in for a GPU model whose time is spent off the CPU: ``gpu`` sleeps a fixed
``--sleep`` (20 ms) per batch and runs one batch at a time per server (``instance_group`` count
1, as one GPU would), so a 2-core machine can show what more servers buy. The same Dask frame
(``--rows`` rows of 4 FP32 columns in ``--partitions`` partitions, built on the workers) goes
through ``session.infer("gpu", ddf, batch_size=--batch).compute()`` on a ``LocalCluster`` of 2
process workers, with a session over the first 1, 2 and 4 of 4 local servers (one ReplicaClient
per worker: least outstanding requests). Targets: >= 1.8x rows/s with 2 servers, >= 3.2x with 4.

Overhead: the CPU-bound demo ``iris`` on one server, the pandas path
(``session.infer("iris", frame)``) against the Dask path and the Spark path on the same rows.
The Spark path is ``nbinfer.spark.predict_batch_udf(url, "iris", expand=True)`` over a
``struct`` of the four columns on ``local[2]``, the result collected to pandas (Arrow on), from
a Spark frame of the same rows cached in the JVM (``--partitions`` partitions). The JVM's start,
the caching and Spark's first Python workers fall in the warm-up run, outside the timing.
Skipped (said so) when pyspark or a Java runtime is missing.

Each figure is the median of ``--rounds`` runs. Usage::

    python benchmarks/beyond.py                       # 2 M rows, 3 rounds
    python benchmarks/beyond.py --rows 400000 --rounds 1 --json out.json
    python benchmarks/beyond.py --skip-scaling        # the overhead rows only
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import nbinfer
from nbinfer.server.launcher import LocalServer

COLUMNS = ["a", "b", "c", "d"]

_MODEL = """
import time

from nbinfer.server.model import Model


class Gpu(Model):
    def predict(self, inputs, context):
        time.sleep({sleep})  # the device's time: off the CPU
        return {{"Y": inputs["X"] * 2}}
"""

_CONFIG = """
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [ -1, 4 ] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [ -1, 4 ] }]
instance_group [{ count: 1 kind: KIND_CPU }]
"""


def make_part(number: int, rows: int, run: int = 0) -> pd.DataFrame:
    """Partition ``number``: ``rows`` rows of 4 FP32 columns (built on the worker).

    ``run`` only makes each run's task keys new: Dask reuses a result whose key it still holds,
    so computing one frame twice in a row can skip the work.
    """
    values = np.random.default_rng(number).random((rows, 4), dtype=np.float32) * 8
    return pd.DataFrame(
        values, columns=COLUMNS, index=pd.RangeIndex(number * rows, (number + 1) * rows)
    )


def _median_rate(run: Any, rows: int, rounds: int) -> float:
    """Median rows/s of ``run(round)`` (after one warm-up run)."""
    run(-1)
    rates = []
    for number in range(rounds):
        start = time.perf_counter()
        run(number)
        rates.append(rows / (time.perf_counter() - start))
    return statistics.median(rates)


def spark_rate(url: str, whole: pd.DataFrame, partitions: int, rounds: int) -> float | None:
    """Median rows/s of ``iris`` through nbinfer.spark on ``local[2]`` (None: no Spark here)."""
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import struct
    except ImportError:
        return None
    if shutil.which("java") is None:
        return None
    import nbinfer.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("nbinfer-beyond")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        sdf = spark.createDataFrame(whole).repartition(partitions).cache()
        sdf.count()  # in the JVM's memory before the clock starts
        iris = nbinfer.spark.predict_batch_udf(url, "iris", expand=True)
        features = struct(*COLUMNS)

        def run(number: int) -> None:
            sdf.withColumn("p", iris(features)).select("p.*").toPandas()

        return _median_rate(run, len(whole), rounds)
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--sleep", type=float, default=0.02)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--skip-scaling", action="store_true", help="only the overhead rows (pandas, Dask, Spark)"
    )
    args = parser.parse_args()

    import dask.dataframe as dd
    from distributed import Client as DaskClient
    from distributed import LocalCluster

    repo = Path(tempfile.mkdtemp(prefix="nbinfer-beyond-"))
    atexit.register(shutil.rmtree, repo, True)  # the temporary repository goes at exit
    (repo / "gpu" / "1").mkdir(parents=True)
    (repo / "gpu" / "1" / "model.py").write_text(_MODEL.format(sleep=args.sleep))
    (repo / "gpu" / "config.pbtxt").write_text(_CONFIG)
    per_part = args.rows // args.partitions
    rows = per_part * args.partitions
    servers = [
        LocalServer(model_repository=repo, demo=True, device="cpu", auth_token=None).start()
        for _ in range(4)
    ]
    figures: dict[str, Any] = {"rows": rows, "batch": args.batch, "sleep": args.sleep}
    try:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None
            ) as cluster,
            DaskClient(cluster),
        ):

            def frame(run: int) -> Any:
                return dd.from_map(make_part, range(args.partitions), rows=per_part, run=run)

            for count in () if args.skip_scaling else (1, 2, 4):
                with nbinfer.Session([s.http_url for s in servers[:count]]) as session:

                    def gpu(run: int, session: nbinfer.Session = session) -> None:
                        options = {"columns": {"X": COLUMNS}, "batch_size": args.batch}
                        session.infer("gpu", frame(run), **options).compute()

                    rate = _median_rate(gpu, rows, args.rounds)
                figures[f"servers_{count}"] = rate
                print(
                    f"gpu (sleep {args.sleep * 1000:.0f} ms/batch), {count} server(s): "
                    f"{rate:,.0f} rows/s"
                )
            for count, target in () if args.skip_scaling else ((2, 1.8), (4, 3.2)):
                ratio = figures[f"servers_{count}"] / figures["servers_1"]
                figures[f"speedup_{count}"] = ratio
                print(f"  {count} servers: {ratio:.2f}x (target >= {target}x)")

            # overhead on the CPU-bound iris, one server
            whole = pd.concat([make_part(i, per_part) for i in range(args.partitions)])
            with nbinfer.Session(servers[0].http_url) as session:
                pandas_rate = _median_rate(
                    lambda run: session.infer("iris", whole, progress=False), rows, args.rounds
                )
                dask_rate = _median_rate(
                    lambda run: session.infer("iris", frame(run)).compute(), rows, args.rounds
                )
            figures["iris_pandas"] = pandas_rate
            figures["iris_dask"] = dask_rate
            print(
                f"iris, 1 server: pandas path {pandas_rate:,.0f} rows/s, "
                f"Dask path {dask_rate:,.0f} rows/s ({dask_rate / pandas_rate:.2f}x)"
            )
        # outside the Dask cluster: Spark's local[2] gets the machine as the others did
        rate = spark_rate(servers[0].http_url, whole, args.partitions, args.rounds)
        if rate is None:
            print("iris, 1 server: Spark path skipped (no pyspark or no Java runtime)")
        else:
            figures["iris_spark"] = rate
            print(
                f"iris, 1 server: Spark path (local[2], JVM start excluded) {rate:,.0f} rows/s "
                f"({rate / figures['iris_pandas']:.2f}x the pandas path)"
            )
    finally:
        for s in servers:
            s.stop()
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
