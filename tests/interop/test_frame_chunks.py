"""A frame's chunks: built from the frame's own memory, cast per chunk, errors naming their rows."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer import Session
from nbinfer.errors import DataTypeError, InferenceError
from nbinfer.interop.chunks import FrameJob
from nbinfer.interop.pandas import outputs_to_dataframe, plan_frame
from nbinfer.interop.probabilities import SAMPLE_ROWS, ProbabilityFrame
from nbinfer.protocol.types import ModelMetadata, TensorSpec

IRIS = ModelMetadata(
    "iris",
    inputs=[TensorSpec("input", "FP32", [-1, 4])],
    outputs=[TensorSpec("probabilities", "FP32", [-1, 3])],
)
COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def features(n: int, dtype: type = np.float64) -> np.ndarray:
    return np.random.default_rng(n).uniform(0.1, 8.0, (n, 4)).astype(dtype)


# ---------------------------------------------------------------------- building (no server)


def test_float32_columns_side_by_side_are_sent_as_a_view_of_the_frame() -> None:
    values = features(100, np.float32)
    frame = pd.DataFrame(values, columns=COLUMNS, copy=False)
    job = FrameJob(plan_frame(frame, IRIS), 30)
    payload = job.payload(30, 60)
    assert isinstance(payload, dict)
    sent = payload["input"]
    assert np.shares_memory(sent, values) and sent.flags.c_contiguous
    np.testing.assert_array_equal(sent, values[30:60])
    # three of five columns, side by side: still a view, rows 24 bytes apart
    wide = pd.DataFrame(features(100, np.float32).repeat(2, axis=1)[:, :5], copy=False)
    wide.columns = ["a", *COLUMNS]
    picked = plan_frame(wide, IRIS, columns=COLUMNS)
    part = picked.arrays(0, 10)["input"]
    assert np.shares_memory(part, wide.to_numpy())
    np.testing.assert_array_equal(part, wide[COLUMNS].to_numpy()[:10])


@pytest.mark.parametrize("layout", ["block", "columns", "reordered"])
def test_float64_frames_are_cast_per_chunk_to_exactly_the_values_of_one_cast(layout: str) -> None:
    values = features(1000)
    frame = pd.DataFrame(values, columns=COLUMNS, copy=False)
    if layout == "columns":  # one array per column, as read_csv gives
        frame = pd.DataFrame({c: values[:, j].copy() for j, c in enumerate(COLUMNS)})
    mapping = {"input": COLUMNS[::-1]} if layout == "reordered" else None
    expected = frame[COLUMNS[::-1] if mapping else COLUMNS].to_numpy(dtype=np.float32)
    job = FrameJob(plan_frame(frame, IRIS, columns=mapping), 300)
    built = []
    for start, stop in job.ranges:
        payload = job.payload(start, stop)
        assert isinstance(payload, dict)
        assert payload["input"].dtype == np.float32
        built.append(payload["input"])
    assert [len(b) for b in built] == [300, 300, 300, 100]
    np.testing.assert_array_equal(np.concatenate(built), expected)  # bit for bit
    assert job.nan_rows == 0 and job.nan_inputs == []


def test_nan_rows_are_counted_over_all_chunks() -> None:
    values = features(50)
    values[[3, 27, 49], [0, 2, 2]] = np.nan
    values[27, 1] = np.nan  # two NaN in one row: one row
    job = FrameJob(plan_frame(pd.DataFrame(values, columns=COLUMNS), IRIS), 10)
    for start, stop in job.ranges:
        job.payload(start, stop)
    assert job.nan_rows == 3 and job.nan_inputs == ["input"]


def test_out_of_range_values_name_column_chunk_and_rows() -> None:
    values = features(35)
    values[23, 3] = 1e40
    for frame in (
        pd.DataFrame(values, columns=COLUMNS, copy=False),
        pd.DataFrame({c: values[:, j].copy() for j, c in enumerate(COLUMNS)}),
    ):
        job = FrameJob(plan_frame(frame, IRIS), 10)
        job.payload(0, 10)  # the rows before are fine
        with pytest.raises(DataTypeError) as caught:
            job.payload(20, 30)
        message = str(caught.value)
        assert "column 'petal_width'" in message and "1e+40 is outside FP32" in message
        assert message.endswith("(chunk 3 of 4, rows 20-29 of 35)")
        assert caught.value.context["rows"] == "20:30"
        assert "np.clip(df['petal_width']" in caught.value.hints[0]
    infinite = values.copy()
    infinite[23, 3] = np.inf  # inf is a float value like any other: sent as it is
    job = FrameJob(plan_frame(pd.DataFrame(infinite, columns=COLUMNS), IRIS), 10)
    payload = job.payload(20, 30)
    assert isinstance(payload, dict) and np.isinf(payload["input"][3, 3])


# ------------------------------------------------------------------------------ the output frame


def softmax_rows(n: int) -> np.ndarray:
    z = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_big_result_is_shown_as_probabilities_from_a_sample_of_its_rows() -> None:
    labels = {"probabilities": ["a", "b", "c"]}
    rows = 20 * SAMPLE_ROWS
    probs = softmax_rows(rows)
    out = nbinfer.InferOutput("probabilities", "FP32", [rows, 3], probs)
    frame = outputs_to_dataframe([out], labels=labels)
    assert isinstance(frame, ProbabilityFrame)
    assert np.shares_memory(frame.to_numpy(), probs)  # the result wraps the array it was given
    for broken_row in (0, rows - 1):  # the rows a display shows are always read
        broken = probs.copy()
        broken[broken_row] = [0.5, 0.5, 0.5]
        out = nbinfer.InferOutput("probabilities", "FP32", [rows, 3], broken)
        assert type(outputs_to_dataframe([out], labels=labels)) is pd.DataFrame


# ------------------------------------------------------------------------------- on a server


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:

        def picky(x: np.ndarray) -> np.ndarray:
            if (x < 0).any():
                raise ValueError("negative input")
            return x * 2

        s.serve(picky, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
        yield s


def test_a_chunk_the_model_refuses_names_its_rows(session: Session) -> None:
    frame = pd.DataFrame({"x": np.arange(40, dtype=np.float32)})
    frame.loc[17, "x"] = -1.0
    with pytest.raises(InferenceError, match="negative input") as caught:
        session.infer("picky", frame, batch_size=8, concurrency=2, progress=False)
    assert "(chunk 3 of 5, rows 16-23 of 40)" in str(caught.value)

    async def run() -> None:
        await session.ainfer("picky", frame, batch_size=8, progress=False)

    with pytest.raises(InferenceError, match=r"chunk 3 of 5, rows 16-23 of 40"):
        asyncio.run(run())
    one = session.infer("picky", frame.head(8), progress=False)  # one request: nothing to name
    assert one["y"].tolist() == [2.0 * i for i in range(8)]


def test_a_chunked_frame_equals_the_model_in_process_bit_for_bit(session: Session) -> None:
    from nbinfer.server.demo.nets import iris_predict, load_weights

    values = features(5000)
    frame = pd.DataFrame(values, columns=COLUMNS, index=np.arange(5000)[::-1] * 3)
    out = session.infer("iris", frame, batch_size=1024, progress=False)
    assert out.index.equals(frame.index)
    reference = iris_predict(load_weights("iris"), values.astype(np.float32))
    np.testing.assert_array_equal(out.to_numpy(), reference)


def test_nan_note_counts_rows_of_every_chunk(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    values = features(40)
    values[[2, 19, 39], [1, 0, 3]] = np.nan
    frame = pd.DataFrame(values, columns=COLUMNS)
    with caplog.at_level(logging.WARNING, logger="nbinfer"):
        out = session.infer("iris", frame, batch_size=8, progress=False)
    note = "3 of 40 rows had NaN inputs ('input'); NaN in, NaN out: their outputs are NaN"
    assert out.attrs["note"] == note and note in caplog.text
    assert np.isnan(out.to_numpy()[[2, 19, 39]]).all() and not np.isnan(out.iloc[3]).any()
    assert "note" not in session.infer("iris", frame.dropna(), batch_size=8).attrs
