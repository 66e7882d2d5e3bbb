"""Client and server settings: timeouts, retries, TLS, auth.

Precedence is explicit argument > environment variable > default. This module is a leaf: it
imports nothing from nbinfer but :mod:`nbinfer.errors`.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "env_int", "env_str"]

#: Default bound on a request body accepted by the embedded server (bytes).
DEFAULT_MAX_REQUEST_BYTES = 256 * 1024 * 1024


def env_str(name: str, default: str | None = None) -> str | None:
    """Return the environment variable ``name`` (``NBINFER_`` prefixed) or ``default``."""
    return os.environ.get(f"NBINFER_{name}", default)


def env_int(name: str, default: int) -> int:
    """Return the integer environment variable ``NBINFER_<name>`` or ``default``."""
    raw = os.environ.get(f"NBINFER_{name}")
    return default if raw is None or raw == "" else int(raw)
