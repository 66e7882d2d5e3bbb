"""The transport tests run against an embedded server like the client tests' (``server``, ``url``).

The engines are below the client, where LocalServer's in-process token registry is consulted,
so their server is the no-token kind (``auth_token=None``, as ``nbinfer serve``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nbinfer.server.launcher import LocalServer
from tests.client.conftest import url  # noqa: F401 - fixture, shared (it uses ``server`` below)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    # as the client tests' server: demo (in-memory) models unload and reload over the network
    srv = LocalServer(demo=True, allow_model_replace=True, auth_token=None).start()
    try:
        yield srv
    finally:
        srv.stop()
