"""nbinfer's server in the test's own process: its HTTP + gRPC frontends on a thread.

For tests whose server must be built from a ``DataPlane`` object (extensions turned off, a
subclass that records what reaches it) or whose models write what they see into lists the test
reads. A real server on 127.0.0.1 all the same: the session under test talks to it over sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from nbinfer.server.app import ServerOptions, serve_async
from nbinfer.server.dataplane import DataPlane


@contextlib.contextmanager
def serving(plane: DataPlane) -> Iterator[tuple[str, str]]:
    """Serve ``plane`` on 127.0.0.1 from a thread of this process; yields (http, grpc) URLs."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    urls: list[str] = []
    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        await serve_async(
            ServerOptions(),
            stop=stop[0],
            on_ready=lambda http, grpc: (urls.extend([http, f"grpc://{grpc}"]), ready.set()),
            dataplane=plane,
        )

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30), "server did not start"
    try:
        yield urls[0], urls[1]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(30)
        loop.close()
