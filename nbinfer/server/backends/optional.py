"""Optional dependencies of the backends (torch, onnxruntime, onnx), imported on first use.

A leaf: the backend modules import it, and it imports nothing of nbinfer, so a backend module
never needs the backends package's dispatch (which imports the backends lazily).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["require"]

_EXTRA = {
    "onnxruntime": "onnx",
    "onnx": "onnx",
    "torch": "torch",
}


def require(module: str, *, what: str) -> Any:
    """Import an optional dependency or raise an ImportError naming the extra to install.

    Args:
        module: The module to import (``"torch"``, ``"onnxruntime"``, ``"onnx"``).
        what: What needs it, for the message (``"ONNX models"``).

    Raises:
        ImportError: the module is not installed; the message says ``pip install 'nbinfer[...]'``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = _EXTRA.get(module.split(".", 1)[0], module)
        raise ImportError(
            f"{what} need the optional dependency {module!r}, which is not installed; "
            f"install it with: pip install 'nbinfer[{extra}]'"
        ) from exc
