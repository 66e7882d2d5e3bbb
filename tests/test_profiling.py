"""session.profile(): short load profiles against the embedded server, checked for sanity.

Windows are short (0.3-0.5 s) so the whole file runs in well under a minute on 2 busy cores;
the checks are relations that hold on any machine (percentiles ordered, splits adding up,
open-loop latency growing past capacity), plus one comparison with an independent
tritonclient loop that interleaves runs and compares medians.
"""

from __future__ import annotations

import _thread
import json
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer import Session
from nbinfer.errors import InvalidInputError
from nbinfer.profiling import ProfileFrame, compare, random_inputs

pytestmark = pytest.mark.timeout(240)

QUICK: dict[str, Any] = {"window": 0.3, "max_windows": 4, "warmup": 0.2, "progress": False}
SERVICE_S = 0.02  # the sleeping model's service time: client overhead is a small part of it


class Sleepy(nbinfer.Model):
    """Sleeps a fixed time per request: a service time that dominates client overhead."""

    name = "sleepy"
    inputs = (("x", "FP32", [-1, 4]),)
    outputs = (("y", "FP32", [-1, 4]),)
    max_concurrency = 1

    def predict(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        time.sleep(SERVICE_S)
        return {"y": inputs["x"]}


class Flaky(nbinfer.Model):
    """Raises on every other request."""

    name = "flaky"
    inputs = (("x", "INT32", [-1]),)
    outputs = (("y", "INT32", [-1]),)

    def load(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def predict(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            odd = self.calls % 2
        if odd:
            raise RuntimeError("flaky model refuses odd calls")
        return {"y": inputs["x"]}


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        s.serve(Sleepy())
        s.serve(Flaky())
        yield s


def _check_row(row: pd.Series) -> None:
    latencies = [row[f"latency_p{p}_ms"] for p in (50, 90, 95, 99)] + [row["latency_max_ms"]]
    assert latencies == sorted(latencies), latencies
    assert row["latency_p50_ms"] > 0
    assert row["requests"] > 0 and row["throughput"] > 0
    assert row["errors"] == 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrency_sweep_orders_percentiles_and_splits_time(
    session: Session, protocol: str
) -> None:
    frame = session.profile("add_sub", protocol=protocol, concurrency=[1, 2], **QUICK)
    assert isinstance(frame, ProfileFrame)
    assert list(frame["concurrency"]) == [1, 2]
    assert set(frame["mode"]) == {"concurrency"} and set(frame["protocol"]) == {protocol}
    for _, row in frame.iterrows():
        _check_row(row)
        # closed loop: the three client parts are the whole request
        parts = row["client_encode_ms"] + row["client_network_ms"] + row["client_decode_ms"]
        assert parts == pytest.approx(row["latency_avg_ms"], rel=0.15)
        # the server's statistics cover the same windows: as many successes, its time inside
        assert row["server_requests"] == pytest.approx(row["requests"], rel=0.05, abs=10)
        server = sum(row[f"server_{p}_ms"] for p in ("queue", "compute_infer"))
        assert 0 < server < row["client_network_ms"]
        assert 1 <= row["windows"] <= 4


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_fixed_rate_keeps_its_schedule(session: Session, protocol: str) -> None:
    frame = session.profile("add_sub", protocol=protocol, request_rate=[100, 200], **QUICK)
    assert list(frame["mode"]) == ["rate", "rate"]
    assert list(frame["request_rate"]) == [100.0, 200.0]
    for _, row in frame.iterrows():
        _check_row(row)
        assert row["send_rate"] == pytest.approx(row["request_rate"], rel=0.1)
        assert row["throughput"] == pytest.approx(row["request_rate"], rel=0.1)
        assert row["schedule_lag_p99_ms"] >= 0


def test_open_loop_latency_counts_from_the_schedule(session: Session) -> None:
    # sleepy serves one request at a time, ~50/s at most: 100/s piles up a queue, and
    # latency measured from each scheduled send grows with it (no coordinated omission)
    closed = session.profile("sleepy", concurrency=1, **QUICK).iloc[0]
    opened = session.profile(
        "sleepy", request_rate=100, window=0.5, max_windows=2, warmup=0.1, progress=False
    ).iloc[0]
    assert closed["latency_p50_ms"] < 4 * SERVICE_S * 1e3
    assert opened["throughput"] < 0.9 * 100
    assert opened["latency_p99_ms"] > 10 * closed["latency_p99_ms"]
    assert opened["server_queue_ms"] > closed["server_queue_ms"]


def test_errors_are_counted_when_the_model_raises(session: Session) -> None:
    frame = session.profile("flaky", concurrency=[1], **QUICK)
    row = frame.iloc[0]
    assert row["errors"] > 0 and row["requests"] > 0
    assert row["errors"] == pytest.approx(row["requests"], rel=0.2, abs=3)
    assert "flaky model refuses odd calls" in row["first_error"]
    html = frame._repr_mimebundle_()["text/html"]
    assert "errors" in html and "flaky model refuses odd calls" in html


def _tritonclient_rate(session: Session, protocol: str, concurrency: int, seconds: float) -> float:
    """Requests per second of plain tritonclient sync loops, one thread per in-flight request."""
    server = session.server
    assert server is not None
    x = np.ones((1, 4), dtype=np.float32)
    if protocol == "http":
        import tritonclient.http as tc
    else:
        import tritonclient.grpc as tc  # type: ignore[no-redef]
    url = server.http_url.removeprefix("http://") if protocol == "http" else server.grpc_url
    counts = [0] * concurrency
    deadline = time.perf_counter() + seconds

    def loop(i: int) -> None:
        client = tc.InferenceServerClient(url)
        inp = tc.InferInput("x", [1, 4], "FP32")
        inp.set_data_from_numpy(x)
        while time.perf_counter() < deadline:
            client.infer("sleepy", [inp])
            counts[i] += 1
        client.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


@pytest.mark.parametrize(("protocol", "concurrency"), [("http", 1), ("grpc", 2)])
def test_throughput_matches_an_independent_tritonclient_loop(
    session: Session, protocol: str, concurrency: int
) -> None:
    # Five back-to-back pairs of equal length, alternating which goes first; the median of the
    # per-pair ratios cancels the drift of a busy machine (other jobs share its 2 cores).
    ratios = []
    for i in range(5):
        pair = []
        for ours in (i % 2 == 0, i % 2 == 1):
            if ours:
                frame = session.profile(
                    "sleepy",
                    protocol=protocol,
                    concurrency=concurrency,
                    window=0.4,
                    max_windows=2,  # exactly two windows: 0.8 s measured
                    warmup=0.1,
                    progress=False,
                )
                pair.append(float(frame["throughput"].iloc[0]))
            else:
                pair.append(_tritonclient_rate(session, protocol, concurrency, 0.8))
        ours_rate, theirs_rate = pair if i % 2 == 0 else pair[::-1]
        ratios.append(ours_rate / theirs_rate)
    assert statistics.median(ratios) == pytest.approx(1.0, rel=0.15), ratios


def test_inputs_from_metadata_dataframe_or_arrays(session: Session) -> None:
    meta = session.client.get_model_metadata("add_sub")
    arrays = random_inputs(meta, batch_size=3)
    assert {k: v.shape for k, v in arrays.items()} == {"INPUT0": (3, 16), "INPUT1": (3, 16)}
    assert all(v.dtype == np.float32 for v in arrays.values())
    echo = random_inputs(session.client.get_model_metadata("echo"), batch_size=2)
    assert echo["INPUT0"].shape == (2, 1) and isinstance(echo["INPUT0"][0, 0], bytes)

    batched = session.profile("add_sub", concurrency=1, batch_size=4, **QUICK).iloc[0]
    assert batched["batch_size"] == 4

    frame = pd.DataFrame({"sepal_length": [5.1, 6.2], "sepal_width": [3.5, 2.9]})
    frame["petal_length"], frame["petal_width"] = [1.4, 4.3], [0.2, 1.3]
    from_frame = session.profile("iris", frame, concurrency=1, **QUICK).iloc[0]
    assert from_frame["batch_size"] == 2 and from_frame["errors"] == 0

    given = {"INPUT0": np.zeros((2, 16), np.float32), "INPUT1": np.ones((2, 16), np.float32)}
    assert session.profile("add_sub", given, concurrency=1, **QUICK).iloc[0]["batch_size"] == 2


def test_export_and_compare(session: Session, tmp_path: Any) -> None:
    http = session.profile("add_sub", concurrency=[1, 2], **QUICK)
    grpc = session.profile("add_sub", protocol="grpc", concurrency=[1, 2], **QUICK)
    both = compare(http, grpc, labels=["HTTP", "gRPC"])
    assert isinstance(both, ProfileFrame)
    assert list(both["run"]) == ["HTTP", "HTTP", "gRPC", "gRPC"]
    assert list(http.compare(grpc)["run"].unique()) == ["add_sub (http)", "add_sub (grpc)"]
    assert list(http.compare(http)["run"].unique()) == ["add_sub (http)", "add_sub (http) #2"]
    with pytest.raises(InvalidInputError):
        compare(http, grpc, labels=["one"])

    http.to_csv(tmp_path / "run.csv", index=False)
    back = pd.read_csv(tmp_path / "run.csv")
    assert list(back.columns) == list(http.columns)
    assert back["throughput"].tolist() == pytest.approx(http["throughput"].tolist())
    records = json.loads(both.to_json(orient="records"))
    assert [r["run"] for r in records] == ["HTTP", "HTTP", "gRPC", "gRPC"]

    bundle = both._repr_mimebundle_()
    assert "add_sub" in bundle["text/plain"]
    html = bundle["text/html"]
    assert "data:image/png;base64," in html and "HTTP · c=2" in html
    from nbinfer.notebook.profile_display import png

    assert png(http)[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_settings_and_protocol_switch_on_a_remote_session(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="positive"):
        session.profile("add_sub", concurrency=[0], **QUICK)
    with Session(session.url) as remote, pytest.raises(InvalidInputError, match="profiling"):
        remote.profile("add_sub", protocol="grpc", **QUICK)


def test_a_column_subset_displays_as_a_plain_frame(session: Session) -> None:
    frame = session.profile("add_sub", request_rate=100, **QUICK)
    subset = frame[["request_rate", "throughput"]]
    bundle = subset._repr_mimebundle_()
    assert "<table" in bundle["text/html"] and "data:image/png" not in bundle["text/html"]


def test_command_line_profile_writes_csv_json_and_png(
    session: Session, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from nbinfer.cli import main

    out = {ext: tmp_path / f"run.{ext}" for ext in ("csv", "json", "png")}
    args = ["profile", session.url, "add_sub", "--concurrency", "1", "2", "--window", "0.3"]
    args += ["--max-windows", "3", "--warmup", "0.2"]
    args += [arg for ext, path in out.items() for arg in (f"--{ext}", str(path))]
    assert main(args) == 0
    assert "throughput" in capsys.readouterr().out
    assert len(pd.read_csv(out["csv"])) == 2
    assert [r["concurrency"] for r in json.loads(out["json"].read_text())] == [1, 2]
    assert out["png"].read_bytes()[:4] == b"\x89PNG"
    assert main(["profile", session.url, "flaky", "--concurrency", "1", *args[6:12]]) == 1


def test_an_interrupt_stops_the_load_at_once(session: Session) -> None:
    def successes() -> int:
        return int(session.stats("add_sub")["success"].sum())

    threading.Timer(1.0, _thread.interrupt_main).start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        session.profile("add_sub", concurrency=2, window=1.0, max_windows=100, progress=False)
    assert time.perf_counter() - start < 5
    time.sleep(0.3)  # the server records a request's statistics just after answering it
    before = successes()
    time.sleep(0.5)
    assert successes() == before  # no load left running in the background
