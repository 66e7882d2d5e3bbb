"""The zero-copy local path against a real Triton on the same host: the same client code.

``Client(url)`` with its default ``shared_memory="auto"`` registers its regions with Triton
(2.51, the nvidia-pytriton wheel) through the standard ``system_shared_memory`` extension and
gets the outputs written into them; no nbinfer-only wire extension is involved.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from nbinfer.client import Client

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
