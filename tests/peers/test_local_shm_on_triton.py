"""The zero-copy local path against a real Triton on the same host: the same client code.

``Client(url)`` with its default ``shared_memory="auto"`` registers its regions with Triton
(2.51, the nvidia-pytriton wheel) through the standard ``system_shared_memory`` extension and
gets the outputs written into them; no nbinfer-only wire extension is involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client
from nbinfer.client.shm import HELD_WAIT_S

if TYPE_CHECKING:
    from peer import Peer

pytestmark = pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_big_tensors_go_through_shared_memory_with_triton(triton: Peer, protocol: str) -> None:
    url = triton.http_url if protocol == "http" else triton.grpc_url
    rng = np.random.default_rng(0)
    data = {
        name: rng.standard_normal((32768, 16)).astype(np.float32) for name in ("INPUT0", "INPUT1")
    }
    mine = f"nbinfer_shm_{os.getpid()}_"
    with Client(url) as client:
        client.infer("add_sub", data)
        result = client.infer("add_sub", data)
        np.testing.assert_allclose(result["OUTPUT0"], data["INPUT0"] + data["INPUT1"])
        np.testing.assert_allclose(result["OUTPUT1"], data["INPUT0"] - data["INPUT1"])
        regions = [r["name"] for r in client.get_system_shared_memory_status()]
        assert sum(mine in name for name in regions) == 4
        assert not result["OUTPUT0"].flags.owndata  # a view on the region Triton wrote
        del result
    with Client(url, shared_memory=False) as check:
        assert not [r for r in check.get_system_shared_memory_status() if mine in r["name"]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_closing_waits_for_triton_to_let_go_of_a_region(
    triton: Peer, protocol: str, tmp_path: Path
) -> None:
    """Triton refuses to unregister a region a request still holds ("currently in use"), as
    while a request the client cut off still runs its model: a client closed then asks again
    until Triton lets go, so no region stays registered (nor mapped by Triton)."""
    url = triton.http_url if protocol == "http" else triton.grpc_url
    started = tmp_path / "started"
    big = np.arange(1 << 18, dtype=np.float32)  # 1 MiB: through a region
    mine = f"nbinfer_shm_{os.getpid()}_"

    async def main() -> float:
        client = AsyncClient(url)
        params = {"started": str(started), "hold_s": 0.5}
        in_flight = asyncio.create_task(client.infer("held", {"INPUT0": big}, parameters=params))
        while not started.exists():  # the model holds the request (and its region) now
            assert not in_flight.done(), in_flight
            await asyncio.sleep(0.01)
        in_flight.cancel()  # cut off, as the stop button does; Triton's model call goes on
        with contextlib.suppress(asyncio.CancelledError):
            await in_flight
        begun = time.perf_counter()
        await client.aclose()
        return time.perf_counter() - begun

    waited = asyncio.run(main())
    with Client(url, shared_memory=False) as check:
        assert not [r for r in check.get_system_shared_memory_status() if mine in r["name"]]
    assert 0.05 < waited < HELD_WAIT_S  # it did wait for Triton, and not for nothing
