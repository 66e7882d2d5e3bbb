"""The notebook layer: the model browser, magics, the sketch pad and the IPython extension.

Layer: the notebook floor, the top of the tree: it may import anything below it and nothing below
imports it; IPython, ipywidgets and anywidget are imported only in this package, and only by the
modules that use them. The HTML reprs themselves are drawn by :mod:`nbinfer.render` (every layer
names its renderer there); this package keeps what is bound to IPython or ipywidgets:
``widgets`` (:class:`~nbinfer.notebook.widgets.ModelBrowser`, ``nbinfer.browse``), ``editors``
(its try-it form), ``sketch`` (the sketch pad), ``magics`` and the error handler below.

``%load_ext nbinfer`` calls :func:`load_ipython_extension`, which registers the ``%nbinfer`` and
``%%infer`` magics and the error display. The error display needs no ``%load_ext``:
``import nbinfer`` inside a running IPython shell installs it (:func:`install_error_display`).

How an uncaught :class:`~nbinfer.NbinferError` shows (an IPython custom exception handler, for
nbinfer's errors only, and only when no other handler is installed):

* in a kernel (JupyterLab, VS Code, nbclient): the error output (the red box) holds your own
  frames, the library frames folded to one line, and the message; under it the error card: what
  failed, what to try, and the library frames and the chained exception collapsed in a
  ``<details>``. The card's ``text/plain`` has every frame, chained exceptions too (logs,
  ``nbconvert --to markdown``, terminals reading the notebook).
* in a terminal IPython (no HTML): IPython's usual traceback with every frame, then the card's
  text ("What to try").

Why a handler and not IPython's ``_render_traceback_`` protocol: that hook returns only the text
of the error output (no HTML, so no card and nothing to expand), and it would replace the
traceback in terminals too. The handler keeps the error output (cells still fail: Run All stops,
nbclient / papermill see the error) and adds the card after it.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

__all__ = ["install_error_display", "load_ipython_extension", "unload_ipython_extension"]

_log = logging.getLogger("nbinfer")


def _shell_frames(tb: Any) -> int:
    """How many outermost frames of ``tb`` are the shell's own (IPython's ``run_code``)."""
    import IPython

    home = os.path.dirname(os.path.abspath(IPython.__file__)) + os.sep
    count = 0
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(home):
        count += 1
        tb = tb.tb_next
    return count


def _cell_name(shell: Any) -> Any:
    """File name -> IPython's label for it (``Cell In[3]``), None for real files."""
    compiler = getattr(shell, "compile", None)
    format_code_name = getattr(compiler, "format_code_name", None)

    def name_of(filename: str) -> str | None:
        found = format_code_name(filename) if format_code_name is not None else None
        return " ".join(found) if found else None

    return name_of


def _show_error(
    shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
) -> Any:
    """IPython custom exception handler: your frames, then the error card (see the module)."""
    from IPython.display import display

    from nbinfer.render.error_card import error_report, hints_text

    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # %debug, %tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    if "text/html" not in shell.display_formatter.active_types:  # a terminal: text only
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        tips = hints_text(value)  # under the traceback's last line, which has the message
        if tips:
            display({"text/plain": tips}, raw=True)  # type: ignore[no-untyped-call]
        return None
    try:
        report = error_report(value, skip=_shell_frames(tb), name_of=_cell_name(shell))
    except Exception:  # never lose the error to a bug of the card: IPython's own traceback
        _log.exception("nbinfer: could not draw the error card")
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        return None
    shell._showtraceback(etype, value, [report.traceback])  # the error output
    display(report.bundle, raw=True)  # type: ignore[no-untyped-call]
    if getattr(shell, "call_pdb", False):
        shell.debugger(force=True)
    return None


def install_error_display(shell: Any) -> bool:
    """Show nbinfer's errors on ``shell`` as your frames + the error card; True if installed.

    Installs an IPython custom exception handler for :class:`~nbinfer.NbinferError` only,
    never replacing a handler someone else installed (then nothing changes and it returns
    False). Idempotent. ``import nbinfer`` calls it inside a running IPython shell.
    """
    from nbinfer.errors import NbinferError

    if shell.custom_exceptions == (NbinferError,):
        return True
    if shell.custom_exceptions:
        _log.debug("nbinfer: another custom exception handler is installed; left as is")
        return False
    shell.set_custom_exc((NbinferError,), _show_error)
    return True


def _install_in_running_shell() -> None:
    """``import nbinfer`` in IPython / Jupyter: install the error display (IPython not imported)."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    if shell is not None and hasattr(shell, "set_custom_exc"):
        try:
            install_error_display(shell)
        except Exception:  # a display nicety must never break `import nbinfer`
            _log.debug("nbinfer: could not install the error display", exc_info=True)


def load_ipython_extension(ipython: Any) -> None:
    """Register the nbinfer magics and the error display on an IPython shell."""
    from nbinfer.notebook.magics import NbinferMagics

    ipython.register_magics(NbinferMagics)
    install_error_display(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the error display installed by :func:`load_ipython_extension`."""
    from nbinfer.errors import NbinferError

    if ipython.custom_exceptions == (NbinferError,):
        ipython.set_custom_exc((), None)
