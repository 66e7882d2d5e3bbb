"""Dask frames through session.infer: lazy, inferred on 2 process workers by 2 real servers."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.server.launcher import LocalServer
from tests.beyond.servers import completed, kill

# Dask is imported where it is used: at collection it would cost every pytest process (each
# xdist worker collects the whole suite) about a second of CPU
if any(importlib.util.find_spec(name) is None for name in ("dask", "distributed")):
    pytest.skip("could not import 'dask.dataframe' and 'distributed'", allow_module_level=True)

COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def from_map(*args: Any, **kwargs: Any) -> Any:
    """``dask.dataframe.from_map`` (Dask imported on first use)."""
    import dask.dataframe as dd

    return dd.from_map(*args, **kwargs)


def make_part(number: int, rows: int = 1_250_000) -> pd.DataFrame:
    """Partition ``number`` of an iris-shaped frame (deterministic; built on the worker)."""
    rng = np.random.default_rng(number)
    values = rng.random((rows, 4), dtype=np.float32) * np.float32(7.0) + np.float32(0.5)
    index = pd.RangeIndex(number * rows, (number + 1) * rows)
    return pd.DataFrame(values, columns=COLUMNS, index=index)


def make_rows(number: int, rows: int, negative_at: int = -1) -> pd.DataFrame:
    """A small partition of the four X columns; one negative value at row ``negative_at``."""
    values = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) + number * rows * 4
    if negative_at >= 0:
        values[negative_at, 2] = -1.0
    index = pd.RangeIndex(number * rows, (number + 1) * rows)
    return pd.DataFrame(values, columns=list("abcd"), index=index)


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    import distributed

    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=True,
            dashboard_address=None,
            # no dashboard, but the scheduler's HTTP routes still listen: on a free port, not
            # 8787 (taken by any other cluster on the machine: a warning, so an error here)
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client


def test_a_dask_frame_of_10_million_rows_gives_exactly_the_pandas_result(
    cluster: object, shared_servers: list[LocalServer]
) -> None:
    parts = 8
    ddf = from_map(make_part, range(parts))
    started = [_served(s, "iris") for s in shared_servers]
    with nbinfer.Session([s.http_url for s in shared_servers]) as session:
        lazy = session.infer("iris", ddf)
        # lazy: a Dask frame whose meta comes from the model's metadata, nothing ran yet
        assert type(lazy).__module__.startswith("dask")
        assert list(lazy._meta.columns) == [
            "probabilities[setosa]",
            "probabilities[versicolor]",
            "probabilities[virginica]",
        ]
        assert [str(d) for d in lazy._meta.dtypes] == ["float32"] * 3
        served_before = [_served(s, "iris") for s in shared_servers]
        assert served_before == started
        out = lazy.compute()
        computed = [_served(s, "iris") for s in shared_servers]
        frame = pd.concat([make_part(i) for i in range(parts)])
        assert len(frame) >= 10_000_000
        expected = session.infer("iris", frame, progress=False)
    pd.testing.assert_frame_equal(out, expected)  # same rows, order, index, values
    assert all(a > b for a, b in zip(computed, started, strict=True))  # both servers did work


def _served(server: LocalServer, model: str) -> int:
    with nbinfer.Client(server.http_url) as client:
        stats = client.get_inference_statistics(model)["model_stats"]
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


def test_a_server_killed_mid_run_still_gives_the_exact_result(
    cluster: object, shared_servers: list[LocalServer]
) -> None:
    parts, rows, batch = 4, 60, 6  # 40 requests of 0.2 s each
    ddf = from_map(make_rows, range(parts), rows=rows)
    killed_after: list[int] = []
    stop = threading.Event()

    def killer() -> None:  # once the first server has answered a request, kill it
        while not stop.is_set():
            done = _served(shared_servers[0], "slow")
            if done > 0:
                kill(shared_servers[0])
                killed_after.append(done)
                return
            stop.wait(0.05)

    with nbinfer.Session([s.http_url for s in shared_servers]) as session:
        lazy = session.infer("slow", ddf, columns={"X": list("abcd")}, batch_size=batch)
        thread = threading.Thread(target=killer)
        thread.start()
        try:
            out = lazy.compute()
        finally:
            stop.set()
            thread.join()
    frame = pd.concat([make_rows(i, rows) for i in range(parts)])
    assert killed_after, "the first server never answered"
    requests = parts * rows // batch
    assert killed_after[0] < requests  # killed mid-run ...
    # ... and what the first server had not finished when it died ran on the second (its
    # statistics, read before the kill, may lag what it finished by then)
    finished = completed(shared_servers[0], "slow")
    assert killed_after[0] <= finished < requests
    assert _served(shared_servers[1], "slow") >= requests - finished
    assert list(out.index) == list(frame.index)
    np.testing.assert_array_equal(out.to_numpy(), frame.to_numpy() * 2)


def test_a_partition_the_model_rejects_names_the_partition_and_the_models_message(
    cluster: object, shared_servers: list[LocalServer]
) -> None:
    def part(number: int) -> pd.DataFrame:
        return make_rows(number, 10, negative_at=3 if number == 2 else -1)

    ddf = from_map(part, range(4))
    with nbinfer.Session([s.http_url for s in shared_servers]) as session:
        lazy = session.infer("picky", ddf, columns={"X": list("abcd")})
        with pytest.raises(nbinfer.InferenceError) as info:
            lazy.compute()
    message = str(info.value)
    assert "partition 2 of 4" in message
    assert "row 3 holds a negative measurement" in message


def test_a_local_sessions_own_server_serves_the_workers_with_its_token(cluster: object) -> None:
    ddf = from_map(make_part, range(2), rows=1000)
    with nbinfer.Session(device="cpu") as session:  # its embedded server requires a token
        assert session.token
        out = session.infer("iris", ddf).compute()
        expected = session.infer("iris", pd.concat([make_part(i, 1000) for i in range(2)]))
    pd.testing.assert_frame_equal(out, expected)


def test_options_a_lazy_frame_cannot_honour_are_refused_at_call_time(
    shared_servers: list[LocalServer],
) -> None:
    ddf = from_map(make_rows, range(2), rows=4)
    with nbinfer.Session(shared_servers[0].http_url) as session:
        with pytest.raises(nbinfer.InvalidInputError, match="classification= is not available"):
            session.infer("iris", from_map(make_part, range(1), rows=4), classification=1)
        with pytest.raises(nbinfer.InvalidInputError, match="gives a Dask frame"):
            session.infer("double", ddf, columns={"X": list("abcd")}, as_frame=False)
