"""Arrow Tables / RecordBatches in and out: the pandas rules, zero-copy reads, a real server."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")

import nbinfer  # noqa: E402
from nbinfer import Client, Session  # noqa: E402
from nbinfer.errors import DataTypeError, InvalidInputError  # noqa: E402
from nbinfer.interop.arrow import column_values, outputs_to_arrow  # noqa: E402
from nbinfer.interop.pandas import plan_frame, plan_inputs, request_from_dataframe  # noqa: E402
from nbinfer.protocol.types import InferOutput, ModelMetadata, TensorSpec  # noqa: E402

IRIS_COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
ONE = ModelMetadata("one", inputs=[TensorSpec("x", "FP32", [-1])])
WIDE = ModelMetadata("wide", inputs=[TensorSpec("INPUT0", "FP32", [-1, 16])])


def iris_pandas(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.uniform(0.1, 8.0, (n, 4)), columns=IRIS_COLUMNS)


def address(values: np.ndarray) -> int:
    return int(values.__array_interface__["data"][0])


def same_frames(table: object, frame: pd.DataFrame) -> None:
    """``table`` (Arrow) has ``frame``'s columns, in order, with its dtypes and values."""
    assert isinstance(table, pa.Table)
    assert table.column_names == list(frame.columns)
    for name in frame.columns:
        got = table.column(name).to_numpy()
        if frame[name].dtype.kind == "O":
            assert got.tolist() == frame[name].tolist(), name
        else:
            assert got.dtype == frame[name].dtype, name
            np.testing.assert_array_equal(got, frame[name].to_numpy(), err_msg=name)


# ---------------------------------------------------------------------- import stays light


def test_import_nbinfer_loads_neither_pyarrow_nor_polars() -> None:
    code = (
        "import json, sys, nbinfer; nbinfer.Session; nbinfer.request_from_dataframe; "
        "import nbinfer.interop.pandas, nbinfer.interop.chunks, nbinfer.session.frames; "
        "print(json.dumps(sorted(m for m in ('pyarrow', 'polars') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# ------------------------------------------------------------- zero-copy reads (no server)


def test_a_null_free_numeric_column_is_a_view_on_the_arrow_buffer() -> None:
    data = np.arange(1000, dtype=np.float32)
    table = pa.table({"x": data})
    buffer = table.column("x").chunk(0).buffers()[1]
    values = column_values(table.column("x"), "x")
    assert address(values) == buffer.address and not values.flags.writeable
    # the plan sends rows of a column already in the input's dtype as slices of that view
    plan = plan_inputs(table, ONE)
    (_, _, tensor) = plan.tensors(10, 20)[0]
    assert address(tensor) == buffer.address + 10 * 4
    assert np.shares_memory(tensor, values)


def test_a_fixed_size_list_column_is_a_2d_view_on_its_child_buffer() -> None:
    rows = np.arange(64, dtype=np.float32).reshape(4, 16)
    cells = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), 16)
    table = pa.table({"INPUT0": cells}).slice(1)  # an offset: still a view
    values = column_values(table.column("INPUT0"), "INPUT0")
    assert values.shape == (3, 16)
    assert address(values) == cells.values.buffers()[1].address + 16 * 4
    np.testing.assert_array_equal(values, rows[1:])
    (_, datatype, tensor) = plan_inputs(table, WIDE).tensors()[0]
    assert datatype == "FP32" and tensor.shape == (3, 16) and np.shares_memory(tensor, values)


def test_copies_only_where_the_buffer_cannot_be_read_as_is() -> None:
    chunked = pa.chunked_array([pa.array([1.0, 2.0]), pa.array([3.0])])
    np.testing.assert_array_equal(column_values(chunked, "x"), [1.0, 2.0, 3.0])
    with_nulls = column_values(pa.chunked_array([pa.array([1, None, 3])]), "n")
    assert with_nulls.dtype == np.float64 and np.isnan(with_nulls[1])  # as pandas reads it
    flags = column_values(pa.chunked_array([pa.array([True, False])]), "b")
    assert flags.dtype == np.bool_ and flags.tolist() == [True, False]


@pytest.mark.parametrize(
    ("values", "kind"),
    [(["a", None], "string"), ([True, None], "bool")],
)
def test_nulls_in_a_non_numeric_column_are_refused_by_name(values: list, kind: str) -> None:
    table = pa.table({"col": pa.array(values)})
    with pytest.raises(InvalidInputError, match=rf"column 'col' \({kind}\) has 1 null value"):
        plan_inputs(table, None)


def test_spec_less_metadata_reads_datatypes_and_shapes_off_arrow_columns() -> None:
    cells = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(32, dtype=np.float32)), 16)
    words = pa.array(["a", "b"]).dictionary_encode()
    table = pa.table({"INPUT0": cells, "words": words, "n": pa.array([1, 2], pa.int16())})
    plan = plan_frame(table, ModelMetadata("kserve", inputs=[]))
    specs = [(p.spec.name, p.spec.datatype, list(p.spec.shape)) for p in plan.planned]
    assert specs == [("INPUT0", "FP32", [-1, 16]), ("words", "BYTES", [-1]), ("n", "INT16", [-1])]
    tensors = {name: array for name, _, array in plan.tensors()}
    assert tensors["INPUT0"].shape == (2, 16) and tensors["words"].tolist() == [b"a", b"b"]


def test_numeric_result_columns_wrap_the_received_arrays() -> None:
    received = np.arange(12, dtype=np.float32).reshape(6, 2)
    scores = np.arange(6, dtype=np.float64)
    outputs = [InferOutput("p", "FP32", [6, 2], received), InferOutput("s", "FP64", [6], scores)]
    table = outputs_to_arrow(outputs, labels={"p": ["no", "yes"]}, note="said")
    assert table.column_names == ["p[no]", "p[yes]", "s"]
    assert table.schema.metadata == {b"nbinfer.note": b"said"}
    assert table.column("s").chunk(0).buffers()[1].address == address(scores)  # no copy
    np.testing.assert_array_equal(table.column("p[yes]").to_numpy(), received[:, 1])
    kept = outputs_to_arrow(outputs, expand=False, record_batch=True)
    assert isinstance(kept, pa.RecordBatch)
    assert kept.column(0).values.buffers()[1].address == address(received)


# --------------------------------------------------------- the pandas rules (no server)


IRIS = ModelMetadata("iris", inputs=[TensorSpec("INPUT", "FP32", [-1, 4])])
TWO = ModelMetadata(
    "two", inputs=[TensorSpec("x", "INT64", [-1]), TensorSpec("text", "BYTES", [-1, 1])]
)


@pytest.mark.parametrize(
    ("metadata", "frame", "columns"),
    [
        (IRIS, pd.DataFrame({c: [1.0, 2.0] for c in IRIS_COLUMNS[:3]}), None),  # missing
        (IRIS, pd.DataFrame({c: [1.0, 2.0] for c in [*IRIS_COLUMNS, "extra"]}), None),  # extra
        (TWO, pd.DataFrame({"x": [1, 2], "words": ["a", "b"], "more": [1, 2]}), None),
        (TWO, pd.DataFrame({"x": [1, 2], "text": ["a", "b"]}), {"x": "nope"}),
        (IRIS, pd.DataFrame({c: ["a", "b"] for c in IRIS_COLUMNS}), None),  # uncoercible
    ],
)
def test_bad_columns_give_the_pandas_error_word_for_word(
    metadata: ModelMetadata, frame: pd.DataFrame, columns: dict | None
) -> None:
    with pytest.raises(InvalidInputError) as from_pandas:
        request_from_dataframe(frame, metadata, columns=columns)
    for table in (pa.Table.from_pandas(frame), pa.RecordBatch.from_pandas(frame)):
        with pytest.raises(InvalidInputError) as from_arrow:
            request_from_dataframe(table, metadata, columns=columns)
        assert str(from_arrow.value) == str(from_pandas.value)
        assert from_arrow.value.context == from_pandas.value.context


def test_lossy_numbers_are_refused_as_for_pandas() -> None:
    frame = pd.DataFrame({c: [1.0, 1e40] for c in IRIS_COLUMNS})
    with pytest.raises(DataTypeError) as from_pandas:
        request_from_dataframe(frame, IRIS)
    with pytest.raises(DataTypeError) as from_arrow:
        request_from_dataframe(pa.Table.from_pandas(frame), IRIS)
    assert str(from_arrow.value) == str(from_pandas.value)
    assert "column 'sepal_length'" in str(from_arrow.value)


def test_request_from_dataframe_takes_a_table_as_it_takes_pandas() -> None:
    frame = pd.DataFrame({"x": [1, 2, 3], "text": ["a", "bé", ""]})
    expected = request_from_dataframe(frame, TWO)
    for table in (pa.table({"x": [1, 2, 3], "text": ["a", "bé", ""]}), pa.Table.from_pandas(frame)):
        got = nbinfer.request_from_dataframe(table, TWO)
        assert got.model_name == "two"
        assert [(i.name, i.datatype, i.shape) for i in got.inputs] == [
            (i.name, i.datatype, i.shape) for i in expected.inputs
        ]
        for a, b in zip(got.inputs, expected.inputs, strict=True):
            np.testing.assert_array_equal(a.data, b.data)


# --------------------------------------------------------------------------- on a server


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:

        def pair(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return a * 10 + b

        s.serve(
            pair,
            inputs=[("a", "INT64", [-1]), ("b", "FP64", [-1])],
            outputs=[("s", "FP64", [-1])],
        )
        yield s


def test_a_table_gives_the_pandas_result_as_a_table(session: Session) -> None:
    frame = iris_pandas(500)
    expected = session.infer("iris", frame, batch_size=64, progress=False)
    got = session.infer("iris", pa.Table.from_pandas(frame), batch_size=64, progress=False)
    same_frames(got, expected)
    assert got.column_names[0] == "probabilities[setosa]"
    batch = session.infer("iris", pa.RecordBatch.from_pandas(frame), batch_size=64, progress=False)
    assert isinstance(batch, pa.RecordBatch)
    assert batch.to_pydict() == got.to_pydict()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_large_table_in_many_arrow_chunks_is_chunked_in_row_order(
    session: Session, protocol: str
) -> None:
    assert session.server is not None
    url = session.server.http_url if protocol == "http" else session.server.grpc_url
    frame = iris_pandas(100_003, seed=1)
    table = pa.concat_tables(  # several Arrow chunks per column: joined once by the plan
        [pa.Table.from_pandas(frame.iloc[s : s + 30_000]) for s in range(0, len(frame), 30_000)]
    )
    assert table.column(0).num_chunks == 4
    with Session(url, token=session.token) as remote:
        got = remote.infer("iris", table, batch_size=4096, concurrency=4, progress=False)
        expected = remote.infer("iris", frame, batch_size=4096, concurrency=4, progress=False)
    assert got.num_rows == 100_003
    same_frames(got, expected)


def test_ainfer_returns_a_table(session: Session) -> None:
    frame = iris_pandas(257)

    async def run() -> object:
        return await session.ainfer("iris", pa.Table.from_pandas(frame), batch_size=10)

    got = asyncio.run(run())
    same_frames(got, session.infer("iris", frame, batch_size=10, progress=False))


def test_fixed_size_list_columns_feed_array_inputs_like_pandas_cells(session: Session) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random((30, 16), dtype=np.float32), rng.random((30, 16), dtype=np.float32)
    frame = pd.DataFrame({"INPUT0": list(a), "INPUT1": list(b)})
    table = pa.table(
        {
            "INPUT0": pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), 16),
            "INPUT1": pa.FixedSizeListArray.from_arrays(pa.array(b.reshape(-1)), 16),
        }
    )
    got = session.infer("add_sub", table, batch_size=4, progress=False)
    same_frames(got, session.infer("add_sub", frame, batch_size=4, progress=False))
    np.testing.assert_allclose(got.column("OUTPUT0[3]").to_numpy(), a[:, 3] + b[:, 3])
    kept = session.infer("add_sub", table, expand=False)
    assert kept.column_names == ["OUTPUT0", "OUTPUT1"]
    assert kept.schema.field("OUTPUT0").type == pa.list_(pa.float32(), 16)
    np.testing.assert_allclose(
        np.stack(kept.column("OUTPUT1").to_numpy(zero_copy_only=False)), a - b
    )


def test_text_classification_and_declared_order_as_for_pandas(session: Session) -> None:
    words = ["alpha", "β-ünïcode", "", "x" * 300] * 25
    echoed = session.infer("echo", pa.table({"INPUT0": words}), batch_size=9, progress=False)
    assert echoed.column("OUTPUT0").to_pylist() == words
    assert echoed.schema.field("OUTPUT0").type == pa.string()
    frame = iris_pandas(40, seed=3)
    top = session.infer("iris", pa.Table.from_pandas(frame), classification=2)
    same_frames(top, session.infer("iris", frame, classification=2))
    assert top.column_names == ["label", "score", "label_2", "score_2"]
    pairs = pa.table({"first": [1, 2, 3], "second": [0.5, 0.25, 0.0]})  # declared order
    assert session.infer("pair", pairs).column("s").to_pylist() == [10.5, 20.25, 30.0]


def test_nulls_in_a_float_column_are_sent_as_nan_and_flagged_like_pandas(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    frame = iris_pandas(6)
    frame.iloc[[1, 4], 2] = np.nan
    expected = session.infer("iris", frame)
    table = pa.Table.from_pandas(frame)  # NaN becomes null
    table = table.set_column(2, "petal_length", pa.array(frame["petal_length"], from_pandas=True))
    assert table.column("petal_length").null_count == 2
    with caplog.at_level(logging.WARNING, logger="nbinfer"):
        got = session.infer("iris", table)
    note = expected.attrs["note"]
    assert note.startswith("2 of 6 rows had NaN inputs")
    assert got.schema.metadata == {b"nbinfer.note": note.encode()}
    assert note in caplog.text
    same_frames(got, expected)


def test_a_null_in_an_integer_input_is_refused_as_pandas_nan_is(session: Session) -> None:
    table = pa.table({"a": pa.array([1, None, 3]), "b": [0.5, 0.25, 0.0]})
    frame = pd.DataFrame({"a": [1, None, 3], "b": [0.5, 0.25, 0.0]})  # float64 with NaN
    with pytest.raises(DataTypeError) as from_pandas:
        session.infer("pair", frame)
    with pytest.raises(DataTypeError, match=r"column 'a'.*holds nan") as from_arrow:
        session.infer("pair", table)
    assert str(from_arrow.value) == str(from_pandas.value)


def test_a_client_sends_a_request_built_from_a_table(session: Session) -> None:
    assert session.server is not None
    frame = iris_pandas(6)
    with Client(session.server.http_url, auth=session.token) as client:
        meta = client.get_model_metadata("iris")
        got = client.infer(
            "iris", nbinfer.request_from_dataframe(pa.Table.from_pandas(frame), meta)
        )
        expected = client.infer("iris", nbinfer.request_from_dataframe(frame, meta))
    np.testing.assert_array_equal(got.as_numpy("probabilities"), expected.as_numpy("probabilities"))
