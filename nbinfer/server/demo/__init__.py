"""Demo models shipped with the embedded server (no downloads): add_sub, echo, iris, digits."""

from __future__ import annotations

from nbinfer.server.demo.models import AddSub, Digits, Echo, Iris, demo_models

__all__ = ["AddSub", "Digits", "Echo", "Iris", "demo_models"]
