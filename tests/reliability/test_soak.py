"""Mixed-load soak: threads mixing HTTP JSON, HTTP binary and gRPC calls, with one thread loading
and unloading a model under them; every answer is checked, the server's RSS must stay bounded.

CI runs ``NBINFER_SOAK_SECONDS`` (default ``DEFAULT_SECONDS``) seconds; a longer run::

    NBINFER_SOAK_SECONDS=600 python -m pytest -s -p no:cacheprovider tests/reliability/test_soak.py
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import reliability_report

from nbinfer.client import Client
from nbinfer.errors import ModelNotFoundError, ModelNotReadyError, ServerUnavailableError
from nbinfer.server.launcher import LocalServer

#: Seconds of soak: CI's default and the documented longer run.
DEFAULT_SECONDS = 20
LONG_SECONDS = 600
SECONDS = float(os.environ.get("NBINFER_SOAK_SECONDS", DEFAULT_SECONDS))
THREADS = 6
#: Allowed growth of the server's resident memory between warm-up and the end of the soak.
RSS_BOUND_MB = 48.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _worker(
    server: LocalServer, seed: int, until: float, counts: Counter[str], errors: list[str]
) -> None:
    rng = random.Random(seed)
    urls = {
        "http-json": (server.http_url, False),
        "http-binary": (server.http_url, True),
        "grpc": (server.grpc_url, None),
    }
    clients = {kind: Client(url, binary=binary) for kind, (url, binary) in urls.items()}
    try:
        while time.monotonic() < until:
            kind = rng.choice(list(clients))
            client = clients[kind]
            case = rng.randrange(4)
            try:
                if case == 0:
                    a = np.asarray(rng.random() * 100, np.float32) * np.ones(
                        (rng.randint(1, 8), 16), np.float32
                    )
                    b = np.arange(a.size, dtype=np.float32).reshape(a.shape)
                    out = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})
                    ok = np.array_equal(out["OUTPUT0"], a + b) and np.array_equal(
                        out["OUTPUT1"], a - b
                    )
                elif case == 1:
                    words = np.array(
                        [f"w{rng.random()}".encode() for _ in range(rng.randint(1, 20))],
                        dtype=object,
                    )
                    ok = list(client.infer("identity_bytes", {"INPUT0": words})["OUTPUT0"]) == list(
                        words
                    )
                elif case == 2:
                    ints = np.array([rng.randint(-(2**62), 2**62) for _ in range(7)], np.int64)
                    ok = np.array_equal(
                        client.infer("identity_int64", {"INPUT0": ints})["OUTPUT0"], ints
                    )
                else:
                    flags = np.array([rng.random() < 0.5 for _ in range(9)])
                    try:
                        got = client.infer("identity_bool", {"INPUT0": flags})["OUTPUT0"]
                    except (ModelNotReadyError, ModelNotFoundError, ServerUnavailableError):
                        counts["refused while unloaded"] += 1
                        continue
                    ok = np.array_equal(got, flags)
            except Exception as exc:  # every other failure is a finding
                errors.append(f"{kind} case {case}: {type(exc).__name__}: {exc}")
                continue
            counts["ok" if ok else "mismatch"] += 1
            if not ok:
                errors.append(f"{kind} case {case}: wrong answer")
    finally:
        for client in clients.values():
            client.close()


def _churn(server: LocalServer, until: float, counts: Counter[str], errors: list[str]) -> None:
    with Client(server.http_url) as client:
        while time.monotonic() < until:
            try:
                client.unload_model("identity_bool")
                time.sleep(0.2)
                client.load_model("identity_bool")
                counts["load/unload cycles"] += 1
                time.sleep(0.5)
            except Exception as exc:
                errors.append(f"load/unload: {type(exc).__name__}: {exc}")
        client.load_model("identity_bool")


def test_mixed_load_soak_answers_everything_correctly_within_an_rss_bound(
    server: LocalServer,
) -> None:
    pid = server.pid
    assert pid is not None
    counts: Counter[str] = Counter()
    errors: list[str] = []
    _worker(server, 0, time.monotonic() + 2.0, Counter(), errors)  # warm-up
    before = rss_mb(pid)
    until = time.monotonic() + SECONDS
    threads = [
        threading.Thread(target=_worker, args=(server, seed, until, counts, errors))
        for seed in range(1, THREADS + 1)
    ]
    threads.append(threading.Thread(target=_churn, args=(server, until, counts, errors)))
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SECONDS + 60)
    elapsed = time.monotonic() - start
    after = rss_mb(pid)
    print(
        f"\nsoak: {elapsed:.0f} s, {THREADS} threads + load/unload, {dict(counts)}, "
        f"{counts['ok'] / elapsed:.0f} checked answers/s, "
        f"server RSS {before:.0f} -> {after:.0f} MiB"
    )
    figures = {"seconds": round(elapsed, 1), "counts": dict(counts), "errors": len(errors)}
    figures |= {"rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1)}
    reliability_report.record("soak", "figures", figures)
    assert not errors, errors[:10]
    assert counts["mismatch"] == 0 and counts["ok"] > 100
    assert counts["load/unload cycles"] >= 1
    assert after - before < RSS_BOUND_MB, f"RSS grew {after - before:.0f} MiB"
