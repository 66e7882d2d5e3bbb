"""The worker threads of one model without a scheduler: a slot per request, freed when given up.

A synchronous ``predict`` on a thread cannot be pre-empted. When its caller gives up (client
disconnect, gRPC cancellation or deadline, the ``timeout`` parameter), :class:`ModelWorkers`
frees the request's slot at once and lets the thread finish in the background, its result
discarded, so the model's next request starts right away instead of waiting for the abandoned
one. Each model has threads of its own (``workers`` running + ``max_abandoned`` finishing), so a
model stuck in ``predict`` only ever holds its own threads, never another model's. Beyond
``max_abandoned`` threads still finishing, a given-up request keeps its slot until its thread
returns: new requests to that model then wait for a slot, as behind any busy worker, and the
number of threads stays bounded.

Models with a scheduler (``instance_group``, dynamic batching, queue limits) do not use this:
their instance count is a promise of at most that many concurrent executions (a model that is
not thread-safe relies on it), so an abandoned execution keeps its instance until it returns.

Imports only the standard library; never the dataplane, the repository or a frontend.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["ModelWorkers", "when_done"]

logger = logging.getLogger("nbinfer")


class ModelWorkers:
    """At most ``workers`` requests of one model on threads at once; abandoned ones step aside.

    Args:
        name: The model, for thread names.
        workers: Requests that may run at once.
        max_abandoned: Threads of given-up requests that may still be finishing in the
            background without holding a slot (0: a given-up request keeps its slot).

    Example::

        workers = ModelWorkers("sleepy", workers=4, max_abandoned=16)
        result = await workers.run(model.predict, inputs)
    """

    def __init__(self, name: str, *, workers: int, max_abandoned: int) -> None:
        self.name = name
        self.workers = max(1, workers)
        self.max_abandoned = max(0, max_abandoned)
        #: Threads of given-up requests still running (not holding a slot).
        self.abandoned = 0
        self._slots = asyncio.Semaphore(self.workers)
        # one thread for every slot and every abandoned thread: an admitted request never
        # waits for a thread
        self._executor = ThreadPoolExecutor(
            max_workers=self.workers + self.max_abandoned, thread_name_prefix=f"nbinfer-{name}"
        )

    async def run(
        self, fn: Callable[..., Any], *args: Any, jobs: list[Future[Any]] | None = None
    ) -> Any:
        """Run ``fn(*args)`` on one of the model's threads once a slot is free.

        ``jobs`` (when given) receives the thread's future, so a caller can tell whether an
        abandoned thread is still running (a sequence stays locked until it returns).
        """
        await self._slots.acquire()
        loop = asyncio.get_running_loop()
        try:
            job = self._executor.submit(fn, *args)
        except BaseException:
            self._slots.release()
            raise
        if jobs is not None:
            jobs.append(job)
        try:
            result = await asyncio.wrap_future(job, loop=loop)
        except asyncio.CancelledError:
            self._abandon(job, loop)
            raise
        except BaseException:
            self._slots.release()
            raise
        self._slots.release()
        return result

    def _abandon(self, job: Future[Any], loop: asyncio.AbstractEventLoop) -> None:
        """The caller gave up: free the slot now, or when the thread returns past the bound."""
        if job.cancel() or job.done():
            self._slots.release()
            return
        if self.abandoned < self.max_abandoned:
            self.abandoned += 1
            self._slots.release()
            when_done(job, loop, self._settled)
        else:
            when_done(job, loop, self._slots.release)

    def _settled(self) -> None:
        self.abandoned -= 1

    def shutdown(self) -> None:
        """Release the threads without waiting (the model retired); running ones finish."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def when_done(job: Future[Any], loop: asyncio.AbstractEventLoop, then: Callable[[], Any]) -> None:
    """Call ``then`` on ``loop`` when the thread running ``job`` returns."""

    def done(_: Future[Any]) -> None:
        try:
            loop.call_soon_threadsafe(then)
        except RuntimeError:  # the loop is closed: the server stopped
            logger.debug("abandoned request of a stopped server finished")

    job.add_done_callback(done)
