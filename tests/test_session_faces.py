"""The Session's sync / async pairs are one declaration: same parameters, same defaults."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import numpy as np
import pytest

from nbinfer import Session
from nbinfer.errors import InvalidInputError

PAIRS = [("infer", "ainfer"), ("classify", "aclassify")]


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


@pytest.mark.parametrize(("sync", "aio"), PAIRS)
def test_both_faces_take_the_same_parameters_with_the_same_defaults(sync: str, aio: str) -> None:
    blocking, awaiting = getattr(Session, sync), getattr(Session, aio)
    assert inspect.signature(blocking) == inspect.signature(awaiting)
    params = list(inspect.signature(blocking).parameters.values())
    assert params[0].name == "self" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
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
        result = getattr(session, face)("add_sub", {"INPUT0": a, "INPUT1": a}, timeout="x")
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
