"""The sessions of this process: what is open, the shared ones, and what closing releases.

Owns the weak table behind :func:`nbinfer.sessions`, the table behind ``Session.shared()``,
the replacement of earlier local sessions by a newer one (:func:`retire_previous`), the
``atexit`` hook, and :class:`Resources` (the clients and local server a session holds, which
a ``weakref.finalize`` callback releases when nothing references the session any more).

Must not import the rest of the session package (it sits below it) nor the server: the types
it names are imported for type checking only.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import itertools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from nbinfer.client import AsyncClient, Client
    from nbinfer.server.launcher import LocalServer
    from nbinfer.session import Session
    from nbinfer.session.core import SessionCore

__all__ = [
    "Resources",
    "close_async_client",
    "register",
    "retire_previous",
    "sessions",
    "shared_session",
]

logger = logging.getLogger("nbinfer")
_S = TypeVar("_S", bound="SessionCore")

#: Open sessions by creation number (weak: an unreferenced session closes itself).
_OPEN: weakref.WeakValueDictionary[int, SessionCore] = weakref.WeakValueDictionary()
_COUNTER = itertools.count(1)
#: ``Session.shared()``: one session (and local server) per set of options, kept alive here.
_SHARED: dict[tuple[tuple[str, str], ...], SessionCore] = {}
_SHARED_LOCK = threading.Lock()
_ATEXIT_LOCK = threading.Lock()
_ATEXIT_DONE = False


def sessions() -> list[Session]:
    """The open sessions of this process, oldest first (what is running, and where).

    Example::

        nbinfer.sessions()     # [<Session http://127.0.0.1:39211 (local server, http)>]
    """
    # Every SessionCore that registers is a Session (the class users construct).
    return [cast("Session", s) for _, s in sorted(_OPEN.items()) if not s._closed]


def register(session: SessionCore) -> None:
    """List ``session`` in :func:`sessions` and make sure open sessions close at exit."""
    global _ATEXIT_DONE
    _OPEN[next(_COUNTER)] = session
    with _ATEXIT_LOCK:
        if not _ATEXIT_DONE:
            atexit.register(_close_all)
            _ATEXIT_DONE = True


def retire_previous(newer: SessionCore) -> list[SessionCore]:
    """Close the other open local sessions (shared ones aside): ``newer`` replaces them.

    What ``Session()`` does after its own server started, so that a re-run
    ``session = nbinfer.Session()`` cell leaves one server whatever still references the old
    session (IPython's ``Out`` history keeps every displayed value). Returns those closed.
    """
    with _SHARED_LOCK:
        shared = {id(s) for s in _SHARED.values()}
    retired = []
    for _, session in sorted(_OPEN.items()):
        if session is newer or session._closed or session._server is None:
            continue
        if id(session) in shared:
            continue
        try:
            session._retire(newer)
        except Exception:  # the newer session stands; say what the old one left behind
            logger.warning("could not close the replaced %r", session, exc_info=True)
        retired.append(session)
    return retired


def shared_session(key: tuple[tuple[str, str], ...], start: Callable[[], _S]) -> _S:
    """The shared session for ``key``, started by ``start()`` when none is open and running."""
    with _SHARED_LOCK:
        session = _SHARED.get(key)
        server = None if session is None or session._closed else session._server
        if session is None or server is None or not server.running:
            session = _SHARED[key] = start()
        return cast(_S, session)  # start() made what is stored under key


def _close_all() -> None:
    for session in list(_OPEN.values()):
        session.close()


@dataclasses.dataclass
class Resources:
    """What a session holds open; mutable so that ``restart()`` can swap the client in place.

    A ``weakref.finalize`` callback owns it (never the session: the callback must not keep the
    session alive), and :meth:`release` runs once, by ``close()`` or the finalizer.
    """

    client: Client
    server: LocalServer | None
    owner: str
    #: One AsyncClient per event loop (by ``id(loop)``).
    aclients: dict[int, AsyncClient] = dataclasses.field(default_factory=dict)

    def close_clients(self) -> None:
        """Close the sync client and every async client (the server keeps running)."""
        self.client.close()
        for aclient in self.aclients.values():
            close_async_client(aclient)
        self.aclients.clear()

    def release(self) -> None:
        """Close the clients and stop the server this session started."""
        try:
            self.close_clients()
        finally:
            if self.server is not None:
                logger.debug("stopping the local server of %s", self.owner)
                self.server.stop()


def close_async_client(client: AsyncClient) -> None:
    """Close an AsyncClient from sync code, whether or not a loop is running here."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        asyncio.run(client.aclose())
    else:
        loop.create_task(client.aclose())
