"""The notebook layer: rich display, magics and the IPython extension.

Layer: the notebook floor, the top of the tree: it may import anything below it; IPython,
ipywidgets and matplotlib are imported only in this package, and only by the modules that use them.

``%load_ext nbinfer`` calls :func:`load_ipython_extension`, which registers the ``%nbinfer`` and
``%%infer`` magics and shows nbinfer errors with a "what to try" card under the traceback.
IPython is imported only when the extension loads; :mod:`nbinfer.notebook.display` needs none.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def _show_error(
    shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
) -> Any:
    """IPython custom exception handler: the usual traceback, then the error card."""
    from IPython.display import display

    from nbinfer.notebook.display import mimebundle

    shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
    display(mimebundle(value), raw=True)  # type: ignore[no-untyped-call]


def load_ipython_extension(ipython: Any) -> None:
    """Register the nbinfer magics and the error display on an IPython shell."""
    from nbinfer.errors import NbinferError
    from nbinfer.notebook.magics import NbinferMagics

    ipython.register_magics(NbinferMagics)
    if not ipython.custom_exceptions:  # never replace a handler someone else installed
        ipython.set_custom_exc((NbinferError,), _show_error)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the error display installed by :func:`load_ipython_extension`."""
    from nbinfer.errors import NbinferError

    if ipython.custom_exceptions == (NbinferError,):
        ipython.set_custom_exc((), None)
