"""Heavy request work off the event loop, and the budget of request bytes in flight.

Layer: the server (imports ``nbinfer.errors`` and the standard library); never a frontend.

HTTP and gRPC share one event loop, so work proportional to a request (inflating a compressed
body, parsing a large JSON document or protobuf message, base64 uploads) would freeze every
other client while it runs. The frontends hand such work to :func:`off_loop` once a request is
larger than :data:`OFFLOAD_BYTES`; smaller requests stay inline (a thread hop would cost them
more than it saves). :class:`InflightBytes` bounds the request bytes held by all connections at
once (``--max-inflight-bytes``): a request that would go past it is refused at once with
:class:`~nbinfer.errors.QueueFullError` (HTTP 503, gRPC ``RESOURCE_EXHAUSTED``) naming the limit.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from nbinfer.errors import InvalidInputError, PayloadTooLargeError, QueueFullError

__all__ = [
    "DEFAULT_MAX_PARAMETERS",
    "OFFLOAD_BYTES",
    "InflightBytes",
    "Reservation",
    "inflate",
    "off_loop",
]

_T = TypeVar("_T")

#: Default of ``--max-parameters``: parameters one inference request may carry (its own, its
#: inputs' and its outputs'; the data plane refuses more).
DEFAULT_MAX_PARAMETERS = 1000
#: From this size on (a request body, its JSON part or a protobuf message) decoding runs on a
#: worker thread; below it the work is a few milliseconds at most and stays on the loop.
OFFLOAD_BYTES = 64 * 1024
#: Output produced per inflate step (each step releases the GIL and checks the limit).
_INFLATE_STEP = 1 << 20
#: Threads decoding requests at once (beyond them requests wait their turn: the bytes are
#: already bounded by ``--max-inflight-bytes``; more threads would only contend for the GIL).
_DECODE_THREADS = 4

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_DECODE_THREADS, thread_name_prefix="nbinfer-decode")
        return _pool


async def off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """Run ``fn(*args)`` on the request-decoding threads and await its result."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), fn, *args)


class InflightBytes:
    """The request bytes all connections hold at once, bounded by ``limit`` (thread-safe).

    Args:
        limit: Most bytes in flight (0: unbounded).
        flag: The option that sets the limit, named in the refusal.
    """

    def __init__(self, limit: int, *, flag: str = "--max-inflight-bytes") -> None:
        self.limit = max(0, int(limit))
        self.flag = flag
        self.used = 0
        self._lock = threading.Lock()

    def reservation(self) -> Reservation:
        """A new, empty reservation (release it when the request is done)."""
        return Reservation(self)

    def _take(self, n: int) -> None:
        with self._lock:
            if self.limit and self.used + n > self.limit:
                used = self.used
                raise QueueFullError(
                    f"server busy: {used} bytes of requests are in flight and this request "
                    f"needs {n} more, above the limit of {self.limit} bytes "
                    f"({self.flag}); retry later"
                )
            self.used += n

    def _give(self, n: int) -> None:
        with self._lock:
            self.used -= n


class Reservation:
    """The bytes one request holds of an :class:`InflightBytes` budget."""

    __slots__ = ("_budget", "held")

    def __init__(self, budget: InflightBytes) -> None:
        self._budget = budget
        self.held = 0

    def take(self, n: int) -> None:
        """Hold ``n`` more bytes.

        Raises:
            QueueFullError: the budget has no room for them (nothing is taken).
        """
        if n > 0:
            self._budget._take(n)
            self.held += n

    def give(self, n: int) -> None:
        """Give ``n`` of the held bytes back (the data they stood for was dropped)."""
        n = min(n, self.held)
        if n > 0:
            self.held -= n
            self._budget._give(n)

    def release(self) -> None:
        """Give every held byte back. Idempotent."""
        held, self.held = self.held, 0
        if held:
            self._budget._give(held)


def inflate(
    body: bytes,
    encoding: bytes,
    limit: int,
    reservation: Reservation | None = None,
    flag: str = "--max-request-bytes",
) -> bytes:
    """Inflate a gzip / deflate body step by step, stopping as soon as it passes ``limit``.

    A compression bomb never grows past ``limit`` (+ one step): each step inflates at most
    1 MiB, and ``reservation`` (when given) holds the inflated bytes against the in-flight
    budget as they appear. ``flag`` is the option that sets ``limit``, named in the refusal.

    Raises:
        InvalidInputError: an unknown encoding, or data that is not valid ``encoding`` data.
        PayloadTooLargeError: the inflated body is larger than ``limit`` (413).
        QueueFullError: the in-flight budget has no room for the inflated bytes.
    """
    enc = encoding.strip().lower()
    if enc in (b"", b"identity"):
        return body
    if enc not in (b"gzip", b"x-gzip", b"deflate"):
        raise InvalidInputError(
            f"unsupported Content-Encoding {encoding.decode('latin-1')!r}; use gzip or deflate"
        )
    try:
        try:  # 32 + 15: auto-detect gzip or zlib framing; raw deflate as a fallback
            return _inflate(zlib.decompressobj(47), body, limit, reservation, flag)
        except zlib.error:
            if enc != b"deflate":
                raise
            return _inflate(zlib.decompressobj(-15), body, limit, reservation, flag)
    except zlib.error as exc:
        raise InvalidInputError(f"request body is not valid {enc.decode()} data: {exc}") from exc


def _inflate(d: Any, body: bytes, limit: int, reservation: Reservation | None, flag: str) -> bytes:
    parts: list[bytes] = []
    try:
        return _steps(d, body, limit, reservation, flag, parts)
    except BaseException:
        if reservation is not None:
            reservation.give(sum(len(p) for p in parts))  # what this attempt held
        raise


def _steps(
    d: Any,
    data: bytes,
    limit: int,
    reservation: Reservation | None,
    flag: str,
    parts: list[bytes],
) -> bytes:
    total = 0
    while True:
        chunk = d.decompress(data, _INFLATE_STEP)
        data = d.unconsumed_tail
        if chunk:
            total += len(chunk)
            if total > limit:
                raise PayloadTooLargeError(
                    f"decompressed request body exceeds the server limit of {limit} bytes "
                    f"({flag}); the rest was not inflated"
                )
            if reservation is not None:
                reservation.take(len(chunk))
            parts.append(chunk)
        if not data and (d.eof or not chunk):
            break
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)
