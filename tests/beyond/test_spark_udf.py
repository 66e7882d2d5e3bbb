"""nbinfer.spark.predict_batch_udf on a real local Spark (local[2]) against 2 real servers."""

from __future__ import annotations

import os
import shutil
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

    session = (
        SparkSession.builder.master("local[2]")
        .appName("nbinfer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _iris_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    values = rng.random((rows, 4), dtype=np.float32) * np.float32(7.0) + np.float32(0.5)
    frame = pd.DataFrame(values, columns=COLUMNS)
    frame.insert(0, "id", np.arange(rows, dtype=np.int64))
    return frame


def test_the_udf_gives_exactly_the_pandas_paths_probabilities(
    spark: object, two_servers: list[LocalServer]
) -> None:
    frame = _iris_frame(50_000)
    urls = [s.http_url for s in two_servers]
    iris = nbinfer.spark.predict_batch_udf(urls, "iris", batch_size=5000)
    sdf = spark.createDataFrame(frame).repartition(2)  # type: ignore[attr-defined]
    out = (
        sdf.withColumn("p", iris(spark_functions.array(*COLUMNS)))
        .select("id", "p")
        .toPandas()
        .sort_values("id")
    )
    with nbinfer.Session(urls) as session:
        expected = session.infer("iris", frame[COLUMNS], progress=False)
    got = np.stack(out["p"].to_numpy())
    assert got.dtype == np.float32 and got.shape == (len(frame), 3)
    np.testing.assert_array_equal(got, expected.to_numpy())
    assert list(out["id"]) == list(range(len(frame)))  # every row once


def test_several_outputs_make_a_struct_and_the_return_type_comes_from_metadata(
    spark: object, two_servers: list[LocalServer]
) -> None:
    udf = nbinfer.spark.predict_batch_udf(two_servers[0].http_url, "two", batch_size=7)
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


def test_a_server_killed_mid_run_loses_and_duplicates_no_row(
    spark: object, two_servers: list[LocalServer]
) -> None:
    urls = [s.http_url for s in two_servers]
    slow = nbinfer.spark.predict_batch_udf(urls, "slow", outputs=["Y"], batch_size=5)
    frame = pd.DataFrame(np.arange(240, dtype=np.float32).reshape(60, 4), columns=COLUMNS)
    frame.insert(0, "id", np.arange(60))
    sdf = spark.createDataFrame(frame).repartition(2)  # type: ignore[attr-defined]
    import threading

    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        with nbinfer.Client(two_servers[0].http_url) as client:
            while not stop.is_set():
                stats = client.get_inference_statistics("slow")["model_stats"]
                done = sum(int(s["inference_stats"]["success"]["count"]) for s in stats)
                if done > 0:
                    kill(two_servers[0])
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
    two_servers: list[LocalServer],
) -> None:
    with pytest.raises(nbinfer.InvalidInputError, match=r"no output\(s\) \['nope'\]"):
        nbinfer.spark.predict_batch_udf(two_servers[0].http_url, "iris", outputs=["nope"])
    spec = nbinfer.TensorSpec("big", "UINT64", [-1])
    with pytest.raises(nbinfer.InvalidInputError, match="Spark has no such type"):
        nbinfer.spark.spark_type(spec, "m")
