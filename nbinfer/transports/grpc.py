"""v2 gRPC engines (grpcio sync, grpc.aio async): I/O only.

Method callables are built from nbinfer's own (private descriptor pool) message classes, so
nbinfer, tritonclient and kserve can live in one process. Engines map ``grpc.RpcError`` onto
:mod:`nbinfer.errors` with ``raise ... from exc``, keeping the server's message, the status and the
request id.

The engines perform the :class:`~nbinfer.protocol.calls.GrpcCall` objects that
:class:`~nbinfer.protocol.grpc_binding.GrpcBinding` yields; messages, RPC paths and the lazy
response reader are :mod:`nbinfer.protocol.grpc`'s (this module never touches the generated
stubs). Imports the protocol layer, errors and config; never the client, session or server
(grpcio only lazily).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from nbinfer.config import ClientConfig
from nbinfer.errors import (
    NbinferError,
    RequestTimeoutError,
    TransportError,
    connect_error,
    error_for_grpc_code,
)
from nbinfer.protocol import grpc as pgrpc
from nbinfer.protocol.calls import GrpcCall, GrpcReply
from nbinfer.transports.loops import PerLoop

__all__ = [
    "AsyncGrpcEngine",
    "GrpcEngine",
    "grpc_target",
    "map_rpc_error",
]

logger = logging.getLogger("nbinfer")

#: The RPCs whose replies come with their response metadata (a :class:`GrpcReply`).
_WITH_HEADERS = frozenset({"ModelInfer", "ModelReady"})
#: The RPCs whose replies are handed over as received bytes (read by
#: :class:`nbinfer.protocol.grpc_reply.ResponseReader`, which views the tensors in place).
_BYTES_REPLIES = frozenset({"ModelInfer"})
#: The main thread's id (the one a kernel interrupt reaches); an int compare per call.
_MAIN_IDENT = threading.main_thread().ident

#: Seconds the main thread waits at a time for its call (a signal wakes it sooner on POSIX).
_SLICE = 0.05

_CONNECT_HINTS = (
    "failed to connect",
    "connection refused",
    "dns resolution failed",
    "connections to all backends failing",
    "name resolution",
    "handshake",
    "ssl",
    "connection reset",
    "socket closed",
    "empty address list",
)


def _grpc() -> Any:
    import grpc

    return grpc


def grpc_target(url: str) -> tuple[str, bool]:
    """``grpc://host:port`` / ``grpcs://host:port`` / ``host:port`` -> ``(target, secure)``."""
    secure = url.startswith(("grpcs://", "https://"))
    target = url.split("://", 1)[1] if "://" in url else url
    return target.rstrip("/"), secure


def map_rpc_error(exc: Any, target: str, request_id: str | None = None) -> NbinferError:
    """Translate a ``grpc.RpcError`` into the most specific :mod:`nbinfer.errors` class."""
    code = exc.code() if hasattr(exc, "code") else None
    name = getattr(code, "name", "UNKNOWN")
    details = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    if name == "DEADLINE_EXCEEDED":
        return RequestTimeoutError(f"gRPC call to {target} timed out: {details}", url=target)
    if name == "UNAVAILABLE" and any(h in details.lower() for h in _CONNECT_HINTS):
        return connect_error(target, details)
    if name == "CANCELLED":
        return TransportError(f"gRPC call to {target} was cancelled: {details}", url=target)
    return error_for_grpc_code(name, details, request_id=request_id)


def _options(config: ClientConfig) -> list[tuple[str, Any]]:
    size = int(config.max_message_bytes)
    options: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", size),
        ("grpc.max_receive_message_length", size),
        ("grpc.primary_user_agent", config.user_agent),
    ]
    if config.keepalive_seconds:
        options += [
            ("grpc.keepalive_time_ms", int(config.keepalive_seconds * 1000)),
            ("grpc.keepalive_timeout_ms", 20000),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.keepalive_permit_without_calls", 1),
        ]
    if config.tls is not None and config.tls.server_hostname:
        options.append(("grpc.ssl_target_name_override", config.tls.server_hostname))
    return options


class _AuthPlugin:
    """A grpc metadata plugin adding the configured credentials to each call."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def __call__(self, context: Any, callback: Any) -> None:
        callback(self._metadata, None)


def _channel_parts(
    config: ClientConfig, secure: bool
) -> tuple[Any, tuple[tuple[str, str], ...], Any]:
    """Return ``(credentials or None, per-call metadata, compression)``."""
    grpc = _grpc()
    metadata = tuple((k.lower(), v) for k, v in config.headers.items())
    auth = tuple(config.auth.headers().items()) if config.auth is not None else ()
    creds = None
    if secure:
        tls = config.tls
        root, key, chain = tls.read() if tls is not None else (None, None, None)
        creds = grpc.ssl_channel_credentials(
            root_certificates=root, private_key=key, certificate_chain=chain
        )
        if auth:
            creds = grpc.composite_channel_credentials(
                creds, grpc.metadata_call_credentials(_AuthPlugin(auth))
            )
    else:
        metadata += auth  # call credentials need a secure channel: send them as metadata
    compression = grpc.Compression.Gzip if config.compression == "gzip" else None
    return creds, metadata, compression


def _headers(*metadata: Any) -> dict[str, str]:
    """Initial then trailing metadata as one dict (lower-cased keys; ``-bin`` values latin-1)."""
    out: dict[str, str] = {}
    for part in metadata:
        for key, value in part or ():
            out[key.lower()] = value if type(value) is str else bytes(value).decode("latin-1")
    return out


def _serialize(message: Any) -> bytes:
    """Messages go through ``SerializeToString``; pre-serialized requests (bytes) as they are."""
    if type(message) is bytes:
        return message
    data: bytes = message.SerializeToString()
    return data


#: The grpcio channel option that runs unary-stream calls on the caller's thread.
_SINGLE_THREADED = ("SingleThreadedUnaryStream", 1)
#: The stub key of ``ModelStreamInfer`` opened with one request (a unary-stream call).
_STREAM_ONE = "ModelStreamInfer:one"


def _method(channel: Any, rpc: str) -> Any:
    """The multicallable of ``rpc`` on a grpcio or grpc.aio channel.

    ``ModelStreamInfer:one`` is ``ModelStreamInfer`` called with one request: a unary-stream
    call, on the wire the same as a stream whose client sends one message and half-closes.
    """
    if rpc == _STREAM_ONE:
        spec = pgrpc.rpc_of("ModelStreamInfer")
        return channel.unary_stream(
            spec.path,
            request_serializer=_serialize,
            response_deserializer=spec.response.FromString,
            _registered_method=True,
        )
    spec = pgrpc.rpc_of(rpc)
    factory = channel.stream_stream if spec.kind == "stream_stream" else channel.unary_unary
    return factory(
        spec.path,
        request_serializer=_serialize,
        # replies handed over as their bytes: their reader keeps the tensors where they arrived
        response_deserializer=None if rpc in _BYTES_REPLIES else spec.response.FromString,
        _registered_method=True,
    )


_WireKind = Literal["main", "pool", "stream"]
_WIRE_KINDS: tuple[_WireKind, ...] = ("main", "pool", "stream")


class _Wire:
    """One grpcio channel and the method callables made on it."""

    __slots__ = ("channel", "stubs")

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.stubs: dict[str, Any] = {}

    def stub(self, rpc: str) -> Any:
        stub = self.stubs.get(rpc)
        if stub is None:
            stub = self.stubs[rpc] = _method(self.channel, rpc)
        return stub


class _Job:
    """One unary call handed from the main thread to the engine's caller thread.

    ``done`` is held until the call ends; the main thread waits by acquiring it.
    """

    __slots__ = ("call", "cancelled", "done", "error", "reply")

    def __init__(self, call: GrpcCall) -> None:
        self.call = call
        self.cancelled = False
        self.done = threading.Lock()
        self.done.acquire()
        self.reply: Any = None
        self.error: BaseException | None = None


class _SigintWatch:
    """Cuts the main thread's call the moment a SIGINT arrives (the kernel's stop button).

    grpcio's blocking call checks for signals only every 200 ms. While the main thread blocks
    in one, this process's signal wake-up fd is a pipe read by this watcher thread: CPython's
    own signal handler writes the signal's number there at once, and for SIGINT the watcher
    closes the calling engine's "main" channel, which ends the call (cancelled on the server
    too) so the pending ``KeyboardInterrupt`` is raised right away. Bytes are passed on to the
    wake-up fd that was set before (an event loop's), which is put back after each call. One
    watcher per process (the wake-up fd is the process's); it costs two ``set_wakeup_fd`` calls
    per main-thread call, against two thread hops (measured 100+ us of CPU on a busy machine).
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        try:
            os.set_blocking(self._write, False)  # set_wakeup_fd insists
            signal.set_wakeup_fd(signal.set_wakeup_fd(self._write))  # main interpreter only
        except BaseException:
            os.close(self._read)
            os.close(self._write)
            raise
        self.engine: GrpcEngine | None = None
        self.previous = -1
        thread = threading.Thread(target=self._watch, name="nbinfer-sigint-watch", daemon=True)
        thread.start()

    def arm(self, engine: GrpcEngine) -> int:
        """Route signals here for ``engine``'s call; returns the wake-up fd to put back."""
        previous = signal.set_wakeup_fd(self._write)
        self.previous, self.engine = previous, engine
        return previous

    def disarm(self, previous: int) -> None:
        """Put the previous wake-up fd back."""
        self.engine = None
        signal.set_wakeup_fd(previous)

    def _watch(self) -> None:
        while data := os.read(self._read, 512):
            engine, previous = self.engine, self.previous
            if engine is not None and int(signal.SIGINT) in data:
                engine._cut("main")
            if previous >= 0:
                with contextlib.suppress(OSError):
                    os.write(previous, data)


_WATCH: list[_SigintWatch | None] = []
_WATCH_LOCK = threading.Lock()


def _sigint_watch() -> _SigintWatch | None:
    """The process's watcher, made on first use (None where signals cannot be routed so)."""
    if not _WATCH:
        with _WATCH_LOCK:
            if not _WATCH:
                watch: _SigintWatch | None = None
                try:
                    if hasattr(signal, "SIGINT") and hasattr(os, "set_blocking"):
                        watch = _SigintWatch()
                except (OSError, ValueError) as exc:  # no pipes, or not the main interpreter
                    logger.debug("gRPC: interrupts through a caller thread (%s)", exc)
                    watch = None
                _WATCH.append(watch)
    return _WATCH[0]


class GrpcEngine:
    """Sync gRPC engine over grpcio channels (thread-safe, interruptible).

    grpcio's blocking call checks for signals only every 200 ms, and its future-based call
    starts a thread per call when calls do not overlap (twice the CPU per call). So calls from
    the main thread, the one a kernel interrupt reaches, block on a channel of their own while
    a watcher thread (:class:`_SigintWatch`) stands ready to close that channel the moment a
    SIGINT arrives, cancelling the call on the server too. Where the signal wake-up fd cannot be
    used, they run on a caller thread of this engine while the main thread waits on a lock,
    which a signal wakes at once. Calls from other threads block on their own over a shared
    channel, which :meth:`abort_in_flight` closes.

    Args:
        url: ``grpc://host:port``, ``grpcs://host:port`` or ``host:port``.
        config: Timeouts, TLS, auth, compression, message size, keepalive.
    """

    def __init__(self, url: str, config: ClientConfig) -> None:
        self.target, self._secure = grpc_target(url)
        self._config = config
        self._creds, self._metadata, self._compression = _channel_parts(config, self._secure)
        self._options = _options(config)
        self._lock = threading.Lock()
        #: Channels opened on first use: "main" (the main thread's calls, made on the caller
        #: thread), "pool" (other threads' calls), "stream" (streams, which no abort cuts).
        self._wires: dict[_WireKind, _Wire] = {}
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._caller: threading.Thread | None = None
        self._closed = False

    def _open(self, kind: _WireKind) -> _Wire:
        grpc = _grpc()
        # the streams' channel reads a one-request stream on the thread that iterates it
        options = [*self._options, _SINGLE_THREADED] if kind == "stream" else self._options
        if self._creds is not None:
            channel = grpc.secure_channel(self.target, self._creds, options, self._compression)
        else:
            channel = grpc.insecure_channel(self.target, options, self._compression)
        return _Wire(channel)

    def _wire(self, kind: _WireKind) -> _Wire:
        wire = self._wires.get(kind)
        if wire is None:
            with self._lock:
                if self._closed:
                    raise TransportError("the client is closed")
                wire = self._wires.get(kind)
                if wire is None:
                    wire = self._wires[kind] = self._open(kind)
        return wire

    def _cut(self, kind: _WireKind) -> None:
        """Close one channel, cancelling its calls in flight; the next call opens a new one."""
        with self._lock:
            wire = self._wires.pop(kind, None)
        if wire is not None:
            wire.channel.close()

    def _perform(self, wire: _Wire, call: GrpcCall) -> Any:
        try:
            stub = wire.stub(call.rpc)
            timeout = call.timeout if call.timeout is not None else self._config.timeouts.total
            metadata = self._metadata + call.metadata if call.metadata else self._metadata
            if call.rpc in _WITH_HEADERS:  # the reply carries the response headers
                reply, rpc = stub.with_call(call.message, timeout=timeout, metadata=metadata)
                # the metadata is read into a dict only if the caller looks (~10 us per call)
                return GrpcReply(
                    reply, lambda: _headers(rpc.initial_metadata(), rpc.trailing_metadata())
                )
            return stub(call.message, timeout=timeout, metadata=metadata)
        except _grpc().RpcError as exc:
            raise map_rpc_error(exc, self.target, call.request_id) from exc
        except ValueError as exc:  # the channel was closed under the call (an abort)
            raise TransportError(
                f"gRPC call to {self.target} was cancelled", url=self.target
            ) from exc

    def call(self, call: GrpcCall) -> Any:
        """Perform one unary call and return the response message.

        ``ModelInfer`` returns a :class:`GrpcReply` (the message and its metadata). On the main
        thread a ``KeyboardInterrupt`` (any exception raised while waiting) comes at once and
        cancels the call.

        Raises:
            ConnectError: The server could not be reached.
            RequestTimeoutError: The deadline passed.
            TransportError: The call was cancelled by :meth:`abort_in_flight` or the engine is
                closed.
            ServerError: The server answered with an error status (most specific subclass).
        """
        if self._closed:
            raise TransportError("the client is closed")
        if threading.get_ident() != _MAIN_IDENT:
            return self._perform(self._wires.get("pool") or self._wire("pool"), call)
        watch = _sigint_watch()
        if watch is not None:  # a main-thread call blocking here, cut by the watcher on SIGINT
            wire = self._wires.get("main") or self._wire("main")
            previous = watch.arm(self)
            try:
                return self._perform(wire, call)
            except NbinferError:
                raise
            except BaseException:  # the interrupt: make sure the call is gone on the server too
                self._cut("main")
                raise
            finally:
                watch.disarm(previous)
        job = _Job(call)
        try:
            self._start_caller().put(job)
            while not job.done.acquire(timeout=_SLICE):
                pass
        except BaseException:
            job.cancelled = True  # before the cut: a job the caller has not begun never starts
            self._cut("main")
            raise
        if job.error is not None:
            raise job.error
        return job.reply

    def _start_caller(self) -> queue.SimpleQueue[_Job | None]:
        if self._caller is None:
            with self._lock:
                if self._caller is None:
                    self._caller = threading.Thread(
                        target=_serve_main,
                        args=(weakref.ref(self), self._jobs),
                        name="nbinfer-grpc-caller",
                        daemon=True,
                    )
                    self._caller.start()
                    weakref.finalize(self, self._jobs.put, None)  # an engine never closed
        return self._jobs

    def _run_job(self, job: _Job) -> None:
        try:
            wire = self._wire("main")
            if job.cancelled:  # interrupted before it began
                raise TransportError(f"gRPC call to {self.target} was cancelled", url=self.target)
            job.reply = self._perform(wire, job.call)
        except BaseException as exc:  # handed to the waiting main thread
            job.error = exc
        job.done.release()

    def abort_in_flight(self) -> None:
        """Cancel the unary calls in flight on other threads than the main one (after an interrupt).

        Each fails with a :class:`~nbinfer.errors.TransportError` at once and the server sees the
        cancellation; later calls open a new channel. Open streams go on.
        """
        self._cut("pool")

    def stream(
        self,
        requests: Iterator[Any],
        *,
        timeout: float | None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        """Open a ``ModelStreamInfer`` stream; returns the grpc call (an iterator, cancellable)."""
        if self._closed:
            raise TransportError("the client is closed")
        return self._wire("stream").stub("ModelStreamInfer")(
            requests,
            timeout=timeout if timeout is not None else self._config.timeouts.stream,
            metadata=self._metadata + metadata,
        )

    def stream_one(
        self, message: Any, *, timeout: float | None, metadata: tuple[tuple[str, str], ...] = ()
    ) -> Any:
        """Send one request on ``ModelStreamInfer``; returns the call (an iterator, cancellable).

        The replies are read on the thread that iterates the call, with no hop through the
        channel's spin thread (grpcio's single-threaded unary-stream calls); a signal still
        interrupts the wait (grpcio polls in slices and checks for signals between them).
        """
        if self._closed:
            raise TransportError("the client is closed")
        return self._wire("stream").stub(_STREAM_ONE)(
            message,
            timeout=timeout if timeout is not None else self._config.timeouts.stream,
            metadata=self._metadata + metadata,
        )

    def close(self) -> None:
        """Close the channels and stop the caller thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            caller = self._caller
        for kind in _WIRE_KINDS:
            self._cut(kind)
        if caller is not None:
            self._jobs.put(None)
            if caller is not threading.current_thread():
                caller.join()


def _serve_main(engine: weakref.ref[GrpcEngine], jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The caller thread: perform the main thread's calls, one at a time.

    Holds the engine weakly, so an engine dropped without ``close()`` still goes (and this thread
    with it).
    """
    while (job := jobs.get()) is not None:
        live = engine()
        if live is None:
            return
        live._run_job(job)
        del live


class _AioChannel:
    """A grpc.aio channel of one event loop and the method callables made on it."""

    __slots__ = ("channel", "metadata", "stubs")

    def __init__(self, channel: Any, metadata: tuple[tuple[str, str], ...]) -> None:
        self.channel = channel
        self.metadata = metadata
        self.stubs: dict[str, Any] = {}


async def _close_channel(aio: _AioChannel) -> None:
    await aio.channel.close()


class AsyncGrpcEngine:
    """Asyncio gRPC engine over grpc.aio: one channel per event loop, made on first use.

    Each loop's channel is closed in that loop when the loop shuts down or when the engine is
    closed (see :class:`~nbinfer.transports.loops.PerLoop`).
    """

    def __init__(self, url: str, config: ClientConfig) -> None:
        self.target, self._secure = grpc_target(url)
        self._config = config
        self._channels: PerLoop[_AioChannel] = PerLoop(_close_channel)
        self._closed = False

    def _channel(self) -> _AioChannel:
        aio = self._channels.get()
        if aio is None:
            grpc = _grpc()
            creds, metadata, compression = _channel_parts(self._config, self._secure)
            options = _options(self._config)
            if creds is not None:
                channel = grpc.aio.secure_channel(self.target, creds, options, compression)
            else:
                channel = grpc.aio.insecure_channel(self.target, options, compression)
            aio = self._channels.add(_AioChannel(channel, metadata))
        return aio

    def _stub(self, aio: _AioChannel, rpc: str) -> Any:
        stub = aio.stubs.get(rpc)
        if stub is None:
            stub = aio.stubs[rpc] = _method(aio.channel, rpc)
        return stub

    async def call(self, call: GrpcCall) -> Any:
        """Perform one unary call; same contract as :meth:`GrpcEngine.call`."""
        if self._closed:
            raise TransportError("the client is closed")
        aio = self._channel()
        stub = self._stub(aio, call.rpc)
        timeout = call.timeout if call.timeout is not None else self._config.timeouts.total
        try:
            rpc = stub(call.message, timeout=timeout, metadata=aio.metadata + call.metadata)
            reply = await rpc
            if call.rpc not in _WITH_HEADERS:
                return reply
            initial, trailing = await rpc.initial_metadata(), await rpc.trailing_metadata()
            return GrpcReply(reply, _headers(initial, trailing))
        except _grpc().RpcError as exc:
            raise map_rpc_error(exc, self.target, call.request_id) from exc

    def stream(
        self,
        requests: Any,
        *,
        timeout: float | None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        """Open a ``ModelStreamInfer`` stream (an async iterator of replies, cancellable)."""
        if self._closed:
            raise TransportError("the client is closed")
        aio = self._channel()
        return self._stub(aio, "ModelStreamInfer")(
            requests,
            timeout=timeout if timeout is not None else self._config.timeouts.stream,
            metadata=aio.metadata + metadata,
        )

    def stream_one(
        self, message: Any, *, timeout: float | None, metadata: tuple[tuple[str, str], ...] = ()
    ) -> Any:
        """Send one request on ``ModelStreamInfer`` (a unary-stream call: no request iterator)."""
        if self._closed:
            raise TransportError("the client is closed")
        aio = self._channel()
        return self._stub(aio, _STREAM_ONE)(
            message,
            timeout=timeout if timeout is not None else self._config.timeouts.stream,
            metadata=aio.metadata + metadata,
        )

    async def aclose(self) -> None:
        """Close the channels (idempotent): this loop's now, other running loops' in their loop."""
        self._closed = True
        await self._channels.aclose()


async def aiter_replies(call: Any) -> AsyncIterator[Any]:
    """Iterate a grpc.aio stream call, mapping errors (helper for the async client)."""
    try:
        async for reply in call:
            yield reply
    except _grpc().RpcError as exc:
        raise map_rpc_error(exc, "stream") from exc
