"""The load profiler's sweep: each setting warmed up, measured in windows until stable, summed up.

:func:`profile` runs the settings (concurrency levels or request rates) one after the other on
a :class:`~nbinfer.profiling.load.Load` (its load sent from threads with a sync client; the
monitor, in a thread of its own since notebooks already run an event loop, is asyncio),
reports each step as a :class:`ProfileProgress`, turns the trailing stable windows into one row
each (client and server time split, saturation of the load generator) and returns a
:class:`~nbinfer.profiling.frame.ProfileFrame`. :func:`run_profile` is ``nbinfer profile``.

Layer: part of ``nbinfer.profiling``; imports ``nbinfer.errors``, ``protocol``, ``client`` and
``interop``; the renderer ``nbinfer.render.profile`` only lazily, for ``--png``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nbinfer.client import AsyncClient, Client
from nbinfer.errors import InvalidInputError, NbinferError, UnsupportedError, count_option
from nbinfer.interop._inflight import progress_bar
from nbinfer.profiling.frame import CLIENT_PARTS, COLUMNS, PERCENTILES, SERVER_PARTS, ProfileFrame
from nbinfer.profiling.load import Load, Options, Window, random_inputs, request_rows
from nbinfer.profiling.shm import RATE_SLOTS, shared_memory_mode, shared_memory_slots

__all__ = ["STABLE_WINDOWS", "ProfileProgress", "profile", "run_profile", "setting_label"]

logger = logging.getLogger("nbinfer")

#: A client process busier than this (fraction of one core) is reported as saturated.
SATURATED_CPU = 0.9
#: Load-generator threads busy (on a CPU or waiting for one) this fraction of the time are
#: what sets the pace: their own work is as long as a good part of the wait for the server
#: (Python's threads share one interpreter lock, so about one core is all they can use).
SATURATED_GENERATOR = 0.4
#: Open loop: sender threads (the requests that can be in flight at once) without shared memory.
OPEN_LOOP_SENDERS = 32
#: Open loop: a send later than this behind its schedule (p99) means the client fell behind.
SATURATED_LAG = 0.005
#: How many trailing windows must agree (perf_analyzer's criterion).
STABLE_WINDOWS = 3


@dataclass(frozen=True)
class ProfileProgress:
    """Where a profile run is, handed to a ``progress=`` callable at every step.

    ``phase`` is ``"connect"`` (metadata and inputs, before the first setting), ``"warm-up"``
    (load running, not counted), ``"measure"`` (after each window) or ``"done"`` (the
    setting's row is ready). ``setting`` is ``"c=4"`` or ``"200/s"``; ``throughput`` (infer/s)
    and ``latency_ms`` (mean) are the last window's while measuring (NaN before the first),
    the row's when done.
    """

    phase: str
    setting: str
    index: int
    settings: int
    window: int = 0
    max_windows: int = 0
    throughput: float = float("nan")
    latency_ms: float = float("nan")
    stable: bool = False

    def __str__(self) -> str:
        where = f"{self.setting} ({self.index + 1}/{self.settings})" if self.setting else ""
        if self.phase == "connect":
            return "connecting"
        if self.phase == "warm-up":
            return f"{where}: warm-up"
        numbers = f"{self.throughput:,.0f} infer/s, {self.latency_ms:.2f} ms"
        if self.phase == "measure":
            return f"{where}: window {self.window}/{self.max_windows}, {numbers}"
        return f"{where}: {numbers}, {'stable' if self.stable else 'not stable'}"


def setting_label(mode: str, value: float) -> str:
    """How a setting is named: ``c=4`` (concurrency) or ``200/s`` (request rate)."""
    return f"{value:g}/s" if mode == "rate" else f"c={int(value)}"


def _stable(windows: Sequence[Window], tolerance: float) -> bool:
    """The last windows agree within ``tolerance`` on throughput and mean latency."""
    if len(windows) < STABLE_WINDOWS:
        return False
    last = windows[-STABLE_WINDOWS:]
    for values in ([w.rate for w in last], [w.mean for w in last]):
        low, high = min(values), max(values)
        if low <= 0 or high > low * (1.0 + tolerance):
            return False
    return True


async def _measure(
    load: Load, mode: str, value: float, tell: Callable[[str, list[Window]], None]
) -> tuple[dict[str, tuple[int, int]] | None, list[Window]]:
    """Warm up, then measure windows until stable or capped; ``tell(phase, windows)`` each step.

    Returns the server statistics before the first window and the windows (each holding the
    cumulative statistics at its end).
    """
    if load.sync is None:
        return await _measure_tasks(load, mode, value, tell)
    stop = threading.Event()
    if mode == "concurrency":
        load.start_closed(int(value), stop)
    else:
        senders = len(load.slots) if load.slots else OPEN_LOOP_SENDERS
        load.start_open(float(value), stop, senders)
    interrupted = True
    try:
        windows = await _windows(load, tell, lambda: False)
        interrupted = False
        return windows
    finally:
        stop.set()
        if interrupted:  # the stop button: cut the calls in flight (the server cancels them)
            load.sync._abort_in_flight()
        await asyncio.to_thread(load.join)


async def _windows(
    load: Load, tell: Callable[[str, list[Window]], None], ended: Callable[[], bool]
) -> tuple[dict[str, tuple[int, int]] | None, list[Window]]:
    """Warm up, then close a window every ``opts.window`` seconds until stable or capped."""
    opts = load.opts
    tell("warm-up", [])
    await asyncio.sleep(opts.warmup)
    before = await load.server_stats()
    load.take(0.0, 0.0)
    windows: list[Window] = []
    wall, cpu, gen = time.perf_counter(), time.process_time(), load.clock.read()
    while len(windows) < opts.max_windows and not ended():
        await asyncio.sleep(opts.window)
        # Every boundary as the first: the server's snapshot, then the client's cut as soon as it
        # arrives. The server's counts then cover the client's window shifted by one reply's
        # transit at each end; cutting first and asking after (as this did) widened them by a
        # whole round trip plus that transit, so a busy machine saw ~10 % more server requests.
        stats = await load.server_stats()
        now, now_cpu, now_gen = time.perf_counter(), time.process_time(), load.clock.read()
        window = load.take(now - wall, now_cpu - cpu, now_gen - gen)
        wall, cpu, gen = now, now_cpu, now_gen
        window.stats = stats
        windows.append(window)
        tell("measure", windows)
        if _stable(windows, opts.stability):
            break
    return before, windows


async def _measure_tasks(
    load: Load, mode: str, value: float, tell: Callable[[str, list[Window]], None]
) -> tuple[dict[str, tuple[int, int]] | None, list[Window]]:
    """:func:`_measure` with the load as asyncio tasks (its generator: the whole process)."""
    stop = asyncio.Event()
    if mode == "concurrency":
        task = asyncio.create_task(load.closed(int(value), stop))
    else:
        task = asyncio.create_task(load.opened(float(value), stop))
    load.clock.per_thread = False  # one thread does everything: count the process
    try:
        return await _windows(load, tell, task.done)
    finally:
        stop.set()
        await task


def _ms(values: Sequence[float]) -> float:
    return float(np.mean(values)) * 1e3 if len(values) else float("nan")


def _summarise(
    windows: list[Window], before: dict[str, tuple[int, int]] | None, rows: int
) -> dict[str, Any]:
    """One result row from the trailing (stable) windows."""
    last = windows[-STABLE_WINDOWS:]
    latency = np.concatenate([np.asarray(w.latency, dtype=float) for w in last]) * 1e3
    elapsed = sum(w.elapsed for w in last)
    row: dict[str, Any] = {
        "requests": int(latency.size),
        "errors": sum(w.errors for w in last),
        "throughput": latency.size * rows / elapsed if elapsed else 0.0,
        "latency_avg_ms": float(latency.mean()) if latency.size else float("nan"),
        "latency_max_ms": float(latency.max()) if latency.size else float("nan"),
        "windows": len(windows),
        "send_rate": sum(w.sent for w in last) / elapsed if elapsed else 0.0,
        "client_cpu": sum(w.cpu for w in last) / elapsed if elapsed else 0.0,
        "generator_busy": sum(w.generator for w in last) / elapsed if elapsed else 0.0,
        "first_error": next((w.first_error for w in last if w.first_error), ""),
    }
    for p in PERCENTILES:
        row[f"latency_p{p}_ms"] = float(np.percentile(latency, p)) if latency.size else float("nan")
    for part in CLIENT_PARTS:
        row[f"client_{part}_ms"] = _ms([v for w in last for v in getattr(w, part)])
    lag = [v for w in last for v in w.lag]
    row["schedule_lag_p99_ms"] = float(np.percentile(lag, 99)) * 1e3 if lag else float("nan")
    start = before if len(windows) <= STABLE_WINDOWS else windows[-STABLE_WINDOWS - 1].stats
    end = windows[-1].stats
    row["server_requests"] = 0
    for part in SERVER_PARTS:
        row[f"server_{part}_ms"] = float("nan")
    if start is not None and end is not None:
        done = end.get("success", (0, 0))[0] - start.get("success", (0, 0))[0]
        row["server_requests"] = done
        for part in SERVER_PARTS:
            count = end.get(part, (0, 0))[0] - start.get(part, (0, 0))[0]
            ns = end.get(part, (0, 0))[1] - start.get(part, (0, 0))[1]
            row[f"server_{part}_ms"] = ns / count / 1e6 if count > 0 else float("nan")
    return row


def _saturation(row: dict[str, Any], mode: str, value: float) -> str:
    """Why the load generator, not the server, may have set the pace ('' when it did not)."""
    reasons = []
    if row["generator_busy"] >= SATURATED_GENERATOR:
        reasons.append(f"load threads busy {row['generator_busy']:.0%} of the time")
    if row["client_cpu"] >= SATURATED_CPU:
        reasons.append(f"client process at {row['client_cpu']:.0%} of a core")
    if mode == "rate":
        if row["send_rate"] < 0.95 * value:
            reasons.append(f"sent {row['send_rate']:.0f}/s of {value:g}/s scheduled")
        if row["schedule_lag_p99_ms"] > SATURATED_LAG * 1e3:
            reasons.append(f"sends {row['schedule_lag_p99_ms']:.1f} ms behind schedule (p99)")
    return "; ".join(reasons)


async def _run(
    url: str,
    model: str,
    inputs: Any,
    settings: list[tuple[str, float]],
    opts: Options,
    client_options: Mapping[str, Any],
    batch_size: int,
    shm: str,
    report: Callable[[ProfileProgress], None],
) -> list[dict[str, Any]]:
    report(ProfileProgress("connect", "", 0, len(settings), max_windows=opts.max_windows))
    async with AsyncClient(url, **client_options) as client:
        if inputs is None:
            meta = await client.get_model_metadata(model, opts.version)
            inputs = random_inputs(meta, batch_size=batch_size)
        elif _is_frame(inputs):
            from nbinfer.interop.pandas import dataframe_to_inputs

            meta = await client.get_model_metadata(model, opts.version)
            inputs = dataframe_to_inputs(inputs, meta)
        request = await client.build_request(model, inputs, model_version=opts.version)
        rows = request_rows(request)
        regions = None
        if shm == "system":
            count = max(int(v) if m == "concurrency" else RATE_SLOTS for m, v in settings)
            regions = await shared_memory_slots(client, model, request, count)
        sync = _sync_client(url, client_options)
        try:
            return await _sweep(
                Load(client, request, opts, regions.slots if regions else [], sync),
                settings,
                rows,
                shm,
                report,
            )
        finally:
            if sync is not None:
                await asyncio.to_thread(sync.close)
            if regions is not None:
                await regions.release()


def _sync_client(url: str, options: Mapping[str, Any]) -> Client | None:
    """The load's sync client, or None when the options are the AsyncClient's own."""
    engine = options.get("http_engine")
    if options.get("httpx_client") is not None or engine == "aiohttp":
        return None
    try:
        return Client(url, **{"shared_memory": False, **options})
    except (NbinferError, TypeError) as exc:  # options only the AsyncClient takes
        logger.info("profile: load from asyncio tasks (%s)", exc)
        return None


def _progress(
    phase: str, at: tuple[int, int, str], windows: list[Window], rows: int, opts: Options
) -> ProfileProgress:
    """The event for ``phase`` of setting ``at`` = (index, count, label) after ``windows``."""
    last = windows[-1] if windows else None
    return ProfileProgress(
        phase,
        at[2],
        at[0],
        at[1],
        window=len(windows),
        max_windows=opts.max_windows,
        throughput=last.rate * rows if last else float("nan"),
        latency_ms=last.mean * 1e3 if last else float("nan"),
        stable=_stable(windows, opts.stability),
    )


async def _sweep(
    load: Load,
    settings: list[tuple[str, float]],
    rows: int,
    shm: str,
    report: Callable[[ProfileProgress], None],
) -> list[dict[str, Any]]:
    """Measure every setting in turn: one row each."""
    client, model, opts = load.client, load.opts.model, load.opts
    results = []
    for index, (mode, value) in enumerate(settings):
        at = (index, len(settings), setting_label(mode, value))

        def tell(phase: str, windows: list[Window], at: tuple[int, int, str] = at) -> None:
            report(_progress(phase, at, windows, rows, opts))

        before, windows = await _measure(load, mode, value, tell)
        row = _summarise(windows, before, rows)
        row.update(
            mode=mode,
            concurrency=int(value) if mode == "concurrency" else None,
            request_rate=float(value) if mode == "rate" else None,
            batch_size=rows,
            protocol=client.protocol,
            shared_memory=shm,
            model=model,
            stable=_stable(windows, opts.stability),
            stability=opts.stability,
            window_s=opts.window,
        )
        why = _saturation(row, mode, value)
        row["client_saturated"] = bool(why)
        if why:
            logger.warning(
                "profile %s %s=%g: the load generator may be the bottleneck (%s)",
                model,
                mode,
                value,
                why,
            )
        results.append(row)
        done = _progress("done", at, windows, rows, opts)
        report(replace(done, throughput=row["throughput"], latency_ms=row["latency_avg_ms"]))
    return results


def _is_frame(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns")


def _settings(
    concurrency: Sequence[int] | int, request_rate: Sequence[float] | float | None
) -> list[tuple[str, float]]:
    """``[(mode, value), ...]`` in the order given.

    Raises:
        InvalidInputError: No settings, or one that is not positive.
    """
    settings: list[tuple[str, float]]
    if request_rate is not None:
        rates = [request_rate] if isinstance(request_rate, (int, float)) else request_rate
        settings = [("rate", float(r)) for r in rates]
    else:
        levels = [concurrency] if isinstance(concurrency, int | str) else concurrency
        settings = [("concurrency", count_option("concurrency", c)) for c in levels]
    if not settings or any(v <= 0 for _, v in settings):
        raise InvalidInputError(f"profile needs positive settings, got {settings}")
    return settings


def _check(opts: Options) -> None:
    """Refuse timing options that could never measure (a zero window loops for ever)."""
    bad = [
        f"{name}={value!r} (must be {rule})"
        for name, value, ok, rule in (
            ("window", opts.window, opts.window > 0, "> 0 seconds"),
            ("max_windows", opts.max_windows, opts.max_windows >= 1, ">= 1"),
            ("warmup", opts.warmup, opts.warmup >= 0, ">= 0 seconds"),
            ("stability", opts.stability, opts.stability > 0, "> 0, e.g. 0.1 for 10 %"),
        )
        if not ok
    ]
    if bad:
        raise InvalidInputError("profile: " + ", ".join(bad))


def profile(
    url: str,
    model: str,
    inputs: Any = None,
    *,
    concurrency: Sequence[int] | int = (1, 2, 4, 8),
    request_rate: Sequence[float] | float | None = None,
    batch_size: int = 1,
    model_version: str = "",
    window: float = 0.5,
    max_windows: int = 6,
    warmup: float = 0.5,
    stability: float = 0.1,
    timeout: float | None = None,
    progress: bool | Callable[[ProfileProgress], None] | None = None,
    shared_memory: str | bool = "none",
    label: str = "",
    client_options: Mapping[str, Any] | None = None,
) -> ProfileFrame:
    """Profile ``model`` on the v2 server at ``url``: throughput and latency per load setting.

    Args:
        url: The server (``http://...`` or ``grpc://...``).
        model: Model name.
        inputs: ``None`` for random data shaped from the model's metadata, a DataFrame (one
            row per batch element) or ``{name: array}`` / a list of ``InferInput``.
        concurrency: Closed loop: requests kept in flight, one setting per value.
        request_rate: Open loop instead: requests per second, one setting per value; latency
            counts from each request's scheduled send time.
        batch_size: The leading (-1) dimension of generated inputs.
        model_version: Model version ('' for the server's choice).
        window: Seconds per measurement window.
        max_windows: Windows per setting before giving up on stability (the time cap). The
            defaults (0.5 s windows, at most 6, 0.5 s warm-up) take 2-3.5 s per setting, about
            10 s for four; for numbers to publish, measure longer (``window=2``,
            ``max_windows=10``).
        warmup: Seconds of load before measuring each setting.
        stability: Tolerance of the stability criterion (0.1: the last three windows within
            10 % on throughput and mean latency); the row's ``stable`` says if they were.
        timeout: Per-request deadline in seconds.
        progress: Show a progress bar naming the phase (connecting, warm-up, window n, done;
            default: on), ``False`` for none, or a callable given a :class:`ProfileProgress`
            at every step instead of the bar.
        shared_memory: ``"system"`` (or ``True``): tensors go through POSIX shared-memory
            regions, one input and one output region per concurrency slot, instead of the
            requests (perf_analyzer's ``--shared-memory=system``); the server must be on this
            host. ``"none"`` (or ``False``, the default): over the wire.
        label: Names this run in comparisons.
        client_options: Passed to :class:`~nbinfer.AsyncClient` (auth, headers, ssl, ...).

    Raises:
        InvalidInputError: No settings, or inputs that cannot be built for the model.
        UnsupportedError: ``shared_memory="cuda"``, or ``"system"`` on a server without the
            extension or not on this host.
        NbinferError: The server cannot be reached or the model is unknown.
    """
    shm = shared_memory_mode(shared_memory)
    settings = _settings(concurrency, request_rate)
    count_option("batch_size", batch_size)
    opts = Options(model, model_version, window, max_windows, warmup, stability, timeout)
    _check(opts)
    callback = progress if callable(progress) else None
    show = progress is not False and callback is None
    bar = progress_bar(len(settings), show=show, unit="setting", desc=f"profile {model}")

    def report(event: ProfileProgress) -> None:
        if callback is not None:
            callback(event)
        if bar is None:
            return
        bar.set_postfix_str(str(event), refresh=event.phase != "done")
        if event.phase == "done":
            bar.update(1)  # refreshes, with the row's numbers beside the count

    outcome: list[Any] = []
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    stopping, finished = threading.Event(), threading.Event()

    async def driven() -> list[dict[str, Any]]:
        task = asyncio.current_task()
        assert task is not None
        running.append((asyncio.get_running_loop(), task))
        if stopping.is_set():  # interrupted before this task could be cancelled
            raise asyncio.CancelledError
        client = dict(client_options or {})
        return await _run(url, model, inputs, settings, opts, client, batch_size, shm, report)

    def main() -> None:
        try:
            outcome.append(asyncio.run(driven()))
        except BaseException as exc:  # handed to the calling thread below
            outcome.append(exc)
        finally:
            finished.set()

    # A thread of its own: notebooks already run an event loop in the main thread.
    thread = threading.Thread(target=main, name="nbinfer-profile", daemon=True)
    thread.start()
    try:
        while not finished.wait(0.1):
            pass
    except BaseException:
        # Interrupted (the notebook's stop button): stop the load, wait for its cleanup (shm
        # regions released), then let the caller know. An Event, not thread.join(): a join
        # interrupted by KeyboardInterrupt may report the thread finished while it still runs.
        stopping.set()
        for loop, task in running:
            loop.call_soon_threadsafe(task.cancel)
        finished.wait()
        raise
    finally:
        if bar is not None:
            bar.close()
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    frame = ProfileFrame(outcome[0], columns=list(COLUMNS))
    via = frame["protocol"].iloc[0] + (", system shm" if shm == "system" else "")
    frame["run"] = label or f"{model} ({via})"
    return frame


def run_profile(args: Any) -> int:
    """``nbinfer profile``: profile, print the table, write the requested files.

    Exits with 1 if a request failed, 2 (the message on stderr) when the server cannot do what
    was asked (``--shared-memory system`` on a server without it or on another host).
    """
    try:
        frame = profile(
            args.url,
            args.model,
            concurrency=args.concurrency,
            request_rate=args.request_rate,
            batch_size=args.batch_size,
            window=args.window,
            max_windows=args.max_windows,
            warmup=args.warmup,
            stability=args.stability,
            shared_memory=args.shared_memory,
        )
    except UnsupportedError as exc:
        sys.stderr.write(f"nbinfer profile: {exc}\n")
        return 2
    shown = ["mode", "concurrency", "request_rate", "throughput", "latency_p50_ms"]
    shown += ["latency_p99_ms", "errors", "stable", "client_saturated"]
    if args.shared_memory != "none":
        shown.insert(0, "shared_memory")
    sys.stdout.write(frame[shown].to_string(index=False) + "\n")
    if args.csv:
        frame.to_csv(args.csv, index=False)
    if args.json:
        frame.to_json(args.json, orient="records", indent=1)
    if args.png:
        from nbinfer.render.profile import png

        with open(args.png, "wb") as out:
            out.write(png(frame, dpi=110))
    return 1 if frame["errors"].sum() else 0
