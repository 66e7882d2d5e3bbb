"""The error card and the short traceback a notebook shows for an uncaught nbinfer error.

Layer: render (pure, duck-typed): stdlib only; imports nothing of nbinfer outside
:mod:`nbinfer.render`. An error is any exception; nbinfer's add what the card shows through
attributes it reads by name: ``message``, ``hints`` (what to try), ``context`` (facts),
``status`` / ``request_id`` (a server's answer) and ``model_traceback`` (the model's own).

:func:`error_report` gives what the notebook shows: the user's frames (:func:`library_frames`
tells them from nbinfer's and installed code's) and the card, with the library frames collapsed
(the IPython handler in :mod:`nbinfer.notebook` sends both).

Example::

    from nbinfer.render.error_card import render_error
    html = render_error(nbinfer.ModelNotFoundError("no model 'x'", model="x"))
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sysconfig
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbinfer.render.html import Html, card, code_spans, escape, facts, section

__all__ = [
    "ErrorReport",
    "error_bundle",
    "error_report",
    "error_text",
    "full_traceback",
    "hints",
    "hints_text",
    "library_frames",
    "render_error",
    "short_traceback",
]


def hints(exc: BaseException) -> list[str]:
    """What to try: the error's ``hints`` (an nbinfer error's own or its class's), else ``[]``."""
    found = getattr(exc, "hints", ())
    return [str(h) for h in found] if isinstance(found, tuple | list) else []


def _error_facts(exc: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {}
    status = getattr(exc, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):  # a server's answer
        out["status"] = status
        out["request id"] = getattr(exc, "request_id", None)
    context = getattr(exc, "context", None)
    if isinstance(context, Mapping):
        out.update({str(k).replace("_", " "): v for k, v in context.items()})
    return out


def _model_traceback(exc: BaseException) -> str | None:
    found = getattr(exc, "model_traceback", None)
    return found if isinstance(found, str) else None


def _message(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else str(exc)


#: The nbinfer package's directory (its frames are library frames).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@functools.cache
def _installed_dirs() -> tuple[str, ...]:
    """Where installed code lives: the stdlib and site-packages (asyncio, httpx, ...)."""
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(sorted({os.path.abspath(paths[k]) + os.sep for k in keys if k in paths}))


def library_frames(frames: Sequence[traceback.FrameSummary]) -> list[bool]:
    """Which of ``frames`` (outermost first) are library frames, not the user's.

    A library frame is nbinfer's own (under its package), or installed code (asyncio,
    ``concurrent.futures``, an HTTP engine) reached from it. The caller's frames before the
    first nbinfer frame, and user code that nbinfer calls back (a model defined in the
    notebook), are the user's.
    """
    flags: list[bool] = []
    inside = False
    for frame in frames:
        path = frame.filename if frame.filename.startswith("<") else os.path.abspath(frame.filename)
        if path.startswith(_PACKAGE_DIR):
            inside = True
        elif not (path.startswith("<frozen ") or path.startswith(_installed_dirs())):
            inside = False  # a user file (a notebook cell, a script): the user's again
        flags.append(inside)
    return flags


def _cause(exc: BaseException) -> BaseException | None:
    """The exception ``exc`` was raised from or during (as Python's traceback prints it)."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__


def _frame_text(frame: traceback.FrameSummary, name_of: Callable[[str], str | None] | None) -> str:
    label = name_of(frame.filename) if name_of is not None else None
    if label:
        where = f"  {label}, line {frame.lineno}"
        where += "" if frame.name == "<module>" else f", in {frame.name}"
    else:
        where = f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}'
    source = (frame.line or "").strip()
    return f"{where}\n    {source}" if source else where


def _frames_text(
    frames: Sequence[traceback.FrameSummary],
    name_of: Callable[[str], str | None] | None = None,
) -> str:
    return "\n".join(_frame_text(f, name_of) for f in frames)


def _folded(count: int) -> str:
    noun = "frame" if count == 1 else "frames"
    return f"  [... {count} library {noun}: under 'Library frames' in the error card ...]"


def short_traceback(
    exc: BaseException,
    frames: Sequence[traceback.FrameSummary],
    *,
    name_of: Callable[[str], str | None] | None = None,
    color: bool = False,
) -> str:
    """The user's frames of ``exc``, then its message; each run of library frames folds to a line.

    ``name_of`` maps a file name to a label (IPython's ``Cell In[3]``); ``color`` adds ANSI
    colours, as IPython's tracebacks have. Chained exceptions are left out (the card has them).
    """
    red, green, off = ("\x1b[1;31m", "\x1b[32m", "\x1b[0m") if color else ("", "", "")
    lines = [f"{red}{type(exc).__name__}{off}  Traceback (most recent call last)"]
    folded = 0
    for frame, library in zip(frames, library_frames(frames), strict=True):
        if library:
            folded += 1
            continue
        if folded:
            lines.append(_folded(folded))
            folded = 0
        head, _, source = _frame_text(frame, name_of).partition("\n")
        lines.append(f"{green}{head}{off}" + (f"\n{source}" if source else ""))
    if folded:
        lines.append(_folded(folded))
    lines.append(f"{red}{type(exc).__name__}{off}: {_message(exc)}")
    return "\n".join(lines)


def full_traceback(exc: BaseException) -> str:
    """Every frame of ``exc`` and of the exceptions it chains to, as Python prints them."""
    return "".join(traceback.format_exception(exc)).rstrip("\n")


def hints_text(exc: BaseException) -> str:
    """``What to try:`` and the error's hints as a list, ``""`` when it has none."""
    tips = hints(exc)
    return "\n".join(["What to try:", *(f"  - {t}" for t in tips)]) if tips else ""


def error_text(exc: BaseException) -> str:
    """Plain-text summary of an error: the model's traceback (if any), class, message, tips."""
    model_tb = _model_traceback(exc)
    lines = [model_tb, ""] if model_tb else []
    lines.append(f"{type(exc).__name__}: {_message(exc)}")
    tips = hints_text(exc)
    return "\n".join([*lines, tips] if tips else lines)


def _library_section(exc: BaseException, frames: Sequence[traceback.FrameSummary]) -> Html:
    """The collapsed "Library frames" of ``exc``: nbinfer's frames, then what it was raised from."""
    library = [f for f, lib in zip(frames, library_frames(frames), strict=True) if lib]
    cause = _cause(exc)
    if not library and cause is None:
        return Html("")
    parts = []
    if library:
        parts.append(
            Html(f'<pre class="nbi-pre nbi-traceback">{escape(_frames_text(library))}</pre>')
        )
    if cause is not None:
        how = "raised from" if exc.__cause__ is not None else "raised while handling"
        parts.append(Html(f'<div class="nbi-caption">{how}:</div>'))
        pre = escape(full_traceback(cause))
        parts.append(Html(f'<pre class="nbi-pre nbi-traceback">{pre}</pre>'))
    return Html(
        '<div class="nbi-library">'
        + section("Library frames", "".join(parts), count=len(library), open=False)
        + "</div>"
    )


def render_error(
    exc: BaseException, *, frames: Sequence[traceback.FrameSummary] | None = None
) -> Html:
    """An nbinfer error: the model's traceback first (your code), what failed, what to try.

    Then, collapsed, the library frames of ``frames`` (default: the error's own traceback)
    and the exception it was raised from, if any.
    """
    tips = hints(exc)
    body = []
    model_tb = _model_traceback(exc)
    if model_tb:
        pre = Html(f'<pre class="nbi-pre nbi-traceback">{escape(model_tb)}</pre>')
        body.append(section("Model traceback (your code)", pre))
    message = Html(f'<div class="nbi-message">{escape(_message(exc))}</div>')
    body += [facts(_error_facts(exc)), message]
    if tips:
        items = "".join(f"<li>{code_spans(t)}</li>" for t in tips)
        body.append(section("What to try", Html(f'<ul class="nbi-hints">{items}</ul>')))
    if frames is None:
        frames = traceback.extract_tb(exc.__traceback__)
    body.append(_library_section(exc, frames))
    doc = (type(exc).__doc__ or "").strip().splitlines()
    return card(
        "Error",
        type(exc).__name__,
        "".join(body),
        text=error_text(exc),
        sub=doc[0] if doc else "",
        error=True,
    )


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """What a notebook shows for an uncaught nbinfer error (see :func:`error_report`).

    Attributes:
        traceback: The error output's text (ANSI colours): the user's frames, the library
            frames folded to one line, the message.
        bundle: The card that follows it: ``text/html`` (the card, library frames collapsed)
            and ``text/plain`` (every frame, chained exceptions too, then what to try).
    """

    traceback: str
    bundle: dict[str, str]


def error_report(
    exc: BaseException,
    *,
    skip: int = 0,
    name_of: Callable[[str], str | None] | None = None,
) -> ErrorReport:
    """The short traceback and the error card for an uncaught ``exc``.

    Args:
        exc: The error (its ``__traceback__`` is read).
        skip: Outermost frames to leave out (the shell's own, e.g. IPython's ``run_code``).
        name_of: File name -> label (IPython's ``Cell In[3]``), None to keep the file name.
    """
    frames = traceback.extract_tb(exc.__traceback__)[skip:]
    tips = hints_text(exc)
    text = f"{full_traceback(exc)}\n\n{tips}" if tips else full_traceback(exc)
    return ErrorReport(
        traceback=short_traceback(exc, frames, name_of=name_of, color=True),
        bundle={"text/plain": text, "text/html": render_error(exc, frames=frames)},
    )


def error_bundle(exc: BaseException) -> dict[str, str]:
    """``text/plain`` + ``text/html`` of an error (an nbinfer error's ``_repr_mimebundle_``)."""
    return {"text/plain": error_text(exc), "text/html": render_error(exc)}
