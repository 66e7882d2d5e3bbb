"""Messages built by name, settings and shared-memory status: protocol.grpc is the one door.

Clients and servers get every message through :mod:`nbinfer.protocol.grpc` (never the generated
stubs), so these builders and codecs must cover both directions and fail inside the error tree.
"""

from __future__ import annotations

from typing import Any

import pytest

from nbinfer.errors import InvalidInputError, UnsupportedError
from nbinfer.protocol.grpc import (
    RPCS,
    request_message,
    response_message,
    shm_status_from_proto,
    shm_status_to_proto,
)
from nbinfer.protocol.grpc_settings import (
    log_settings_from_proto,
    log_settings_to_proto,
    trace_settings_from_proto,
    trace_settings_to_proto,
)


@pytest.mark.parametrize("rpc", list(RPCS))
def test_every_rpc_has_both_messages_by_name(rpc: str) -> None:
    assert isinstance(request_message(rpc), RPCS[rpc].request)
    assert isinstance(response_message(rpc), RPCS[rpc].response)


def test_builders_fail_inside_the_error_tree() -> None:
    with pytest.raises(UnsupportedError, match="unknown RPC 'Nope'"):
        response_message("Nope")
    with pytest.raises(InvalidInputError, match="ServerLive response") as caught:
        response_message("ServerLive", live="yes")
    assert caught.value.__cause__ is not None


def test_trace_settings_round_trip_as_the_rest_route_shapes_them() -> None:
    msg: Any = request_message("TraceSetting", model_name="m")
    trace_settings_to_proto(
        {"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": 1000, "log_frequency": None},
        msg.settings,
    )
    assert trace_settings_from_proto(msg.settings) == {
        "trace_level": ["TIMESTAMPS", "TENSORS"],
        "trace_rate": "1000",
        "log_frequency": [],  # left empty: resets the setting
    }


def test_log_settings_keep_their_types() -> None:
    msg: Any = response_message("LogSettings")
    settings = {"log_info": True, "log_verbose_level": 2, "log_format": "default"}
    log_settings_to_proto(settings, msg.settings)
    assert log_settings_from_proto(msg.settings) == settings


@pytest.mark.parametrize(
    ("kind", "row"),
    [
        ("system", {"name": "r", "key": "/k", "offset": 8, "byte_size": 64}),
        ("cuda", {"name": "g", "device_id": 0, "byte_size": 1024}),
    ],
)
def test_shm_status_round_trips(kind: str, row: dict[str, Any]) -> None:
    assert shm_status_from_proto(kind, shm_status_to_proto(kind, [row])) == [row]


def test_an_unknown_shm_kind_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="known: system, cuda"):
        shm_status_to_proto("tpu", [])
