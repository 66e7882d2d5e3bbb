"""Sync HTTP engines alone, against the embedded server: which one should nbinfer use?

nbinfer's sync HTTP client sends cleartext HTTP/1.1 through its own socket engine (a kept-alive
socket per thread, the answer parsed by llhttp through httptools) and everything else (TLS,
HTTP/2, proxies, streams) through pycurl (libcurl), because they measured fastest. This checks
that choice against the standard library's ``http.client`` and the Python HTTP clients built on
Rust (reqwest / hyper): each engine posts the same pre-built JSON request (the demo
``add_sub``, FP32 [1, 16] x 2) over one keep-alive connection, from one thread, and reads the
answer's bytes (the socket engine parses the head, as it must; the others hand back bytes):
nothing of nbinfer's client on the path, so the figures are the engines' floors. Engines that
are not installed are skipped and named; ``pip install pyreqwest httpr pyqwest`` adds them.

Each figure is the median of ``--rounds`` alternating rounds of ``--calls`` calls: requests per
second and this process's CPU per call (``time.process_time``; the server is another process).

Usage::

    python benchmarks/engines.py [--calls 1500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from nbinfer.server.launcher import LocalServer

#: One call: the answer's bytes.
Call = Callable[[], bytes]

BODY = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))},
            {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [1] * 16},
        ]
    }
).encode()
HEADERS = {"Content-Type": "application/json"}


def pycurl_engine(url: str) -> Call:
    import pycurl

    curl = pycurl.Curl()
    chunks: list[bytes] = []
    curl.setopt(pycurl.URL, url)
    curl.setopt(pycurl.WRITEFUNCTION, chunks.append)
    curl.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in HEADERS.items()] + ["Expect:"])
    curl.setopt(pycurl.TCP_NODELAY, 1)

    def call() -> bytes:
        chunks.clear()
        curl.setopt(pycurl.POSTFIELDS, BODY)
        curl.perform()
        return b"".join(chunks)

    return call


def socket_engine(url: str) -> Call:
    from nbinfer.config import ClientConfig
    from nbinfer.transports.socket_engine import SocketEngine

    base, _, path = url.partition("/v2/")
    engine = SocketEngine(base, ClientConfig())
    return lambda: engine.request("POST", "v2/" + path, BODY, HEADERS).body


def stdlib_engine(url: str) -> Call:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc)

    def call() -> bytes:
        connection.request("POST", parts.path, BODY, HEADERS)
        return connection.getresponse().read()

    return call


def pyreqwest_engine(url: str) -> Call:
    from pyreqwest.client import SyncClientBuilder

    client = SyncClientBuilder().build()

    def call() -> bytes:
        request = client.post(url).body_bytes(BODY).header("Content-Type", HEADERS["Content-Type"])
        return bytes(request.build().send().bytes())

    return call


def httpr_engine(url: str) -> Call:
    import httpr

    client = httpr.Client()
    return lambda: bytes(client.post(url, content=BODY, headers=HEADERS).content)


def pyqwest_engine(url: str) -> Call:
    import pyqwest

    client = pyqwest.SyncClient()
    return lambda: bytes(client.post(url, headers=HEADERS, content=BODY).content)


ENGINES: dict[str, Callable[[str], Call]] = {
    "pycurl (nbinfer's)": pycurl_engine,
    "sockets (nbinfer's)": socket_engine,
    "http.client": stdlib_engine,
    "pyreqwest": pyreqwest_engine,
    "httpr": httpr_engine,
    "pyqwest": pyqwest_engine,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with LocalServer(demo=True, auth_token=None) as server:
        url = f"{server.http_url}/v2/models/add_sub/infer"
        calls: dict[str, Call] = {}
        for name, make in ENGINES.items():
            try:
                call = make(url)
                answer = call()
            except ImportError as exc:
                print(f"{name}: not installed ({exc.name})")
                continue
            if b'"OUTPUT0"' not in answer:
                raise SystemExit(f"{name}: unexpected answer {answer[:200]!r}")
            calls[name] = call
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                start, cpu = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    call()
                wall, used = time.perf_counter() - start, time.process_time() - cpu
                figures[name].append((args.calls / wall, used / args.calls * 1e6))
    ours = statistics.median(rate for rate, _ in figures[next(iter(figures))])
    print(f"{'engine':20s} {'req/s':>7s} {'CPU us/call':>12s} {'vs pycurl':>10s}")
    for name, rounds in figures.items():
        rate = statistics.median(r for r, _ in rounds)
        cpu_us = statistics.median(c for _, c in rounds)
        print(f"{name:20s} {rate:7.0f} {cpu_us:12.1f} {rate / ours:9.2f}x")


if __name__ == "__main__":
    main()
