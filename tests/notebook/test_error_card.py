"""Errors show your line, then the card: the renderer, a real IPython shell and a real kernel.

The renderer tests need no server: a ConnectError comes from a real client calling a closed port
on 127.0.0.1 (no retries), so its traceback runs through the client and a transport and chains
the engine's error. The shell and kernel tests use an embedded server.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import nbinfer
import nbinfer.notebook as notebook
from nbinfer.errors import NbinferError
from nbinfer.render import error_card
from tests.ports import free_port

PACKAGE = str(Path(nbinfer.__file__).resolve().parent)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def user_code_calling_nbinfer() -> None:
    """A user's function: the frame that must stay visible."""
    with nbinfer.Client(f"http://127.0.0.1:{free_port()}", retries=0) as client:
        client.is_server_live()


@pytest.fixture
def connect_error() -> nbinfer.ConnectError:
    with pytest.raises(nbinfer.ConnectError) as info:
        user_code_calling_nbinfer()
    return info.value


# -- hints: a property of the error ----------------------------------------------------------


def test_an_error_carries_its_own_hint_else_its_class_defaults() -> None:
    own = nbinfer.DataTypeError("FP64 is not FP32", hint="Cast it: `x.astype(np.float32)`.")
    assert own.hints == ("Cast it: `x.astype(np.float32)`.",) and own.hint_given
    assert error_card.hints(own) == ["Cast it: `x.astype(np.float32)`."]
    several = nbinfer.InvalidInputError("bad", hint=["one", "two"])
    assert several.hints == ("one", "two")
    default = nbinfer.ModelNotFoundError("unknown model 'irs'", model="irs")
    assert default.hints == nbinfer.ModelNotFoundError.default_hints and not default.hint_given
    assert error_card.hints(ValueError("not ours")) == []


def test_default_hints_name_the_model_of_the_error() -> None:
    named = nbinfer.RemoteInvalidInputError("shape [1,3] != [-1,4]", model="iris")
    assert named.hints == (
        "Compare your inputs with `session.model('iris').metadata` (names, datatypes, shapes).",
    )
    anonymous = nbinfer.InvalidInputError("bad")
    assert "`session.model(name).metadata`" in anonymous.hints[0]
    text = error_card.error_text(nbinfer.ModelNotReadyError("not ready", model="iris"))
    assert "session.load('iris')" in text


def test_an_error_can_be_given_a_better_hint_after_it_is_raised() -> None:
    error = nbinfer.InvalidInputError("bad spec", model="f")
    error.hints = ("Fix the spec.",)
    assert "Fix the spec." in error_card.render_error(error)
    assert "session.model(" not in error_card.render_error(error)


@pytest.mark.parametrize(
    "message",
    [
        "Request for unknown model: 'irs' is not found; known models: add_sub, digits, iris",
        "unknown model 'irs'; known models: add_sub, digits, iris",  # nbinfer servers before 26
    ],
)
def test_an_unknown_model_close_to_a_known_one_says_which(message: str) -> None:
    typo = nbinfer.errors.error_for_status(404, message, model="irs")
    assert typo.hints[0] == "Did you mean `'iris'`?"
    assert typo.hints[1:] == nbinfer.ModelNotFoundError.default_hints
    over_grpc = nbinfer.errors.error_for_grpc_code("NOT_FOUND", message)
    assert over_grpc.hints[0] == "Did you mean `'iris'`?"
    far = nbinfer.errors.error_for_status(404, "unknown model 'resnet'; known models: iris")
    assert far.hints == nbinfer.ModelNotFoundError.default_hints


def test_a_shape_mismatch_says_it_in_columns() -> None:
    iris = nbinfer.errors.error_for_status(
        400, "input 'input' of model 'iris': shape [1,3] does not match the expected [-1,4]"
    )
    assert iris.hints[0] == "'iris' needs 4 columns in input 'input', got 3: pass rows of 4 values."
    digits = nbinfer.errors.error_for_grpc_code(
        "INVALID_ARGUMENT",
        "input 'input' of model 'digits': shape [1,7,7] does not match the expected [-1,8,8]",
    )
    assert digits.hints[0] == (
        "'digits' takes input 'input' of shape [-1, 8, 8] (-1: any size), got [1, 7, 7]."
    )
    assert digits.hints[1:] == (
        "Compare your inputs with `session.model(name).metadata` (names, datatypes, shapes).",
    )


# -- which frames are the user's ---------------------------------------------------------------


def _frame(filename: str, name: str = "f") -> traceback.FrameSummary:
    return traceback.FrameSummary(filename, 1, name, line="x = 1")


def test_library_frames_are_nbinfer_and_installed_code_reached_from_it() -> None:
    asyncio_file = str(Path(traceback.__file__).parent / "asyncio" / "base_events.py")
    frames = [
        _frame(asyncio_file, "caller_side"),  # installed code before nbinfer: the caller's
        _frame("/tmp/ipykernel_1/2345.py", "<module>"),  # a notebook cell
        _frame(f"{PACKAGE}/session/core.py", "call"),
        _frame(asyncio_file, "run_until_complete"),  # reached from nbinfer: library
        _frame(f"{PACKAGE}/transports/curl_engine.py", "request"),
        _frame("/home/me/models.py", "predict"),  # user code nbinfer called back
        _frame(f"{PACKAGE}/server/model.py", "check"),
    ]
    assert error_card.library_frames(frames) == [False, False, True, True, True, False, True]


def test_short_traceback_keeps_the_users_frames_and_folds_the_librarys(
    connect_error: nbinfer.ConnectError,
) -> None:
    frames = traceback.extract_tb(connect_error.__traceback__)
    library = sum(error_card.library_frames(frames))
    assert library >= 3  # client, transport, engine: what used to bury the card
    text = error_card.short_traceback(connect_error, frames)
    assert "user_code_calling_nbinfer" in text and "client.is_server_live()" in text
    assert PACKAGE not in text  # no library frame is printed
    assert f"[... {library} library frames: under 'Library frames'" in text
    assert text.splitlines()[-1] == f"ConnectError: {connect_error.message}"
    assert "The above exception" not in text and "ConnectionRefusedError" not in text  # no wall
    assert text.count("Traceback") == 1


def test_cell_names_and_colour_are_the_shells() -> None:
    try:
        exec(compile("raise nbinfer.InvalidInputError('x')", "<cell-7>", "exec"))
    except nbinfer.InvalidInputError as exc:
        frames = traceback.extract_tb(exc.__traceback__)[1:]  # this test's own frame: skip
        text = error_card.short_traceback(
            exc, frames, name_of=lambda f: "Cell In[7]" if f == "<cell-7>" else None, color=True
        )
    assert "\x1b[" in text
    assert "  Cell In[7], line 1" in ANSI.sub("", text)


def test_report_text_keeps_every_frame_and_the_chain_then_the_card(
    connect_error: nbinfer.ConnectError,
) -> None:
    report = error_card.error_report(connect_error)
    plain = report.bundle["text/plain"]
    for frame in traceback.extract_tb(connect_error.__traceback__):
        assert f'"{frame.filename}", line {frame.lineno}' in plain  # every frame, always
    # the chained engine error
    assert "direct cause" in plain and "ConnectionRefusedError: [Errno 111]" in plain
    assert plain.index("Traceback") < plain.index("What to try:") < plain.index("Is the server")
    assert PACKAGE not in ANSI.sub("", report.traceback)


def test_report_html_is_the_card_with_library_frames_and_chain_collapsed(
    connect_error: nbinfer.ConnectError,
) -> None:
    page = error_card.error_report(connect_error).bundle["text/html"]
    assert "ConnectError" in page and "What to try" in page
    card_end = page.index('<div class="nbi-library">')
    assert page.index("What to try") < card_end  # the card first, then the folded frames
    library = page[card_end:]
    assert library.startswith('<div class="nbi-library"><details><summary>Library frames')
    assert "<details open" not in library  # collapsed: one click opens it
    frames = traceback.extract_tb(connect_error.__traceback__)
    for frame, is_library in zip(frames, error_card.library_frames(frames), strict=True):
        quoted = f"&quot;{frame.filename}&quot;, line {frame.lineno}"
        assert (quoted in library) is is_library, frame
    assert "raised from:" in library and "ConnectionRefusedError: [Errno 111]" in library


def test_displaying_a_caught_error_shows_its_library_frames_collapsed(
    connect_error: nbinfer.ConnectError,
) -> None:
    page = connect_error._repr_mimebundle_()["text/html"]
    assert "<summary>Library frames" in page and "client/sync.py" in page


def test_an_error_raised_while_handling_another_says_so() -> None:
    try:
        try:
            raise ValueError("the first problem")
        except ValueError:
            raise nbinfer.InvalidInputError("the second")  # noqa: B904 (the implicit context)
    except nbinfer.InvalidInputError as exc:
        page = error_card.render_error(exc)
    assert "raised while handling:" in page and "ValueError: the first problem" in page


def test_an_error_without_traceback_has_no_library_section() -> None:
    page = error_card.render_error(nbinfer.InvalidInputError("bad"))
    assert "Library frames" not in page


# -- a real IPython shell ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.set_custom_exc((), None)
    with nbinfer.Session(device="cpu") as session:
        ip.user_ns["session"] = session
        yield ip
    ip.set_custom_exc((), None)


def test_import_inside_ipython_installs_the_display_without_load_ext(
    shell: InteractiveShell,
) -> None:
    shell.set_custom_exc((), None)
    notebook._install_in_running_shell()  # what `import nbinfer` runs inside a shell
    assert shell.custom_exceptions == (NbinferError,)
    assert notebook.install_error_display(shell)  # idempotent


def test_a_handler_someone_else_installed_is_kept(shell: InteractiveShell) -> None:
    def theirs(*args: Any, **kwargs: Any) -> None:
        return None

    shell.set_custom_exc((KeyError,), theirs)
    try:
        assert not notebook.install_error_display(shell)
        assert shell.custom_exceptions == (KeyError,)
    finally:
        shell.set_custom_exc((), None)
    assert notebook.install_error_display(shell)


def _run(shell: InteractiveShell, cell: str) -> tuple[Any, str, list[dict[str, str]]]:
    notebook.install_error_display(shell)
    with capture_output() as captured:
        result = shell.run_cell(cell)
    return result, ANSI.sub("", captured.stdout), [o.data for o in captured.outputs]


def test_shell_shows_the_users_line_then_the_card_with_library_frames_folded(
    shell: InteractiveShell,
) -> None:
    result, stdout, outputs = _run(shell, "x = 1\nsession.model('irs')")
    assert isinstance(result.error_in_exec, nbinfer.ModelNotFoundError)  # the cell failed
    assert "Cell In[" in stdout and "line 2" in stdout and "session.model('irs')" in stdout
    assert PACKAGE not in stdout and "library frames" in stdout
    assert stdout.rstrip().endswith("ModelNotFoundError: " + result.error_in_exec.message)
    [card] = outputs
    assert "<summary>Library frames" in card["text/html"] and "What to try" in card["text/html"]
    assert f"{PACKAGE}/session/core.py" in card["text/plain"]  # every frame in the text
    assert f"{PACKAGE}/protocol/http_binding.py" in card["text/plain"]  # where the 404 is read
    assert "session.model('irs')" in card["text/plain"]


def test_shell_shows_a_chained_error_once(shell: InteractiveShell) -> None:
    result, stdout, outputs = _run(shell, "session.profile('iris', nope=1)")
    error = result.error_in_exec
    assert isinstance(error, nbinfer.InvalidInputError)
    assert isinstance(error.__cause__, TypeError)  # a bad value found deeper: still wrapped
    assert stdout.count("Traceback") == 1 and "The above exception" not in stdout
    assert "help(session.profile)" in outputs[0]["text/html"]  # its hint fits the error
    library = outputs[0]["text/html"].split('<div class="nbi-library">', 1)[1]
    assert "raised from:" in library and "unexpected keyword argument" in library
    assert "direct cause" in outputs[0]["text/plain"]


def test_terminal_ipython_prints_every_frame_then_what_to_try(shell: InteractiveShell) -> None:
    formatter = shell.display_formatter
    active = formatter.active_types
    formatter.active_types = ["text/plain"]  # what TerminalInteractiveShell sets
    try:
        _, stdout, outputs = _run(shell, "session.model('irs')")
    finally:
        formatter.active_types = active
    assert f"{PACKAGE}/session/core.py" in stdout and "Traceback" in stdout  # every frame
    assert "What to try:" not in stdout
    [card] = outputs  # then the card's text (a terminal prints it; the capture keeps it)
    assert list(card) == ["text/plain"] and card["text/plain"].startswith("What to try:")


def test_a_binding_mistake_is_a_plain_type_error_in_the_shell(shell: InteractiveShell) -> None:
    result, stdout, outputs = _run(shell, "session.profile()")
    assert type(result.error_in_exec) is TypeError
    assert "session.profile() missing a required argument: 'model'" in stdout
    assert "The above exception" not in stdout and "InvalidInputError" not in stdout
    assert not outputs


# -- a real kernel (what JupyterLab and VS Code talk to) ------------------------------------------


def test_a_kernel_without_load_ext_sends_your_line_then_the_card(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "import nbinfer\nsession = nbinfer.Session(device='cpu')",
        "rows = [[5.1, 3.5, 1.4, 0.2]]\nsession.model('iris_v2')",
        "session.close()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = nb.cells[1].outputs
    assert [o.output_type for o in outputs] == ["error", "display_data"]  # line, then card
    error, card = outputs
    assert error.ename == "ModelNotFoundError"
    red_box = ANSI.sub("", "\n".join(error.traceback))
    assert "Cell In[2], line 2" in red_box and "session.model('iris_v2')" in red_box
    assert "/nbinfer/" not in red_box and "library frames" in red_box
    assert "Request for unknown model: 'iris_v2' is not found" in red_box.splitlines()[-1]
    assert "<summary>Library frames" in card.data["text/html"]
    assert "/nbinfer/session/core.py" in card.data["text/plain"]
    assert "What to try:" in card.data["text/plain"]
    assert not any(o.output_type == "error" for o in nb.cells[2].outputs)
