"""Profiling a streaming (generative) model: what genai-perf reports, per concurrency.

For each concurrency, that many workers each send one generation after another for ``duration``
seconds (after one warm-up request each); every response is timed as it arrives. A row says:

* ``ttft_*_ms``: time to first token (avg, p50, p90, p99);
* ``itl_*_ms``: inter-token latency, the gaps between a request's tokens (avg, p50, p99);
* ``latency_*_ms``: request latency, from sending to the last response (avg, p50, p90, p99);
* ``output_tokens_per_s``: tokens received per second by all workers together;
  ``requests_per_s``; ``tokens_per_request`` (the output sequence length, mean);
* ``requests``, ``errors`` and the ``first_error``.

A token is a response that carries an output (one token per response on streaming LLM backends
and the demo ``story`` model). Requests go through Triton's generate extension, the call a
generative model's users make (``generate_stream``): over HTTP its Server-Sent Events, over
gRPC the decoupled ``ModelStreamInfer`` stream (``protocol=``; by default the URL's). The load
runs on its own thread and event loop, as :func:`nbinfer.profiling.profile` does.

Layer: profiling; imports client, errors, protocol and render (the chart).

Example::

    frame = session.profile("story", concurrency=[1, 2, 4], max_tokens=32)
    frame[["concurrency", "ttft_p50_ms", "itl_avg_ms", "output_tokens_per_s"]]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import InvalidInputError, NbinferError, count_option
from nbinfer.protocol.types import ModelMetadata

__all__ = ["STREAM_COLUMNS", "StreamProfileFrame", "is_streaming", "profile_stream"]

#: The columns of a stream profile, in order.
STREAM_COLUMNS = (
    "concurrency",
    "requests",
    "errors",
    "ttft_avg_ms",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "itl_avg_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "tokens_per_request",
    "first_error",
)


class StreamProfileFrame(pd.DataFrame):  # type: ignore[misc]
    """A stream profile, one row per concurrency; a notebook draws its charts.

    The charts: TTFT (p50, p99), inter-token latency (avg, p99) and output tokens/s.
    """

    @property
    def _constructor(self) -> type[StreamProfileFrame]:
        return StreamProfileFrame

    def _repr_html_(self) -> str:
        from nbinfer.render.stream_profile import stream_profile_html

        rows = self.to_dict("records")
        table = pd.DataFrame(self).to_html(index=False, float_format=lambda v: f"{v:.2f}")
        return stream_profile_html(rows, table_html=table)


def is_streaming(client: Client, model: str, version: str = "") -> bool:
    """Whether ``model`` streams (its config says decoupled); False when that cannot be read."""
    try:
        config = client.get_model_config(model, version)
    except NbinferError:
        return False
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


@dataclasses.dataclass
class _Timing:
    """One request: its token arrival times (seconds from sending) and its end."""

    tokens: list[float]
    end: float


def _prompt_field(meta: ModelMetadata) -> str:
    """The input the prompt goes to: ``text_input``, else the model's one BYTES input.

    Raises:
        InvalidInputError: neither exists.
    """
    names = [spec.name for spec in meta.inputs]
    if "text_input" in names:
        return "text_input"
    texts = [s.name for s in meta.inputs if s.datatype == "BYTES"]
    if len(texts) != 1:
        raise InvalidInputError(
            f"model {meta.name!r}: no 'text_input' and not one BYTES input for the prompt "
            f"(inputs: {', '.join(names) or 'none'})"
        )
    return texts[0]


def _is_token(obj: Mapping[str, Any]) -> bool:
    """Whether a response object carries an output (a value other than an empty list)."""
    return any(k not in _NOT_OUTPUTS and v != [] for k, v in obj.items())


#: The keys of a generate response object that are not outputs.
_NOT_OUTPUTS = frozenset({"model_name", "model_version", "id", "parameters"})


@dataclasses.dataclass(frozen=True)
class _Request:
    """What every generation of a profile sends (``generate_stream``'s arguments)."""

    model: str
    fields: Mapping[str, Any]
    version: str | None
    timeout: float | None


async def _one(client: AsyncClient, request: _Request) -> _Timing:
    """Send one generation and time its responses."""
    start = time.perf_counter()
    tokens: list[float] = []
    stream = client.generate_stream(
        request.model, request.fields, version=request.version, timeout=request.timeout
    )
    async for obj in stream:
        if _is_token(obj):
            tokens.append(time.perf_counter() - start)
    return _Timing(tokens, time.perf_counter() - start)


async def _setting(
    client: AsyncClient, request: _Request, concurrency: int, duration: float
) -> dict[str, Any]:
    """One row: ``concurrency`` workers sending generations back to back for ``duration`` s.

    Every worker's warm-up request ends before the clock starts; each worker then sends at
    least one timed request.
    """
    timings: list[_Timing] = []
    errors: list[str] = []

    async def worker(stop: float) -> None:
        while True:
            try:
                timings.append(await _one(client, request))
            except NbinferError as exc:
                errors.append(str(exc).split("\n\n")[0])
            if time.perf_counter() >= stop:
                return

    await asyncio.gather(*(_one(client, request) for _ in range(concurrency)))  # warm-up
    start = time.perf_counter()
    await asyncio.gather(*(worker(start + duration) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return _row(concurrency, timings, errors, elapsed)


def _pct(values: Sequence[float], p: float) -> float:
    return float(np.percentile(values, p)) * 1e3 if len(values) else float("nan")


def _row(
    concurrency: int, timings: list[_Timing], errors: list[str], elapsed: float
) -> dict[str, Any]:
    ttft = [t.tokens[0] for t in timings if t.tokens]
    itl = [b - a for t in timings for a, b in zip(t.tokens, t.tokens[1:], strict=False)]
    latency = [t.end for t in timings]
    tokens = sum(len(t.tokens) for t in timings)
    return {
        "concurrency": concurrency,
        "requests": len(timings),
        "errors": len(errors),
        "ttft_avg_ms": float(np.mean(ttft)) * 1e3 if ttft else float("nan"),
        "ttft_p50_ms": _pct(ttft, 50),
        "ttft_p90_ms": _pct(ttft, 90),
        "ttft_p99_ms": _pct(ttft, 99),
        "itl_avg_ms": float(np.mean(itl)) * 1e3 if itl else float("nan"),
        "itl_p50_ms": _pct(itl, 50),
        "itl_p99_ms": _pct(itl, 99),
        "latency_avg_ms": float(np.mean(latency)) * 1e3 if latency else float("nan"),
        "latency_p50_ms": _pct(latency, 50),
        "latency_p90_ms": _pct(latency, 90),
        "latency_p99_ms": _pct(latency, 99),
        "output_tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
        "requests_per_s": len(timings) / elapsed if elapsed > 0 else 0.0,
        "tokens_per_request": tokens / len(timings) if timings else float("nan"),
        "first_error": errors[0] if errors else "",
    }


def profile_stream(
    url: str,
    model: str,
    prompt: str | None = None,
    *,
    concurrency: Sequence[int] | int = (1, 2, 4),
    duration: float = 2.0,
    protocol: Literal["http", "grpc"] | None = None,
    model_version: str = "",
    timeout: float | None = None,
    client_options: Mapping[str, Any] | None = None,
    **fields: Any,
) -> StreamProfileFrame:
    """Profile a streaming model at ``url``: TTFT, ITL, tokens/s, latency percentiles.

    Each request is ``generate_stream(model, text_input=prompt, **fields)`` (the prompt goes to
    ``text_input``, or to the model's one BYTES input).

    Args:
        url: The server (``http://host:8000`` or ``grpc://host:8001``).
        model: A decoupled (streaming) model taking a prompt.
        prompt: What every request sends (default: ``"Hello"``).
        concurrency: Generations in flight, one row per value.
        duration: Seconds of load per setting (after one warm-up request per worker).
        protocol: ``"http"`` (the generate extension's Server-Sent Events) or ``"grpc"`` (the
            decoupled ``ModelStreamInfer`` stream); default: the URL's (as a client reads it).
        model_version: The model version.
        timeout: Per-request deadline in seconds.
        client_options: Passed to :class:`~nbinfer.AsyncClient` (auth, headers, ...).
        **fields: The generate request's other fields: the model's inputs by name
            (``max_tokens=32``), else request parameters.

    Raises:
        InvalidInputError: No settings, a non-positive duration, an unknown protocol, or no
            prompt input.
        NbinferError: The server cannot be reached, the model is unknown, or (HTTP) the server
            has no generate extension.
    """
    given = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    if not given:
        raise InvalidInputError("concurrency needs at least one level, got none")
    levels = [count_option("concurrency", c) for c in given]
    if not duration > 0:
        raise InvalidInputError(f"duration must be positive, got {duration!r}")
    if protocol not in (None, "http", "grpc"):
        raise InvalidInputError(f"protocol must be 'http' or 'grpc', got {protocol!r}")
    options = dict(client_options or {})
    if protocol is not None:
        options["protocol"] = protocol

    async def run() -> list[dict[str, Any]]:
        async with AsyncClient(url, **options) as client:
            meta = await client.get_model_metadata(model, model_version)
            text = "Hello" if prompt is None else prompt
            request = _Request(
                model, {_prompt_field(meta): text, **fields}, model_version or None, timeout
            )
            return [await _setting(client, request, c, duration) for c in levels]

    # A thread of its own: a notebook already runs an event loop in the main thread.
    with concurrent.futures.ThreadPoolExecutor(1, "nbinfer-profile-stream") as pool:
        rows = pool.submit(asyncio.run, run()).result()
    return StreamProfileFrame(rows, columns=list(STREAM_COLUMNS))
