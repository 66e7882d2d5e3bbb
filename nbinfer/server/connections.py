"""HTTP connection limits of the embedded server: a uvicorn httptools protocol with bounds.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

httptools buffers a request line and header block for as long as it is sent, and uvicorn has no
header or body read timeout. :func:`limited_protocol` returns a protocol class (one per server)
that enforces :class:`HttpLimits` *before* bytes reach the parser:

* header block larger than ``max_header_bytes`` or with more than ``max_header_count`` fields:
  ``431`` and the connection is closed (the excess is never buffered);
* header block not complete ``header_timeout`` seconds after the connection opened or the
  request's first byte: ``408``;
* body arriving slower than ``min_body_rate`` bytes/s over any ``body_timeout`` window (or not at
  all): ``408``;
* idle keep-alive connections close after ``keep_alive_timeout`` seconds (uvicorn's timer);
* at most ``max_connections`` connections: a new one first evicts the oldest connection that has
  not sent a complete header block, then the oldest idle keep-alive connection; when every
  connection has a request in flight, the new one gets ``503``. The default cap leaves file
  descriptors for gRPC and the models (see :func:`fd_budget`).

A client that disconnects while its request is running gets its request task cancelled, so the
data plane drops queued work and cancels running work (see ``dataplane.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HttpLimits", "fd_budget", "limited_protocol"]

#: File descriptors kept out of every connection cap (models, gRPC internals, logs, pipes).
_MIN_RESERVE = 32


def fd_budget() -> tuple[int, int]:
    """Default ``(http, grpc)`` connection caps from the soft ``RLIMIT_NOFILE``.

    An eighth of the limit (at least 32 descriptors) stays in reserve; HTTP may use two thirds of
    the rest and gRPC one third, so neither frontend can starve the other or the server.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 65536
    usable = max(soft - max(_MIN_RESERVE, soft // 8), 16)
    return max(usable * 2 // 3, 8), max(usable // 3, 4)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Bounds of the HTTP frontend (see the module docstring for what each answers).

    Attributes:
        max_header_bytes: Largest request line + header block (431 beyond).
        max_header_count: Most header fields per request (431 beyond).
        header_timeout: Seconds to send a complete header block (408 after).
        body_timeout: Seconds of a body-read window (408 when a window brings too little).
        min_body_rate: Bytes per second a body must average over each window (0: any byte).
        keep_alive_timeout: Seconds an idle keep-alive connection stays open.
        max_connections: Open HTTP connections at once.
    """

    max_header_bytes: int
    max_header_count: int
    header_timeout: float
    body_timeout: float
    min_body_rate: int
    keep_alive_timeout: float
    max_connections: int


class _TooManyHeaders(Exception):
    pass


def _reply(transport: Any, status: int, reason: bytes, message: str) -> None:
    body = orjson.dumps({"error": message})
    transport.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (status, reason, len(body), body)
    )
    transport.close()


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header / body limits, timeouts and a connection cap."""

    limits: ClassVar[HttpLimits]
    #: Open connections of this server, oldest first (shared by the instances of one subclass).
    open: ClassVar[dict[LimitedHttpToolsProtocol, None]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_headers = True
        self._served = False
        self._header_bytes = 0
        self._header_count = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_bytes = 0
        self._task: asyncio.Task[None] | None = None

    # -- connections ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Register the connection (evicting an idle one at the cap) and arm the header timer."""
        super().connection_made(transport)
        conns = type(self).open
        if len(conns) >= self.limits.max_connections and not self._evict_one():
            self.logger.warning("HTTP connection limit (%d) reached", self.limits.max_connections)
            _reply(
                transport,
                503,
                b"Service Unavailable",
                f"too many connections (limit {self.limits.max_connections}); retry later",
            )
            return
        conns[self] = None
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._header_late)

    def _evict_one(self) -> bool:
        """Close the oldest connection in this order; False when every one is being served.

        1. a header block under way (or none sent yet on a new connection);
        2. idle keep-alive;
        3. a request body under way (no response started).
        """
        tiers: list[LimitedHttpToolsProtocol | None] = [None, None, None]
        for conn in type(self).open:
            cycle = conn.cycle
            if conn._in_headers:
                if cycle is not None and not cycle.response_complete:
                    continue  # answering its previous request
                if conn._header_bytes or not conn._served:
                    conn._drop()
                    return True
                if tiers[1] is None:
                    tiers[1] = conn
            elif (
                tiers[2] is None
                and cycle is not None
                and cycle.more_body
                and not cycle.response_started
            ):
                tiers[2] = conn
        for victim in tiers:
            if victim is not None:
                victim._drop()
                return True
        return False

    def _drop(self) -> None:
        type(self).open.pop(self, None)
        self._stop_timers()
        self.transport.abort()  # frees the descriptor now, not after a flush

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection; cancel its request if it was still being served."""
        type(self).open.pop(self, None)
        self._stop_timers()
        cycle = self.cycle
        super().connection_lost(exc)
        task = self._task
        if (
            task is not None
            and not task.done()
            and cycle is not None
            and not cycle.response_complete
        ):
            task.cancel()  # the client gave up: drop / cancel its work

    def _stop_timers(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        task = self.loop.create_task(cycle.run_asgi(app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)
        self._task = task

    # -- reading -------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        """Feed the parser, never more header bytes than the limit allows."""
        if self._in_headers:
            budget = self.limits.max_header_bytes - self._header_bytes
            if len(data) > budget:
                if budget > 0:
                    self._header_bytes += budget
                    self._feed(data[:budget])
                    if self.transport.is_closing():
                        return
                if self._in_headers:
                    self._refuse(
                        431,
                        b"Request Header Fields Too Large",
                        f"request line and headers exceed {self.limits.max_header_bytes} bytes",
                    )
                    return
                self.data_received(data[max(budget, 0) :])
                return
            self._header_bytes += len(data)
        elif self._body_timer is not None:
            self._body_bytes += len(data)
        self._feed(data)
        if self.transport.is_closing():
            return
        if self._in_headers:
            if self._header_timer is None and self._header_bytes:
                self._header_timer = self.loop.call_later(
                    self.limits.header_timeout, self._header_late
                )
        elif self._body_timer is None and self.cycle is not None and self.cycle.more_body:
            self._body_bytes = 0
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_check)

    def _feed(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _TooManyHeaders):
                self._refuse(
                    431,
                    b"Request Header Fields Too Large",
                    f"more than {self.limits.max_header_count} header fields",
                )
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()

    def _refuse(self, status: int, reason: bytes, message: str) -> None:
        """Answer ``status`` (unless a response is under way) and close the connection."""
        self._stop_timers()
        cycle = self.cycle
        # the request being read (body phase), or a previous one still being answered
        if cycle is not None and (not self._in_headers or not cycle.response_complete):
            if cycle.response_started:  # already answered (e.g. 401): just hang up
                self.transport.close()
                return
            cycle.response_complete = True  # the application must not answer as well
            cycle.disconnected = True
            cycle.message_event.set()
        _reply(self.transport, status, reason, message)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count header fields (431 beyond the limit)."""
        self._header_count += 1
        if self._header_count > self.limits.max_header_count:
            raise _TooManyHeaders
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """End of the header phase: stop its timer."""
        self._in_headers = False
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """End of the body: the next bytes start a new header block."""
        self._in_headers = True
        self._served = True
        self._header_bytes = 0
        self._header_count = 0
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # -- timers --------------------------------------------------------------------------------
    def _header_late(self) -> None:
        self._header_timer = None
        if not self._in_headers or self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # a response is still being produced: only then does the header clock start
            self._header_timer = self.loop.call_later(self.limits.header_timeout, self._header_late)
            return
        if self._header_bytes == 0 and self._served:
            return  # an idle keep-alive connection: uvicorn's keep-alive timer closes it
        self._refuse(
            408,
            b"Request Timeout",
            f"request headers not received within {self.limits.header_timeout:g} s",
        )

    def _body_check(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self._in_headers or cycle is None or not cycle.more_body:
            return
        limits = self.limits
        wanted = max(1, int(limits.min_body_rate * limits.body_timeout))
        if self._body_bytes < wanted and not self.flow.read_paused:
            self._refuse(
                408,
                b"Request Timeout",
                f"request body too slow: {self._body_bytes} bytes in {limits.body_timeout:g} s "
                f"(minimum {limits.min_body_rate} bytes/s)",
            )
            return
        self._body_bytes = 0
        self._body_timer = self.loop.call_later(limits.body_timeout, self._body_check)


def limited_protocol(limits: HttpLimits) -> type[LimitedHttpToolsProtocol]:
    """A protocol class for one server, with its own limits and connection registry."""
    return type(
        "LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": limits, "open": {}}
    )


def close_all(protocol: type[LimitedHttpToolsProtocol]) -> None:
    """Abort every connection of a server's protocol class (after shutdown)."""
    for conn in list(protocol.open):
        with contextlib.suppress(Exception):
            conn._drop()
