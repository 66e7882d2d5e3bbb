"""A Session on a slow server: the async faces keep the event loop running; reprs call nothing.

The server is the embedded one behind a real HTTP proxy (aiohttp, in its own thread and event
loop) that answers the metadata reads (server metadata, model metadata, model config) after a
delay, or every request after another; it counts what it forwards. Every session here starts
cold: nothing read before the call under test.
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

from nbinfer.errors import RequestTimeoutError
from nbinfer.session import Session
from nbinfer.session.boundary import GRACE

IRIS = pd.DataFrame(
    [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]],
    columns=["sepal_length", "sepal_width", "petal_length", "petal_width"],
)
#: The reads the proxy delays: ``GET /v2``, a model's metadata and its config.
_METADATA_ROUTE = re.compile(r"^/v2(/models/[^/]+(/versions/[^/]+)?(/config)?)?/?$")
#: Hop-by-hop headers (and the ones aiohttp sets itself) that a proxy does not copy.
_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


class SlowProxy:
    """An HTTP proxy in front of ``upstream`` whose metadata answers (or the GETs ``route``
    matches) take ``delay`` seconds: the request waits before it is forwarded."""

    def __init__(
        self, upstream: str, delay: float, route: re.Pattern[str] = _METADATA_ROUTE
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.delay = delay
        self.route = route
        self.delayed = 0  # metadata reads answered late
        self.delay_all = 0.0  # seconds every request waits (on top of ``delay``)
        self.requests = 0  # requests forwarded
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
        self.requests += 1
        if self.delay_all:
            await asyncio.sleep(self.delay_all)
        if request.method == "GET" and self.route.match(request.path):
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


@pytest.mark.serial  # a loop-stall bound: run alone, not beside the parallel run's load
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


def _sleep_then_echo(x):  # type: ignore[no-untyped-def]
    import time

    time.sleep(1.0)  # far past the caller's timeout
    return x


@pytest.mark.serial  # a loop-stall bound: run alone, not beside the parallel run's load
def test_a_timeout_on_a_live_local_server_keeps_the_loop_running_through_the_grace(
    upstream: Session,
) -> None:
    # After a transport error the session gives its local server GRACE seconds to show that
    # it died (it has not: the call only timed out). A coroutine must await that, not block.
    upstream.serve(_sleep_then_echo, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
    x = np.ones(2, np.float32)
    asyncio.run(upstream.ainfer("_sleep_then_echo", {"x": x}, timeout=5.0))  # metadata read

    async def timed_out() -> RequestTimeoutError:
        with pytest.raises(RequestTimeoutError) as caught:
            await upstream.ainfer("_sleep_then_echo", {"x": x}, timeout=0.05)
        return caught.value

    error, ticks, gap = _ticking(timed_out)
    assert "is gone" not in str(error)  # the server lives: the timeout itself is raised
    assert upstream.server is not None and upstream.server.running
    # Blocking for the grace would stop the ticker GRACE (0.25 s) at once; a loaded machine
    # still ticks well within this bound, and through the grace (about 25 ticks).
    assert gap < 0.8 * GRACE, f"the event loop stalled for {gap * 1000:.0f} ms"
    assert ticks >= 10, f"the ticker ticked only {ticks} times"


def test_reprs_draw_from_held_state_and_never_call_a_slow_server(
    upstream: Session, slow: SlowProxy
) -> None:
    slow.delay = 0.0
    with Session(slow.url, token=upstream.token) as session:
        cold = session._repr_mimebundle_()["text/html"]  # nothing held yet: it says so
        assert slow.requests == 0
        assert "Nothing read from the server yet" in cold and "session.refresh()" in cold
        assert session.refresh() is session
        iris = session.model("iris")
        slow.delay_all = 2.0  # from now on every answer takes 2 s
        before = slow.requests
        start = time.perf_counter()
        card = session._repr_mimebundle_()["text/html"]
        model_card = iris._repr_mimebundle_()["text/html"]
        texts = repr(session) + repr(iris)
        took = time.perf_counter() - start
        assert slow.requests == before, "a repr called the server"
        # one round trip would take 2 s; a generous bound for a loaded machine
        assert took < 1.0, f"the reprs took {took * 1000:.0f} ms"
        assert "nbinfer" in card and "add_sub" in card and "READY" in card
        assert "setosa" in model_card and "[-1, 4]" in model_card and "READY" in model_card
        assert "iris" in texts
        slow.delay_all = 0.0


def test_refresh_reads_again_and_holds_what_the_server_answers(
    upstream: Session, slow: SlowProxy
) -> None:
    slow.delay = 0.0
    upstream.serve(lambda x: x * 2, name="doubler", inputs=[("x", "FP32", [-1])],
                   outputs=[("y", "FP32", [-1])])  # fmt: skip
    with Session(slow.url, token=upstream.token) as session:
        doubler = session.model("doubler")
        session.refresh()
        assert "doubler" in session._repr_mimebundle_()["text/html"]
        upstream.unload("doubler")  # behind this session's back: its cards still show it
        assert "READY" in doubler._repr_mimebundle_()["text/html"]
        assert "doubler" in session._repr_mimebundle_()["text/html"]
        assert doubler.refresh() is doubler  # the answer is held for the card, not raised
        gone = doubler._repr_mimebundle_()["text/html"]
        assert "READY" not in gone and "doubler" in gone
        session.refresh()
        listed = session.models
        assert "doubler" not in set(listed.loc[listed["state"] == "READY", "name"])
