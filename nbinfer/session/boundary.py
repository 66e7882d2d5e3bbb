"""The boundary of a public Session method: what escapes it, and a dead local server named.

:func:`public` wraps every public method of a :class:`~nbinfer.Session` (sync and async):
arguments that do not fit raise a plain ``TypeError``; a ``ValueError`` / ``TypeError`` from
below becomes :class:`~nbinfer.errors.InvalidInputError`; when the local server the session
started has died, the caller gets a :class:`~nbinfer.errors.ConnectError` that says how it
ended and names ``session.restart()``.

:class:`Boundary` holds those checks. After a transport error a dying server gets a moment
(:data:`GRACE`) to finish dying: the sync face waits for the process, the async face polls it
between ``await asyncio.sleep`` so its event loop keeps running meanwhile.

May import ``errors`` (and, for types only, ``server.launcher``); the session core builds on it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import signal
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from nbinfer.errors import ConnectError, InvalidInputError, NbinferError, TransportError

if TYPE_CHECKING:
    from nbinfer.server.launcher import LocalServer

__all__ = ["GRACE", "Boundary", "public"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Seconds a local server gets to finish dying after a call's connection broke (the connection
#: can break a moment before the process is gone).
GRACE = 0.25
#: How often the async face looks at a dying server during :data:`GRACE`.
_POLL = 0.01


def public(method: _F) -> _F:
    """The boundary of a public Session method: what escapes it belongs to the error tree.

    Arguments that do not fit the method's signature (a missing one, an unknown keyword, too
    many) raise a plain ``TypeError`` naming them, as Python does, with no chain. A
    ``ValueError`` / ``TypeError`` raised under the method (a bad argument value, found
    wherever it is first used) becomes :class:`~nbinfer.errors.InvalidInputError` naming the
    method, with the original as its cause. When the session's local server has died the
    caller gets a :class:`~nbinfer.errors.ConnectError` that says so and names
    ``session.restart()``: checked before the call (a dead server should not cost the
    client's connect retries) and after a transport error (it died during the call).
    """
    name = method.__name__
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def acall(self: Boundary, *args: Any, **kwargs: Any) -> Any:
            self._check_local_server()
            unbound = None  # raised outside the handler: a plain TypeError, no chain
            try:
                return await method(self, *args, **kwargs)
            except (TransportError, TypeError, ValueError) as exc:
                unbound = _unbound(method, name, (self, *args), kwargs, exc)
                if unbound is None:
                    error = await self._aboundary_error(name, exc)  # the loop keeps running
                    if error is None:
                        raise
                    raise error from exc
            raise unbound  # your arguments do not fit the method: see the message below

        return cast(_F, acall)

    @functools.wraps(method)
    def call(self: Boundary, *args: Any, **kwargs: Any) -> Any:
        self._check_local_server()
        unbound = None  # raised outside the handler: a plain TypeError, no chain
        try:
            return method(self, *args, **kwargs)
        except (TransportError, TypeError, ValueError) as exc:
            unbound = _unbound(method, name, (self, *args), kwargs, exc)
            if unbound is None:
                error = self._boundary_error(name, exc)
                if error is None:
                    raise
                raise error from exc
        raise unbound  # your arguments do not fit the method: see the message below

    return cast(_F, call)


def _unbound(
    method: Callable[..., Any],
    name: str,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    exc: BaseException,
) -> TypeError | None:
    """The ``TypeError`` for arguments that do not fit ``method``, None when they fit.

    In the user's words (``session.profile() missing a required argument: 'model'``); checked
    only after a ``TypeError``, against the signature the method shows (``help()``).
    """
    if not isinstance(exc, TypeError):
        return None
    try:
        signature = inspect.signature(method)
        signature.bind(*args, **kwargs)
    except TypeError as mismatch:
        reason = str(mismatch)
    except ValueError:  # no signature to read
        return None
    else:
        return None
    params = list(signature.parameters.values())[1:]  # without self
    if reason == "too many positional arguments":
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        positional = [p.name for p in params if p.kind in kinds]
        noun = "argument" if len(positional) == 1 else "arguments"
        reason = (
            f"takes {len(positional)} positional {noun} ({', '.join(positional)}) but "
            f"{len(args) - 1} were given; pass the others by keyword"
        )
    elif reason.startswith("got an unexpected keyword argument"):
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        known = [p.name for p in params if p.kind not in variadic]
        reason += f"; its arguments: {', '.join(known)}"
    return TypeError(f"session.{name}() {reason}")


class Boundary:
    """The checks :func:`public` makes: a replaced session, a dead local server."""

    url: str
    _server: LocalServer | None
    _closed: bool
    #: The URL of the newer local session that replaced (and closed) this one.
    _replaced_by: str | None

    def _replaced_error(self) -> ConnectError:
        """What a call on a session that a newer local session replaced raises."""
        return ConnectError(
            f"this session ({self.url}) was replaced by a newer local nbinfer.Session() "
            f"({self._replaced_by}), which closed it and stopped its server: use the newer "
            "session. To keep several local sessions running, create the later ones with "
            "nbinfer.Session(keep_previous=True) (or use nbinfer.Session.shared())"
        )

    def _check_local_server(self) -> None:
        """Raise the error :meth:`_dead_server_error` describes, if there is one.

        A session that a newer local session replaced says so instead.
        """
        if self._replaced_by is not None:
            raise self._replaced_error()
        error = self._dead_server_error()
        if error is not None:
            raise error

    def _watched(self) -> LocalServer | None:
        """The local server whose death a call should name (``None``: none, or closed)."""
        return None if self._closed else self._server

    def _dead_server_error(self, grace: float = 0.0) -> ConnectError | None:
        """A ConnectError that says how to go on if this session's local server died.

        ``grace``: seconds to let a dying server finish dying (a call's connection can break
        a moment before the process is gone); waited for in this thread.
        """
        server = self._watched()
        if server is None:
            return None
        code = server.wait(grace) if grace else None
        if code is None and server.running:
            return None
        return _gone(server)

    async def _adead_server_error(self, grace: float) -> ConnectError | None:
        """:meth:`_dead_server_error` for a coroutine: the grace is awaited, never blocked on.

        The process is polled every :data:`_POLL` seconds until it is gone or ``grace`` has
        passed, so the event loop runs other tasks meanwhile.
        """
        server = self._watched()
        if server is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while server.running and loop.time() < deadline:
            await asyncio.sleep(_POLL)
        return None if server.running else _gone(server)

    def _boundary_error(self, method: str, exc: Exception) -> NbinferError | None:
        """What a public method raises for ``exc`` (``None``: ``exc`` itself)."""
        if isinstance(exc, NbinferError):
            return self._dead_server_error(GRACE) if isinstance(exc, TransportError) else None
        return _invalid(method, exc)

    async def _aboundary_error(self, method: str, exc: Exception) -> NbinferError | None:
        """:meth:`_boundary_error` for a coroutine (a dying server is awaited, not waited for)."""
        if isinstance(exc, NbinferError):
            if isinstance(exc, TransportError):
                return await self._adead_server_error(GRACE)
            return None
        return _invalid(method, exc)


def _invalid(method: str, exc: Exception) -> InvalidInputError:
    """A bad argument value found under ``method``, in the error tree."""
    return InvalidInputError(
        f"session.{method}(): {exc}",
        hint=f"Check the values passed to `session.{method}()`: `help(session.{method})`.",
        method=method,
    )


def _gone(server: LocalServer) -> ConnectError:
    """The error of a local server that is gone: how it ended, its log's tail, what to do."""
    code = server.wait(0)
    if code is not None and code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = "stopped" if code is None else f"exit code {code}"
    tail = server.logs(tail=10).rstrip()
    return ConnectError(
        f"the local server of this session (pid {server.pid}) is gone ({how}); "
        "session.restart() starts a new one and serves this session's notebook models "
        "(session.serve()) again" + (f"\n--- server log (tail) ---\n{tail}" if tail else ""),
        pid=server.pid,
        exit_code=code,
    )
