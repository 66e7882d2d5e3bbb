"""Fixtures of the "beyond one machine" tests (the servers themselves: ``servers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nbinfer.server.launcher import LocalServer
from tests.beyond.servers import start_servers, write_repository


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("replicas"))


@pytest.fixture
def two_servers(repository: Path) -> Iterator[list[LocalServer]]:
    servers = start_servers(2, repository)
    yield servers
    for s in servers:
        s.stop()
