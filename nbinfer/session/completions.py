"""A prompt column of a DataFrame -> a completion column (``session.generate(m, frame)``).

Rows run ``concurrency`` at a time (threads on the sync face, tasks on the asyncio one), each
through the same loop as one ``session.generate`` (:mod:`nbinfer.session.generate`); a row
that fails keeps its error message in ``<output>_error`` instead of ending the batch; a live
progress line says how far the batch got; ``attrs["generate"]`` holds the batch's figures.

May import ``errors``, ``render`` and ``session.generate``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbinfer.errors import InvalidInputError, NbinferError, count_option
from nbinfer.protocol.types import ModelMetadata
from nbinfer.render.generate import progress_html, progress_text
from nbinfer.session.generate import (
    Generation,
    StreamSource,
    _adrive,
    _drive,
    _live,
    _ms,
    _Request,
    _Run,
)

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["agenerate_frame", "generate_frame"]


def _frame_plan(
    self: StreamSource,
    model: str,
    frame: Any,
    meta: ModelMetadata,
    *,
    version: str,
    parameters: Mapping[str, Any] | None,
    timeout: float | None,
    output: str | None,
    prompt_input: str | None,
    fields: dict[str, Any],
) -> tuple[list[_Request | str], str]:
    """One request per row (or the row's error message), and the completion column's name."""
    column = fields.pop("prompt", "prompt")
    if column not in frame.columns:
        raise InvalidInputError(
            f"session.generate(): the frame has no prompt column {column!r} (columns: "
            f"{', '.join(map(str, frame.columns))}); name it with prompt='column'"
        )
    name = output or "completion"
    plans: list[_Request | str] = []
    for value in frame[column].tolist():
        if not isinstance(value, str):
            plans.append(f"no prompt in column {column!r}: {value!r}")
            continue
        plans.append(
            self._request(
                model,
                value,
                meta,
                version=version,
                parameters=parameters,
                timeout=timeout,
                output=output,
                prompt_input=prompt_input,
                fields=fields,
            )
        )
    return plans, name


def generate_frame(
    self: StreamSource,
    model: str,
    frame: Any,
    *,
    concurrency: int,
    progress: bool,
    **options: Any,
) -> pd.DataFrame:
    """``session.generate(model, frame, ...)``: rows on ``concurrency`` threads."""
    meta = self._meta(model, options["version"])
    plans, name = _frame_plan(self, model, frame, meta, **options)
    batch = _Batch(model, len(plans), progress)
    workers = count_option("concurrency", concurrency)

    def one(plan: _Request | str) -> Generation | str:
        if isinstance(plan, str):
            return plan
        run = _Run(plan.model, plan.version, plan.prompt, plan.output, None, None)
        try:
            return _drive(run, self._stream(plan))
        except NbinferError as exc:
            return str(exc) or type(exc).__name__

    with concurrent.futures.ThreadPoolExecutor(workers, "nbinfer-generate") as pool:
        futures = [pool.submit(one, plan) for plan in plans]
        for future in concurrent.futures.as_completed(futures):
            batch.done(future.result())
        results = [f.result() for f in futures]
    return batch.frame(frame, name, results)


async def agenerate_frame(
    self: StreamSource,
    model: str,
    frame: Any,
    *,
    concurrency: int,
    progress: bool,
    **options: Any,
) -> pd.DataFrame:
    """``await session.agenerate(model, frame, ...)``: ``concurrency`` rows at a time."""
    meta = await self._ameta(model, options["version"])
    plans, name = _frame_plan(self, model, frame, meta, **options)
    batch = _Batch(model, len(plans), progress)
    gate = asyncio.Semaphore(count_option("concurrency", concurrency))

    async def one(plan: _Request | str) -> Generation | str:
        if isinstance(plan, str):
            result: Generation | str = plan
        else:
            async with gate:
                run = _Run(plan.model, plan.version, plan.prompt, plan.output, None, None)
                try:
                    result = await _adrive(run, await self._astream(plan))
                except NbinferError as exc:
                    result = str(exc) or type(exc).__name__
        batch.done(result)
        return result

    results = await asyncio.gather(*(one(plan) for plan in plans))
    return batch.frame(frame, name, list(results))


class _Batch:
    """A DataFrame batch's progress (live) and its completed frame."""

    def __init__(self, model: str, total: int, progress: bool) -> None:
        self.model, self.total = model, total
        self.count = self.errors = self.tokens = 0
        self.start = time.perf_counter()
        self.live = _live(True, self._draw, "") if progress else None
        self._lock = threading.Lock()

    def _stats(self) -> dict[str, object]:
        seconds = time.perf_counter() - self.start
        rate = f"{self.tokens / seconds:.1f}" if seconds > 0 and self.tokens else None
        return {"tokens": self.tokens, "tokens/s": rate, "elapsed": _ms(seconds)}

    def _draw(self, *_: Any) -> dict[str, str]:
        args = (self.count, self.total)
        stats = self._stats()
        return {
            "text/plain": progress_text(*args, model=self.model, errors=self.errors, stats=stats),
            "text/html": progress_html(*args, model=self.model, errors=self.errors, stats=stats),
        }

    def done(self, result: Generation | str) -> None:
        with self._lock:
            self.count += 1
            if isinstance(result, str):
                self.errors += 1
            else:
                self.tokens += result.tokens
            if self.live is not None:
                self.live.update("", self._draw)

    def frame(self, frame: Any, name: str, results: list[Generation | str]) -> pd.DataFrame:
        if self.live is not None:
            self.live.finish(
                self._draw,
                progress_text(
                    self.count,
                    self.total,
                    model=self.model,
                    errors=self.errors,
                    stats=self._stats(),
                ),
            )
        out = frame.copy()
        out[name] = [r.text if isinstance(r, Generation) else None for r in results]
        out[f"{name}_error"] = [r if isinstance(r, str) else None for r in results]
        seconds = time.perf_counter() - self.start
        out.attrs["generate"] = {
            "model": self.model,
            "rows": self.total,
            "errors": self.errors,
            "tokens": self.tokens,
            "seconds": seconds,
            "tokens_per_second": self.tokens / seconds if seconds > 0 else None,
        }
        return out
