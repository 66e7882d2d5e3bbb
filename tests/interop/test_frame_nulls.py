"""Missing values in frame columns: refused by name where a value would change, on a real server.

A pandas ``object`` column holding ``None`` / ``NaN`` beside ``True`` / ``False`` (what a CSV or a
``reindex`` gives) once reached a BOOL input as ``False`` (``None``) or ``True`` (``NaN``): a value
changed silently. Arrow and Polars frames get the same rule through their column readers.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from nbinfer import Session
from nbinfer.errors import InvalidInputError

pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:

        def flip(flag: np.ndarray) -> np.ndarray:
            return ~flag

        s.serve(flip, inputs=[("flag", "BOOL", [-1])], outputs=[("out", "BOOL", [-1])])

        def twice(n: np.ndarray) -> np.ndarray:
            return n * 2

        s.serve(twice, inputs=[("n", "INT64", [-1])], outputs=[("out", "INT64", [-1])])
        yield s


def _count(session: Session, model: str) -> int:
    return int(session.stats(model)["inference_count"].sum())


@pytest.mark.parametrize(
    "column",
    [
        pd.Series([True, None, False, None]),
        pd.Series([True, np.nan, False, np.nan]),
        pd.Series([True, pd.NA, False, pd.NA], dtype="boolean"),
    ],
    ids=["none", "nan", "pd.NA"],
)
def test_missing_values_in_a_bool_column_are_refused_before_any_request(
    session: Session, column: pd.Series
) -> None:
    frame = pd.DataFrame({"flag": column})
    before = _count(session, "flip")
    match = r"(?=.*column 'flag')(?=.*2 missing value)(?=.*rows \[1, 3\])(?=.*fillna)(?=.*BOOL)"
    with pytest.raises(InvalidInputError, match=match) as e:
        session.infer("flip", frame)
    assert e.value.context["column"] == "flag" and e.value.context["tensor"] == "flag"
    assert any("fillna" in h for h in e.value.hints)
    assert _count(session, "flip") == before


def test_missing_values_in_an_object_int_column_are_refused_by_name(session: Session) -> None:
    frame = pd.DataFrame({"n": pd.Series([1, 2, None], dtype=object)})
    with pytest.raises(InvalidInputError, match=r"column 'n'.*1 missing value.*rows \[2\]"):
        session.infer("twice", frame)


def test_complete_object_bool_column_still_infers(session: Session) -> None:
    frame = pd.DataFrame({"flag": pd.Series([True, False, True], dtype=object)})
    assert session.infer("flip", frame)["out"].tolist() == [False, True, False]
    filled = pd.DataFrame({"flag": pd.Series([True, None, False], dtype="boolean").fillna(False)})
    assert session.infer("flip", filled)["out"].tolist() == [False, True, True]


def test_arrow_and_polars_nulls_in_bool_columns_are_refused(session: Session) -> None:
    table = pa.table({"flag": pa.array([True, None, False])})
    with pytest.raises(InvalidInputError, match=r"column 'flag' \(bool\) has 1 null.*fill_null"):
        session.infer("flip", table)
    frame = pl.DataFrame({"flag": [True, None, False]})
    with pytest.raises(InvalidInputError, match=r"column 'flag' \(Boolean\) has 1 null.*fill_null"):
        session.infer("flip", frame)


def test_arrow_and_polars_nulls_in_int_columns_are_refused(session: Session) -> None:
    before = _count(session, "twice")
    table = pa.table({"n": pa.array([1, None, 3], pa.int64())})
    with pytest.raises(InvalidInputError, match=r"column 'n'.*INT64.*nan.*fillna"):
        session.infer("twice", table)
    frame = pl.DataFrame({"n": [1, None, 3]})
    with pytest.raises(InvalidInputError, match=r"column 'n'.*INT64.*nan"):
        session.infer("twice", frame)
    assert _count(session, "twice") == before
    full = pa.table({"n": pa.array([1, 2, 3], pa.int64())})
    assert session.infer("twice", full).column("out").to_pylist() == [2, 4, 6]
