"""Every attack of issue 25 at once, while honest clients check every answer.

The server is ``LocalServer(demo=True, auth_token=None)``: a notebook user's server with the
token opted out, as ``nbinfer serve`` runs (so the attacks reach the handlers rather than
stopping at 401; ``LocalServer()`` itself has a token by default) and ``explicit`` model
control (loads of new models allowed, so the replace rule and the caps are what stops harm).
``attackers.py`` runs every attack from a process of its own, each in a loop, for the whole
window: replacing ``add_sub`` with an upload, unloading ``iris``, a web page (foreign Host,
Origin, ``Sec-Fetch-Site``), another uid registering the user's shared memory, another uid
calling a second server (with its token, as ``Session()`` starts it) without the token, a
shared-memory flood, gzip bombs, a 500k-parameter gRPC message, uploads of new models up to the
cap, a load of 30,000 tiny files, an upload over the operator's model through its link,
sequence floods and a 5 MB sequence id, KServe v1 values v2 refuses, a 240 MB upload and four
200 MB bodies at once. Meanwhile one HTTP and one gRPC client call ``add_sub`` and ``iris``
back to back and check every answer.

Done when (issue 25): 0 wrong answers, 0 errors, the honest clients' p99 latency under 250 ms,
and every attack refused. A latency sample is the mean of one ``add_sub`` + ``iris`` pair; call
by call, gRPC's p99 is closer to the bound (see docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from nbinfer import Client
from nbinfer.server.launcher import LocalServer
from tests.server.repo_calls import linked_repository

ROOT = Path(__file__).resolve().parents[2]
#: Seconds every attack runs (the honest clients run the same window).
WINDOW = 12.0
P99_BOUND = 0.250

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="becomes another uid: needs root (CI is)")


def _honest(
    url: str, stop: threading.Event, out: dict[str, list[float]], errors: list[str]
) -> None:
    rng = np.random.default_rng()
    flowers = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], np.float32)
    with Client(url) as client:
        expected_iris = client.infer("iris", {"input": flowers}).as_numpy("probabilities")
        while not stop.is_set():
            a = rng.standard_normal((1, 16)).astype(np.float32)
            b = rng.standard_normal((1, 16)).astype(np.float32)
            started = time.perf_counter()
            try:
                r = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})
                s = client.infer("iris", {"input": flowers})
            except Exception as exc:
                errors.append(f"{url}: {type(exc).__name__}: {exc}")
                continue
            out["latency"].append((time.perf_counter() - started) / 2)
            right = (
                np.array_equal(r.as_numpy("OUTPUT0"), a + b)
                and np.array_equal(r.as_numpy("OUTPUT1"), a - b)
                and np.array_equal(s.as_numpy("probabilities"), expected_iris)
            )
            out["wrong" if not right else "right"].append(1.0)


@as_root
@pytest.mark.serial  # the p99 bound needs the machine to itself: scripts/check runs it alone
@pytest.mark.timeout(300)
def test_every_attack_at_once_does_no_harm_and_honest_clients_stay_fast(tmp_path: Path) -> None:
    repo, _ = linked_repository(tmp_path)  # an operator's model that links out of its directory
    with (
        LocalServer(demo=True, device="cpu", auth_token=None, model_repository=repo) as server,
        LocalServer(demo=True, device="cpu") as guarded,  # a token, as Session() starts it
    ):
        stop = threading.Event()
        results = {proto: {"latency": [], "wrong": [], "right": []} for proto in ("http", "grpc")}
        errors: list[str] = []
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        attackers = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("attackers.py")),
                server.http_url,
                server.grpc_address,
                guarded.http_url,
                guarded.grpc_address,
                str(WINDOW),
                *([os.environ["NBINFER_ATTACKS"]] if "NBINFER_ATTACKS" in os.environ else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert attackers.stdout is not None
        assert attackers.stdout.readline().strip() == "ATTACKING", attackers.stderr
        urls = {"http": server.http_url, "grpc": server.grpc_url}
        honest = [
            threading.Thread(target=_honest, args=(urls[p], stop, results[p], errors)) for p in urls
        ]
        for t in honest:
            t.start()
        out, err = attackers.communicate(timeout=WINDOW + 180)
        stop.set()
        for t in honest:
            t.join(timeout=60)
        assert attackers.returncode == 0, err
        report = json.loads(out.strip().splitlines()[-1])
        harm = {name: r["harm"][:3] for name, r in report.items() if r["harm"]}
        assert not harm, f"attacks that did harm: {harm}"
        assert all(r["tries"] >= 1 for r in report.values()), report
        assert not errors, errors[:5]
        for proto, r in results.items():
            assert not r["wrong"], f"{proto}: {len(r['wrong'])} wrong answers"
            assert len(r["latency"]) >= 20, f"{proto}: only {len(r['latency'])} calls in the window"
            p99 = float(np.percentile(r["latency"], 99))
            tries = {name: a["tries"] for name, a in report.items()}
            print(f"{proto}: {len(r['latency'])} checked calls, p99 {p99 * 1000:.0f} ms; {tries}")
            assert p99 < P99_BOUND, (
                f"{proto}: p99 {p99 * 1000:.0f} ms over {len(r['latency'])} calls under attack"
            )
        # afterwards: the demo models are still the demo models, iris still loaded
        with Client(server.http_url) as client:
            index = {m.name: m.state for m in client.get_model_repository_index()}
            assert index["iris"] == "READY" and index["add_sub"] == "READY", index
