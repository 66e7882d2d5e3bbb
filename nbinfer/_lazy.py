"""Lazy module attributes (PEP 562): a package names what it offers without importing it.

``nbinfer`` and ``nbinfer.server`` use it so that a client-only ``import nbinfer`` never imports
the server. A leaf: imports nothing of nbinfer.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_attributes"]


def lazy_attributes(
    module: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``module`` for ``names`` (name -> defining module).

    A name is imported from its module on first use and then stored in ``module``'s namespace,
    so later lookups never reach the hook; ``dir()`` lists the lazy names with the rest.
    """
    namespace = sys.modules[module].__dict__

    def __getattr__(name: str) -> object:
        home = names.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
