"""A Session on a slow server: the async faces keep the event loop running.

The server is the embedded one behind a real HTTP proxy (aiohttp, in its own thread and event
loop) that answers the metadata reads (server metadata, model metadata, model config) after a
delay; inference goes through at once. Every session here starts cold: nothing read before the
call under test.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import numpy as np
import pandas as pd
import pytest
from aiohttp import web

from nbinfer.session import Session

IRIS = pd.DataFrame(
    [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]],
    columns=["sepal_length", "sepal_width", "petal_length", "petal_width"],
)
#: The reads the proxy delays: ``GET /v2``, a model's metadata and its config.
_METADATA_ROUTE = re.compile(r"^/v2(/models/[^/]+(/versions/[^/]+)?(/config)?)?/?$")
#: Hop-by-hop headers (and the ones aiohttp sets itself) that a proxy does not copy.
_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


class SlowProxy:
    """An HTTP proxy in front of ``upstream`` whose metadata answers take ``delay`` seconds."""

    def __init__(self, upstream: str, delay: float) -> None:
        self.upstream = upstream.rstrip("/")
        self.delay = delay
        self.delayed = 0  # metadata reads answered late
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def __enter__(self) -> SlowProxy:
        self._thread.start()
        assert self._started.wait(30), "the proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._started.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        if request.method == "GET" and _METADATA_ROUTE.match(request.path):
            self.delayed += 1
            await asyncio.sleep(self.delay)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=await request.read(),
        ) as reply:
            body = await reply.read()
            kept = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP}
            return web.Response(status=reply.status, headers=kept, body=body)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Session]:
    with Session(device="cpu") as session:
        yield session


@pytest.fixture
def slow(upstream: Session) -> Iterator[SlowProxy]:
    with SlowProxy(upstream.url, delay=0.5) as proxy:
        yield proxy


def _ticking(call: Callable[[], Awaitable[Any]]) -> tuple[Any, int, float]:
    """Run ``call()`` beside a 10 ms ticker: its result, the ticks and the longest gap (s)."""

    async def main() -> tuple[Any, int, float]:
        ticks: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            ticks.append(time.perf_counter())
            while not stop.is_set():
                await asyncio.sleep(0.01)
                ticks.append(time.perf_counter())

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # the ticker's first tick
        try:
            result = await call()
        finally:
            stop.set()
            await task
        gaps = np.diff(ticks)
        return result, len(ticks), float(gaps.max()) if len(gaps) else float("inf")

    return asyncio.run(main())


@pytest.mark.parametrize("face", ["ainfer", "aclassify"])
def test_async_faces_keep_the_loop_running_on_a_slow_server_from_a_cold_session(
    upstream: Session, slow: SlowProxy, face: str
) -> None:
    with Session(slow.url, token=upstream.token) as session:  # cold: nothing read yet
        if face == "ainfer":
            result, ticks, gap = _ticking(lambda: session.ainfer("iris", IRIS))
            assert list(result.index) == [0, 1] and result.shape == (2, 3)
        else:
            digits = np.zeros((2, 8, 8), np.uint8)
            result, ticks, gap = _ticking(lambda: session.aclassify("digits", digits, top_k=1))
            assert len(result) == 2
    # Each metadata read takes 0.5 s: one made on the loop would stop the ticker that long.
    # The bounds leave room for a loaded machine and still catch any blocking read.
    assert slow.delayed >= 2, "the proxy should have delayed the metadata reads"
    assert gap < 0.25, f"the event loop stalled for {gap * 1000:.0f} ms"
    assert ticks >= 20, f"the ticker ticked only {ticks} times in {slow.delayed} slow reads"
