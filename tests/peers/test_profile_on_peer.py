"""session.profile() against real peers: Triton (with the statistics extension; over the wire
and through system shared memory), MLServer and KServe (without it: the client-side split only)."""

from __future__ import annotations

import asyncio
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from nbinfer import AsyncClient, Session
from nbinfer.client.shm import HELD_WAIT_S
from nbinfer.profiling.shm import shared_memory_slots

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


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_profile_regions_are_released_once_triton_lets_go_of_them(
    triton: Peer, protocol: str, tmp_path: Path
) -> None:
    """Triton refuses to unregister a region a request still holds ("currently in use"), as
    it can for a moment after the load's last answer: the release waits for it, then succeeds."""
    url = triton.grpc_url if protocol == "grpc" else triton.http_url
    started = tmp_path / "started"

    async def main() -> tuple[list[str], Any, float]:
        async with AsyncClient(url) as client:
            params = {"started": str(started), "hold_s": 0.5}
            request = await client.build_request(
                "held", {"INPUT0": np.arange(4, dtype=np.float32)}, parameters=params
            )
            regions = await shared_memory_slots(client, "held", request, 1)
            started.unlink()  # touched by the probe that sized the output region
            in_flight = asyncio.create_task(client.infer("held", regions.slots[0].request))
            while not started.exists():  # the model holds the request (and its regions) now
                assert not in_flight.done(), in_flight
                await asyncio.sleep(0.01)
            begun = time.perf_counter()
            await regions.release()
            waited = time.perf_counter() - begun
            result = await in_flight
            left = [r["name"] for r in await client.get_system_shared_memory_status()]
            return left, result, waited

    left, result, waited = asyncio.run(main())
    assert not [name for name in left if name.startswith("nbinfer_profile_")]
    # answered into its output region: the wait did not cut the request off its regions
    [output] = result.outputs
    assert (output.name, output.datatype, output.shape) == ("OUTPUT0", "FP32", [4])
    assert waited < HELD_WAIT_S
