"""Import a model's ``model.py`` as a fresh module: nbinfer models and Triton Python models alike.

Each import gets a module name of its own (a reload or a second version never sees the first's
globals) and a failed import leaves nothing in ``sys.modules``. The file is compiled from its
source every time, never from a cached ``.pyc``: a bytecode cache is trusted by the source's
mtime in whole seconds and its size, so a ``model.py`` edited and reloaded within the same second
could otherwise run the old code. A leaf of the server: imports only ``nbinfer.errors``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import re
import sys
from pathlib import Path
from types import ModuleType

from nbinfer.errors import InvalidInputError

__all__ = ["SysPath", "import_script"]

_counter = itertools.count(1)


class SysPath:
    """Put a directory first on ``sys.path`` for a while (model-local imports, as in Triton)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.added = False

    def __enter__(self) -> None:
        if self.path not in sys.path:
            sys.path.insert(0, self.path)
            self.added = True

    def __exit__(self, *exc: object) -> None:
        if self.added:
            with contextlib.suppress(ValueError):
                sys.path.remove(self.path)


def import_script(
    path: Path, prefix: str, name: str, version: str, *, search: Path | None = None
) -> ModuleType:
    """Execute ``path`` as a new module named ``<prefix>_<name>_v<version>_<n>``.

    Args:
        path: The file.
        prefix: What the module name starts with (tells the backends' modules apart in tracebacks).
        name: The model's name.
        version: The model's version.
        search: A directory put first on ``sys.path`` while the file runs (its local imports).

    Raises:
        InvalidInputError: the file cannot be imported (the cause names what it raised).
    """
    safe = re.sub(r"\W", "_", name)
    mod_name = f"{prefix}_{safe}_v{version}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise InvalidInputError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        with SysPath(search) if search is not None else contextlib.nullcontext():
            exec(code, module.__dict__)  # what the loader would do, minus its bytecode cache
    except BaseException as exc:
        sys.modules.pop(mod_name, None)
        raise InvalidInputError(f"failed to import {path}: {type(exc).__name__}: {exc}") from exc
    return module
