"""Fixtures of the "beyond one machine" tests (the servers themselves: ``servers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nbinfer.server.launcher import LocalServer
from tests.beyond.servers import revive, start_servers, write_repository


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("replicas"))


@pytest.fixture
def two_servers(repository: Path) -> Iterator[list[LocalServer]]:
    servers = start_servers(2, repository)
    yield servers
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def _module_pair(repository: Path) -> Iterator[list[LocalServer]]:
    servers = start_servers(2, repository)
    yield servers
    for s in servers:
        s.stop()


@pytest.fixture
def shared_servers(_module_pair: list[LocalServer], repository: Path) -> list[LocalServer]:
    """Two servers shared by the tests of a module (for tests that count a server's requests as
    a difference): a server an earlier test killed is replaced by a fresh one."""
    return revive(_module_pair, repository)
