"""Live outputs: one display updated in place while a stream runs (text generation).

:func:`live_output` picks where a growing text goes:

* in a Jupyter kernel (JupyterLab, Notebook, VS Code: they all speak the same display
  protocol) one ``display_data`` with a ``display_id``, then ``update_display_data`` messages
  for that id: the cell keeps ONE output that grows, and a saved notebook holds the last state;
* anywhere else (IPython in a terminal, plain Python) the new text is written to stdout as it
  arrives, with no newline per token, and a stats line at the end.

The session layer drives it through the duck-typed :class:`LiveOutput` (``update`` /
``finish``); it hands each update a ``draw()`` returning the mime bundle, so this module
knows nothing of what is drawn. Updates are throttled (at most one per
:data:`MIN_INTERVAL` seconds; the last one always goes out).

Layer: session; imports nothing of nbinfer, and never imports IPython: it uses IPython only when
the process already runs it (through ``sys.modules``, as ``client/callbacks.py`` does).
``display="html"`` outside IPython falls back to the text form.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

__all__ = ["MIN_INTERVAL", "LiveOutput", "live_output", "shown_in_this_cell"]

#: Fewest seconds between two updates of a live display (a fast model must not flood the page).
MIN_INTERVAL = 0.05

Draw = Callable[[], dict[str, str]]


class LiveOutput(Protocol):
    """Where a growing text is shown (see :func:`live_output`)."""

    def update(self, delta: str, draw: Draw) -> None:
        """``delta``: the text added since the last call; ``draw()``: the whole bundle now."""

    def finish(self, draw: Draw, footer: str) -> None:
        """Draw the final state; ``footer``: the plain-text stats line."""


class _Display:
    """One IPython display, updated in place (``display_id``)."""

    def __init__(self, draw: Draw) -> None:
        display = _ipython().display.display  # running: checked by live_output
        self._handle = display(draw(), raw=True, display_id=True)
        self._last = time.monotonic()

    def update(self, delta: str, draw: Draw) -> None:
        now = time.monotonic()
        if now - self._last >= MIN_INTERVAL:
            self._last = now
            self._handle.update(draw(), raw=True)

    def finish(self, draw: Draw, footer: str) -> None:
        self._handle.update(draw(), raw=True)


class _Stdout:
    """Text written to a stream as it arrives (terminals, plain Python)."""

    def __init__(self, head: str, stream: TextIO) -> None:
        self._stream = stream
        if head:
            stream.write(head)
            stream.flush()

    def update(self, delta: str, draw: Draw) -> None:
        if delta:
            self._stream.write(delta)
            self._stream.flush()

    def finish(self, draw: Draw, footer: str) -> None:
        self._stream.write("\n" + (f"[{footer}]\n" if footer else ""))
        self._stream.flush()


def _in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (an IPython shell with a kernel attached)."""
    if "IPython" not in sys.modules:
        return False
    shell = _shell()
    return shell is not None and getattr(shell, "kernel", None) is not None


def live_output(mode: bool | str | None, draw: Draw, *, head: str = "") -> LiveOutput | None:
    """A live output for ``mode``, or None for ``False``.

    ``None`` / ``True`` pick (a display in a kernel, else stdout), ``"html"`` forces a display,
    ``"text"`` stdout. ``draw()`` gives the first bundle; ``head`` is what the text form
    writes first.

    Raises:
        ValueError: An unknown ``mode``.
    """
    if mode is False:
        return None
    if mode not in (None, True, "html", "text"):
        raise ValueError(f"display must be True, False, 'html' or 'text', got {mode!r}")
    if (mode == "html" and _ipython() is not None) or (mode in (None, True) and _in_kernel()):
        return _Display(draw)
    return _Stdout(head, sys.stdout)


def _ipython() -> Any:
    """IPython when this process runs it (found through ``sys.modules``, never imported here)."""
    return sys.modules.get("IPython")


def _shell() -> Any:
    """The running IPython shell, or None."""
    ipython = _ipython()
    return None if ipython is None else ipython.get_ipython()


def shown_in_this_cell() -> Callable[[], bool]:
    """A check that stays true while the IPython cell running now is still the last one run.

    A result drawn live above its cell's ``Out`` uses it to show a short summary there rather
    than the whole text twice.
    """
    if "IPython" not in sys.modules:
        return lambda: False
    shell = _shell()
    if shell is None:
        return lambda: False
    count = shell.execution_count
    return lambda: bool(shell.execution_count == count)
