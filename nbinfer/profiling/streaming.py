"""Profiling a streaming (generative) model: what genai-perf reports, per concurrency.

For each concurrency, that many workers each send one generation after another for ``duration``
seconds (after one warm-up request each); every response is timed as it arrives. A row says:

* ``ttft_*_ms``: time to first token (avg, p50, p90, p99);
* ``itl_*_ms``: inter-token latency, the gaps between a request's tokens (avg, p50, p99);
* ``latency_*_ms``: request latency, from sending to the last response (avg, p50, p90, p99);
* ``output_tokens_per_s``: tokens received per second by all workers together;
  ``requests_per_s``; ``tokens_per_request`` (the output sequence length, mean);
* ``requests``, ``errors`` and the ``first_error``.

A token is a response that carries text (one token per response on streaming LLM backends and
the demo ``story`` model). The stream is gRPC ``ModelStreamInfer`` (see the ``SEAM`` marker);
the load runs on its own thread and event loop, as :func:`nbinfer.profiling.profile` does.

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
from typing import Any

import numpy as np
import pandas as pd

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.protocol.dtypes import numpy_dtype
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


def _inputs(
    meta: ModelMetadata, prompt: str, fields: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The prompt and ``fields`` as inputs by name; the fields no input has, as parameters."""
    specs = {spec.name: spec for spec in meta.inputs}
    prompt_input = "text_input" if "text_input" in specs else None
    if prompt_input is None:
        texts = [s.name for s in meta.inputs if s.datatype == "BYTES"]
        if len(texts) != 1:
            raise InvalidInputError(
                f"model {meta.name!r}: no 'text_input' and not one BYTES input for the prompt"
            )
        prompt_input = texts[0]
    inputs: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for name, value in {prompt_input: prompt, **fields}.items():
        spec = specs.get(name)
        if spec is None:
            params[name] = value
            continue
        shape = [d if d > 0 else 1 for d in spec.shape]
        if spec.datatype == "BYTES":
            data = value.encode("utf-8") if isinstance(value, str) else value
            arr = np.array([data], dtype=object)
        else:
            arr = np.asarray([value], dtype=numpy_dtype(spec.datatype))
        inputs[name] = arr.reshape(shape) if int(np.prod(shape)) == arr.size else arr
    return inputs, params


async def _one(client: AsyncClient, request: Any, timeout: float | None) -> _Timing:
    """Send one generation and time its responses."""
    # SEAM(generate_stream): client.generate_stream(...) gives the same responses over HTTP.
    start = time.perf_counter()
    tokens: list[float] = []
    async for result in client.stream_infer([request], timeout=timeout):
        if any(result.as_numpy(name).size for name in result.output_names):
            tokens.append(time.perf_counter() - start)
    return _Timing(tokens, time.perf_counter() - start)


async def _setting(
    client: AsyncClient, request: Any, concurrency: int, duration: float, timeout: float | None
) -> dict[str, Any]:
    """One row: ``concurrency`` workers sending generations back to back for ``duration`` s."""
    timings: list[_Timing] = []
    errors: list[str] = []

    async def worker(stop: float) -> None:
        await _one(client, request, timeout)  # warm-up
        while time.perf_counter() < stop:
            try:
                timings.append(await _one(client, request, timeout))
            except NbinferError as exc:
                errors.append(str(exc).split("\n\n")[0])

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
    model_version: str = "",
    timeout: float | None = None,
    client_options: Mapping[str, Any] | None = None,
    **fields: Any,
) -> StreamProfileFrame:
    """Profile a streaming model at ``url`` (gRPC): TTFT, ITL, tokens/s, latency percentiles.

    Args:
        url: The server's gRPC address (``grpc://host:8001``).
        model: A decoupled (streaming) model taking a prompt (``text_input``).
        prompt: What every request sends (default: ``"Hello"``).
        concurrency: Generations in flight, one row per value.
        duration: Seconds of load per setting (after one warm-up request per worker).
        model_version: The model version.
        timeout: Per-request deadline in seconds.
        client_options: Passed to :class:`~nbinfer.AsyncClient` (auth, headers, ...).
        **fields: The model's inputs by name (``max_tokens=32``), else request parameters.

    Raises:
        InvalidInputError: No settings, a non-positive duration, or no prompt input.
        NbinferError: The server cannot be reached or the model is unknown.
    """
    levels = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    if not levels or any(not isinstance(c, int) or c < 1 for c in levels):
        raise InvalidInputError(f"concurrency must be positive ints, got {concurrency!r}")
    if not duration > 0:
        raise InvalidInputError(f"duration must be positive, got {duration!r}")
    options = {**(client_options or {}), "protocol": "grpc"}

    async def run() -> list[dict[str, Any]]:
        async with AsyncClient(url, **options) as client:
            meta = await client.get_model_metadata(model, model_version)
            inputs, params = _inputs(meta, "Hello" if prompt is None else prompt, fields)
            request = await client.build_request(
                model, inputs, model_version=model_version, parameters=params
            )
            return [await _setting(client, request, c, duration, timeout) for c in levels]

    # A thread of its own: a notebook already runs an event loop in the main thread.
    with concurrent.futures.ThreadPoolExecutor(1, "nbinfer-profile-stream") as pool:
        rows = pool.submit(asyncio.run, run()).result()
    return StreamProfileFrame(rows, columns=list(STREAM_COLUMNS))
