"""benchmarks/all.py's target table: a row per line of issue 29's table, judged against its target.

Built from the JSON the scripts write (small hand-made figures here; no benchmark runs).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ALL = Path(__file__).resolve().parents[1] / "benchmarks" / "all.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_all", ALL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_all"] = module  # dataclasses / NamedTuple resolve their module
    spec.loader.exec_module(module)
    return module


def client_row(scenario: str, ratio: float, rounds: str) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "unit": "req/s",
        "rounds": rounds,
        "nbinfer": 1000.0 * ratio,
        "tritonclient": 1000.0,
        "ratio": ratio,
        "nbinfer_cpu_us_per_call": 300.0,
        "tritonclient_cpu_us_per_call": 320.0,
    }


def write(out: Path, name: str, figures: Any) -> None:
    (out / name).write_text(json.dumps(figures), encoding="utf-8")


def test_every_line_of_issue_29s_table_gets_a_row_with_its_verdict(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path,
        "client.json",
        [
            client_row("grpc sync  c=1 add_sub main", 1.02, "median of 5 rounds"),
            client_row("grpc sync  c=1 add_sub", 1.01, "median of 5 rounds"),
            client_row("grpc sync  c=1 minimal client", 1.03, "median of 5 rounds"),
            client_row("http sync  c=1 add_sub main", 1.35, "median of 5 rounds"),
            client_row("http sync  c=1 raw engine vs prebuilt", 1.42, "median of 5 rounds"),
            client_row("grpc sync  c=8 add_sub", 0.97, "best of 3 rounds"),
        ],
    )
    rounds = [
        ({"throughput": 950.0, "p50_ms": 1.0}, {"throughput": 1000.0, "p50_ms": 0.95}),
        ({"throughput": 900.0, "p50_ms": 1.1}, {"throughput": 1000.0, "p50_ms": 1.0}),
        ({"throughput": 1000.0, "p50_ms": 0.9}, {"throughput": 1000.0, "p50_ms": 0.9}),
    ]
    write(
        tmp_path,
        "profiler.json",
        {"http": {"throughput_ratio": 0.95, "p50_ratio": 1.05, "rounds": rounds}},
    )
    medians = {
        "nbinfer shm (http)": 2400.0,
        "nbinfer shm (grpc)": 2500.0,
        "nbinfer http binary": 600.0,
        "tritonclient shm": 2000.0,
        "tritonclient http binary": 400.0,
    }
    write(
        tmp_path,
        "local_shm.json",
        {"medians": medians, "rounds": {k: [v] * 5 for k, v in medians.items()}},
    )
    write(
        tmp_path,
        "dataframe.json",
        {
            "rows": 5_000_000,
            "rounds": 5,
            "seconds": {"in-process": [1.0, 1.2], "nbinfer": [1.1, 1.3]},
            "median_time_ratio": {"in-process": 1.12},
        },
    )
    rows = bench.target_rows(tmp_path, 0.4)
    by = {row.name: row for row in rows}
    verdicts = {
        "client gRPC sync c=1 add_sub, main thread vs tritonclient, prebuilt inputs": True,
        "client gRPC sync c=1 add_sub, worker thread vs tritonclient, prebuilt inputs": False,
        "client HTTP sync c=1 add_sub, main thread vs tritonclient, prebuilt inputs": True,
        "profile() c=1 HTTP vs tritonclient loop, throughput": True,
        "profile() c=1 HTTP vs tritonclient loop, p50 latency": True,
        "local shared memory 16 MB each way vs tritonclient HTTP binary": False,  # 6x < 10x
        "local shared memory 16 MB each way vs tritonclient's own shm": None,  # no target
        "session.infer('iris', df) 5 M rows vs the same model in-process": False,  # 1.12 > 1.1
    }
    assert {name: by[name].met for name in verdicts} == verdicts
    assert [row.name for row in rows][: len(verdicts)] == list(verdicts)  # issue 29's rows first
    assert all(row.issue == 29 for row in rows[: len(verdicts)])
    assert by["client gRPC sync c=8 add_sub vs tritonclient"].issue == 11
    assert by["profile() c=1 HTTP vs tritonclient loop, throughput"].ours == 950.0  # medians
    assert by["profile() c=1 HTTP vs tritonclient loop, p50 latency"].peer == 0.95
    frame = by["session.infer('iris', df) 5 M rows vs the same model in-process"]
    assert (frame.ours, frame.peer, frame.higher_is_better) == (pytest.approx(1.2), 1.1, False)
    assert by["local shared memory 16 MB each way vs nbinfer HTTP binary"].value == 4.0

    bench.print_rows(rows)
    table = capsys.readouterr().out
    assert "issue 29's table" in table and "earlier targets (issue 11)" in table
    line = next(li for li in table.splitlines() if li.startswith("session.infer('iris', df)"))
    assert "1.20 s" in line and "1.10 s" in line and "1.12x" in line and "<= 1.1x" in line
    assert "MISSED" in line and "[time ratio, median of 5 rounds, paired]" in line
    main = next(li for li in table.splitlines() if "main thread" in li and "gRPC" in li)
    assert "met" in main and "[median of 5 rounds; CPU 300 vs 320 us/call]" in main
    # each c=1 row names its ceiling (the engine alone vs the same peer), where it was measured
    http = next(li for li in table.splitlines() if "main thread" in li and "HTTP" in li)
    assert "us/call; engine alone 1.42x]" in http
    assert not any(li.startswith("client ") and "raw engine" in li for li in table.splitlines())
    # the worker row misses 1.05x, and so does the minimal grpcio client measured beside it
    worker = next(li for li in table.splitlines() if "worker thread" in li and "gRPC" in li)
    assert "MISSED (bound below target)" in worker and "minimal grpcio client 1.03x]" in worker
    assert by["client gRPC sync c=1 add_sub, worker thread vs tritonclient, prebuilt inputs"].bound
    assert (
        by["client gRPC sync c=1 add_sub, main thread vs tritonclient, prebuilt inputs"].bound
        is None
    )
    assert not any(li.startswith("client ") and "minimal client" in li for li in table.splitlines())


def test_the_local_row_is_the_sessions_when_local_shm_measures_one(
    bench: ModuleType, tmp_path: Path
) -> None:
    medians = {
        "nbinfer Session": 3000.0,
        "nbinfer shm (http)": 2400.0,
        "nbinfer shm posix (http)": 1500.0,
        "nbinfer http binary": 600.0,
        "tritonclient shm": 1000.0,
        "tritonclient http binary": 250.0,
    }
    write(tmp_path, "local_shm.json", {"medians": medians, "rounds": {}})
    rows = {row.name: row for row in bench.target_rows(tmp_path, None)}
    binary = rows["local shared memory 16 MB each way vs tritonclient HTTP binary"]
    assert (binary.value, binary.met, binary.ours) == (12.0, True, 3000.0)
    assert rows["local shared memory 16 MB each way vs tritonclient's own shm"].value == 3.0
    assert rows["local shared memory 16 MB each way vs nbinfer HTTP binary"].value == 5.0
