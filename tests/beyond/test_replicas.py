"""Several real servers behind one client / session: spread, failover, pinning, counts."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.server.launcher import LocalServer
from tests.beyond.servers import kill, start_servers
from tests.ports import free_port


def _rows(n: int) -> pd.DataFrame:
    values = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    return pd.DataFrame(values, columns=["a", "b", "c", "d"], index=np.arange(n) * 10 + 3)


def _served(server: LocalServer, model: str) -> int:
    with nbinfer.Client(server.http_url) as client:
        stats = client.get_inference_statistics(model)["model_stats"]
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


def test_a_list_of_urls_builds_a_replica_client_that_spreads_by_outstanding_calls(
    two_servers: list[LocalServer],
) -> None:
    urls = [s.http_url for s in two_servers]
    with nbinfer.Client(urls) as client:
        assert isinstance(client, nbinfer.ReplicaClient)
        assert client.urls == urls
        x = np.ones((2, 4), np.float32)
        futures = [client.async_infer("double", {"X": x * i}) for i in range(24)]
        results = [f.result() for f in futures]
        stats = client.replica_stats()
        merged = client.get_inference_statistics("double")["model_stats"]
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result.as_numpy("Y"), x * i * 2)
    # calls overlapped (8 threads, 20 ms each): the idle replica got its share, and the
    # counts agree with what each server says it ran
    assert all(s["infers"] > 0 for s in stats), stats
    assert sum(s["infers"] for s in stats) == 24
    assert [s["infers"] for s in stats] == [_served(s, "double") for s in two_servers]
    assert all(s["failures"] == 0 and s["up"] for s in stats)
    # the servers' statistics, asked of both and summed: what session.stats() shows
    (entry,) = merged
    assert int(entry["inference_stats"]["success"]["count"]) == 24
    assert int(entry["inference_count"]) == 24  # both servers counted


def test_a_server_killed_mid_run_loses_and_duplicates_no_row(
    two_servers: list[LocalServer],
) -> None:
    frame = _rows(120)
    with nbinfer.Session([s.http_url for s in two_servers]) as session:
        assert isinstance(session.client, nbinfer.ReplicaClient)
        stop = threading.Event()

        def killer() -> None:  # once the first replica has calls in flight, kill it
            while not stop.is_set():
                if session.client.replica_stats()[0]["outstanding"] > 0:
                    kill(two_servers[0])
                    return
                stop.wait(0.005)

        thread = threading.Thread(target=killer)
        thread.start()
        try:
            out = session.infer("slow", frame, columns={"X": list("abcd")}, batch_size=6)
        finally:
            stop.set()
            thread.join()
        stats = session.client.replica_stats()
    expected = frame.to_numpy() * 2
    assert list(out.index) == list(frame.index)
    np.testing.assert_array_equal(out.to_numpy(), expected)
    dead, alive = stats
    assert not dead["up"] and dead["failures"] >= 1
    assert alive["retried"] >= 1  # the calls cut off on the dead one ran again here
    # every inference the live one was sent succeeded there, counted once by the server
    assert _served(two_servers[1], "slow") == alive["infers"]


def test_a_dead_replica_is_skipped_then_probed_again_when_it_comes_back(
    repository: Path,
) -> None:
    port = free_port()
    late_url = f"http://127.0.0.1:{port}"
    (live,) = start_servers(1, repository)
    x = np.ones((1, 4), np.float32)
    try:
        with nbinfer.Client([late_url, live.http_url], reprobe=0.0) as client:
            for _ in range(4):
                client.infer("double", {"X": x})
            late = client.replica_stats()[0]
            assert not late["up"]
            assert late["failures"] >= 1 and "cannot connect" in late["last_error"]
            with LocalServer(
                model_repository=repository,
                demo=False,
                device="cpu",
                auth_token=None,
                http_port=port,
            ):
                for _ in range(6):  # probed (ready), then back in the rotation
                    client.infer("double", {"X": x})
                late = client.replica_stats()[0]
                assert late["up"] and late["requests"] > late["failures"]
    finally:
        live.stop()


def test_without_reprobe_time_a_failed_replica_is_not_asked_again(
    repository: Path,
) -> None:
    (live,) = start_servers(1, repository)
    try:
        urls = [f"http://127.0.0.1:{free_port()}", live.http_url]
        with nbinfer.Client(urls, reprobe=3600.0) as client:
            for _ in range(5):
                client.infer("double", {"X": np.ones((1, 4), np.float32)})
            dead, alive = client.replica_stats()
    finally:
        live.stop()
    assert dead["requests"] <= 1 and dead["failures"] == dead["requests"]
    assert alive["infers"] == 5  # every call answered, the failed one's included


def test_grpc_replicas_fail_over_the_same_way(two_servers: list[LocalServer]) -> None:
    x = np.ones((2, 4), np.float32)
    with nbinfer.Client([s.grpc_url for s in two_servers]) as client:
        assert client.protocol == "grpc"
        before = [client.infer("double", {"X": x * i}).as_numpy("Y") for i in range(4)]
        kill(two_servers[0])
        after = [client.infer("double", {"X": x * i}).as_numpy("Y") for i in range(4, 12)]
        dead, alive = client.replica_stats()
    for i, y in enumerate([*before, *after]):
        np.testing.assert_array_equal(y, x * i * 2)
    assert dead["infers"] >= 1 and alive["infers"] >= 8  # both served; the dead one no more
    assert not dead["up"] and dead["failures"] >= 1


def test_a_sequence_stays_on_one_replica(two_servers: list[LocalServer]) -> None:
    with nbinfer.Client([s.http_url for s in two_servers]) as client:
        seq = nbinfer.Sequence()
        totals = [
            int(
                client.infer("accumulate", {"INPUT": np.array([v], np.int32)}, sequence=seq)[
                    "OUTPUT"
                ][0]
            )
            for v in (1, 2, 3, 4, 5, 6)
        ]
        stats = client.replica_stats()
    assert totals == [1, 3, 6, 10, 15, 21]  # one server held the state throughout
    assert sorted(s["requests"] for s in stats) == [0, 6]


def test_a_stream_stays_on_one_replica(two_servers: list[LocalServer]) -> None:
    # a gRPC stream is one call: every request sent on it goes to the replica it opened on,
    # and a second one opens only once the first is stopped
    replies: list[np.ndarray] = []
    errors: list[BaseException] = []
    all_back = threading.Event()

    def callback(result: nbinfer.InferResult | None, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)
        else:
            assert result is not None
            replies.append(result.as_numpy("Y"))
        if len(replies) + len(errors) == 12:
            all_back.set()

    before = [_served(s, "double") for s in two_servers]
    x = np.ones((1, 4), np.float32)
    with nbinfer.Client([s.grpc_url for s in two_servers]) as client:
        client.start_stream(callback)
        with pytest.raises(nbinfer.NbinferError, match="already open"):
            client.start_stream(callback)
        for i in range(12):
            client.stream_infer("double", {"X": x * i})
        assert all_back.wait(60), (len(replies), errors)
        client.stop_stream()
    assert not errors, errors
    assert sorted(float(r[0, 0]) for r in replies) == [2.0 * i for i in range(12)]
    ran = [_served(s, "double") - b for s, b in zip(two_servers, before, strict=True)]
    assert sorted(ran) == [0, 12], ran


def test_when_no_replica_answers_the_error_names_each_one() -> None:
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    with nbinfer.Client(urls) as client, pytest.raises(nbinfer.ConnectError) as info:
        client.infer("double", {"X": np.ones((1, 4), np.float32)})
    assert all(url in str(info.value) for url in urls)
    assert "no replica could serve the call" in str(info.value)


def test_replicas_must_speak_one_protocol() -> None:
    with pytest.raises(nbinfer.InvalidInputError, match="one protocol"):
        nbinfer.Client(["http://127.0.0.1:1", "grpc://127.0.0.1:2"])
    with pytest.raises(nbinfer.InvalidInputError, match="list of server URLs"):
        nbinfer.ReplicaClient([])
    with pytest.raises(nbinfer.InvalidInputError, match="list of server URLs"):
        nbinfer.Client(8000)  # type: ignore[arg-type]


def test_the_async_face_fails_over_too(two_servers: list[LocalServer]) -> None:
    async def run() -> tuple[list[np.ndarray], list[dict[str, object]]]:
        async with nbinfer.AsyncClient([s.http_url for s in two_servers]) as client:
            assert isinstance(client, nbinfer.AsyncReplicaClient)
            x = np.ones((2, 4), np.float32)
            first = await asyncio.gather(*(client.infer("double", {"X": x * i}) for i in range(6)))
            kill(two_servers[0])
            rest = await asyncio.gather(
                *(client.infer("double", {"X": x * i}) for i in range(6, 12))
            )
            return [r.as_numpy("Y") for r in (*first, *rest)], client.replica_stats()

    outs, stats = asyncio.run(run())
    for i, y in enumerate(outs):
        np.testing.assert_array_equal(y, np.ones((2, 4), np.float32) * i * 2)
    assert not stats[0]["up"] and stats[1]["up"]


def test_import_nbinfer_loads_no_engine() -> None:
    import subprocess
    import sys

    code = (
        "import sys, nbinfer, nbinfer.session; "
        "print([m for m in ('dask', 'distributed', 'pyspark', 'pyarrow') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
