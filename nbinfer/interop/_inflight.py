"""Requests in flight for the chunked runs (DataFrames, images): a window, a progress bar.

Layer: interop (imports ``nbinfer.errors`` only, plus tqdm lazily); never the client, transports,
session or server.

:func:`~nbinfer.interop.pandas.infer_frame` and :func:`~nbinfer.interop.images.classify_images`
both cut their work into requests and keep up to ``concurrency`` of them in flight while the next
payload is prepared (so preparing overlaps the network and the server). Answers are taken as they
complete; each carries the key it was sent with, so the caller files it in its place and the
order of completion does not matter. The first error cancels what is still queued and is raised;
the progress bar counts rows or images and is closed whatever happens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator
from typing import Any

from nbinfer.errors import InvalidInputError

__all__ = ["arun", "progress_bar", "run"]

#: ``(key, payload, units)``: what to send, the key ``take`` gets back, what it adds to the bar.
Item = tuple[Any, Any, int]
Take = Callable[[Any, Any], None]


def progress_bar(total: int, *, show: bool, unit: str, desc: str, unit_scale: bool = False) -> Any:
    """A tqdm bar (a widget in notebooks, text in terminals), or ``None`` when not shown."""
    if not show:
        return None
    from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]

    return tqdm(total=total, unit=unit, unit_scale=unit_scale, desc=desc, leave=False)


def run(
    items: Iterable[Item],
    submit: Callable[[Any], concurrent.futures.Future[Any]],
    take: Take,
    *,
    concurrency: int,
    bar: Any = None,
) -> None:
    """Send every payload with ``submit`` (returns a future), at most ``concurrency`` in flight.

    Raises:
        InvalidInputError: ``concurrency`` < 1.
    """
    pending: dict[concurrent.futures.Future[Any], tuple[Any, int]] = {}
    with _Window(items, concurrency, bar, pending) as window:
        while window.fill(submit):
            done, _ = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
            for future in done:
                window.take(pending.pop(future), future.result(), take)


async def arun(
    items: Iterable[Item],
    submit: Callable[[Any], Awaitable[Any]],
    take: Take,
    *,
    concurrency: int,
    bar: Any = None,
) -> None:
    """Like :func:`run` from a coroutine: ``submit(payload)`` is awaitable."""
    pending: dict[asyncio.Future[Any], tuple[Any, int]] = {}
    with _Window(items, concurrency, bar, pending) as window:
        while window.fill(lambda payload: asyncio.ensure_future(submit(payload))):
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                window.take(pending.pop(task), task.result(), take)


class _Window:
    """The bookkeeping both drivers share; on exit it cancels the rest and closes the bar."""

    def __init__(self, items: Iterable[Item], concurrency: int, bar: Any, pending: Any) -> None:
        self.items: Iterator[Item] = iter(items)
        self.concurrency = concurrency
        self.bar = bar
        self.pending = pending

    def fill(self, start: Callable[[Any], Any]) -> bool:
        """Start payloads until ``concurrency`` are in flight; False when all are answered."""
        if self.concurrency < 1:  # checked inside the with block, so the bar still closes
            raise InvalidInputError(f"concurrency must be >= 1, got {self.concurrency}")
        while len(self.pending) < self.concurrency:
            item = next(self.items, None)
            if item is None:
                break
            key, payload, units = item
            self.pending[start(payload)] = (key, units)
        return bool(self.pending)

    def take(self, sent: tuple[Any, int], result: Any, take: Take) -> None:
        take(sent[0], result)
        if self.bar is not None:
            self.bar.update(sent[1])

    def __enter__(self) -> _Window:
        return self

    def __exit__(self, *exc: object) -> None:
        for future in self.pending:
            future.cancel()
        if isinstance(self.items, Generator):  # its own cleanup (e.g. decoding threads) now
            self.items.close()
        if self.bar is not None:
            self.bar.close()
