"""Dynamic batching in nbinfer's embedded server: throughput with and without it.

A compute-bound model (a 2-layer NumPy MLP, by default 1024 -> 8192 -> 1024 float32, ReLU; pick
other sizes with --d-in / --d-hidden / --d-out) receives batch-1 requests from 16 concurrent
callers. The same model is served twice from one model repository: ``mlp`` (no batching) and
``mlp_batched`` (``dynamic_batching`` in its config.pbtxt), so one batch of 16 rows replaces 16
matrix-vector products (each reading all the weights) by one matrix-matrix product. ``mlp`` has 2
instances (one execution per core); ``mlp_batched`` has 1 instance and a max queue delay of 20 ms
(about one batch's compute time), so the requests that come back while a batch runs wait for each
other and batches stay full instead of alternating between a large and a small one. Each model gets
``--duration`` seconds per way, in ``--rounds`` alternating rounds (medians are reported, which
keeps other load on the machine from favouring one side).

Driven two ways:

* in-process, through :class:`nbinfer.server.DataPlane` (asyncio, no network);
* over the network, against ``python -m nbinfer.server`` (via ``LocalServer``) with
  ``tritonclient.grpc.aio`` (one client, 16 requests in flight).

Prints req/s for both models and the batched / unbatched ratio for each way::

    python benchmarks/batching.py --duration 6
    python benchmarks/batching.py --d-in 512 --d-hidden 2048 --d-out 512
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# One BLAS thread per model execution (set before NumPy loads): on a small machine, OpenBLAS's
# spinning worker threads otherwise starve the event loop that receives requests. Override with
# --blas-threads.
if __name__ == "__main__":
    for _i, _arg in enumerate(sys.argv):
        if _arg.startswith("--blas-threads"):
            _value = _arg.split("=", 1)[1] if "=" in _arg else sys.argv[_i + 1]
            os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _value
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", os.environ["OPENBLAS_NUM_THREADS"])

import numpy as np  # after the BLAS settings above

_MODEL_PY = """
import numpy as np

from nbinfer.server.model import Model


class Mlp(Model):
    \"\"\"relu(x @ W1 + b1) @ W2 + b2 with fixed random weights.\"\"\"

    inputs = [("x", "FP32", [{d_in}])]
    outputs = [("y", "FP32", [{d_out}])]

    def load(self):
        rng = np.random.default_rng(0)
        self.w1 = (rng.standard_normal(({d_in}, {d_hidden})) / np.sqrt({d_in})).astype(np.float32)
        self.b1 = np.zeros({d_hidden}, np.float32)
        self.w2 = (rng.standard_normal(({d_hidden}, {d_out})) / np.sqrt({d_hidden})).astype(
            np.float32
        )
        self.b2 = np.zeros({d_out}, np.float32)

    def predict(self, inputs):
        h = np.maximum(inputs["x"] @ self.w1 + self.b1, 0.0)
        return {{"y": h @ self.w2 + self.b2}}
"""

_CONFIG = """
name: "{name}"
max_batch_size: {max_batch}
input [{{ name: "x" data_type: TYPE_FP32 dims: [ {d_in} ] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [ {d_out} ] }}]
instance_group [{{ count: {instances} kind: KIND_CPU }}]
{batching}
"""


MODELS = ("mlp", "mlp_batched")


def write_repository(root: Path, args: argparse.Namespace) -> None:
    """Write the ``mlp`` and ``mlp_batched`` models under ``root``."""
    dims = {"d_in": args.d_in, "d_hidden": args.d_hidden, "d_out": args.d_out}
    batching = "dynamic_batching {{ max_queue_delay_microseconds: {delay} {preferred} }}".format(
        delay=args.delay_us,
        preferred=f"preferred_batch_size: [ {args.preferred} ]" if args.preferred else "",
    )
    for name, dyn, instances in (
        ("mlp", "", args.instances_unbatched),
        ("mlp_batched", batching, args.instances_batched),
    ):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(_MODEL_PY.format(**dims))
        (root / name / "config.pbtxt").write_text(
            _CONFIG.format(
                name=name, max_batch=args.max_batch, batching=dyn, instances=instances, **dims
            )
        )


def _rows(d_in: int, n: int = 64) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((1, d_in)).astype(np.float32) for _ in range(n)]


# -- load generators ---------------------------------------------------------------------------
async def _closed_loop(call: Any, n_inputs: int, concurrency: int, seconds: float) -> float:
    """``concurrency`` callers, each sending its next request when the previous one returns."""
    done = 0
    stop = time.perf_counter() + seconds

    async def worker(i: int) -> None:
        nonlocal done
        k = i
        while time.perf_counter() < stop:
            await call(k % n_inputs)
            k += concurrency
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return done / (time.perf_counter() - start)


async def _measure(
    calls: dict[str, Any], n_inputs: int, args: argparse.Namespace
) -> dict[str, list[float]]:
    """Warm each model up, then alternate them for ``args.rounds`` rounds (noise cancels out)."""
    rates: dict[str, list[float]] = {model: [] for model in calls}
    for call in calls.values():
        await _closed_loop(call, n_inputs, args.concurrency, min(1.0, args.duration / 4))
    for _ in range(args.rounds):
        for model, call in calls.items():
            rate = await _closed_loop(call, n_inputs, args.concurrency, args.duration / args.rounds)
            rates[model].append(rate)
    return rates


async def _inprocess(
    root: Path, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, Any], dict[str, Any]]:
    from nbinfer.protocol.types import InferInput, InferRequest
    from nbinfer.server import DataPlane, ModelRepository

    dp = DataPlane(ModelRepository(root))
    xs = _rows(args.d_in)
    calls: dict[str, Any] = {}
    for model in MODELS:
        reqs = [
            InferRequest(inputs=[InferInput("x", "FP32", [1, args.d_in], x)], model_name=model)
            for x in xs
        ]

        async def call(k: int, reqs: list[InferRequest] = reqs) -> Any:
            return await dp.infer(reqs[k])

        calls[model] = call
    try:
        rates = await _measure(calls, len(xs), args)
        checks = {m: (await calls[m](0)).outputs[0].data for m in MODELS}
        stats = {m: dp.statistics(m)["model_stats"][0] for m in MODELS}
    finally:
        await dp.close()
    return rates, checks, stats


async def _network(
    url: str, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    import tritonclient.grpc.aio as tga
    from tritonclient.grpc import InferInput as TInput

    client = tga.InferenceServerClient(url)
    inputs = []
    for x in _rows(args.d_in):
        inp = TInput("x", [1, args.d_in], "FP32")
        inp.set_data_from_numpy(x)
        inputs.append(inp)
    calls: dict[str, Any] = {}
    for model in MODELS:

        async def call(k: int, model: str = model) -> Any:
            return await client.infer(model, [inputs[k]])

        calls[model] = call
    try:
        rates = await _measure(calls, len(inputs), args)
        checks = {m: (await calls[m](0)).as_numpy("y") for m in MODELS}
    finally:
        await client.close()
    return rates, checks


def _batch_summary(stats: dict[str, Any]) -> str:
    sizes = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}
    executions = stats["execution_count"]
    mean = stats["inference_count"] / executions if executions else 0.0
    common = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    return f"{executions} executions, mean batch {mean:.1f}, most frequent sizes {common}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", type=float, default=10.0, help="seconds per model and way (all rounds)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per model")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--d-in", type=int, default=1024)
    parser.add_argument("--d-hidden", type=int, default=8192)
    parser.add_argument("--d-out", type=int, default=1024)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument(
        "--delay-us", type=int, default=20_000, help="max_queue_delay_microseconds (20000)"
    )
    parser.add_argument("--preferred", type=int, default=0, help="preferred_batch_size (0: none)")
    parser.add_argument(
        "--instances-unbatched",
        type=int,
        default=2,
        help="instance_group count of mlp (2: one execution per core)",
    )
    parser.add_argument(
        "--instances-batched",
        type=int,
        default=1,
        help="instance_group count of mlp_batched (1: all waiting requests form one batch)",
    )
    parser.add_argument(
        "--blas-threads", default="1", help="OPENBLAS_NUM_THREADS of both processes (1)"
    )
    parser.add_argument("--no-network", action="store_true", help="in-process only")
    args = parser.parse_args(argv)

    print(
        f"MLP {args.d_in}->{args.d_hidden}->{args.d_out} float32, batch-1 requests, concurrency "
        f"{args.concurrency}, {args.duration:.0f} s per cell, {os.cpu_count()} CPUs; batched: "
        f"max_batch_size {args.max_batch}, max_queue_delay {args.delay_us} us, "
        f"{args.instances_batched} instance(s); unbatched: {args.instances_unbatched} instance(s); "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '?')}"
    )
    results: dict[tuple[str, str], float] = {}

    def report(way: str, rates: dict[str, list[float]], notes: dict[str, str]) -> None:
        for model in MODELS:
            results[(way, model)] = statistics.median(rates[model])
            spread = ", ".join(f"{r:.0f}" for r in rates[model])
            print(
                f"  {way:<11} {model:<12} {results[(way, model)]:8.0f} req/s  "
                f"(rounds: {spread}){notes.get(model, '')}"
            )

    with tempfile.TemporaryDirectory(prefix="nbinfer-batching-") as tmp:
        root = Path(tmp)
        write_repository(root, args)

        rates, checks, stats = asyncio.run(_inprocess(root, args))
        report("in-process", rates, {m: f"\n{'':27}{_batch_summary(stats[m])}" for m in MODELS})
        np.testing.assert_allclose(checks["mlp"], checks["mlp_batched"], rtol=1e-4, atol=1e-4)

        if not args.no_network:
            from nbinfer.server.launcher import LocalServer

            blas = os.environ.get("OPENBLAS_NUM_THREADS", "1")
            env = {"OPENBLAS_NUM_THREADS": blas, "OMP_NUM_THREADS": blas}
            # tritonclient drives it too: no token, as `nbinfer serve`
            with LocalServer(
                model_repository=root, demo=False, device="cpu", env=env, auth_token=None
            ) as server:
                net_rates, net_checks = asyncio.run(_network(server.grpc_address, args))
            report("gRPC", net_rates, {})
            for m in MODELS:
                np.testing.assert_allclose(net_checks[m], checks["mlp"], rtol=1e-4, atol=1e-4)

    print("\nbatched / unbatched throughput (medians):")
    for way in ("in-process", "gRPC"):
        if (way, "mlp") in results:
            ratio = results[(way, "mlp_batched")] / results[(way, "mlp")]
            print(f"  {way:<11} {ratio:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
