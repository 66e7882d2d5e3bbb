"""Where user callbacks run: ``async_infer``'s worker threads and the sync face's stream reader.

A callback that raises is never only logged on a thread nobody watches: the ``async_infer``
future carries the exception, a stream callback is told through its ``error`` argument, and the
traceback is shown in IPython when the process already runs one (found through ``sys.modules``,
never imported here; elsewhere it is logged on ``nbinfer``). Imports errors, the results and
the gRPC transport (lazily, to map a failed stream); never IPython, the session or the server.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from nbinfer.client.core import Callback
from nbinfer.client.results import InferResult
from nbinfer.errors import NbinferError, TransportError
from nbinfer.transports.base import SyncGrpcEngine

if TYPE_CHECKING:
    from nbinfer.protocol.grpc_binding import GrpcBinding

__all__ = ["SyncStream", "infer_then_call_back", "read_stream", "stream_metadata"]

logger = logging.getLogger("nbinfer")


def show_callback_error(exc: BaseException, where: str) -> None:
    """Show a callback's exception to the user: IPython's traceback display, else the log."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    if shell is not None:
        try:
            shell.showtraceback((type(exc), exc, exc.__traceback__))
        except Exception:  # a display that fails must not hide the original error
            logger.exception("could not show the %s error in IPython", where)
        else:
            logger.debug("%s raised", where, exc_info=exc)
            return
    logger.error("%s raised", where, exc_info=exc)


def _call_back(
    callback: Callback, result: InferResult | None, error: NbinferError | None, where: str
) -> None:
    try:
        callback(result, error)
    except Exception as exc:
        show_callback_error(exc, where)
        raise


def infer_then_call_back(
    infer: Callable[[], InferResult], callback: Callback | None
) -> InferResult:
    """Run one ``async_infer`` call on its worker thread, then its callback.

    What the future returned by ``async_infer`` carries: the result, the inference error (an
    :class:`~nbinfer.errors.NbinferError`; anything else is wrapped in a ``TransportError``), or
    the exception the callback raised.
    """
    try:
        result = infer()
    except NbinferError as exc:
        if callback is not None:
            _call_back(callback, None, exc, "async_infer callback")
        raise
    except Exception as exc:
        error = TransportError(f"inference failed: {exc!r}")
        error.__cause__ = exc
        if callback is not None:
            _call_back(callback, None, error, "async_infer callback")
        raise error from exc
    if callback is not None:
        _call_back(callback, result, None, "async_infer callback")
    return result


def stream_metadata(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata of a stream (keys lower-cased, as gRPC requires)."""
    return tuple((k.lower(), v) for k, v in (headers or {}).items())


def _replies(
    call: Any, binding: GrpcBinding, target: str, cancelled: Callable[[], bool]
) -> Iterator[tuple[InferResult | None, NbinferError | None]]:
    """``(result, None)`` or ``(None, error)`` per reply of a sync stream.

    A failed stream (deadline, server gone) ends with its mapped error, unless we cancelled it.
    """
    import grpc

    from nbinfer.transports.grpc import map_rpc_error

    try:
        for reply in call:
            try:
                result = InferResult(binding.stream_reply(reply))
            except NbinferError as exc:
                yield None, exc
            else:
                yield result, None
    except grpc.RpcError as exc:
        if not cancelled():
            yield None, map_rpc_error(exc, target)


def read_stream(call: Any, binding: GrpcBinding, target: str) -> Iterator[InferResult]:
    """The results of a sync stream; the first error ends it (as on the asyncio face)."""
    try:
        for result, error in _replies(call, binding, target, lambda: False):
            if error is not None:
                raise error
            assert result is not None
            yield result
    finally:
        call.cancel()


_STOP = object()


class SyncStream:
    """One open ModelStreamInfer stream of a sync client: a request queue and a reader thread."""

    def __init__(
        self,
        engine: SyncGrpcEngine,
        binding: GrpcBinding,
        callback: Callback,
        headers: Mapping[str, str] | None,
        timeout: float | None,
        target: str,
    ) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._callback = callback
        self._binding = binding
        self._cancelled = False
        metadata = stream_metadata(headers)
        self._call = engine.stream(self._requests(), timeout=timeout, metadata=metadata)
        self._target = target
        self._thread = threading.Thread(target=self._read, name="nbinfer-stream", daemon=True)
        self._thread.start()

    def _requests(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            yield item

    def send(self, message: Any) -> None:
        """Queue one request message (sent in order by gRPC's writer)."""
        self._queue.put(message)

    def _deliver(self, result: InferResult | None, error: NbinferError | None) -> None:
        try:
            _call_back(self._callback, result, error, "stream callback")
        except Exception as exc:
            if error is not None:
                return  # it failed on an error already: shown above, nothing more to tell it
            told = NbinferError(f"the stream callback raised {exc!r} on reply {result!r}")
            told.__cause__ = exc
            try:
                self._callback(None, told)
            except Exception as again:
                show_callback_error(again, "stream callback")

    def _read(self) -> None:
        for result, error in _replies(self._call, self._binding, self._target, self._stopped):
            self._deliver(result, error)

    def _stopped(self) -> bool:
        return self._cancelled

    def stop(self, *, cancel: bool) -> None:
        """End the stream: after the outstanding replies, or at once with ``cancel``."""
        self._queue.put(_STOP)
        if cancel:
            self._cancelled = True
            self._call.cancel()
        self._thread.join()
