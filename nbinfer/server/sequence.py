"""The sequence extension: per-sequence state for stateful models.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

A model is stateful when it sets ``stateful = True`` or its config has ``sequence_batching``.
Requests to it carry the parameters ``sequence_id`` (uint64 or string), ``sequence_start`` and
``sequence_end``; the model's hooks see them on the :class:`~nbinfer.server.model.InferContext`
together with ``context.state``, a dict that persists across the calls of one sequence. The state
is dropped at ``sequence_end`` or once the sequence has been idle for longer than
``max_sequence_idle_microseconds`` (a model attribute or ``sequence_batching`` setting;
default 60 s). Requests of one sequence run one at a time, in arrival order.

Example::

    class Accumulate(Model):
        stateful = True
        ...
        def predict(self, inputs, context):
            context.state["sum"] = context.state.get("sum", 0) + inputs["INPUT"].sum()
            return {"OUTPUT": np.array([context.state["sum"]])}
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nbinfer.errors import InvalidInputError, QueueFullError
from nbinfer.protocol.types import Parameters

__all__ = [
    "DEFAULT_MAX_SEQUENCES",
    "DEFAULT_MAX_SEQUENCE_IDLE_US",
    "DEFAULT_MAX_SEQUENCE_ID_BYTES",
    "SequenceManager",
    "SequenceSlot",
    "is_stateful",
    "parse_sequence",
    "sequence_idle_us",
    "sequence_strategy",
]

logger = logging.getLogger("nbinfer")

#: Default idle time after which an unfinished sequence's state is dropped (60 s).
DEFAULT_MAX_SEQUENCE_IDLE_US = 60_000_000
#: Default of ``--max-sequences``: open sequences of all stateful models together.
DEFAULT_MAX_SEQUENCES = 1000
#: Default of ``--max-sequence-id-bytes``: the longest string ``sequence_id`` (UTF-8 bytes).
DEFAULT_MAX_SEQUENCE_ID_BYTES = 256

_UINT64_MAX = (1 << 64) - 1


def is_stateful(model: Any, config: Mapping[str, Any]) -> bool:
    """Whether a model keeps per-sequence state (``stateful = True`` or ``sequence_batching``)."""
    return bool(getattr(model, "stateful", False)) or bool(config.get("sequence_batching"))


def sequence_idle_us(model: Any, config: Mapping[str, Any]) -> int:
    """The model's ``max_sequence_idle_microseconds`` (attribute, then config, then default)."""
    value = getattr(model, "max_sequence_idle_microseconds", None)
    if value is None:
        sb = config.get("sequence_batching")
        if isinstance(sb, Mapping):
            value = sb.get("max_sequence_idle_microseconds")
    try:
        number = int(value) if value is not None else 0
    except (TypeError, ValueError):
        number = 0
    return number if number > 0 else DEFAULT_MAX_SEQUENCE_IDLE_US


def _flag(params: Parameters, key: str, model: str) -> bool:
    value = params.get(key, False)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise InvalidInputError(
        f"request parameter {key!r} of model {model!r} must be a boolean, got {value!r}",
        model=model,
    )


def parse_sequence(
    params: Parameters, model: str, *, max_id_bytes: int = DEFAULT_MAX_SEQUENCE_ID_BYTES
) -> tuple[int | str | None, bool, bool]:
    """``(sequence_id, start, end)`` from request parameters; the id is None when absent / 0.

    Raises:
        InvalidInputError: a malformed id (not a uint64 or a string, or a string longer than
            ``max_id_bytes`` UTF-8 bytes) or flag.
    """
    raw = params.get("sequence_id")
    seq_id: int | str | None
    if raw is None or raw == "" or raw == 0:
        seq_id = None
    elif isinstance(raw, bool) or not isinstance(raw, int | str):
        raise InvalidInputError(
            f"request parameter 'sequence_id' of model {model!r} must be a uint64 or a string, "
            f"got {raw!r}",
            model=model,
        )
    elif isinstance(raw, int) and not 0 < raw <= _UINT64_MAX:
        raise InvalidInputError(
            f"request parameter 'sequence_id' of model {model!r} must be a uint64, got {raw}",
            model=model,
        )
    elif (
        isinstance(raw, str)
        and max_id_bytes
        and len(raw.encode("utf-8", "surrogatepass")) > (max_id_bytes)
    ):
        size = len(raw.encode("utf-8", "surrogatepass"))
        raise InvalidInputError(
            f"request parameter 'sequence_id' of model {model!r} is a string of {size} bytes, "
            f"longer than the server's limit of {max_id_bytes} (--max-sequence-id-bytes)",
            model=model,
        )
    else:
        seq_id = raw
    return seq_id, _flag(params, "sequence_start", model), _flag(params, "sequence_end", model)


@dataclass(eq=False)
class SequenceSlot:
    """The live state of one sequence: the model's ``state`` dict and an ordering lock."""

    key: Hashable
    sequence_id: int | str
    idle_ns: int
    state: dict[str, Any] = field(default_factory=dict)
    last_used: int = field(default_factory=time.monotonic_ns)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended: bool = False

    def expired(self, now: int) -> bool:
        """Whether the sequence has been idle (not running) for longer than its timeout."""
        return not self.lock.locked() and now - self.last_used > self.idle_ns


class SequenceManager:
    """The active sequences of a server, by ``(model, version, sequence_id)``.

    A background task (on the loop that first used a sequence) drops idle sequences; a lookup
    also treats an expired sequence as unknown, so correctness never waits for the sweep.

    Args:
        sweep_interval_s: Seconds between sweeps of idle sequences.
        max_sequences: Most open sequences (0: unbounded); starting one more is refused with
            :class:`~nbinfer.errors.QueueFullError` (HTTP 503, gRPC ``RESOURCE_EXHAUSTED``)
            while the open ones keep working.
        max_id_bytes: Longest string ``sequence_id`` in UTF-8 bytes (see :func:`parse_sequence`).
    """

    def __init__(
        self,
        *,
        sweep_interval_s: float = 1.0,
        max_sequences: int = DEFAULT_MAX_SEQUENCES,
        max_id_bytes: int = DEFAULT_MAX_SEQUENCE_ID_BYTES,
    ) -> None:
        self.max_sequences = max(0, max_sequences)
        self.max_id_bytes = max(0, max_id_bytes)
        self._swept_at = 0
        self._slots: dict[Hashable, SequenceSlot] = {}
        self._sweep_interval = sweep_interval_s
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._slots)

    def acquire(
        self,
        model: str,
        version: str,
        sequence_id: int | str | None,
        *,
        start: bool,
        idle_us: int,
    ) -> SequenceSlot:
        """The slot of a request (a fresh one at ``sequence_start``).

        Raises:
            InvalidInputError: no ``sequence_id``, or a non-start request for a sequence that is
                not active.
            QueueFullError: a new sequence while ``max_sequences`` are open.
        """
        if sequence_id is None:
            raise InvalidInputError(
                f"inference request to model {model!r} must specify a non-zero or non-empty "
                "correlation ID (the model is stateful: requests need a 'sequence_id' "
                "parameter, and 'sequence_start': true on the first request of a sequence)",
                model=model,
            )
        self._ensure_sweeper()
        key = (model, version, sequence_id)
        now = time.monotonic_ns()
        slot = self._slots.get(key)
        if slot is not None and slot.expired(now):
            self._slots.pop(key, None)
            slot = None
        if start:
            if slot is not None and not slot.lock.locked():
                logger.info("sequence %r of model %r restarted", sequence_id, model)
            elif slot is None:
                self._check_room(model)
            slot = SequenceSlot(key, sequence_id, idle_us * 1000)
            self._slots[key] = slot
        elif slot is None:
            raise InvalidInputError(
                f"inference request for sequence {sequence_id} to model {model!r} must specify "
                "the START flag on the first request of the sequence (sequence "
                f"{sequence_id!r} is not active: start it with 'sequence_start': true; it may "
                f"have ended, or been idle for longer than {idle_us / 1e6:g} s)",
                model=model,
            )
        slot.last_used = now
        return slot

    def _check_room(self, model: str) -> None:
        """Refuse a new sequence at the cap (after dropping the idle ones)."""
        cap = self.max_sequences
        if not cap or len(self._slots) < cap:
            return
        now = time.monotonic_ns()
        if now - self._swept_at > 100_000_000:  # at most ten sweeps a second at the cap
            self.sweep()
        if len(self._slots) >= cap:
            raise QueueFullError(
                f"cannot start a sequence of model {model!r}: {len(self._slots)} sequences are "
                f"open, the server's limit is {cap} (--max-sequences); end finished sequences "
                "with 'sequence_end': true, or retry once idle ones time out",
                model=model,
            )

    def release(self, slot: SequenceSlot, *, end: bool) -> None:
        """Mark a request of ``slot`` done; ``end`` drops the sequence's state."""
        slot.last_used = time.monotonic_ns()
        if end:
            slot.ended = True
            if self._slots.get(slot.key) is slot:
                del self._slots[slot.key]

    def drop_model(self, model: str) -> None:
        """Forget every sequence of ``model`` (it was unloaded)."""
        for key in [k for k in self._slots if isinstance(k, tuple) and k[0] == model]:
            del self._slots[key]

    def sweep(self) -> int:
        """Drop idle sequences now; returns how many were dropped."""
        now = self._swept_at = time.monotonic_ns()
        gone = [k for k, s in self._slots.items() if s.expired(now)]
        for key in gone:
            slot = self._slots.pop(key)
            logger.info(
                "sequence %r of model %r dropped after %.3g s idle",
                slot.sequence_id,
                key[0] if isinstance(key, tuple) else key,
                (now - slot.last_used) / 1e9,
            )
        return len(gone)

    def _ensure_sweeper(self) -> None:
        loop = asyncio.get_running_loop()
        task = self._sweeper
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self._sweeper = loop.create_task(self._sweep_forever())

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval)
            self.sweep()

    async def close(self) -> None:
        """Stop the sweeper and drop every sequence. Idempotent."""
        task, self._sweeper = self._sweeper, None
        if task is not None and not task.done():
            task.cancel()
            if task.get_loop() is asyncio.get_running_loop():
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._slots.clear()


def sequence_strategy(
    sequence_batching: Mapping[str, Any], max_batch_size: int, what: str
) -> tuple[dict[str, Any] | None, int]:
    """The batching settings of a ``sequence_batching`` section (Triton's sequence batcher).

    ``direct`` (the default) and ``oldest`` both put the waiting requests of different
    sequences (one each) in one execution, up to ``max_batch_size`` rows; ``oldest`` also up
    to ``max_candidate_sequences``, and takes ``preferred_batch_size`` and
    ``max_queue_delay_microseconds`` as the dynamic batcher does. Returns the dynamic-batching
    settings and the largest batch (``None``: no batching, ``max_batch_size`` 0).
    """
    if max_batch_size <= 0:
        return None, max_batch_size
    oldest = sequence_batching.get("oldest")
    direct = sequence_batching.get("direct")
    strategy = oldest if oldest is not None else direct
    if strategy is None:
        strategy = {}
    if not isinstance(strategy, Mapping):
        raise InvalidInputError(f"{what} strategy must be a mapping, got {strategy!r}")
    raw: dict[str, Any] = {
        "max_queue_delay_microseconds": strategy.get("max_queue_delay_microseconds", 0)
    }
    cap = max_batch_size
    if oldest is not None:
        raw["preferred_batch_size"] = strategy.get("preferred_batch_size") or []
        raw_candidates = strategy.get("max_candidate_sequences", 0)
        try:
            candidates = int(raw_candidates)
        except (TypeError, ValueError):
            candidates = -1
        if candidates < 0 or isinstance(raw_candidates, bool | float):
            raise InvalidInputError(
                f"{what}.oldest.max_candidate_sequences must be an integer >= 0, "
                f"got {raw_candidates!r}"
            )
        if candidates:
            cap = min(cap, candidates)
    return raw, cap
