"""What a session asks a server, counted in the server's own access log.

The embedded server started with ``access_log=True`` writes one line per HTTP request and per
gRPC call; the tests read those lines to pin how often a session reads the server metadata
(once, whatever it does afterwards) and which routes KServe's model list falls back to. The
last test serves a DataPlane that lists no models at all (in this process) to pin what
``session.models`` gives there.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from nbinfer import Client, Session, UnsupportedError
from nbinfer.protocol.types import RepositoryModel
from nbinfer.server.dataplane import DataPlane
from nbinfer.server.demo import demo_models
from nbinfer.server.launcher import LocalServer
from nbinfer.server.repository import ModelRepository
from tests.inprocess import serving


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(demo=True, device="cpu", access_log=True) as local:
        yield local


def _access_lines(server: LocalServer, client: Client) -> list[str]:
    """The access log so far, once a marker request made after everything else is in it."""
    marker = uuid.uuid4().hex
    client.is_server_live(headers={"x-request-id": marker})
    deadline = time.monotonic() + 10
    while marker not in server.logs() and time.monotonic() < deadline:
        time.sleep(0.02)
    return [line for line in server.logs().splitlines() if "nbinfer.access" in line]


def _metadata_reads(lines: list[str]) -> int:
    """Server-metadata requests among access log lines (``GET /v2`` or ``ServerMetadata``)."""
    return sum('"GET /v2 HTTP' in line or "/ServerMetadata" in line for line in lines)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_session_reads_the_server_metadata_once_whatever_it_does(
    server: LocalServer, protocol: str
) -> None:
    url = server.grpc_url if protocol == "grpc" else server.http_url
    with Client(server.http_url) as other:
        before = _metadata_reads(_access_lines(server, other))
    iris = pd.DataFrame(np.random.default_rng(3).random((40, 4)), columns=list("abcd"))
    with Session(url) as session:
        assert session.capabilities.name == "nbinfer"
        assert "iris" in set(session.models["name"])
        session.infer("iris", iris)
        session.infer("iris", iris, batch_size=8, progress=False)
        session.infer(
            "add_sub", {"INPUT0": np.ones(16, np.float32), "INPUT1": np.ones(16, np.float32)}
        )
        for _ in range(2):  # each asyncio.run is a new event loop, so a new async client
            asyncio.run(session.ainfer("iris", iris, batch_size=8, progress=False))
        digits = np.zeros((3, 8, 8), np.uint8)
        session.classify("digits", digits, top_k=2)
        asyncio.run(session.aclassify("digits", digits, top_k=2))
        session.stats("iris")
        assert session.model("iris").metadata.name == "iris"
        session._repr_mimebundle_()  # the notebook card reads the capability record
        lines = _access_lines(server, session.client)
    assert _metadata_reads(lines) - before == 1, [line for line in lines if "/v2 " in line]


def test_kserve_model_list_falls_back_to_v1_where_v2_has_no_list(server: LocalServer) -> None:
    # nbinfer's server answers KServe's v1 list (GET /v1/models) but has no GET /v2/models
    with Client(server.http_url) as client:
        start = len(_access_lines(server, client))
        names = client.list_models()
        lines = _access_lines(server, client)[start:]
    assert {"iris", "add_sub", "digits"} <= set(names)
    asked = [line.split('"')[1] for line in lines if "/models " in line]
    assert asked == ["GET /v2/models HTTP/1.1", "GET /v1/models HTTP/1.1"]
    statuses = [line.split('"')[2].split()[0] for line in lines if "/models " in line]
    assert statuses == ["404", "200"]


class _NoListing(DataPlane):
    """nbinfer's server answering neither its repository index nor KServe's v1 list."""

    def repository_index(self, *, ready_only: bool = False) -> list[RepositoryModel]:
        raise UnsupportedError("this server lists no models")


def test_a_server_that_lists_no_models_gets_the_ones_the_session_met(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plane = _NoListing(ModelRepository(models=demo_models()), extensions=["binary_tensor_data"])
    with serving(plane) as (http, _), Session(http) as session:
        with caplog.at_level(logging.WARNING, logger="nbinfer"):
            assert session.models.empty
            session.infer("iris", pd.DataFrame(np.ones((2, 4)), columns=list("abcd")))
            session.model("add_sub")
            models = session.models
        assert models.to_dict("list") == {"name": ["iris", "add_sub"], "state": ["READY"] * 2}
        assert (models.attrs["source"], models.attrs["complete"]) == ("session", False)
        note = models.attrs["note"]
        assert "server 'nbinfer'" in note and "offers no model listing" in note
        assert "session.model('name')" in note
        card = session._repr_mimebundle_()["text/html"]  # the card: the note above the list
        assert "offers no model listing" in card and card.index("nbi-warn") < card.index("iris")
        said = [r for r in caplog.records if "offers no model listing" in r.getMessage()]
        assert len(said) == 1
        probed = session.capabilities.probed
        assert probed["repository_index"] is False and probed["model_list"] is False
