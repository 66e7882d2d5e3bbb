"""Engine resources owned per asyncio event loop, each closed inside its own loop.

An aiohttp session or a grpc.aio channel belongs to the loop it was created in, and an
``AsyncClient`` may be used from several loops: successive ``asyncio.run`` calls in a script, a
notebook's loop and a worker thread's. :class:`PerLoop` keeps one resource per loop and closes it
in that loop, either when the engine is closed or when the loop shuts down: with each resource it
starts a small *guard* async generator in the loop, and asyncio closes the async generators
still open in a loop when it shuts the loop down (``asyncio.run``, ``asyncio.Runner``,
``loop.shutdown_asyncgens()``), which runs the guard's ``finally`` while the loop can still
close sockets. Without that, each finished loop left its session's connections open
(``ResourceWarning: unclosed transport``).

Imports asyncio only: no engine, no protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["CLOSE_TIMEOUT", "PerLoop"]

logger = logging.getLogger("nbinfer")

T = TypeVar("T")

#: Seconds :meth:`PerLoop.aclose` waits for another running loop to close its resource.
CLOSE_TIMEOUT = 10.0

#: Closing tasks in flight (the loop keeps only weak references to tasks).
_PENDING: set[asyncio.Task[None]] = set()


def _run_without_loop(step: Any) -> bool:
    """Run an awaitable that is not expected to suspend; False if it did (then it is dropped)."""
    try:
        step.send(None)
    except StopIteration:
        return True
    step.close()
    return False


class PerLoop(Generic[T]):
    """One resource per event loop, closed in its loop by ``close`` (an async callable).

    Args:
        close: Closes one resource; called in the resource's own loop.
    """

    __slots__ = ("_close", "_entries")

    def __init__(self, close: Callable[[T], Awaitable[None]]) -> None:
        self._close = close
        self._entries: dict[asyncio.AbstractEventLoop, tuple[T, AsyncGenerator[None, None]]] = {}

    def get(self) -> T | None:
        """The running loop's resource, or None when it has none yet."""
        entry = self._entries.get(asyncio.get_running_loop())
        return None if entry is None else entry[0]

    def add(self, resource: T) -> T:
        """Own ``resource`` for the running loop (replacing, and closing, the one it had).

        Must be called from a coroutine or callback running in that loop.
        """
        loop = asyncio.get_running_loop()
        self._forget_closed_loops()
        old = self._entries.pop(loop, None)
        if old is not None:  # e.g. an aiohttp session closed by hand: close what is left
            task = loop.create_task(old[1].aclose())
            _PENDING.add(task)
            task.add_done_callback(_PENDING.discard)
        guard = self._guard(loop, resource)
        # asend() registers the guard with the running loop (asyncio's first-iteration hook);
        # its first step only reaches the ``yield``, so it completes without suspending.
        _run_without_loop(guard.asend(None))
        self._entries[loop] = (resource, guard)
        return resource

    async def _guard(
        self, loop: asyncio.AbstractEventLoop, resource: T
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            entry = self._entries.get(loop)
            if entry is not None and entry[0] is resource:
                del self._entries[loop]
            if not loop.is_closed():
                await self._close(resource)
                await asyncio.sleep(0)  # let the transports' connection_lost callbacks run

    def _forget_closed_loops(self) -> None:
        """Finish the guards of loops closed without shutting down their async generators.

        Nothing can be closed there any more; finishing the guard here keeps the garbage
        collector from handing it to a closed loop later.
        """
        for loop in [loop for loop in self._entries if loop.is_closed()]:
            _, guard = self._entries.pop(loop)
            _run_without_loop(guard.aclose())
            logger.debug("an event loop closed without shutting down its async generators")

    async def aclose(self) -> None:
        """Close every loop's resource: this loop's here, a running loop's in that loop.

        A loop that is not running keeps its resource until it shuts down (its guard closes it
        then); a running loop that does not get to it within :data:`CLOSE_TIMEOUT` seconds
        closes it later (a busy or stuck loop must not hang this one).
        """
        current = asyncio.get_running_loop()
        self._forget_closed_loops()
        for loop, (_, guard) in list(self._entries.items()):
            if loop is current:
                await guard.aclose()
            elif loop.is_running():
                done = asyncio.run_coroutine_threadsafe(guard.aclose(), loop)
                try:  # shielded: on a timeout the close still runs when that loop gets to it
                    await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(done)), CLOSE_TIMEOUT)
                except TimeoutError:
                    logger.debug("a busy event loop did not close its resource in time")
