"""session.profile() against real peers: Triton (with the statistics extension; over the wire
and through system shared memory), MLServer and KServe (without it: the client-side split only)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nbinfer import Session

if TYPE_CHECKING:
    from peer import Peer

QUICK: dict[str, Any] = {"window": 0.4, "max_windows": 3, "warmup": 0.2, "progress": False}


def _sane(row: Any) -> None:
    ordered = [row[f"latency_p{p}_ms"] for p in (50, 90, 95, 99)] + [row["latency_max_ms"]]
    assert ordered == sorted(ordered)
    assert row["requests"] > 0 and row["throughput"] > 0 and row["errors"] == 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_profile_on_triton_splits_server_time_from_its_statistics(
    triton: Peer, protocol: str
) -> None:
    url = triton.grpc_url if protocol == "grpc" else triton.http_url
    with Session(url) as session:
        frame = session.profile("add_sub", concurrency=[1, 2], **QUICK)
    assert list(frame["concurrency"]) == [1, 2]
    for _, row in frame.iterrows():
        _sane(row)
        assert row["server_requests"] == pytest.approx(row["requests"], rel=0.05, abs=10)
        assert 0 < row["server_compute_infer_ms"] < row["client_network_ms"]


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
@pytest.mark.serial  # holds a 50/s request rate within 10 %: run alone, not beside the parallel run
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_profile_on_triton_holds_a_fixed_rate_over_the_wire_and_through_shared_memory(
    triton: Peer, protocol: str
) -> None:
    url = triton.grpc_url if protocol == "grpc" else triton.http_url
    with Session(url) as session:
        wire = session.profile("add_sub", request_rate=50, **QUICK).iloc[0]
        shm = session.profile("add_sub", request_rate=50, shared_memory="system", **QUICK).iloc[0]
        left = [r["name"] for r in session.client.get_system_shared_memory_status()]
    assert not [name for name in left if name.startswith("nbinfer_profile_")]
    for row in (wire, shm):
        _sane(row)
        assert row["throughput"] == pytest.approx(50, rel=0.1)
        assert row["server_requests"] == pytest.approx(row["requests"], rel=0.05, abs=10)
    assert (wire["shared_memory"], shm["shared_memory"]) == ("none", "system")


@pytest.mark.parametrize("name", ["mlserver", "kserve"])
def test_profile_without_statistics_splits_client_time_only(
    name: str, request: pytest.FixtureRequest
) -> None:
    peer: Peer = request.getfixturevalue(name)
    with Session(peer.http_url) as session:
        row = session.profile("add_sub", concurrency=2, **QUICK).iloc[0]
    _sane(row)
    assert math.isnan(row["server_queue_ms"]) and row["server_requests"] == 0
    assert row["client_network_ms"] > 0


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_profile_on_triton_through_system_shared_memory(triton: Peer, protocol: str) -> None:
    url = triton.grpc_url if protocol == "grpc" else triton.http_url
    before = set(os.listdir("/dev/shm"))
    with Session(url) as session:
        frame = session.profile("add_sub", concurrency=[1, 2], shared_memory="system", **QUICK)
        text = session.profile("upper", concurrency=2, shared_memory="system", **QUICK)
        left = [r["name"] for r in session.client.get_system_shared_memory_status()]
    assert list(frame["shared_memory"]) == ["system", "system"]
    for _, row in [*frame.iterrows(), *text.iterrows()]:
        _sane(row)
    assert not [name for name in left if name.startswith("nbinfer_profile_")]
    # this process's segments only: other pytest processes (xdist workers) profile meanwhile
    ours = f"nbinfer_profile_{os.getpid()}_"
    assert not [n for n in set(os.listdir("/dev/shm")) - before if n.startswith(ours)]
