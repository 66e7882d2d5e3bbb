"""The Session's sync / async pairs behave alike: same answers, same errors."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbinfer import InferResult, Session
from nbinfer.errors import InvalidInputError

PAIRS = [("infer", "ainfer"), ("classify", "aclassify")]


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


_A = np.arange(16, dtype=np.float32)
_IRIS = pd.DataFrame(
    np.tile([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], (5, 1)).astype(np.float32),
    columns=["sepal_length", "sepal_width", "petal_length", "petal_width"],
)
_DIGITS = np.stack([np.eye(8, dtype=np.float32) * 16, np.zeros((8, 8), np.float32)])

#: The same call on both faces: (sync name, args, kwargs). Each must give the same answer, or
#: raise the same error class with the same message (the face's own name aside).
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("infer", ("add_sub", {"INPUT0": _A, "INPUT1": _A}), {"outputs": "OUTPUT0"}),
    ("infer", ("add_sub", {"INPUT0": _A, "INPUT1": _A}), {"as_frame": True}),
    ("infer", ("iris", _IRIS), {}),
    ("infer", ("iris", _IRIS), {"batch_size": 3, "concurrency": 2, "progress": False}),
    ("infer", ("iris", _IRIS), {"columns": ["sepal_length", "sepal_width"]}),
    ("infer", ("iris", _IRIS.to_numpy()), {"expand": False}),
    ("infer", ("no_such_model", {"INPUT0": _A}), {}),
    ("infer", ("add_sub", {"INPUT0": _A}), {}),
    ("infer", ("add_sub", {"INPUT0": _A, "INPUT1": _A}), {"timeout": "x"}),
    ("infer", ("add_sub", {"INPUT0": _A, "INPUT1": _A}), {"outputs": ["NOPE"]}),
    ("infer", ("add_sub", {"INPUT0": _A, "INPUT1": _A}), {"model_version": "99"}),
    ("classify", ("digits", _DIGITS), {"top_k": 2}),
    ("classify", ("digits", _DIGITS), {}),
    ("classify", ("digits", _DIGITS), {"top_k": "x"}),
    ("classify", ("iris_nope", _DIGITS), {}),
]


def _plain(value: Any) -> Any:
    """An answer in a form two answers compare by (frames and arrays by their content)."""
    if isinstance(value, InferResult):
        return "result", value.output_names, _plain(value.as_dict())
    if isinstance(value, pd.DataFrame):
        return "frame", list(value.columns), value.to_dict("list")
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return "array", value.dtype.str, value.tolist()
    return value


def _raised(exc: Exception) -> tuple[str, type[Exception], str]:
    return "raised", type(exc), re.sub(r"\bsession\.a(infer|classify)\b", r"session.\1", str(exc))


def _sync_face(session: Session, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    try:
        return "ok", _plain(getattr(session, name)(*args, **kw))
    except Exception as exc:  # the error is the behaviour under test
        return _raised(exc)


def _async_face(session: Session, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    async def run() -> Any:
        try:
            return "ok", _plain(await getattr(session, "a" + name)(*args, **kw))
        except Exception as exc:  # the error is the behaviour under test
            return _raised(exc)

    return asyncio.run(run())


@pytest.mark.parametrize(("name", "args", "kwargs"), CALLS, ids=[c[0] for c in CALLS])
def test_both_faces_answer_each_call_alike(
    session: Session, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert _sync_face(session, name, args, kwargs) == _async_face(session, name, args, kwargs)


@pytest.mark.parametrize(("sync", "aio"), PAIRS)
def test_both_faces_are_named_and_documented_as_a_pair(sync: str, aio: str) -> None:
    blocking, awaiting = getattr(Session, sync), getattr(Session, aio)
    assert inspect.iscoroutinefunction(awaiting) and not inspect.iscoroutinefunction(blocking)
    assert (blocking.__name__, awaiting.__name__) == (sync, aio)
    assert inspect.getdoc(blocking) and "Args:" in (inspect.getdoc(blocking) or "")
    assert f":meth:`{sync}`, from a coroutine" in (inspect.getdoc(awaiting) or "")


def test_the_signatures_are_the_full_ones_not_the_adapters() -> None:
    infer = inspect.signature(Session.infer)
    assert list(infer.parameters) == [
        "self", "model", "data", "outputs", "model_version", "as_frame", "columns",
        "batch_size", "concurrency", "progress", "expand", "classification", "inputs", "kwargs",
    ]  # fmt: skip
    assert infer.parameters["expand"].default is True
    assert infer.parameters["model_version"].default == ""
    assert infer.parameters["outputs"].kind is inspect.Parameter.KEYWORD_ONLY
    classify = inspect.signature(Session.classify)
    assert list(classify.parameters) == [
        "self",
        "model",
        "images",
        "top_k",
        "model_version",
        "options",
    ]
    assert classify.parameters["top_k"].default == 5
    assert classify.return_annotation == "pd.DataFrame"


@pytest.mark.parametrize("face", ["infer", "ainfer"])
def test_the_public_boundary_still_applies_to_both_faces(session: Session, face: str) -> None:
    a = np.arange(16, dtype=np.float32)
    with pytest.raises(InvalidInputError, match=rf"session\.{face}\(\):") as caught:
        result = getattr(session, face)("add_sub", {"INPUT0": a, "INPUT1": a}, priority="x")
        if inspect.iscoroutine(result):  # the asyncio face raises when awaited
            asyncio.run(result)
    assert isinstance(caught.value.__cause__, TypeError | ValueError)  # a bad value, deeper
    with pytest.raises(TypeError, match=rf"session\.{face}\(\) takes 2 positional") as plain:
        result = getattr(session, face)("add_sub", {"INPUT0": a, "INPUT1": a}, "one too many")
        if inspect.iscoroutine(result):
            asyncio.run(result)
    assert type(plain.value) is TypeError and plain.value.__context__ is None  # binding: plain


def test_both_faces_give_the_same_answer(session: Session) -> None:
    a = np.arange(16, dtype=np.float32)
    data = {"INPUT0": a, "INPUT1": a}
    sync = session.infer("add_sub", data, outputs="OUTPUT0")
    aio = asyncio.run(session.ainfer("add_sub", data, outputs="OUTPUT0"))
    np.testing.assert_array_equal(sync["OUTPUT0"], aio["OUTPUT0"])
    np.testing.assert_array_equal(sync["OUTPUT0"], 2 * a)
