"""A Session's errors fit the mistake, against a real embedded server.

Binding mistakes are plain TypeErrors naming the argument; serve() spec errors point at the spec.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest

import nbinfer
from nbinfer.render import error_card
from nbinfer.session import Session
from nbinfer.session.serving import SERVE_SPEC_HINTS


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


def _plain(info: pytest.ExceptionInfo[TypeError]) -> TypeError:
    error = info.value
    assert type(error) is TypeError  # not an InvalidInputError wrapping it
    assert error.__cause__ is None and error.__context__ is None  # one traceback, no chain
    return error


def test_profile_without_a_model_is_a_plain_type_error_naming_model(session: Session) -> None:
    with pytest.raises(TypeError) as info:
        session.profile()  # type: ignore[call-arg]
    assert str(_plain(info)) == "session.profile() missing a required argument: 'model'"


def test_an_unknown_keyword_names_it_and_the_known_ones(session: Session) -> None:
    with pytest.raises(TypeError) as info:
        session.model("iris", verison="1")  # type: ignore[call-arg]
    message = str(_plain(info))
    assert message.startswith("session.model() got an unexpected keyword argument 'verison'")
    assert "its arguments: name, version" in message


def test_too_many_positional_arguments_name_the_positional_ones(session: Session) -> None:
    with pytest.raises(TypeError) as info:
        session.infer("iris", [[5.1, 3.5, 1.4, 0.2]], ["probabilities"])  # type: ignore[misc]
    message = str(_plain(info))
    assert "session.infer() takes 2 positional arguments (model, data) but 3 were given" in message


def test_one_positional_argument_is_said_in_the_singular(session: Session) -> None:
    with pytest.raises(TypeError) as info:
        session.unload("iris", "1")  # type: ignore[call-arg]
    message = str(_plain(info))
    assert message.startswith("session.unload() takes 1 positional argument (model) but 2")
    assert "iris" in set(session.models["name"])  # nothing was unloaded


def test_async_faces_raise_the_same_plain_type_error(session: Session) -> None:
    with pytest.raises(TypeError) as info:
        asyncio.run(session.ainfer())  # type: ignore[call-arg]
    assert str(_plain(info)) == "session.ainfer() missing a required argument: 'model'"


def test_a_bad_value_found_deeper_is_still_an_invalid_input_error(session: Session) -> None:
    with pytest.raises(nbinfer.InvalidInputError, match=r"session\.profile\(\)") as info:
        session.profile("iris", no_such_option=1)
    assert isinstance(info.value.__cause__, TypeError)
    assert info.value.hints == (
        "Check the values passed to `session.profile()`: `help(session.profile)`.",
    )


def test_serve_spec_error_points_at_the_spec_not_at_model_metadata(session: Session) -> None:
    def no_hints(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(nbinfer.InvalidInputError, match="cannot infer the datatype") as info:
        session.serve(no_hints)
    assert info.value.hints == SERVE_SPEC_HINTS
    text = error_card.error_text(info.value)
    assert "session.serve()" in text and "inputs=" in text and "example=" in text
    assert "session.model(" not in text


def test_serve_spec_error_found_by_the_server_points_at_the_spec(session: Session) -> None:
    with pytest.raises(nbinfer.InvalidInputError, match="FLOAT99") as info:
        session.serve(
            lambda x: x, name="typo", inputs=[("x", "FLOAT99", [-1])], outputs=[("y", "FP32", [-1])]
        )
    assert info.value.hints == SERVE_SPEC_HINTS
    assert "session.model(" not in error_card.render_error(info.value)


def test_serve_spec_that_is_not_a_list_points_at_the_spec(session: Session) -> None:
    with pytest.raises(nbinfer.InvalidInputError, match=r"session\.serve\(\)") as info:
        session.serve(lambda x: x, name="five", inputs=5, outputs=5)  # type: ignore[arg-type]
    assert info.value.hints == SERVE_SPEC_HINTS


def test_serve_keeps_a_hint_of_the_errors_own(session: Session) -> None:
    import threading

    lock = threading.Lock()

    def holds_a_lock(x: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        with lock:
            return x

    with pytest.raises(nbinfer.InvalidInputError, match="cannot ship") as info:
        session.serve(holds_a_lock, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
    assert info.value.hint_given and "load()" in info.value.hints[0]


def test_serve_on_a_remote_session_says_where_serving_works(session: Session) -> None:
    with (
        Session(session.url, token=session.token) as remote,
        pytest.raises(nbinfer.InvalidInputError, match="embedded local server") as info,
    ):
        remote.serve(lambda x: x)
    assert "`nbinfer.Session()`" in info.value.hints[0]
