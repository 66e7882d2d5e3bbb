"""Trace and log settings inside gRPC messages: the same dict shapes as the REST routes.

The settings maps (``map<string, SettingValue>`` / ``map<string, LogSettingValue>``) are read and
written through their mapping interface on messages the caller passes in.

Layer: protocol (pure); imports nothing of nbinfer and never the generated stubs (only
protocol/grpc.py does).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = [
    "log_settings_from_proto",
    "log_settings_to_proto",
    "trace_settings_from_proto",
    "trace_settings_to_proto",
]


def trace_settings_to_proto(settings: Mapping[str, Any], target: MutableMapping[str, Any]) -> None:
    """Write trace settings into a ``map<string, SettingValue>``.

    A list becomes several values, anything else one string; ``None`` leaves the entry empty
    (which resets the setting in a request).
    """
    for key, value in settings.items():
        entry = target[key]
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        entry.value.extend(str(v) for v in values)


def trace_settings_from_proto(source: Mapping[str, Any]) -> dict[str, Any]:
    """Read a ``map<string, SettingValue>``: one value as a string, ``trace_level`` as a list."""
    out: dict[str, Any] = {}
    for key, entry in source.items():
        values = list(entry.value)
        out[key] = values[0] if len(values) == 1 and key != "trace_level" else values
    return out


def log_settings_to_proto(settings: Mapping[str, Any], target: MutableMapping[str, Any]) -> None:
    """Write log settings into a ``map<string, LogSettingValue>`` (bool, uint32 or string)."""
    for key, value in settings.items():
        entry = target[key]
        if isinstance(value, bool):
            entry.bool_param = value
        elif isinstance(value, int):
            entry.uint32_param = value
        else:
            entry.string_param = str(value)


def log_settings_from_proto(source: Mapping[str, Any]) -> dict[str, Any]:
    """Read a ``map<string, LogSettingValue>`` (an unset value reads as None)."""
    out: dict[str, Any] = {}
    for key, entry in source.items():
        which = entry.WhichOneof("parameter_choice")
        out[key] = None if which is None else getattr(entry, which)
    return out
