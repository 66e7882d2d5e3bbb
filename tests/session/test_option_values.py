"""Numeric options of infer / ainfer / classify / profile: a bad value is refused by name.

``session.infer(..., batch_size="x")`` once passed silently for array data (and ``0`` / ``-1`` /
``2.5`` too), and ``concurrency=0`` meant "the default": every count option is now checked where
it is given, whatever the data, as an :class:`InvalidInputError` naming the option and the value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbinfer import Session
from nbinfer.errors import InvalidInputError

ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
FRAME = pd.DataFrame(ROWS, columns=["a", "b", "c", "d"])
DIGIT = np.zeros((8, 8), np.float32)


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


CALLS: dict[str, Callable[[Session, dict[str, Any]], object]] = {
    "infer-array": lambda s, o: s.infer("iris", {"input": ROWS}, **o),
    "infer-frame": lambda s, o: s.infer("iris", FRAME, **o),
    "ainfer-array": lambda s, o: asyncio.run(s.ainfer("iris", {"input": ROWS}, **o)),
    "ainfer-frame": lambda s, o: asyncio.run(s.ainfer("iris", FRAME, **o)),
    "classify": lambda s, o: s.classify("digits", DIGIT, **o),
}
BAD = [("x", "a whole number"), (0, ">= 1"), (-2, ">= 1"), (2.5, "a whole number")]
BAD += [(True, "a whole number")]


@pytest.mark.parametrize(("value", "says"), BAD, ids=[repr(v) for v, _ in BAD])
@pytest.mark.parametrize(
    ("call", "option"),
    [(c, "batch_size") for c in CALLS]
    + [(c, "concurrency") for c in CALLS]
    + [("classify", "top_k")],
)
def test_a_bad_count_option_is_refused_by_name(
    session: Session, call: str, option: str, value: object, says: str
) -> None:
    before = int(session.stats()["inference_count"].sum())
    with pytest.raises(InvalidInputError, match=rf"{option}=.*{says}.*{value!r}"):
        CALLS[call](session, {option: value})
    assert int(session.stats()["inference_count"].sum()) == before  # refused before sending


@pytest.mark.parametrize(("value", "says"), [("x", ">= 0"), (-1, ">= 0"), (1.0, ">= 0")])
def test_classify_workers_takes_zero_or_more(session: Session, value: object, says: str) -> None:
    with pytest.raises(InvalidInputError, match=rf"workers=.*{says}.*{value!r}"):
        session.classify("digits", DIGIT, workers=value)
    assert len(session.classify("digits", DIGIT, workers=0, top_k=1)) == 1  # on this thread


@pytest.mark.parametrize(
    ("option", "value"),
    [("batch_size", "x"), ("batch_size", 0), ("batch_size", 1.5), ("concurrency", "x")],
)
def test_profile_refuses_a_bad_count_option_by_name(
    session: Session, option: str, value: object
) -> None:
    with pytest.raises(InvalidInputError, match=rf"{option}"):
        session.profile("add_sub", **{option: value}, window=0.05, max_windows=1)


def test_good_count_options_are_used(session: Session) -> None:
    out = session.infer("iris", {"input": ROWS}, batch_size=np.int64(1), concurrency=1)
    assert out.as_numpy("probabilities").shape == (2, 3)
    frame = session.infer("iris", FRAME, batch_size=1, concurrency=2, progress=False)
    assert frame.shape == (2, 3)
    assert len(session.classify("digits", DIGIT, top_k=2, batch_size=1, workers=1)) == 2
