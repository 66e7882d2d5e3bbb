"""The error card and the short traceback, for duck-typed errors and plain exceptions."""

from __future__ import annotations

import os
import traceback

from nbinfer.render.error_card import (
    error_bundle,
    error_report,
    error_text,
    hints,
    library_frames,
    render_error,
    short_traceback,
)
from tests.render.pages import EVIL, safe, themed

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__import__("nbinfer").__file__)))


class _ServerSaid(Exception):
    """What nbinfer's errors carry, by attribute name (the card imports no error class)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.hints = ("Cast it: `x.astype(np.float32)`.", EVIL)
        self.context = {"model": EVIL, "tensor_name": "INPUT0"}
        self.status = 400
        self.request_id = "r-7"
        self.model_traceback = f'File "model.py", line 3\n    raise ValueError({EVIL!r})'


def test_the_card_shows_message_facts_hints_and_the_models_traceback_escaped() -> None:
    exc = _ServerSaid(f"bad input {EVIL}")
    markup = render_error(exc)
    page = safe(markup)
    themed(markup)
    text = page.joined()
    assert "_ServerSaid" in text and f"bad input {EVIL}" in text
    assert "status" in text and "400" in text and "r-7" in text
    assert "tensor name" in text and "INPUT0" in text  # context keys read as words
    assert "Model traceback (your code)" in text and "model.py" in text
    assert "<code>x.astype(np.float32)</code>" in markup  # `code` in a hint
    assert 'class="nbi nbi-error"' in markup
    assert hints(exc) == ["Cast it: `x.astype(np.float32)`.", EVIL]


def test_any_exception_gets_a_card_without_nbinfers_attributes() -> None:
    exc = ValueError(EVIL)
    text = safe(render_error(exc)).joined()
    assert "ValueError" in text and EVIL in text and "What to try" not in text
    assert hints(exc) == [] and error_text(exc) == f"ValueError: {EVIL}"
    bundle = error_bundle(exc)
    assert bundle["text/plain"] == error_text(exc) and "<style>" in bundle["text/html"]


def test_plain_text_has_the_models_traceback_then_the_message_then_what_to_try() -> None:
    text = error_text(_ServerSaid("boom"))
    assert text.index("model.py") < text.index("_ServerSaid: boom") < text.index("What to try:")


def _frame(path: str, name: str = "f") -> traceback.FrameSummary:
    return traceback.FrameSummary(path, 1, name, line="call()")


def test_library_frames_are_nbinfers_and_installed_code_reached_from_it() -> None:
    import asyncio

    user = _frame("/home/me/notebook.py")
    ours = _frame(os.path.join(PACKAGE, "nbinfer", "client", "sync.py"))
    installed = _frame(asyncio.__file__)
    callback = _frame("<ipython-input-3>", "model")
    frames = [user, installed, ours, installed, callback, ours]
    assert library_frames(frames) == [False, False, True, True, False, True]


def test_the_short_traceback_folds_library_frames_and_names_cells() -> None:
    exc = _ServerSaid("boom")
    cell = _frame("/tmp/ipykernel_1/123.py", "<module>")
    frames = [
        cell,
        _frame(os.path.join(PACKAGE, "nbinfer", "x.py")),
        _frame(os.path.join(PACKAGE, "nbinfer", "y.py")),
    ]
    text = short_traceback(
        exc, frames, name_of=lambda f: "Cell In[3]" if "ipykernel" in f else None
    )
    assert "Cell In[3], line 1" in text
    assert "[... 2 library frames: under 'Library frames' in the error card ...]" in text
    assert text.endswith("_ServerSaid: boom")


def test_an_uncaught_error_gives_the_folded_traceback_and_the_card() -> None:
    try:
        try:
            raise KeyError(EVIL)
        except KeyError as inner:
            raise _ServerSaid("outer") from inner
    except _ServerSaid as exc:
        report = error_report(exc)
    assert "_ServerSaid" in report.traceback and "\x1b[" in report.traceback  # colours
    assert "KeyError" in report.bundle["text/plain"]  # every frame, chained ones too
    page = safe(report.bundle["text/html"])
    assert "raised from:" in page.joined() and "Library frames" in page.joined()
