"""Demo models shipped with the embedded server (no downloads).

add_sub, echo, iris, digits, digits_encoded, accumulate (stateful), repeat (decoupled) and
story (decoupled, generative).

Layer: server; imports only the demo modules below.
"""

from __future__ import annotations

from nbinfer.server.demo.models import Accumulate, AddSub, Digits, Echo, Iris, Repeat, demo_models
from nbinfer.server.demo.story import Story

__all__ = ["Accumulate", "AddSub", "Digits", "Echo", "Iris", "Repeat", "Story", "demo_models"]
