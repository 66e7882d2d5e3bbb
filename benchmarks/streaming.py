"""Token-streaming overhead of the generate extension, beside a hand-written ``requests`` loop.

A decoupled model on the embedded server emits N tokens at a fixed model-side rate and stamps
each with ``time.monotonic_ns()`` when it yields it (and the moment its ``predict`` began). The
monotonic clock is shared by the processes of one host, so each client measures, per token,
*emission -> the token in the caller's hands* (server framing + loopback + client parsing), and
the *time-to-first-token overhead*: request sent -> first token received, minus the model's own
time to its first token. The same server is read in the same run by:

* ``nbinfer http``: ``Client.generate_stream`` (pycurl, SSE parsed incrementally);
* ``nbinfer grpc``: ``Client.generate_stream`` over the decoupled ``ModelStreamInfer`` stream;
* ``nbinfer async``: ``AsyncClient.generate_stream`` (aiohttp);
* ``requests``: the loop users write by hand (``requests.post(stream=True)``, ``iter_lines``,
  ``json.loads`` of each ``data:`` line);
* ``tritonclient grpc`` (when installed): tritonclient's decoupled stream as its examples use
  it (``start_stream`` with a callback putting results on a queue, ``async_stream_infer``); the
  stream is opened before the clock starts, as by a caller that keeps one open for many
  requests (nbinfer opens a call per generation: its TTFT includes that).

Prints medians (over rounds) of the per-token overhead (median over tokens) and the TTFT
overhead, in ms, and nbinfer's ratios to the ``requests`` loop (HTTP) and to tritonclient
(gRPC), then the server's own Python per token measured in this process without the wire
(:func:`server_side`). Issue 27's targets: nbinfer client + server add < 0.2 ms per token
and < 2 ms to the first token.

``--baseline DIR`` adds ``baseline http`` / ``baseline grpc``: the same sync clients and server
from another nbinfer tree (e.g. a checkout of the previous commit), in a child process with
its own server, read in the same alternating rounds: a paired before / after.

Usage::

    python benchmarks/streaming.py [--tokens 200] [--interval-ms 1] [--rounds 5] [--json out.json]
        [--baseline /path/to/other/nbinfer/tree]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import requests

from nbinfer import AsyncClient, Client
from nbinfer.server.launcher import LocalServer

MODEL = """
import asyncio
import time

import numpy as np

from nbinfer import Model


class Ticker(Model):
    name = "ticker"
    decoupled = True
    inputs = (("count", "INT32", [1]), ("interval_us", "INT32", [1]))
    outputs = (("text_output", "BYTES", [1]), ("emit_ns", "INT64", [1]), ("start_ns", "INT64", [1]))

    async def predict(self, inputs, context):
        start = time.monotonic_ns()
        interval = int(inputs["interval_us"][0]) / 1e6
        for i in range(int(inputs["count"][0])):
            if i and interval:
                await asyncio.sleep(interval)
            yield {
                "text_output": np.array([b"tok "], dtype=object),
                "emit_ns": np.array([time.monotonic_ns()], dtype=np.int64),
                "start_ns": np.array([start], dtype=np.int64),
            }
"""

#: One run: (per-token overheads in ns, TTFT overhead in ns).
Sample = tuple[list[int], int]
Runner = Callable[[], Sample]


def _sample(sent: int, chunks: list[tuple[int, dict[str, Any]]]) -> Sample:
    per_token = [arrived - c["emit_ns"] for arrived, c in chunks]
    first_at, first = chunks[0]
    model_ttft = first["emit_ns"] - first["start_ns"]
    return per_token, (first_at - sent) - model_ttft


def nbinfer_sync(url: str, fields: dict[str, int], closers: list[Callable[[], Any]]) -> Runner:
    client = Client(url)
    closers.append(client.close)

    def run() -> Sample:
        sent = time.monotonic_ns()
        chunks = [(time.monotonic_ns(), c) for c in client.generate_stream("ticker", fields)]
        return _sample(sent, chunks)

    return run


def nbinfer_async(url: str, fields: dict[str, int], closers: list[Callable[[], Any]]) -> Runner:
    client = AsyncClient(url)
    loop = asyncio.new_event_loop()
    closers.append(lambda: (loop.run_until_complete(client.aclose()), loop.close()))

    async def once() -> Sample:
        sent = time.monotonic_ns()
        chunks = [(time.monotonic_ns(), c) async for c in client.generate_stream("ticker", fields)]
        return _sample(sent, chunks)

    return lambda: loop.run_until_complete(once())


def requests_loop(url: str, fields: dict[str, int], closers: list[Callable[[], Any]]) -> Runner:
    session = requests.Session()
    closers.append(session.close)
    route = f"{url}/v2/models/ticker/generate_stream"

    def run() -> Sample:
        sent = time.monotonic_ns()
        chunks = []
        with session.post(route, json=fields, stream=True) as reply:
            for line in reply.iter_lines():
                if line.startswith(b"data:"):
                    chunks.append((time.monotonic_ns(), json.loads(line[5:])))
        return _sample(sent, chunks)

    return run


def tritonclient_grpc(url: str, fields: dict[str, int], closers: list[Callable[[], Any]]) -> Runner:
    import queue

    import numpy as np
    import tritonclient.grpc as tc

    client = tc.InferenceServerClient(url.split("://", 1)[-1])
    closers.append(client.close)
    inputs = []
    for name, value in fields.items():
        tensor = tc.InferInput(name, [1], "INT32")
        tensor.set_data_from_numpy(np.array([value], dtype=np.int32))
        inputs.append(tensor)
    count = fields["count"]

    def run() -> Sample:
        results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        try:
            sent = time.monotonic_ns()
            client.async_stream_infer("ticker", inputs)
            chunks = []
            for _ in range(count):
                result, error = results.get()
                if error is not None:
                    raise error
                chunks.append(
                    (
                        time.monotonic_ns(),
                        {k: int(result.as_numpy(k)[0]) for k in ("emit_ns", "start_ns")},
                    )
                )
        finally:
            client.stop_stream()
        return _sample(sent, chunks)

    return run


#: The child of ``--baseline``: that tree's server and sync clients, one sample per request line.
_BASELINE_CHILD = r"""
import atexit, json, shutil, statistics, sys, tempfile
from pathlib import Path
tree, fields = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, tree + "/benchmarks")
import streaming as bench
import nbinfer
from nbinfer.server.launcher import LocalServer
assert nbinfer.__file__.startswith(tree), nbinfer.__file__
repo = Path(tempfile.mkdtemp(prefix="nbinfer-stream-baseline-"))
atexit.register(shutil.rmtree, repo, True)  # the temporary repository goes at exit
(repo / "ticker" / "1").mkdir(parents=True)
(repo / "ticker" / "1" / "model.py").write_text(bench.MODEL)
with LocalServer(model_repository=repo, demo=False, device="cpu", auth_token=None) as server:
    closers = []
    runners = {
        "http": bench.nbinfer_sync(server.http_url, fields, closers),
        "grpc": bench.nbinfer_sync(server.grpc_url, fields, closers),
    }
    print("ready", flush=True)
    for line in sys.stdin:
        tokens, first = runners[line.strip()]()
        print(json.dumps([statistics.median(tokens), first]), flush=True)
    for close in closers:
        close()
"""


def baseline(
    tree: str, fields: dict[str, int], closers: list[Callable[[], Any]]
) -> dict[str, Runner]:
    """``baseline http`` / ``baseline grpc``: another tree's clients and server (a child)."""
    root = str(Path(tree).resolve())
    env = {**os.environ, "PYTHONPATH": root}
    child = subprocess.Popen(
        [sys.executable, "-c", _BASELINE_CHILD, root, json.dumps(fields)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,  # ``-c`` puts the working directory first on sys.path
    )
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout
    closers.append(lambda: (stdin.close(), child.wait()))
    if stdout.readline().strip() != "ready":
        raise RuntimeError(f"the baseline tree {root} did not start its server")

    def runner(wire: str) -> Runner:
        def run() -> Sample:
            stdin.write(wire + "\n")
            stdin.flush()
            per_token, first = json.loads(stdout.readline())
            return [per_token], first

        return run

    return {"baseline http": runner("http"), "baseline grpc": runner("grpc")}


def server_side(tokens: int = 20_000) -> tuple[float, float]:
    """The server's own Python per token, in this process: the model's dict -> a checked
    response (the data plane, as both routes run it) and -> that response's gRPC bytes, in us
    (the ticker model with no interval; the best of 3 runs). What the wire adds is grpcio's."""
    from nbinfer.protocol import grpc as gcodec
    from nbinfer.protocol.types import InferInput, InferRequest
    from nbinfer.server.dataplane import DataPlane
    from nbinfer.server.repository import ModelRepository

    namespace: dict[str, Any] = {}
    exec(compile(MODEL, "ticker/1/model.py", "exec"), namespace)  # the served model's source
    request = InferRequest(
        model_name="ticker",
        inputs=[
            InferInput("count", "INT32", [1], np.array([tokens], np.int32)),
            InferInput("interval_us", "INT32", [1], np.array([0], np.int32)),
        ],
    )

    async def once(encode: bool) -> float:
        plane = DataPlane(ModelRepository(models=[namespace["Ticker"]()]))
        start = time.perf_counter()
        async for response in plane.infer_stream(request):
            if encode:
                gcodec.stream_response_to_bytes(response)
        elapsed = time.perf_counter() - start
        await plane.close()
        return elapsed / tokens * 1e6

    checked = min(asyncio.run(once(False)) for _ in range(3))
    encoded = min(asyncio.run(once(True)) for _ in range(3))
    return checked, encoded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--interval-ms", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--baseline", default=None, help="another nbinfer tree to compare with")
    args = parser.parse_args(argv)
    repo = Path(tempfile.mkdtemp(prefix="nbinfer-stream-bench-"))
    atexit.register(shutil.rmtree, repo, True)  # the temporary repository goes at exit
    (repo / "ticker" / "1").mkdir(parents=True)
    (repo / "ticker" / "1" / "model.py").write_text(MODEL)
    fields = {"count": args.tokens, "interval_us": int(args.interval_ms * 1000)}
    results: dict[str, dict[str, float]] = {}
    with LocalServer(model_repository=repo, demo=False, device="cpu", auth_token=None) as server:
        closers: list[Callable[[], Any]] = []
        runners = {
            "nbinfer http": nbinfer_sync(server.http_url, fields, closers),
            "nbinfer grpc": nbinfer_sync(server.grpc_url, fields, closers),
            "nbinfer async": nbinfer_async(server.http_url, fields, closers),
            "requests": requests_loop(server.http_url, fields, closers),
        }
        with contextlib.suppress(ImportError):  # tritonclient is optional
            runners["tritonclient grpc"] = tritonclient_grpc(server.grpc_url, fields, closers)
        if args.baseline:
            runners.update(baseline(args.baseline, fields, closers))
        for run in runners.values():
            run()  # warm up: connections, metadata
        per: dict[str, list[float]] = {name: [] for name in runners}
        ttft: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.rounds):  # rounds alternate the clients (the machine is shared)
            for name, run in runners.items():
                tokens, first = run()
                per[name].append(statistics.median(tokens) / 1e6)
                ttft[name].append(first / 1e6)
        for close in closers:
            close()
    print(
        f"{args.tokens} tokens every {args.interval_ms:g} ms; medians of {args.rounds} rounds "
        "(per token: emission -> in the caller's hands)"
    )
    print(f"{'client':<18} {'per token ms':>13} {'TTFT overhead ms':>17}")
    for name in per:
        results[name] = {
            "per_token_ms": statistics.median(per[name]),
            "ttft_overhead_ms": statistics.median(ttft[name]),
        }
        r = results[name]
        print(f"{name:<18} {r['per_token_ms']:>13.3f} {r['ttft_overhead_ms']:>17.3f}")
    peers = [(name, "requests") for name in ("nbinfer http", "nbinfer async")]
    if "tritonclient grpc" in results:
        peers.append(("nbinfer grpc", "tritonclient grpc"))
    if "baseline grpc" in results:
        peers += [("nbinfer http", "baseline http"), ("nbinfer grpc", "baseline grpc")]
    for name, peer in peers:
        r, base = results[name], results[peer]
        print(
            f"{name} / {peer}: per token {r['per_token_ms'] / base['per_token_ms']:.2f}x, "
            f"TTFT overhead {r['ttft_overhead_ms'] / base['ttft_overhead_ms']:.2f}x"
        )
    for name in ("nbinfer http", "nbinfer grpc"):
        r = results[name]
        print(
            f"targets, {name}: per token {r['per_token_ms']:.3f} ms (< 0.2), "
            f"TTFT overhead {r['ttft_overhead_ms']:.3f} ms (< 2)"
        )
    checked, encoded = server_side()
    print(
        f"the server's own work per token (one process, no interval): {checked:.1f} us to a "
        f"checked response, {encoded:.1f} us with its gRPC bytes"
    )
    results["server side"] = {"response_us": checked, "grpc_bytes_us": encoded}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
