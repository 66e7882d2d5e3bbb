"""Requests in flight for the chunked runs (DataFrames, images): a window, a progress bar.

Layer: interop (imports ``nbinfer.errors`` only, the summary's renderer in ``nbinfer.render``
lazily, plus tqdm lazily; a notebook bar is shown
through the ``IPython.display`` that tqdm's notebook bar has loaded, found in ``sys.modules``);
never the client, transports, session or server.

:func:`~nbinfer.interop.chunks.infer_frame` and :func:`~nbinfer.interop.images.classify_images`
both cut their work into requests and keep up to ``concurrency`` of them in flight while the next
payload is prepared (so preparing overlaps the network and the server). Answers are taken as they
complete; each carries the key it was sent with, so the caller files it in its place and the
order of completion does not matter. The first error cancels what is still queued and is raised;
the progress bar counts rows or images and is closed whatever happens, leaving a one-line
summary (``iris: 1,000,000 rows in 0.47 s (2.1 M rows/s)``, or how far it got) that survives
saving the notebook: the widget's output is replaced, not kept.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator
from typing import Any

from nbinfer.errors import InvalidInputError

__all__ = ["Progress", "arun", "progress_bar", "run", "summary_line"]

#: ``(key, payload, units)``: what to send, the key ``take`` gets back, what it adds to the bar.
Item = tuple[Any, Any, int]
Take = Callable[[Any, Any], None]
Failed = Callable[[Any, BaseException], None]


def progress_bar(
    total: int, *, show: bool, unit: str, desc: str, unit_scale: bool = False
) -> Progress | None:
    """A live bar that leaves a one-line summary when closed, or ``None`` when not shown."""
    if not show:
        return None
    return Progress(total, unit=unit, desc=desc, unit_scale=unit_scale)


class Progress:
    """A tqdm bar while the work runs; closed, a static one-line summary in its place.

    In a notebook the bar is an ipywidgets widget shown with a display id: :meth:`close`
    replaces that output with the summary (``text/plain`` and ``text/html``, no widget), so a
    saved notebook, nbconvert, GitHub and the docs pages show the summary, never a dead widget.
    In a terminal the text bar is cleared and the summary written on its stream (stderr).
    The summary of a run that stopped early says how far it got and why.
    """

    def __init__(self, total: int, *, unit: str, desc: str, unit_scale: bool = False) -> None:
        from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]

        self.total, self.unit, self.desc = total, unit, desc
        notebook = any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__)
        options: dict[str, Any] = {"display": False} if notebook else {}
        self.bar: Any = tqdm(
            total=total, unit=unit, unit_scale=unit_scale, desc=desc, leave=False, **options
        )
        self._handle: Any = None
        if notebook:  # tqdm.notebook has imported IPython.display (no import of ours)
            show = sys.modules["IPython.display"].display
            self._handle = show(self.bar.container, display_id=True)
        self._started = time.perf_counter()
        #: The summary line, once closed.
        self.summary: str | None = None

    @property
    def n(self) -> int:
        """Units done so far."""
        return int(self.bar.n)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done."""
        self.bar.update(n)

    def set_postfix_str(self, text: str, *, refresh: bool = True) -> None:
        """Show ``text`` after the bar (tqdm's postfix)."""
        self.bar.set_postfix_str(text, refresh=refresh)

    def close(self) -> None:
        """Replace the bar with its summary line (idempotent), as tqdm's ``close``.

        Called while an exception propagates (a ``finally``) before the last unit was counted,
        the summary names that exception as why the run stopped.
        """
        self.finish(sys.exc_info()[1] if self.n < self.total else None)

    def finish(self, exc: BaseException | None) -> None:
        """Replace the bar with its summary line (idempotent); ``exc`` stopped the run, if any."""
        if self.summary is not None:
            return
        self.summary = summary_line(
            self.desc, self.n, self.total, self.unit, time.perf_counter() - self._started, exc
        )
        ok = exc is None and self.n >= self.total
        if self._handle is None:
            self.bar.close()  # leave=False: the text bar's line is cleared
            self.bar.fp.write(self.summary + "\n")
            self.bar.fp.flush()
            return
        self._handle.update(_Summary(self.summary, ok))
        self.bar.close()
        container = self.bar.container  # closed whatever its state: nothing is left to save
        for widget in (container, *container.children):
            widget.close()


class _Summary:
    """The static output a closed bar leaves: the line, in text and in HTML."""

    def __init__(self, line: str, ok: bool) -> None:
        self.line, self.ok = line, ok

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        from nbinfer.render.progress import summary_bundle

        return summary_bundle(self.line, ok=self.ok)

    def __repr__(self) -> str:
        return self.line


def summary_line(
    desc: str, n: int, total: int, unit: str, seconds: float, exc: BaseException | None = None
) -> str:
    """The line a closed bar leaves: ``"iris: 1,000,000 rows in 0.47 s (2.1 M rows/s)"``.

    A run that stopped early says how far it got and why:
    ``"iris: interrupted after 300,000 of 1,000,000 rows, 0.21 s (1.4 M rows/s)"``.
    """
    units = unit if unit.endswith("s") or len(unit) <= 3 else unit + "s"
    took = _seconds(seconds)
    rate = _rate(n, seconds, unit)
    rate = f" ({rate})" if rate else ""
    if exc is None and n >= total:
        return f"{desc}: {n:,} {units} in {took}{rate}"
    if isinstance(exc, KeyboardInterrupt):
        why = "interrupted"
    elif isinstance(exc, asyncio.CancelledError):
        why = "cancelled"
    elif exc is not None:
        why = f"failed ({type(exc).__name__})"
    else:
        why = "stopped"
    return f"{desc}: {why} after {n:,} of {total:,} {units}, {took}{rate}"


def _seconds(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def _rate(n: int, seconds: float, unit: str) -> str:
    """Units per second with an SI prefix (``2.1 M rows/s``), else seconds per unit.

    Seconds per unit (``7.5 s/setting``) when slower than one a second; empty when none done.
    """
    if n <= 0 or seconds <= 0:
        return ""
    rate = n / seconds
    if rate < 1:
        return f"{seconds / n:.1f} s/{unit[:-1] if unit.endswith('s') else unit}"
    size, prefix = next(
        p for p in ((1e9, "G "), (1e6, "M "), (1e3, "k "), (1.0, "")) if rate >= p[0]
    )
    value = rate / size
    return f"{value:.0f} {prefix}{unit}/s" if value >= 100 else f"{value:.1f} {prefix}{unit}/s"


def run(
    items: Iterable[Item],
    submit: Callable[[Any], concurrent.futures.Future[Any]],
    take: Take,
    *,
    concurrency: int,
    bar: Any = None,
    failed: Failed | None = None,
) -> None:
    """Send every payload with ``submit`` (returns a future), at most ``concurrency`` in flight.

    ``failed(key, exc)``, if given, sees the error of a payload before it is raised.

    Raises:
        InvalidInputError: ``concurrency`` < 1.
    """
    pending: dict[concurrent.futures.Future[Any], tuple[Any, int]] = {}
    with _Window(items, concurrency, bar, pending, failed) as window:
        while window.fill(submit):
            done, _ = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
            for future in done:
                window.take(pending.pop(future), future, take)


async def arun(
    items: Iterable[Item],
    submit: Callable[[Any], Awaitable[Any]],
    take: Take,
    *,
    concurrency: int,
    bar: Any = None,
    failed: Failed | None = None,
) -> None:
    """Like :func:`run` from a coroutine: ``submit(payload)`` is awaitable."""
    pending: dict[asyncio.Future[Any], tuple[Any, int]] = {}
    with _Window(items, concurrency, bar, pending, failed) as window:
        while window.fill(lambda payload: asyncio.ensure_future(submit(payload))):
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                window.take(pending.pop(task), task, take)


class _Window:
    """The bookkeeping both drivers share; on exit it cancels the rest and closes the bar."""

    def __init__(
        self, items: Iterable[Item], concurrency: int, bar: Any, pending: Any, failed: Any
    ) -> None:
        self.items: Iterator[Item] = iter(items)
        self.concurrency = concurrency
        self.bar = bar
        self.pending = pending
        self.failed = failed

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

    def take(self, sent: tuple[Any, int], future: Any, take: Take) -> None:
        try:
            result = future.result()
        except Exception as exc:
            if self.failed is not None:
                self.failed(sent[0], exc)
            raise
        take(sent[0], result)
        if self.bar is not None:
            self.bar.update(sent[1])

    def __enter__(self) -> _Window:
        return self

    def __exit__(self, *exc: Any) -> None:
        for future in self.pending:
            future.cancel()
        if isinstance(self.items, Generator):  # its own cleanup (e.g. decoding threads) now
            self.items.close()
        if self.bar is not None:
            self.bar.finish(exc[1])
