"""``session.stats()`` over several real servers: each replica's own rows, a dead one named."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.interop.stats import COUNT_COLUMNS, REPLICA_COLUMNS, STATS_COLUMNS, StatsFrame
from nbinfer.server.launcher import LocalServer
from tests.beyond.servers import kill, start_servers
from tests.render.pages import safe


def _served(server: LocalServer, model: str) -> int:
    """What ``server`` says it ran of ``model``, asked of it alone."""
    with nbinfer.Client(server.http_url) as client:
        stats = client.get_inference_statistics(model)["model_stats"]
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


def _spread_calls(session: nbinfer.Session, calls: int) -> None:
    """``calls`` overlapping inferences of ``double`` (20 ms each): both replicas get some."""
    x = np.ones((2, 4), np.float32)
    futures = [session.client.async_infer("double", {"X": x * i}) for i in range(calls)]
    for i, future in enumerate(futures):
        np.testing.assert_array_equal(future.result().as_numpy("Y"), x * i * 2)


def _page(frame: pd.DataFrame) -> tuple[str, str]:
    """The frame's card (text of its HTML, checked safe) and its plain-text twin."""
    bundle = frame._repr_mimebundle_()
    return safe(bundle["text/html"]).joined(), bundle["text/plain"]


def test_session_stats_gives_each_replicas_own_rows_and_the_sessions_calls(
    two_servers: list[LocalServer],
) -> None:
    urls = [s.http_url for s in two_servers]
    with nbinfer.Session(urls) as session:
        _spread_calls(session, 24)
        frame = session.stats()
        double = session.stats("double")
        summed = session.stats("double", per_replica=False)
        counts = session.replica_stats()
    assert isinstance(frame, StatsFrame)
    assert list(frame.columns) == REPLICA_COLUMNS
    assert set(frame["replica"]) == set(urls) and set(frame["state"]) == {"up"}
    assert set(frame["error"]) == {""}
    # every model of each server, each server's own numbers (the demo models too)
    assert len(frame) == 2 * len(frame[frame["replica"] == urls[0]])
    assert {"double", "iris", "slow"} <= set(frame.loc[frame["replica"] == urls[1], "name"])
    assert list(double["replica"]) == urls and set(double["name"]) == {"double"}
    served = [_served(s, "double") for s in two_servers]
    assert list(double["success"]) == served and all(n > 0 for n in served)
    assert sum(served) == 24
    assert (double["compute_infer_ms"] > 0).all()
    # the sum over the replicas is one server's frame, as before
    assert list(summed.columns) == STATS_COLUMNS and list(summed["success"]) == [24]
    # this session's own calls per replica, beside the servers' statistics
    assert list(counts.columns) == COUNT_COLUMNS and list(counts["url"]) == urls
    assert list(counts["infers"]) == served  # what the client sent is what each server ran
    assert set(counts["state"]) == {"healthy"} and set(counts["failures"]) == {0}
    assert [c["infers"] for c in double.attrs["replicas"]] == served
    text, plain = _page(double)
    for url in urls:
        host = url.split("://")[1]
        assert host in text and host in plain
    assert "This session's calls per replica" in text and "healthy" in text
    assert "2 model versions on 2 replicas" in text
    assert "Latency per request" in text and f"double v1 · {urls[0].split('://')[1]}" in text


def test_a_killed_replica_is_a_row_saying_so_beside_the_live_ones(
    two_servers: list[LocalServer],
) -> None:
    urls = [s.http_url for s in two_servers]
    with nbinfer.Session(urls) as session:
        _spread_calls(session, 16)
        before = [_served(s, "double") for s in two_servers]
        kill(two_servers[0])
        frame = session.stats("double")  # no exception: the live replica's rows are there
        counts = session.replica_stats()
        summed = session.stats("double", per_replica=False)
        rows = pd.DataFrame(np.ones((3, 4), np.float32), columns=list("abcd"))
        session.infer("double", rows, columns={"X": list("abcd")})
        after = session.stats("double")
    dead, live = frame.to_dict("records")
    assert dead["replica"] == urls[0] and dead["state"] == "down"
    assert urls[0].split("://")[1] in dead["error"]  # the connection error, naming the server
    assert dead["name"] == "" and dead["success"] == 0
    assert live == {**live, "replica": urls[1], "state": "up", "error": "", "name": "double"}
    assert live["success"] == before[1]
    # asking was a health check: the dead replica is skipped, its failure counted
    assert list(counts["state"]) == ["skipped", "healthy"]
    assert counts.loc[0, "last_error"] == dead["error"]
    assert list(summed["success"]) == [before[1]]  # the live replica's, not an exception
    assert list(after["state"]) == ["down", "up"] and after.loc[1, "success"] == before[1] + 1
    text, plain = _page(frame)
    assert "(1 down)" in text and "down" in plain and "skipped" in text
    assert dead["error"][:40] in text


def test_a_model_no_replica_knows_raises_model_not_found(
    two_servers: list[LocalServer],
) -> None:
    with nbinfer.Session([s.http_url for s in two_servers]) as session:
        with pytest.raises(nbinfer.ModelNotFoundError, match="nope"):
            session.stats("nope")
        kill(two_servers[0])  # one dead, the other does not know it: still not found
        with pytest.raises(nbinfer.ModelNotFoundError, match="nope"):
            session.stats("nope")


def test_a_single_server_sessions_frame_is_unchanged(repository: Path) -> None:
    (server,) = start_servers(1, repository)
    try:
        with nbinfer.Session(server.http_url) as session:
            session.client.infer("double", {"X": np.ones((1, 4), np.float32)})
            frame = session.stats("double")
            with pytest.raises(nbinfer.UnsupportedError, match="one server"):
                session.replica_stats()
    finally:
        server.stop()
    assert list(frame.columns) == STATS_COLUMNS and "replicas" not in frame.attrs
    assert list(frame["success"]) == [1]
    text, _ = _page(frame)
    assert "1 model versions" in text and "calls per replica" not in text


def test_the_async_replica_client_asks_every_replica_and_names_the_dead_one(
    two_servers: list[LocalServer],
) -> None:
    urls = [s.http_url for s in two_servers]

    async def run() -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
        async with nbinfer.AsyncClient(urls) as client:
            x = np.ones((2, 4), np.float32)
            await asyncio.gather(*(client.infer("double", {"X": x}) for _ in range(8)))
            kill(two_servers[1])
            answers = await client.replica_statistics("double")
            summed = await client.get_inference_statistics("double")
            return answers, summed, client.replica_stats()

    answers, summed, counts = asyncio.run(run())
    assert [a["url"] for a in answers] == urls
    assert [a["state"] for a in answers] == ["up", "down"]
    # the dead replica's error names it: refused (a new connection) or reset (a pooled one
    # aiohttp kept from the calls before; libcurl retries those on a new connection)
    dead = answers[1]["error"]
    assert isinstance(dead, nbinfer.TransportError) and answers[1]["statistics"] is None
    assert str(dead.context["url"]).startswith(urls[1]) and urls[1] in str(dead), dead
    (entry,) = answers[0]["statistics"]["model_stats"]
    ran = int(entry["inference_stats"]["success"]["count"])
    assert ran == counts[0]["infers"]
    (total,) = summed["model_stats"]  # the sum of those that answered
    assert int(total["inference_stats"]["success"]["count"]) == ran
    assert [c["up"] for c in counts] == [True, False]
