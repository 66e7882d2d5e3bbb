"""DataFrames <-> v2 tensors: column mapping, coercion, outputs, chunked runs on a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer import Client, Session
from nbinfer.errors import InvalidInputError
from nbinfer.interop.pandas import dataframe_to_inputs, outputs_to_dataframe, plan_frame
from nbinfer.protocol.types import InferOutput, ModelMetadata, TensorSpec
from nbinfer.server.demo.nets import IRIS_LABELS, iris_predict, load_weights

IRIS = ModelMetadata(
    "iris",
    inputs=[TensorSpec("INPUT", "FP32", [-1, 4])],
    outputs=[TensorSpec("probabilities", "FP32", [-1, 3])],
)
TWO = ModelMetadata(
    "two",
    inputs=[TensorSpec("x", "INT64", [-1]), TensorSpec("text", "BYTES", [-1, 1])],
)
IRIS_COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def iris_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` iris-like rows (float64, as a CSV would give) under a shuffled string index."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0.1, 8.0, (n, 4)), columns=IRIS_COLUMNS)
    frame.index = pd.Index([f"r{i}" for i in rng.permutation(n)], name="id")
    return frame


def iris_reference(frame: pd.DataFrame) -> np.ndarray:
    return iris_predict(load_weights("iris"), frame.to_numpy(dtype=np.float32))


# ------------------------------------------------------------------------ mapping (no server)


def test_feature_columns_become_single_matrix_input_in_model_dtype() -> None:
    df = pd.DataFrame({"a": [1.0, 2.0], "b": [3, 4], "c": [5, 6], "d": [7, 8]})
    (inp,) = dataframe_to_inputs(df, IRIS)
    assert inp.name == "INPUT" and inp.datatype == "FP32" and inp.shape == [2, 4]
    assert inp.data is not None and inp.data.dtype == np.float32
    np.testing.assert_array_equal(inp.data[1], [2, 4, 6, 8])


def test_columns_named_after_inputs_map_one_to_one() -> None:
    df = pd.DataFrame({"text": ["a", "bé"], "x": [1, 2]})
    x, text = dataframe_to_inputs(df, TWO)
    assert (x.name, x.shape, x.data.dtype) == ("x", [2], np.int64)  # type: ignore[union-attr]
    assert text.shape == [2, 1] and text.data is not None
    assert text.data[1, 0] == "bé".encode()


def test_explicit_columns_mapping_picks_and_orders_columns() -> None:
    df = pd.DataFrame({"w": [1.0], "z": [4.0], "y": [3.0], "x": [2.0], "junk": ["no"]})
    (inp,) = dataframe_to_inputs(df, IRIS, columns={"INPUT": ["w", "x", "y", "z"]})
    np.testing.assert_array_equal(inp.data, [[1, 2, 3, 4]])  # type: ignore[arg-type]
    (same,) = dataframe_to_inputs(df, IRIS, columns=["w", "x", "y", "z"])
    np.testing.assert_array_equal(same.data, inp.data)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"no input 'nope'.*INPUT"):
        dataframe_to_inputs(df, IRIS, columns={"nope": ["w"]})
    with pytest.raises(InvalidInputError, match="no column 'missing'"):
        dataframe_to_inputs(df, IRIS, columns=["w", "x", "y", "missing"])


def test_unmappable_frame_names_model_and_expected_inputs() -> None:
    match = r"iris needs 4 columns, got 2: \['a', 'b'\].*'INPUT' \(FP32 \[-1, 4\]\)"
    with pytest.raises(InvalidInputError, match=match):
        dataframe_to_inputs(pd.DataFrame({"a": [1.0], "b": [2.0]}), IRIS)


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("species", ["setosa", "virginica"]),
        ("when", pd.to_datetime(["2024-01-01", "2024-01-02"])),
        ("mixed", [1.0, object()]),
    ],
)
def test_uncoercible_column_is_named_with_model_input_and_dtype(column: str, values: list) -> None:
    df = pd.DataFrame({"a": [1.0, 2.0], "b": [1.0, 2.0], "c": [1.0, 2.0], column: values})
    match = rf"(?=.*'iris')(?=.*column '{column}')(?=.*FP32)(?=.*'INPUT')"  # in any order
    with pytest.raises(InvalidInputError, match=match) as e:
        dataframe_to_inputs(df, IRIS)
    assert e.value.context["column"] == column and e.value.context["tensor"] == "INPUT"
    assert e.value.context["model"] == "iris" and e.value.context["datatype"] == "FP32"


def test_lossy_or_out_of_range_numbers_are_refused_per_column() -> None:
    floats = pd.DataFrame({"x": [1.5, 2.0], "text": ["a", "b"]})
    with pytest.raises(
        InvalidInputError, match=r"column 'x': float64 .*INT64.*1\.5 is not a whole"
    ):
        dataframe_to_inputs(floats, TWO)
    narrow = ModelMetadata("narrow", inputs=[TensorSpec("x", "INT8", [-1])])
    with pytest.raises(InvalidInputError, match=r"column 'x': int64 .*INT8.*300 is outside"):
        dataframe_to_inputs(pd.DataFrame({"x": [1, 300]}), narrow)
    with pytest.raises(InvalidInputError, match=r"column 'text' \(int64\).*BYTES"):
        dataframe_to_inputs(pd.DataFrame({"x": [1], "text": [7]}), TWO)


def test_outputs_become_labelled_columns_and_text() -> None:
    probs = np.array([[0.1, 0.7, 0.2], [0.8, 0.1, 0.1]], dtype=np.float32)
    words = np.array([b"x", b"\xff"], dtype=object)
    frame = outputs_to_dataframe(
        [InferOutput("p", "FP32", [2, 3], probs), InferOutput("w", "BYTES", [2], words)],
        labels={"p": ["setosa", "versicolor", "virginica"]},
        index=pd.Index([10, 11]),
    )
    assert list(frame.columns) == ["p[setosa]", "p[versicolor]", "p[virginica]", "w"]
    assert frame.loc[11, "p[setosa]"] == pytest.approx(0.8)
    assert frame.loc[10, "w"] == "x" and frame.loc[11, "w"] == b"\xff"


def test_classification_without_server_labels_uses_model_labels_then_indices() -> None:
    top = np.array([[b"0.9:2", b"0.1:0"], [b"0.6:5", b"0.4:1:named"]], dtype=object)
    frame = outputs_to_dataframe(
        [InferOutput("p", "BYTES", [2, 2], top)], labels={"p": ["a", "b", "c"]}, classified=["p"]
    )
    assert list(frame.columns) == ["label", "score", "label_2", "score_2"]
    assert frame["label"].tolist() == ["c", "5"] and frame["label_2"].tolist() == ["a", "named"]
    assert frame["score"].tolist() == [0.9, 0.6]


def test_request_from_dataframe_without_metadata_uses_column_names_and_dtypes() -> None:
    df = pd.DataFrame({"n": np.array([1, 2], dtype=np.int32), "s": ["a", "b"]})
    request = nbinfer.request_from_dataframe(df, request_id="r1")
    assert (request.id, request.model_name) == ("r1", "")
    assert [(i.name, i.datatype, i.shape) for i in request.inputs] == [
        ("n", "INT32", [2]),
        ("s", "BYTES", [2]),
    ]
    assert request.inputs[1].data.tolist() == [b"a", b"b"]  # type: ignore[union-attr]


def test_request_from_dataframe_maps_columns_onto_the_metadata_and_names_the_model() -> None:
    df = pd.DataFrame({"c": [1.0, 2.0], "a": [3.0, 4.0], "b": [5.0, 6.0], "d": [7.0, 8.0]})
    request = nbinfer.request_from_dataframe(df, IRIS, columns=["a", "b", "c", "d"])
    assert request.model_name == "iris"
    (inp,) = request.inputs
    assert (inp.name, inp.datatype, inp.shape) == ("INPUT", "FP32", [2, 4])
    np.testing.assert_array_equal(inp.data[0], [3, 5, 1, 7])  # type: ignore[index]
    with pytest.raises(InvalidInputError, match=r"iris needs 4 columns, got 3"):
        nbinfer.request_from_dataframe(df[["a", "b", "c"]], IRIS)


def test_the_protocol_types_leave_dataframes_to_interop() -> None:
    assert not hasattr(nbinfer.InferRequest, "from_dataframe")
    assert not hasattr(nbinfer.InferRequest, "from_pandas")
    assert "request_from_dataframe" in (nbinfer.InferRequest.__doc__ or "")


def test_plan_frame_fills_spec_less_metadata_from_the_columns() -> None:
    bare = ModelMetadata("kserve_model")  # KServe often declares no inputs at all
    df = pd.DataFrame(
        {"n": np.array([1, 2], np.int16), "s": ["a", "b"], "v": [np.ones(3), np.zeros(3)]}
    )
    said: set[str] = set()
    plan = plan_frame(df, bare, said=said)
    assert said == {"kserve_model"}  # said once per model, at debug level
    assert [(p.spec.name, p.spec.datatype, p.spec.shape) for p in plan.planned] == [
        ("n", "INT16", [-1]),
        ("s", "BYTES", [-1]),
        ("v", "FP64", [-1, 3]),
    ]
    assert plan.arrays(0, 2)["v"].shape == (2, 3)
    shapeless = ModelMetadata("m", inputs=[TensorSpec("x", "", [])])
    (x,) = plan_frame(pd.DataFrame({"x": [1.5, 2.5], "y": [0, 0]}), shapeless).planned
    assert (x.spec.datatype, x.spec.shape, x.columns) == ("FP64", [-1], ["x"])
    with pytest.raises(InvalidInputError, match=r"declares input 'x' without a datatype.*'y'"):
        plan_frame(pd.DataFrame({"y": [1.0]}), shapeless)


def test_plan_frame_takes_inputs_over_the_servers_metadata() -> None:
    df = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    plan = plan_frame(df, IRIS, inputs={"wide": ("INT32", [-1, 2])})
    ((name, datatype, arr),) = plan.tensors()
    assert (name, datatype, arr.dtype, arr.shape) == ("wide", "INT32", np.int32, (2, 2))
    plan = plan_frame(
        df, IRIS, inputs=[TensorSpec("a", "FP16", [-1]), TensorSpec("b", "INT8", [-1])]
    )
    assert [(n, d) for n, d, _ in plan.tensors()] == [("a", "FP16"), ("b", "INT8")]
    assert plan_frame(df, IRIS, inputs={"a": "FP32", "b": "FP32"}).arrays(0, 1)["b"].tolist() == [3]


# ------------------------------------------------------------------- against a real server


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

        def small(x: np.ndarray) -> np.ndarray:
            return x + 1

        s.serve(
            small,
            inputs=[("x", "FP32", [1])],
            outputs=[("y", "FP32", [1])],
            max_batch_size=8,
        )
        yield s


def test_small_frame_matches_reference_and_keeps_string_index(session: Session) -> None:
    frame = iris_frame(5)
    out = session.infer("iris", frame)
    assert list(out.columns) == [f"probabilities[{label}]" for label in IRIS_LABELS]
    assert out.index.equals(frame.index)
    np.testing.assert_allclose(out.to_numpy(), iris_reference(frame), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_chunked_frame_is_reassembled_in_order_and_aligned(session: Session, protocol: str) -> None:
    assert session.server is not None
    url = session.server.http_url if protocol == "http" else session.server.grpc_url
    frame = iris_frame(1003, seed=1)
    with Session(url, token=session.token) as remote:
        out = remote.infer("iris", frame, batch_size=7, concurrency=5, progress=False)
        whole = remote.infer("iris", frame, batch_size=len(frame))
    assert out.shape == (1003, 3) and out.index.equals(frame.index)
    # float32 BLAS results may differ in the last bits with the batch size: compare closely
    np.testing.assert_allclose(out.to_numpy(), whole.to_numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.to_numpy(), iris_reference(frame), rtol=1e-5, atol=1e-7)
    for label in ["r0", "r500", "r1002"]:  # row by row, one request each
        single = session.infer("iris", frame.loc[[label]])
        np.testing.assert_allclose(single.loc[label], out.loc[label], rtol=1e-5, atol=1e-7)


def test_max_batch_size_from_model_config_splits_requests(session: Session) -> None:
    frame = pd.DataFrame({"x": np.arange(50, dtype=np.float32)}, index=np.arange(50)[::-1])
    out = session.infer("small", frame, progress=False)  # one request would exceed 8 rows
    np.testing.assert_array_equal(out["y"].to_numpy(), np.arange(50) + 1)
    assert out.index.equals(frame.index)
    stats = session.stats("small")
    assert int(stats["execution_count"].iloc[0]) >= 7


def test_columns_follow_model_declared_order_when_names_differ(session: Session) -> None:
    frame = pd.DataFrame({"first": [1, 2, 3], "second": [0.5, 0.25, 0.0]})
    out = session.infer("pair", frame, batch_size=2)
    np.testing.assert_array_equal(out["s"].to_numpy(), [10.5, 20.25, 30.0])
    mapped = session.infer("pair", frame, columns={"a": "first", "b": "second"})
    np.testing.assert_array_equal(mapped["s"].to_numpy(), out["s"].to_numpy())


def test_cell_columns_feed_each_input_and_every_output_gets_its_columns(
    session: Session,
) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random((30, 16), dtype=np.float32), rng.random((30, 16), dtype=np.float32)
    frame = pd.DataFrame({"INPUT0": list(a), "INPUT1": list(b)}, index=np.arange(30) * 2)
    out = session.infer("add_sub", frame, batch_size=4, progress=False)
    assert out.shape == (30, 32) and out.index.equals(frame.index)
    np.testing.assert_allclose(out.filter(like="OUTPUT0[").to_numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(out.filter(like="OUTPUT1[").to_numpy(), a - b, rtol=1e-6)


def test_result_frame_is_editable_even_from_one_zero_copy_response(session: Session) -> None:
    out = session.infer("iris", iris_frame(3))
    out.iloc[0, 0] = -1.0
    assert out.iloc[0, 0] == -1.0


def test_bytes_columns_round_trip_through_echo_in_chunks(session: Session) -> None:
    words = ["alpha", "β-ünïcode", "", "x" * 300] * 25
    frame = pd.DataFrame({"INPUT0": words}, index=pd.RangeIndex(100, 0, -1))
    out = session.infer("echo", frame, batch_size=9, progress=False)
    assert out["OUTPUT0"].tolist() == words and out.index.equals(frame.index)
    typed = pd.DataFrame({"INPUT0": pd.array(words, dtype="string")})
    assert session.infer("echo", typed)["OUTPUT0"].tolist() == words


def test_uncoercible_column_fails_before_any_request(session: Session) -> None:
    frame = iris_frame(4).assign(petal_width=["a", "b", "c", "d"])
    before = int(session.stats("iris")["inference_count"].sum())
    with pytest.raises(InvalidInputError, match=r"column 'petal_width' \(object\).*FP32"):
        session.infer("iris", frame, batch_size=1)
    assert int(session.stats("iris")["inference_count"].sum()) == before


def test_expand_false_gives_one_column_of_arrays(session: Session) -> None:
    frame = iris_frame(3)
    out = session.infer("iris", frame, expand=False)
    assert list(out.columns) == ["probabilities"] and out.index.equals(frame.index)
    np.testing.assert_allclose(
        np.stack(out["probabilities"]), iris_reference(frame), rtol=1e-5, atol=1e-7
    )


def test_classification_gives_label_and_score_columns(session: Session) -> None:
    frame = iris_frame(40, seed=3)
    ref = iris_reference(frame)
    top = session.infer("iris", frame, classification=1, batch_size=16, progress=False)
    assert list(top.columns) == ["label", "score"] and top.index.equals(frame.index)
    assert top["label"].tolist() == [IRIS_LABELS[i] for i in ref.argmax(axis=1)]
    np.testing.assert_allclose(top["score"].to_numpy(), ref.max(axis=1), atol=1e-6)
    two = session.infer("iris", frame, classification=2)
    assert list(two.columns) == ["label", "score", "label_2", "score_2"]


def test_progress_bar_shows_for_chunked_frames_only(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = iris_frame(64)
    session.infer("iris", frame, batch_size=8, progress=False)
    session.infer("iris", frame)  # one request: no bar by default
    assert "rows" not in capsys.readouterr().err
    session.infer("iris", frame, batch_size=8)
    err = capsys.readouterr().err
    assert "iris" in err and "/64.0" in err and "rows/s" in err


def test_ainfer_chunks_a_frame_like_infer(session: Session) -> None:
    frame = iris_frame(257)

    async def run() -> pd.DataFrame:
        return await session.ainfer("iris", frame, batch_size=10, progress=False)

    out = asyncio.run(run())
    assert out.index.equals(frame.index)
    np.testing.assert_allclose(out.to_numpy(), iris_reference(frame), rtol=1e-5, atol=1e-7)


def test_result_to_dataframe_and_request_from_dataframe(session: Session) -> None:
    assert session.server is not None
    frame = iris_frame(6)
    with Client(session.server.http_url, auth=session.token) as client:
        request = nbinfer.request_from_dataframe(frame, client.get_model_metadata("iris"))
        assert request.model_name == "iris" and request.inputs[0].shape == [6, 4]
        result = client.infer("iris", request)
    out = result.to_dataframe(labels={"probabilities": list(IRIS_LABELS)}, index=frame.index)
    assert out.index.equals(frame.index) and out.columns[0] == "probabilities[setosa]"
    np.testing.assert_allclose(out.to_numpy(), iris_reference(frame), rtol=1e-5, atol=1e-7)
    assert result.as_dataframe().shape == (6, 3)


def test_as_frame_false_returns_one_infer_result_for_a_chunked_frame(session: Session) -> None:
    result = session.infer("iris", iris_frame(30), batch_size=4, as_frame=False)
    assert result.as_numpy("probabilities").shape == (30, 3)
