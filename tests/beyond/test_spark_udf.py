"""nbinfer.spark.predict_batch_udf on a real local Spark (local[2]) against 2 real servers."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.server.launcher import LocalServer
from tests.beyond.servers import kill

pyspark = pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs a Java runtime (.ci/run installs one)", allow_module_level=True)
spark_functions = pytest.importorskip("pyspark.sql.functions")
spark_types = pytest.importorskip("pyspark.sql.types")

import nbinfer.spark  # noqa: E402  (after the skip: it needs pyspark at call time only)

COLUMNS = ["sl", "sw", "pl", "pw"]

# Spark's JVM and its Python workers start slowly on a loaded 2-core machine (~45 s measured for
# the session alone): these tests get more than the default 120 s.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    stop_button = signal.getsignal(signal.SIGINT)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("nbinfer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # 100,000 rows per Arrow batch (Spark's default 10,000): a tenth of the batches for the
        # 10 M rows, ~1/3 less CPU in the JVM and the Python workers (1,000,000 ran the driver's
        # default 1 GiB heap out of memory collecting them)
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        # the JIT's first tier only and one GC thread: half the CPU to start the JVM and run its
        # first jobs, which is most of what these tests ask of it
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # SparkContext makes SIGINT cancel its jobs and never gives Python's handler back; the tests
    # that run next in this worker expect the one a kernel has (tests/conftest.py checks this)
    signal.signal(signal.SIGINT, stop_button)


ROWS = 10_000_000
# Feature j of row ``id`` is ((id * m) % k) / 100 + 0.5 as FP32: Spark computes it on the JVM
# (long, then double arithmetic, then a cast to float) and numpy in the same IEEE steps, so both
# sides hold the very same float32 values without shipping 10 M rows from Python to the JVM.
_FEATURES = ((7919, 1009), (104729, 997), (15485863, 1013), (32452843, 991))


def _features_on_the_jvm(spark: object, rows: int) -> object:
    col = spark_functions.col
    frame = spark.range(0, rows, 1, 2)  # type: ignore[attr-defined]
    for name, (m, k) in zip(COLUMNS, _FEATURES, strict=True):
        frame = frame.withColumn(name, ((col("id") * m % k) / 100.0 + 0.5).cast("float"))
    return frame


def _features_in_pandas(rows: int) -> pd.DataFrame:
    ids = np.arange(rows, dtype=np.int64)
    return pd.DataFrame(
        {
            name: (((ids * m) % k) / 100.0 + 0.5).astype(np.float32)
            for name, (m, k) in zip(COLUMNS, _FEATURES, strict=True)
        }
    )


def _served(server: LocalServer, model: str) -> int:
    with nbinfer.Client(server.http_url) as client:
        stats = client.get_inference_statistics(model)["model_stats"]
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


def test_10_million_rows_give_exactly_the_pandas_paths_columns(
    spark: object, shared_servers: list[LocalServer]
) -> None:
    urls = [s.http_url for s in shared_servers]
    before = [_served(s, "iris") for s in shared_servers]
    iris = nbinfer.spark.predict_batch_udf(urls, "iris", expand=True)
    sdf = _features_on_the_jvm(spark, ROWS)
    out = (
        sdf.withColumn("p", iris(spark_functions.struct(*COLUMNS)))  # type: ignore[attr-defined]
        .select("id", "p.*")
        .toPandas()
    )
    after = [_served(s, "iris") for s in shared_servers]
    ids = out.pop("id").to_numpy()
    order = np.argsort(ids, kind="stable")
    np.testing.assert_array_equal(ids[order], np.arange(ROWS))  # every row once
    got = out.iloc[order].reset_index(drop=True)
    with nbinfer.Session(urls) as session:
        expected = session.infer("iris", _features_in_pandas(ROWS), progress=False)
    assert list(got.columns) == list(expected.columns)  # the pandas path's names and order
    assert list(got.columns) == [
        "probabilities[setosa]",
        "probabilities[versicolor]",
        "probabilities[virginica]",
    ]
    assert [str(d) for d in got.dtypes] == ["float32"] * 3
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())
    assert all(a > b for a, b in zip(after, before, strict=True))  # both servers did work


def test_array_columns_in_and_out_give_the_pandas_paths_values(
    spark: object, shared_servers: list[LocalServer]
) -> None:
    frame = _features_in_pandas(2000)
    frame.insert(0, "id", np.arange(len(frame), dtype=np.int64))
    iris = nbinfer.spark.predict_batch_udf(shared_servers[0].http_url, "iris", batch_size=300)
    sdf = spark.createDataFrame(frame).repartition(2)  # type: ignore[attr-defined]
    out = (
        sdf.withColumn("p", iris(spark_functions.array(*COLUMNS)))
        .select("id", "p")
        .toPandas()
        .sort_values("id")
    )
    with nbinfer.Session(shared_servers[0].http_url) as session:
        expected = session.infer("iris", frame[COLUMNS], progress=False)
    got = np.stack(out["p"].to_numpy())
    assert got.dtype == np.float32 and got.shape == (len(frame), 3)
    np.testing.assert_array_equal(got, expected.to_numpy())
    assert list(out["id"]) == list(range(len(frame)))


def test_a_local_server_with_its_token_serves_the_workers_without_auth(spark: object) -> None:
    # LocalServer generates a token; Spark's Python workers are other processes, so the UDF
    # must carry it (without it every worker's call is refused as unauthenticated)
    with LocalServer(demo=True) as server:
        assert server.auth_token is not None
        frame = _features_in_pandas(500)
        iris = nbinfer.spark.predict_batch_udf(server.http_url, "iris", expand=True)
        sdf = spark.createDataFrame(frame).coalesce(1)  # type: ignore[attr-defined]
        got = sdf.select(iris(spark_functions.struct(*COLUMNS)).alias("p")).select("p.*")
        with nbinfer.Session(server.http_url) as session:
            expected = session.infer("iris", frame, progress=False)
        np.testing.assert_array_equal(got.toPandas().to_numpy(), expected.to_numpy())


def test_several_outputs_make_a_struct_and_the_return_type_comes_from_metadata(
    spark: object, shared_servers: list[LocalServer]
) -> None:
    udf = nbinfer.spark.predict_batch_udf(shared_servers[0].http_url, "two", batch_size=7)
    frame = pd.DataFrame(np.arange(40, dtype=np.float32).reshape(10, 4), columns=COLUMNS)
    frame.insert(0, "id", np.arange(10))
    sdf = spark.createDataFrame(frame)  # type: ignore[attr-defined]
    result = sdf.withColumn("out", udf(spark_functions.array(*COLUMNS)))
    field = result.schema["out"].dataType
    assert isinstance(field, spark_types.StructType)
    assert [(f.name, type(f.dataType).__name__) for f in field.fields] == [
        ("Y", "ArrayType"),
        ("S", "DoubleType"),
    ]
    rows = result.select("id", "out.Y", "out.S").toPandas().sort_values("id")
    x = frame[COLUMNS].to_numpy()
    np.testing.assert_array_equal(np.stack(rows["Y"].to_numpy()), x * 2)
    np.testing.assert_array_equal(rows["S"].to_numpy(), x.sum(axis=1, dtype=np.float64))


def test_expand_gives_one_scalar_field_per_value_named_as_the_pandas_columns(
    spark: object, shared_servers: list[LocalServer]
) -> None:
    udf = nbinfer.spark.predict_batch_udf(shared_servers[0].http_url, "two", expand=True)
    frame = pd.DataFrame(np.arange(40, dtype=np.float32).reshape(10, 4), columns=COLUMNS)
    sdf = spark.createDataFrame(frame)  # type: ignore[attr-defined]
    result = sdf.withColumn("out", udf(spark_functions.struct(*COLUMNS)))
    field = result.schema["out"].dataType
    assert [(f.name, type(f.dataType).__name__) for f in field.fields] == [
        ("Y[0]", "FloatType"),
        ("Y[1]", "FloatType"),
        ("Y[2]", "FloatType"),
        ("Y[3]", "FloatType"),
        ("S", "DoubleType"),
    ]
    got = result.select("out.*").toPandas()
    with nbinfer.Session(shared_servers[0].http_url) as session:
        expected = session.infer("two", frame, progress=False)
    assert list(got.columns) == list(expected.columns)
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())


def test_a_server_killed_mid_run_loses_and_duplicates_no_row(
    spark: object, shared_servers: list[LocalServer]
) -> None:
    urls = [s.http_url for s in shared_servers]
    slow = nbinfer.spark.predict_batch_udf(urls, "slow", outputs=["Y"], batch_size=5)
    frame = pd.DataFrame(np.arange(240, dtype=np.float32).reshape(60, 4), columns=COLUMNS)
    frame.insert(0, "id", np.arange(60))
    sdf = spark.createDataFrame(frame).repartition(2)  # type: ignore[attr-defined]
    import threading

    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        with nbinfer.Client(shared_servers[0].http_url) as client:
            while not stop.is_set():
                stats = client.get_inference_statistics("slow")["model_stats"]
                done = sum(int(s["inference_stats"]["success"]["count"]) for s in stats)
                if done > 0:
                    kill(shared_servers[0])
                    killed.append(done)
                    return
                stop.wait(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        out = (
            sdf.withColumn("y", slow(spark_functions.array(*COLUMNS)))
            .select("id", "y")
            .toPandas()
            .sort_values("id")
        )
    finally:
        stop.set()
        thread.join()
    assert killed and killed[0] < 12  # mid-run: 12 requests in all
    assert list(out["id"]) == list(range(60))
    np.testing.assert_array_equal(np.stack(out["y"].to_numpy()), frame[COLUMNS].to_numpy() * 2)


def test_unknown_outputs_and_types_spark_cannot_carry_are_refused(
    shared_servers: list[LocalServer],
) -> None:
    with pytest.raises(nbinfer.InvalidInputError, match=r"no output\(s\) \['nope'\]"):
        nbinfer.spark.predict_batch_udf(shared_servers[0].http_url, "iris", outputs=["nope"])
    spec = nbinfer.TensorSpec("big", "UINT64", [-1])
    with pytest.raises(nbinfer.InvalidInputError, match="Spark has no such type"):
        nbinfer.spark.spark_type(spec, "m")
