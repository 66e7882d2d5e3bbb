"""A newcomer's first arrays: NumPy data is sent as the model declares it, when no value changes.

Against the real embedded server: float64 and int64 arrays reach FP32 inputs (Session, Client,
sync and async); uint8 pixels get the model's declared scaling; out-of-range values, NaN into
an integer and fractions into an integer are refused before any request, naming the cast to
write; NaN into a float input is sent and said in the result's card; a DataFrame or array of
the wrong width says how many columns / values the model needs and which it got.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.errors import DataTypeError, InvalidInputError
from nbinfer.render.error_card import error_text
from nbinfer.session import Session

SETOSA = [5.1, 3.5, 1.4, 0.2]
VIRGINICA = [6.7, 3.0, 5.2, 2.3]
SPECIES = ["setosa", "versicolor", "virginica"]
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        s.serve(
            lambda x: x * 2,
            name="twice_int",
            inputs=[("x", "INT32", [-1])],
            outputs=[("y", "INT32", [-1])],
        )
        yield s


def _species(probabilities: np.ndarray[Any, Any]) -> list[str]:
    return [SPECIES[i] for i in np.atleast_2d(probabilities).argmax(axis=1)]


def _url(session: Session, wire: str) -> str:
    assert session.server is not None
    return session.url if wire == "http" else session.server.grpc_url


def _iris_calls(session: Session) -> int:
    """Requests the server has counted for iris (successes and failures)."""
    stats = session.model("iris").stats()
    return int(stats.loc[0, "success"]) + int(stats.loc[0, "fail"])


def test_float64_iris_vector_and_matrix_give_the_float32_answer(session: Session) -> None:
    expected = session.infer("iris", np.array([SETOSA, VIRGINICA], np.float32))["probabilities"]
    one = session.infer("iris", np.array(SETOSA))  # float64, one sample
    assert _species(one["probabilities"]) == ["setosa"]
    exact_one = session.infer("iris", np.array(SETOSA, np.float32))["probabilities"]
    np.testing.assert_array_equal(one["probabilities"], exact_one)
    both = session.infer("iris", np.array([SETOSA, VIRGINICA]))  # float64, [2, 4]
    np.testing.assert_array_equal(both["probabilities"], expected)
    assert _species(both["probabilities"]) == ["setosa", "virginica"]


def test_ainfer_converts_float64_the_same_way(session: Session) -> None:
    async def cell() -> Any:
        return await session.ainfer("iris", np.array([SETOSA, VIRGINICA]))

    result = asyncio.run(cell())
    assert _species(result["probabilities"]) == ["setosa", "virginica"]


def test_int64_arrays_reach_an_fp32_input_exactly(session: Session) -> None:
    ints = np.array([[5, 3, 1, 0], [7, 3, 5, 2]])  # int64
    got = session.infer("iris", ints)["probabilities"]
    np.testing.assert_array_equal(
        got, session.infer("iris", ints.astype(np.float32))["probabilities"]
    )


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_client_converts_float64_with_the_models_metadata(session: Session, wire: str) -> None:
    url = _url(session, wire)
    x = np.array([SETOSA, VIRGINICA])
    with nbinfer.Client(url) as client:
        first = client.infer("iris", {"input": x})["probabilities"]
        again = client.infer("iris", {"input": x})["probabilities"]  # metadata now cached
        exact = client.infer("iris", {"input": x.astype(np.float32)})["probabilities"]
    np.testing.assert_array_equal(first, exact)
    np.testing.assert_array_equal(again, exact)
    assert _species(first) == ["setosa", "virginica"]


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_async_client_converts_float64_too(session: Session, wire: str) -> None:
    url = _url(session, wire)

    async def run() -> Any:
        async with nbinfer.AsyncClient(url) as client:
            return (await client.infer("iris", {"input": np.array([VIRGINICA])}))["probabilities"]

    assert _species(asyncio.run(run())) == ["virginica"]


def test_uint8_digits_image_gets_the_models_scaling(session: Session) -> None:
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, size=(8, 8), dtype=np.uint8)
    unit = (image.astype(np.float32) / 255.0)[np.newaxis]
    from_pixels = session.infer("digits", image)["probabilities"]
    from_floats = session.infer("digits", unit)["probabilities"][0]
    np.testing.assert_allclose(from_pixels, from_floats, rtol=1e-6, atol=1e-7)
    unscaled = session.infer("digits", image.astype(np.float32))["probabilities"]
    assert not np.allclose(unscaled, from_floats, atol=1e-3)  # the scaling is what matched


def test_uint8_without_a_declared_scaling_keeps_its_values(session: Session) -> None:
    pixels = np.arange(32, dtype=np.uint8).reshape(2, 16) * 8  # add_sub declares no scaling
    out = session.infer("add_sub", {"INPUT0": pixels, "INPUT1": pixels})["OUTPUT0"]
    np.testing.assert_array_equal(out, 2 * pixels.astype(np.float32))


def test_overflow_is_refused_before_sending_with_the_cast_to_write(session: Session) -> None:
    before = _iris_calls(session)
    with pytest.raises(DataTypeError) as caught:
        session.infer("iris", np.array([5.1, 3.5, 1e39, 0.2]))
    message = str(caught.value)
    for part in ("'iris'", "input 'input'", "float64", "FP32", "1e+39", ".astype(np.float32)"):
        assert part in message
    assert "np.clip" in caught.value.hints[0] and "np.clip" in error_text(caught.value)
    assert _iris_calls(session) == before  # refused here: the server never saw it


def test_client_refuses_overflow_before_sending(session: Session) -> None:
    before = _iris_calls(session)
    with nbinfer.Client(session.url) as client, pytest.raises(InvalidInputError, match="1e\\+39"):
        client.infer("iris", {"input": np.array([[1e39, 1.0, 1.0, 1.0]])})
    assert _iris_calls(session) == before


def test_nan_never_goes_into_an_integer_input(session: Session) -> None:
    with pytest.raises(DataTypeError, match="holds nan, which an integer") as caught:
        session.infer("twice_int", {"x": np.array([1.0, np.nan, 3.0])})
    assert "INT32" in str(caught.value) and "fillna" in caught.value.hints[0]
    with pytest.raises(DataTypeError, match=r"1\.5 is not a whole number"):
        session.infer("twice_int", {"x": np.array([1.5])})
    whole = session.infer("twice_int", {"x": np.array([1.0, 2.0])})["y"]
    np.testing.assert_array_equal(whole, [2, 4])


def test_nan_in_a_float_input_is_sent_and_said_in_the_card(session: Session) -> None:
    result = session.infer("iris", np.array([SETOSA, [6.7, np.nan, 5.2, 2.3], VIRGINICA]))
    probabilities = result["probabilities"]
    assert np.isnan(probabilities[1]).all() and not np.isnan(probabilities[[0, 2]]).any()
    assert result.notes == (
        "1 of 3 rows had NaN inputs ('input'); NaN in, NaN out: their outputs are NaN",
    )
    bundle = result._repr_mimebundle_()
    assert "1 of 3 rows had NaN inputs" in bundle["text/html"]
    assert "1 of 3 rows had NaN inputs" in bundle["text/plain"]
    clean = session.infer("iris", np.array([SETOSA]))
    assert clean.notes == () and "NaN" not in clean._repr_mimebundle_()["text/html"]


def test_nan_in_a_dataframe_is_noted_on_the_frame_and_logged(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    frame = pd.DataFrame([SETOSA, VIRGINICA, VIRGINICA], columns=FEATURES)
    frame.loc[1, "petal_length"] = np.nan
    frame.loc[2, "sepal_width"] = np.nan
    with caplog.at_level(logging.WARNING, logger="nbinfer"):
        out = session.infer("iris", frame)
    assert out.iloc[1:].isna().all().all() and not out.iloc[0].isna().any()
    note = "2 of 3 rows had NaN inputs ('input'); NaN in, NaN out: their outputs are NaN"
    assert out.attrs["note"] == note
    assert f"iris: {note}" in caplog.messages


def test_dataframe_with_too_few_or_too_many_columns_says_what_iris_needs(
    session: Session,
) -> None:
    frame = pd.DataFrame([SETOSA], columns=FEATURES)
    with pytest.raises(InvalidInputError) as few:
        session.infer("iris", frame[FEATURES[:3]])
    assert str(few.value).startswith(
        "iris needs 4 columns, got 3: ['sepal_length', 'sepal_width', 'petal_length']"
    )
    assert "missing" in few.value.hints[0] and "'input'" in few.value.hints[0]
    with pytest.raises(InvalidInputError) as many:
        session.infer("iris", frame.assign(extra=1.0))
    assert str(many.value).startswith("iris needs 4 columns, got 5: ")
    assert "'extra'" in str(many.value) and "df[[...]]" in many.value.hints[0]


def test_named_columns_missing_or_extra_are_both_named(session: Session) -> None:
    row = np.zeros(16, np.float32)
    frame = pd.DataFrame({"INPUT0": [row], "INPUT2": [row], "other": [row]})
    with pytest.raises(InvalidInputError) as caught:
        session.infer("add_sub", frame)
    message = str(caught.value)
    assert "reads the columns ['INPUT0', 'INPUT1']" in message
    assert "missing ['INPUT1'], not read ['INPUT2', 'other']" in message
    assert "df.rename" in caught.value.hints[0]
    with pytest.raises(InvalidInputError, match="no column 'nope'") as picked:
        session.infer("iris", pd.DataFrame([SETOSA], columns=FEATURES), columns=["nope"])
    assert "sepal_length" in str(picked.value)


def test_array_of_the_wrong_width_says_what_the_model_needs(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="iris needs 4 values per sample, got 3"):
        session.infer("iris", np.array([5.1, 3.5, 1.4]))
    with pytest.raises(InvalidInputError, match="iris needs 4 values per row, got 3") as caught:
        session.infer("iris", np.ones((2, 3)))
    assert "[n, 4]" in caught.value.hints[0]


def test_dataframe_float64_overflow_names_the_column(session: Session) -> None:
    frame = pd.DataFrame([SETOSA], columns=FEATURES).assign(petal_width=[1e40])
    with pytest.raises(DataTypeError, match="column 'petal_width'") as caught:
        session.infer("iris", frame)
    assert "np.clip(df['petal_width']" in str(caught.value)


def test_result_card_names_the_top_classes(session: Session) -> None:
    result = session.infer("iris", np.array(SETOSA))
    assert result.labels == {"probabilities": SPECIES}
    html = result._repr_mimebundle_()["text/html"]
    assert html.index("setosa") < html.index("versicolor")  # best first, by name


def test_try_it_form_follows_the_same_rule(session: Session) -> None:
    pytest.importorskip("ipywidgets")
    browser = nbinfer.browse(session)
    browser.wait()
    try:
        browser.select("add_sub")
        browser.wait()
        first, second = browser._editors
        first.widget.value = "1e39"  # one number fills the shape; no FP32 holds it
        second.widget.value = "0"
        browser.run()
        browser.wait()
        shown = browser.result.value
        assert "1e+39 is outside FP32" in shown and "astype(np.float32)" in shown
        browser.select("iris")  # one number box per feature
        browser.wait()
        (editor,) = browser._editors
        for box, value in zip(editor.boxes, [5.1, 3.5, 1.4, -1e40], strict=True):
            box.value = value
        with pytest.raises(DataTypeError, match=r"-1e\+40 is outside FP32"):
            browser.inputs()
        editor.boxes[3].value = 0.2
        assert browser.inputs()["input"].dtype == np.float32
    finally:
        browser.close()
