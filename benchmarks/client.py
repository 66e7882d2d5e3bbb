"""nbinfer's client vs tritonclient against the embedded server, measured in the same run.

Drives the demo ``add_sub`` model (FP32 [1, 16] x 2 -> [1, 16] x 2) over HTTP and gRPC with
sync threads (concurrency 1 and 8) and asyncio tasks (concurrency 1 and 8), then moves 16 MB
each way (two 8 MB FP32 inputs in, two 8 MB outputs back). Both clients request and read both
outputs. Prints req/s, MB/s and the ratio nbinfer / tritonclient for every row; each figure is
the best of ``--rounds`` alternating runs (the machine is shared: best-of damps the noise).

The sync concurrency-1 rows run twice: from the main thread (``... main``, how a notebook cell
calls; nbinfer's gRPC client then arms its SIGINT watcher so the stop button works) and from
a worker thread; each is the round of the median ratio of ``--median-rounds`` (5) alternating
rounds, and the ``cpu`` columns (process CPU per call) are the less noisy figure on a shared
machine. Their peer is tritonclient with prebuilt ``InferInput`` objects (built once, reused
by every call: its fastest use), while nbinfer is called with the dict of arrays, as users
call it (issue 29's rows); the other rows build tritonclient's inputs per call. Beside them,
``... c=1 raw engine vs prebuilt``: the engine alone (grpcio / nbinfer's socket engine sending
pre-built bytes, the answer not decoded) against the same peer, measured the same way: the
ceiling of the c=1 rows. For gRPC, ``... c=1 minimal client [main]``: the least a complete
client on grpcio does (request head cached, arrays appended, answer parsed, both outputs viewed
by NumPy; no deadline, no checks) against the same peer from the same thread: the bound of the
gRPC c=1 rows, since nbinfer's client does all of that and more.

Usage::

    python benchmarks/client.py [--seconds 2] [--rounds 3] [--median-rounds 5]
        [--json out.json] [--only http,grpc]

Notes: tritonclient's sync HTTP client is gevent based and must stay on one thread, so each of
its threads gets its own client; nbinfer's clients are shared by all threads / tasks. The server
runs on the same machine, so the ``srv`` columns (server CPU per call, via psutil) show when it,
not the client, is the limit: at concurrency 8 the rate is bounded by ~1 / srv per second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

import nbinfer.client as nbc
from nbinfer.server.launcher import LocalServer

SMALL = {
    "INPUT0": np.arange(16, dtype=np.float32).reshape(1, 16),
    "INPUT1": np.ones((1, 16), dtype=np.float32),
}
BIG_ROWS = 8 * 1024 * 1024 // (16 * 4)  # 8 MB per tensor
BIG = {
    "INPUT0": np.random.default_rng(0).standard_normal((BIG_ROWS, 16)).astype(np.float32),
    "INPUT1": np.random.default_rng(1).standard_normal((BIG_ROWS, 16)).astype(np.float32),
}
BIG_MB = 2 * sum(a.nbytes for a in BIG.values()) / 1e6  # in + out

#: (calls per second, client CPU microseconds per call, server CPU microseconds per call)
Measured = tuple[float, float, float]

#: The server process (for its CPU time); set in main().
SERVER: list[Any] = []


def server_cpu() -> float:
    """CPU seconds used so far by the server process (its threads included)."""
    if not SERVER:
        return 0.0
    times = SERVER[0].cpu_times()
    return float(times.user + times.system)


# -- tritonclient adapters -------------------------------------------------------------------


def triton_inputs(mod: Any, data: dict[str, np.ndarray], http: bool) -> tuple[list[Any], list[Any]]:
    inputs = []
    for name, arr in data.items():
        inp = mod.InferInput(name, list(arr.shape), "FP32")
        if http:
            inp.set_data_from_numpy(arr, binary_data=True)
        else:
            inp.set_data_from_numpy(arr)
        inputs.append(inp)
    if http:
        outputs = [mod.InferRequestedOutput(n, binary_data=True) for n in ("OUTPUT0", "OUTPUT1")]
    else:
        outputs = [mod.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
    return inputs, outputs


def triton_sync(
    protocol: str, address: str, *, prebuilt: bool = False
) -> Callable[[], Callable[[dict[str, Any]], Any]]:
    """A factory of per-thread tritonclient infer functions.

    ``prebuilt``: the ``InferInput`` / ``InferRequestedOutput`` objects are built once per
    data and reused by every call (tritonclient's fastest use; issue 29's peer for the c=1
    rows); else built per call, from the arrays, as nbinfer is called.
    """
    if protocol == "http":
        import tritonclient.http as mod
    else:
        import tritonclient.grpc as mod  # type: ignore[no-redef]

    def make() -> Callable[[dict[str, Any]], Any]:
        client = mod.InferenceServerClient(address)
        built: dict[int, tuple[list[Any], list[Any]]] = {}

        def infer(data: dict[str, Any]) -> Any:
            if prebuilt:
                if id(data) not in built:
                    built[id(data)] = triton_inputs(mod, data, protocol == "http")
                inputs, outputs = built[id(data)]
            else:
                inputs, outputs = triton_inputs(mod, data, protocol == "http")
            result = client.infer("add_sub", inputs, outputs=outputs)
            return result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")

        return infer

    return make


def triton_grpc_request(data: dict[str, Any], *, head_only: bool = False) -> Any:
    """tritonclient's ``ModelInferRequest`` for ``add_sub`` on ``data`` (its protobuf classes).

    ``head_only``: the inputs' descriptions alone (no contents, no requested outputs).
    """
    import tritonclient.grpc as tg

    inputs, outputs = triton_inputs(tg, data, False)
    request = tg.service_pb2.ModelInferRequest(model_name="add_sub")
    request.inputs.extend(i._get_tensor() for i in inputs)
    if not head_only:
        request.raw_input_contents.extend(i._get_content() for i in inputs)
        request.outputs.extend(o._get_tensor() for o in outputs)
    return request


def raw_grpc(address: str) -> Callable[[], Callable[[dict[str, Any]], Any]]:
    """The floor of any Python gRPC client: grpcio sending pre-serialized bytes, no parsing.

    The request is serialized once (by tritonclient's protobuf classes) and the answer's bytes
    are not even parsed; what remains is grpcio's own per-call cost, which both clients pay.
    """
    import grpc

    def make() -> Callable[[dict[str, Any]], Any]:
        channel = grpc.insecure_channel(address)
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        cache: dict[int, bytes] = {}

        def infer(data: dict[str, Any]) -> Any:
            body = cache.get(id(data))
            if body is None:
                body = cache[id(data)] = triton_grpc_request(data).SerializeToString()
            return call(body)

        return infer

    return make


def minimal_grpc(address: str) -> Callable[[], Callable[[dict[str, Any]], Any]]:
    """The least a complete Python gRPC client does per call: the bound of the c=1 gRPC rows.

    What any client on grpcio must do to turn a dict of arrays into arrays: the request's
    serialized head is built once per data layout (as a client caches its request template)
    and each call appends the arrays' bytes, grpcio sends it (no deadline, no metadata: less
    than nbinfer, which always sets one), protobuf parses the answer and NumPy views both
    outputs, zero-copy. No checks, no errors mapped, no stop button; nothing can be left out.
    """
    import grpc
    import tritonclient.grpc as tg

    from nbinfer.protocol.grpc_tensors import varint  # once per layout, not per call

    def make() -> Callable[[dict[str, Any]], Any]:
        channel = grpc.insecure_channel(address)
        call = channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer",
            response_deserializer=tg.service_pb2.ModelInferResponse.FromString,
        )
        heads: dict[int, tuple[bytes, list[bytes]]] = {}

        def infer(data: dict[str, Any]) -> Any:
            built = heads.get(id(data))
            if built is None:
                head = triton_grpc_request(data, head_only=True).SerializeToString()
                # raw_input_contents (field 7, length-delimited) and each array's size
                tags = [b"\x3a" + varint(a.nbytes) for a in data.values()]
                built = heads[id(data)] = (head, tags)
            head, tags = built
            parts = [head]
            for tag, array in zip(tags, data.values(), strict=True):
                parts += (tag, array.data)
            reply = call(b"".join(parts))
            outputs = reply.outputs[:]
            contents = reply.raw_output_contents[:]
            return tuple(
                np.frombuffer(raw, np.float32).reshape(tuple(out.shape[:]))
                for out, raw in zip(outputs, contents, strict=True)
            )

        return infer

    return make


def raw_http(address: str) -> Callable[[], Callable[[dict[str, Any]], Any]]:
    """The floor of nbinfer's sync HTTP client: its socket engine alone posting pre-built bytes
    (tritonclient's binary request body), the answer's bytes not decoded.

    What remains is the engine's own per-call cost (a kept-alive socket, the head written,
    the answer's head parsed by llhttp) and the server's; the client above it can only add.
    """
    import tritonclient.http as th

    from nbinfer.config import ClientConfig
    from nbinfer.transports.socket_engine import SocketEngine

    def make() -> Callable[[dict[str, Any]], Any]:
        engine = SocketEngine(f"http://{address}", ClientConfig())
        cache: dict[int, tuple[bytes, dict[str, str]]] = {}

        def infer(data: dict[str, Any]) -> Any:
            built = cache.get(id(data))
            if built is None:
                inputs, outputs = triton_inputs(th, data, True)
                body, length = th.InferenceServerClient.generate_request_body(
                    inputs, outputs=outputs
                )
                headers = {"content-type": "application/octet-stream"}
                if length is not None:
                    headers["inference-header-content-length"] = str(length)
                built = cache[id(data)] = (body, headers)
            return engine.request("POST", "v2/models/add_sub/infer", *built).body

        return infer

    return make


def triton_async(protocol: str, address: str) -> tuple[Any, Callable[..., Awaitable[Any]]]:
    if protocol == "http":
        import tritonclient.http as base
        import tritonclient.http.aio as mod
    else:
        import tritonclient.grpc as base  # type: ignore[no-redef]
        import tritonclient.grpc.aio as mod  # type: ignore[no-redef]
    client = mod.InferenceServerClient(address)

    async def infer(data: dict[str, Any]) -> Any:
        inputs, outputs = triton_inputs(base, data, protocol == "http")
        result = await client.infer("add_sub", inputs, outputs=outputs)
        return result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")

    return client, infer


# -- drivers ---------------------------------------------------------------------------------


def run_threads(
    make: Callable[[], Callable[[dict[str, Any]], Any]],
    data: dict[str, Any],
    threads: int,
    seconds: float,
) -> Measured:
    """``(calls/s, client CPU us/call)`` of ``threads`` threads looping ``make()(data)``."""
    counts = [0] * threads
    times = [0.0, 0.0, 0.0]  # begin, stop_at, process CPU at begin

    def set_times() -> None:
        times[0] = time.perf_counter()
        times[1] = times[0] + seconds
        times[2] = time.process_time()
        times.append(server_cpu())

    start_gate = threading.Barrier(threads + 1, action=set_times)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            infer = make()
            infer(data)  # warm up (connection, metadata)
            start_gate.wait()
            n = 0
            stop_at = times[1]
            while time.perf_counter() < stop_at:
                infer(data)
                n += 1
            counts[i] = n
        except BaseException as exc:
            errors.append(exc)
            start_gate.abort()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        start_gate.wait()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    calls = sum(counts)
    cpu_us = (time.process_time() - times[2]) / max(calls, 1) * 1e6
    srv_us = (server_cpu() - times[3]) / max(calls, 1) * 1e6
    return calls / (time.perf_counter() - times[0]), cpu_us, srv_us


def run_main(
    make: Callable[[], Callable[[dict[str, Any]], Any]],
    data: dict[str, Any],
    seconds: float,
) -> Measured:
    """Like :func:`run_threads` with one caller, the main thread (a notebook cell's thread).

    nbinfer's gRPC client routes signals to its SIGINT watcher around each main-thread call, so
    the stop button interrupts it at once; this row measures that path as a notebook sees it.
    """
    assert threading.current_thread() is threading.main_thread()
    infer = make()
    infer(data)  # warm up (connection, metadata)
    begin, cpu, srv = time.perf_counter(), time.process_time(), server_cpu()
    stop_at = begin + seconds
    calls = 0
    while time.perf_counter() < stop_at:
        infer(data)
        calls += 1
    cpu_us = (time.process_time() - cpu) / max(calls, 1) * 1e6
    srv_us = (server_cpu() - srv) / max(calls, 1) * 1e6
    return calls / (time.perf_counter() - begin), cpu_us, srv_us


def run_async_client(
    factory: Callable[[], tuple[Any, Callable[..., Awaitable[Any]]]],
    data: dict[str, Any],
    tasks: int,
    seconds: float,
) -> Measured:
    """Like :func:`run_threads` with ``tasks`` asyncio tasks sharing one client."""

    async def main() -> Measured:
        client, infer = factory()
        try:
            await infer(data)
            stop_at = time.perf_counter() + seconds

            async def loop() -> int:
                n = 0
                while time.perf_counter() < stop_at:
                    await infer(data)
                    n += 1
                return n

            begin, cpu, srv = time.perf_counter(), time.process_time(), server_cpu()
            calls = sum(await asyncio.gather(*(loop() for _ in range(tasks))))
            cpu_us = (time.process_time() - cpu) / max(calls, 1) * 1e6
            srv_us = (server_cpu() - srv) / max(calls, 1) * 1e6
            return calls / (time.perf_counter() - begin), cpu_us, srv_us
        finally:
            closer = getattr(client, "aclose", None) or client.close
            await closer()

    return asyncio.run(main())


def nb_async_factory(url: str) -> Callable[[], tuple[Any, Callable[..., Awaitable[Any]]]]:
    def factory() -> tuple[Any, Callable[..., Awaitable[Any]]]:
        client = nbc.AsyncClient(url, shared_memory=False)

        async def infer(data: dict[str, Any]) -> Any:
            result = await client.infer("add_sub", data)
            return result["OUTPUT0"], result["OUTPUT1"]

        return client, infer

    return factory


def median_of(
    rounds: int, ours: Callable[[], Measured], theirs: Callable[[], Measured]
) -> tuple[Measured, Measured]:
    """Alternate the two ``rounds`` times; the figures of the round of the median ratio.

    The c=1 rows' targets are medians of 5 rounds: the ratio of each round (same load for both
    clients) is what is ranked, and that round's figures are reported.
    """
    pairs = [(ours(), theirs()) for _ in range(rounds)]
    pairs.sort(key=lambda p: p[0][0] / p[1][0] if p[1][0] else float("inf"))
    return pairs[len(pairs) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--median-rounds", type=int, default=5, help="rounds of the c=1 rows")
    parser.add_argument("--only", default="http,grpc")
    parser.add_argument("--json", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    protocols = [p for p in args.only.split(",") if p]
    rows: list[dict[str, Any]] = []

    def row(
        name: str,
        unit: str,
        ours: Measured,
        theirs: Measured,
        scale: float = 1.0,
        *,
        median: bool = False,
    ) -> None:
        (rate_a, cpu_a, srv_a), (rate_b, cpu_b, srv_b) = ours, theirs
        rate_a, rate_b = rate_a * scale, rate_b * scale
        ratio = rate_a / rate_b if rate_b else float("inf")
        rounds = args.median_rounds if median else args.rounds
        rows.append(
            {
                "scenario": name,
                "unit": unit,
                "rounds": f"{'median' if median else 'best'} of {rounds} round"
                + ("s" if rounds != 1 else ""),
                "nbinfer": rate_a,
                "tritonclient": rate_b,
                "ratio": ratio,
                "nbinfer_cpu_us_per_call": cpu_a,
                "tritonclient_cpu_us_per_call": cpu_b,
                "nbinfer_server_cpu_us_per_call": srv_a,
                "tritonclient_server_cpu_us_per_call": srv_b,
            }
        )
        print(
            f"{name:<28} {rate_a:>9.1f} {rate_b:>12.1f} {unit:<6} {ratio:>6.2f}x"
            f" {cpu_a:>9.0f} {cpu_b:>9.0f} {srv_a:>9.0f} {srv_b:>9.0f}",
            flush=True,
        )

    def best_of(
        ours: Callable[[], Measured], theirs: Callable[[], Measured]
    ) -> tuple[Measured, Measured]:
        """Alternate the two measurements ``--rounds`` times; keep each one's best round."""
        a: list[Measured] = []
        b: list[Measured] = []
        for _ in range(args.rounds):
            a.append(ours())
            b.append(theirs())
        return max(a), max(b)

    def run_protocol(proto: str, http_url: str, grpc_url: str) -> None:
        address = http_url if proto == "http" else grpc_url
        address = address.split("://", 1)[-1]
        url = f"{proto}://{address}"
        shared = nbc.Client(url, shared_memory=False)  # the wire; local_shm.py: the shm path

        def nb_make(client: nbc.Client = shared) -> Callable[[dict[str, Any]], Any]:
            def infer(data: dict[str, Any]) -> Any:
                result = client.infer("add_sub", data)
                return result["OUTPUT0"], result["OUTPUT1"]

            return infer

        tc_make = triton_sync(proto, address)
        tc_prebuilt = triton_sync(proto, address, prebuilt=True)  # the c=1 rows' peer
        secs = args.seconds
        ours, theirs = median_of(
            args.median_rounds,
            lambda: run_main(nb_make, SMALL, secs),
            lambda: run_main(tc_prebuilt, SMALL, secs),
        )
        row(f"{proto} sync  c=1 add_sub main", "req/s", ours, theirs, median=True)
        ours, theirs = median_of(
            args.median_rounds,
            lambda: run_threads(nb_make, SMALL, 1, secs),
            lambda: run_threads(tc_prebuilt, SMALL, 1, secs),
        )
        row(f"{proto} sync  c=1 add_sub", "req/s", ours, theirs, median=True)
        # the ceiling of the two c=1 rows above: the engine alone, bytes in, bytes out, against
        # the same peer, measured the same way
        raw = raw_grpc(address) if proto == "grpc" else raw_http(address)
        ours, theirs = median_of(
            args.median_rounds,
            lambda: run_threads(raw, SMALL, 1, secs),
            lambda: run_threads(tc_prebuilt, SMALL, 1, secs),
        )
        row(f"{proto} sync  c=1 raw engine vs prebuilt", "req/s", ours, theirs, median=True)
        if proto == "grpc":  # the bound of the gRPC c=1 rows: a complete client, nothing more
            minimal = minimal_grpc(address)
            ours, theirs = median_of(
                args.median_rounds,
                lambda: run_main(minimal, SMALL, secs),
                lambda: run_main(tc_prebuilt, SMALL, secs),
            )
            row("grpc sync  c=1 minimal client main", "req/s", ours, theirs, median=True)
            ours, theirs = median_of(
                args.median_rounds,
                lambda: run_threads(minimal, SMALL, 1, secs),
                lambda: run_threads(tc_prebuilt, SMALL, 1, secs),
            )
            row("grpc sync  c=1 minimal client", "req/s", ours, theirs, median=True)
        ours, theirs = best_of(
            lambda: run_threads(nb_make, SMALL, 8, secs),
            lambda: run_threads(tc_make, SMALL, 8, secs),
        )
        row(f"{proto} sync  c=8 add_sub", "req/s", ours, theirs)
        if proto == "grpc":  # the ceiling of the gRPC rows: grpcio alone, bytes in, bytes out
            for conc in (1, 8):
                ours, theirs = best_of(
                    lambda c=conc: run_threads(raw_grpc(address), SMALL, c, secs),
                    lambda c=conc: run_threads(tc_make, SMALL, c, secs),
                )
                row(f"grpc sync  c={conc} raw grpcio floor", "req/s", ours, theirs)
        for conc in (1, 8):
            ours, theirs = best_of(
                lambda c=conc: run_async_client(nb_async_factory(url), SMALL, c, secs),
                lambda c=conc: run_async_client(
                    lambda: triton_async(proto, address), SMALL, c, secs
                ),
            )
            row(f"{proto} async c={conc} add_sub", "req/s", ours, theirs)
        ours, theirs = best_of(
            lambda: run_threads(nb_make, BIG, 1, secs),
            lambda: run_threads(tc_make, BIG, 1, secs),
        )
        row(f"{proto} sync  16MB each way", "MB/s", ours, theirs, scale=BIG_MB)
        shared.close()

    # tritonclient drives it too: no token, as `nbinfer serve` (and the same headers for both)
    with LocalServer(demo=True, auth_token=None) as server:
        try:
            import psutil
        except ImportError:  # the srv columns then read 0
            pass
        else:
            SERVER[:] = [psutil.Process(server.pid)]
        print(f"server: {server.http_url} {server.grpc_url}")
        print(f"best of {args.rounds} alternating rounds of {args.seconds:g}s each")
        print("cpu = client process CPU microseconds per call (lower is better);")
        print("srv = server process CPU microseconds per call while serving that client")
        print(
            f"{'scenario':<28} {'nbinfer':>9} {'tritonclient':>12} {'unit':<6} {'ratio':>7}"
            f" {'cpu nb':>9} {'cpu tc':>9} {'srv nb':>9} {'srv tc':>9}"
        )
        for proto in protocols:
            run_protocol(proto, server.http_url, server.grpc_url)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
