"""Binary tensors on servers that do not list them: probe once, remember the answer.

Over HTTP a session sends binary tensor data when the server lists the ``binary_tensor_data``
extension. KServe takes binary data without listing it, MLServer refuses it (422): when a server
does not list it, the first request goes binary and, if refused, again as JSON; the answer is
kept for the rest of the session (``session.capabilities`` records it).

May import the session core, ``errors`` and ``capabilities`` (through the core); never the
server or the notebook layer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nbinfer.errors import (
    ModelNotFoundError,
    ModelNotReadyError,
    NbinferError,
    RemoteUnsupportedError,
    ServerError,
    ServerUnavailableError,
    UnauthenticatedError,
)
from nbinfer.session.ops import Lookups, SessionOp

__all__ = ["BinaryProbe"]

logger = logging.getLogger("nbinfer")
T = TypeVar("T")


class BinaryProbe(Lookups):
    """How a session decides ``binary=`` for its inference requests."""

    def _binary_choice(self, explicit: bool | None) -> bool | None:
        """``binary=`` for a request: explicit, else what a probe found or the server lists.

        Said from the capability record, so a new async client (one per event loop) does not
        read the server metadata again; ``None`` (nothing known yet) leaves it to the client.
        """
        if explicit is not None or self.client.config.binary is not None:
            return explicit
        if self._binary_found is not None:
            return self._binary_found
        caps = self._capabilities
        if caps is None or self.protocol != "http":
            return None
        return caps.offers("binary_tensor_data")

    def _binary_unknown(self, explicit: bool | None) -> SessionOp[bool]:
        """Whether the next HTTP request should probe binary tensors (once per session)."""
        if self.protocol != "http" or self._binary_found is not None:
            return False
        if explicit is not None or self.client.config.binary is not None:
            return False
        caps = self._capabilities
        if caps is None:
            if self._caps_tried:
                return False
            self._caps_tried = True
            caps = yield from self._capabilities_op()
        return caps.error is None and caps.offers("binary_tensor_data") is None

    def _learn_binary(self, found: bool) -> None:
        self._binary_found = found
        caps = self._capabilities  # held: the probe runs only once they were read
        if caps is not None:
            caps.record("binary_tensor_data", found)
        logger.debug(
            "%s %s binary tensor data (not listed in its extensions)",
            "the server" if caps is None else caps.server,
            "takes" if found else "refuses",
        )

    def _probe_binary(
        self, send: Callable[[bool], concurrent.futures.Future[T]]
    ) -> concurrent.futures.Future[T]:
        """Send with binary tensors; if the server refuses them, resend as JSON; remember."""
        with self._probe_lock:
            if self._binary_found is not None:
                return send(self._binary_found)
            first = send(True)
            error = first.exception()
            if error is None:
                self._learn_binary(True)
                return first
            if not _refuses_binary(error):
                return first
            second = send(False)
            if second.exception() is None:
                self._learn_binary(False)
            return second

    async def _aprobe_binary(
        self, send: Callable[[bool | None], Awaitable[T]], lock: asyncio.Lock
    ) -> T:
        """Like :meth:`_probe_binary` from a coroutine (``lock``: one probe per call)."""
        async with lock:
            if self._binary_found is not None:
                return await send(self._binary_found)
            try:
                result = await send(True)
            except NbinferError as exc:
                if not _refuses_binary(exc):
                    raise
                result = await send(False)
                self._learn_binary(False)
                return result
            self._learn_binary(True)
            return result


def _refuses_binary(exc: BaseException) -> bool:
    """Whether a failed binary request may be the server refusing binary tensors.

    Not a missing model or route, a busy server or missing credentials: JSON would not change
    those.
    """
    refusal = isinstance(exc, ServerError) and not isinstance(
        exc,
        ModelNotFoundError
        | ModelNotReadyError
        | ServerUnavailableError
        | UnauthenticatedError
        | RemoteUnsupportedError,
    )
    return refusal
