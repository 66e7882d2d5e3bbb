"""Polars frames in and out: the pandas rules, zero-copy reads, a real server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")

import nbinfer  # noqa: E402
from nbinfer import Session  # noqa: E402
from nbinfer.errors import DataTypeError, InvalidInputError  # noqa: E402
from nbinfer.interop.pandas import plan_inputs, request_from_dataframe  # noqa: E402
from nbinfer.interop.polars import column_values, outputs_to_polars  # noqa: E402
from nbinfer.protocol.types import InferOutput, ModelMetadata, TensorSpec  # noqa: E402

IRIS_COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
IRIS = ModelMetadata("iris", inputs=[TensorSpec("INPUT", "FP32", [-1, 4])])
TWO = ModelMetadata(
    "two", inputs=[TensorSpec("x", "INT64", [-1]), TensorSpec("text", "BYTES", [-1, 1])]
)
ONE = ModelMetadata("one", inputs=[TensorSpec("x", "FP32", [-1])])


def iris_pandas(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.uniform(0.1, 8.0, (n, 4)), columns=IRIS_COLUMNS)


def to_polars(frame: pd.DataFrame) -> object:
    """The same data as a Polars frame, built from NumPy (no pyarrow needed)."""
    return pl.DataFrame({c: frame[c].to_numpy() for c in frame.columns})


def same_frames(got: object, frame: pd.DataFrame) -> None:
    """``got`` (Polars) has ``frame``'s columns, in order, with its dtypes and values."""
    assert isinstance(got, pl.DataFrame)
    assert got.columns == list(frame.columns)
    for name in frame.columns:
        values = got[name].to_numpy()
        if frame[name].dtype.kind == "O":
            assert values.tolist() == frame[name].tolist(), name
        else:
            assert values.dtype == frame[name].dtype, name
            np.testing.assert_array_equal(values, frame[name].to_numpy(), err_msg=name)


# ------------------------------------------------------------- zero-copy reads (no server)


def test_a_null_free_numeric_column_is_read_without_a_copy() -> None:
    frame = pl.DataFrame({"x": np.arange(1000, dtype=np.float32)})
    values = column_values(frame["x"], "x")
    assert np.shares_memory(values, frame["x"].to_numpy())  # Polars' own buffer
    (_, _, tensor) = plan_inputs(frame, ONE).tensors(10, 20)[0]
    assert np.shares_memory(tensor, values) and tensor.tolist() == list(range(10, 20))


def test_an_array_column_feeds_a_2d_input_from_its_buffer() -> None:
    rows = np.arange(64, dtype=np.float32).reshape(4, 16)
    frame = pl.DataFrame({"INPUT0": rows})
    assert frame.schema["INPUT0"] == pl.Array(pl.Float32, 16)
    values = column_values(frame["INPUT0"], "INPUT0")
    assert values.shape == (4, 16) and np.shares_memory(values, frame["INPUT0"].to_numpy())
    wide = ModelMetadata("wide", inputs=[TensorSpec("INPUT0", "FP32", [-1, 16])])
    (_, _, tensor) = plan_inputs(frame, wide).tensors()[0]
    assert np.shares_memory(tensor, values)
    np.testing.assert_array_equal(tensor, rows)


@pytest.mark.parametrize(("values", "kind"), [(["a", None], "String"), ([True, None], "Boolean")])
def test_nulls_in_a_non_numeric_column_are_refused_by_name(values: list, kind: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"column 'col' \({kind}\) has 1 null value"):
        plan_inputs(pl.DataFrame({"col": values}), None)


def test_numeric_result_columns_wrap_the_received_arrays() -> None:
    received = np.arange(12, dtype=np.float32).reshape(6, 2)
    scores = np.arange(6, dtype=np.float64)
    outputs = [InferOutput("p", "FP32", [6, 2], received), InferOutput("s", "FP64", [6], scores)]
    frame = outputs_to_polars(outputs, labels={"p": ["no", "yes"]})
    assert frame.columns == ["p[no]", "p[yes]", "s"]
    assert np.shares_memory(frame["s"].to_numpy(), scores)  # [n]: no copy
    np.testing.assert_array_equal(frame["p[yes]"].to_numpy(), received[:, 1])  # strided: copied
    kept = outputs_to_polars(outputs, expand=False)
    assert kept.schema["p"] == pl.Array(pl.Float32, 2)
    assert np.shares_memory(kept["p"].to_numpy(), received)


def test_a_lazy_frame_is_refused_with_what_to_do() -> None:
    lazy = pl.DataFrame({"x": [1.0]}).lazy()
    with pytest.raises(InvalidInputError, match=r"LazyFrame .*\.collect\(\)"):
        request_from_dataframe(lazy, ONE)


# --------------------------------------------------------- the pandas rules (no server)


@pytest.mark.parametrize(
    ("metadata", "frame", "columns"),
    [
        (IRIS, pd.DataFrame({c: [1.0, 2.0] for c in IRIS_COLUMNS[:3]}), None),
        (IRIS, pd.DataFrame({c: [1.0, 2.0] for c in [*IRIS_COLUMNS, "extra"]}), None),
        (TWO, pd.DataFrame({"x": [1, 2], "words": ["a", "b"], "more": [1, 2]}), None),
        (TWO, pd.DataFrame({"x": [1, 2], "text": ["a", "b"]}), {"x": "nope"}),
        (IRIS, pd.DataFrame({c: ["a", "b"] for c in IRIS_COLUMNS}), None),
        (IRIS, pd.DataFrame({c: [1.0, 1e40] for c in IRIS_COLUMNS}), None),  # lossy
    ],
)
def test_bad_columns_give_the_pandas_error_word_for_word(
    metadata: ModelMetadata, frame: pd.DataFrame, columns: dict | None
) -> None:
    with pytest.raises(InvalidInputError) as from_pandas:
        request_from_dataframe(frame, metadata, columns=columns)
    with pytest.raises(InvalidInputError) as from_polars:
        nbinfer.request_from_dataframe(to_polars(frame), metadata, columns=columns)
    assert type(from_polars.value) is type(from_pandas.value)
    assert str(from_polars.value) == str(from_pandas.value)


# --------------------------------------------------------------------------- on a server


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_large_polars_frame_is_chunked_and_gives_the_pandas_result(
    session: Session, protocol: str
) -> None:
    assert session.server is not None
    url = session.server.http_url if protocol == "http" else session.server.grpc_url
    frame = iris_pandas(100_003, seed=1)
    with Session(url, token=session.token) as remote:
        got = remote.infer("iris", to_polars(frame), batch_size=4096, concurrency=4, progress=False)
        expected = remote.infer("iris", frame, batch_size=4096, concurrency=4, progress=False)
    assert got.height == 100_003 and got.columns[0] == "probabilities[setosa]"
    same_frames(got, expected)


def test_ainfer_returns_a_polars_frame(session: Session) -> None:
    frame = iris_pandas(257)

    async def run() -> object:
        return await session.ainfer("iris", to_polars(frame), batch_size=10)

    got = asyncio.run(run())
    same_frames(got, session.infer("iris", frame, batch_size=10, progress=False))


def test_array_columns_text_and_classification_as_for_pandas(session: Session) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random((30, 16), dtype=np.float32), rng.random((30, 16), dtype=np.float32)
    got = session.infer("add_sub", pl.DataFrame({"INPUT0": a, "INPUT1": b}), batch_size=4)
    expected = session.infer("add_sub", pd.DataFrame({"INPUT0": list(a), "INPUT1": list(b)}))
    same_frames(got, expected)
    kept = session.infer("add_sub", pl.DataFrame({"INPUT0": a, "INPUT1": b}), expand=False)
    assert kept.schema["OUTPUT0"] == pl.Array(pl.Float32, 16)
    np.testing.assert_allclose(kept["OUTPUT1"].to_numpy(), a - b)
    words = ["alpha", "β-ünïcode", "", "x" * 300] * 25
    echoed = session.infer("echo", pl.DataFrame({"INPUT0": words}), batch_size=9, progress=False)
    assert echoed["OUTPUT0"].to_list() == words and echoed.schema["OUTPUT0"] == pl.String
    frame = iris_pandas(40, seed=3)
    top = session.infer("iris", to_polars(frame), classification=1)
    same_frames(top, session.infer("iris", frame, classification=1))


def test_nulls_in_a_float_column_are_sent_as_nan_and_logged_like_pandas(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    frame = iris_pandas(6)
    frame.iloc[[1, 4], 2] = np.nan
    expected = session.infer("iris", frame)
    nulls = to_polars(frame).with_columns(pl.col("petal_length").fill_nan(None))
    assert nulls["petal_length"].null_count() == 2
    with caplog.at_level(logging.WARNING, logger="nbinfer"):
        got = session.infer("iris", nulls)
    assert expected.attrs["note"].startswith("2 of 6 rows had NaN inputs")
    assert expected.attrs["note"] in caplog.text
    same_frames(got, expected)


def test_a_null_in_an_integer_input_is_refused_as_pandas_nan_is(session: Session) -> None:
    with pytest.raises(DataTypeError, match=r"column 'INPUT0'.*holds nan"):
        session.infer("echo", pl.DataFrame({"INPUT0": [1, None]}), inputs={"INPUT0": "INT64"})


def test_session_infer_refuses_a_lazy_frame(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="collect"):
        session.infer("iris", to_polars(iris_pandas(2)).lazy())
