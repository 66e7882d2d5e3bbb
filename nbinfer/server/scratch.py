"""The server's scratch space on disk: one directory per server process, swept after a crash.

Layer: the server (imports only the standard library).

Uploaded model files are written over a copy of the model's directory (``repository.py``);
those copies can be as large as the models. A server that stops normally deletes them; one
killed with SIGKILL (the kernel's OOM killer, ``kill -9``) cannot. So every copy lives under
one root per server process, ``<tmp>/nbinfer-scratch-XXXXXXXX/``, holding an ``.owner`` file
the server keeps ``flock``-ed for as long as it lives. The kernel drops the lock when the
process dies, however it dies; a starting server removes the roots of its user whose lock it
can take (:func:`sweep_stale`). A root whose lock is held (a live server, of any PID namespace
on this kernel) is never touched, nor a root of another user, nor anything that is not a
directory of that name.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
import weakref
from pathlib import Path

logger = logging.getLogger("nbinfer.server")

#: The name of a scratch root (``PREFIX`` + mkdtemp's random part).
PREFIX = "nbinfer-scratch-"
#: The lock file in each root, ``flock``-ed by its server for life.
OWNER = ".owner"
#: Roots younger than this are left alone (a root between ``mkdtemp`` and its lock).
MIN_AGE = 30.0


def _where(base: str | Path | None) -> Path:
    return Path(base) if base is not None else Path(tempfile.gettempdir())


class Scratch:
    """A server's scratch root (its repository's), made on first use, removed by :meth:`close`.

    Args:
        base: The directory to make the root in (default: :func:`tempfile.gettempdir`).
    """

    def __init__(self, base: str | Path | None = None) -> None:
        self._base = base
        self._root: Path | None = None
        self._owner: int | None = None
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        """The root directory (made and locked on first use)."""
        with self._lock:
            if self._root is None:
                root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=_where(self._base)))  # 0700
                flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    owner = os.open(root / OWNER, flags, 0o600)
                    fcntl.flock(owner, fcntl.LOCK_EX)
                except BaseException:
                    shutil.rmtree(root, ignore_errors=True)
                    raise
                self._root, self._owner = root, owner
                _LIVE.add(self)
            return self._root

    def directory(self, prefix: str) -> Path:
        """A fresh directory under the root (``mkdtemp`` with ``prefix``)."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))

    def close(self) -> None:
        """Delete the root and everything in it, then drop the lock. Idempotent."""
        with self._lock:
            root, owner = self._root, self._owner
            self._root = self._owner = None
        _LIVE.discard(self)
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        if owner is not None:
            os.close(owner)


#: The process's scratch roots in use (for :func:`close_all`).
_LIVE: weakref.WeakSet[Scratch] = weakref.WeakSet()


def close_all() -> None:
    """Delete every scratch root of this process now.

    A server exiting at once (a second stop signal) skips its orderly shutdown, not its files.
    """
    for scratch in list(_LIVE):
        scratch.close()


def sweep_stale(base: str | Path | None = None, *, min_age: float = MIN_AGE) -> list[Path]:
    """Remove the scratch roots in ``base`` left by servers of this user that died.

    A root is removed when it is a real directory (not a link) named ``nbinfer-scratch-*``,
    owned by this user, older than ``min_age`` seconds, and its ``.owner`` lock can be taken
    (its server is gone). Returns the roots removed; errors skip a root, never raise.
    """
    where = _where(base)
    removed: list[Path] = []
    try:
        names = [n for n in os.listdir(where) if n.startswith(PREFIX)]
    except OSError:
        return removed
    uid = os.geteuid()
    for name in names:
        root = where / name
        try:
            info = os.lstat(root)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
                continue
            if time.time() - info.st_mtime < min_age:
                continue
            owner = os.open(root / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held: its server is alive
                continue
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
        finally:
            os.close(owner)
    if removed:
        logger.info("removed %d scratch directories of servers that died", len(removed))
    return removed


def sweep_in_background(base: str | Path | None = None) -> threading.Thread:
    """:func:`sweep_stale` on a daemon thread (a large leftover copy must not delay startup)."""
    thread = threading.Thread(
        target=lambda: sweep_stale(base), name="nbinfer-scratch-sweep", daemon=True
    )
    thread.start()
    return thread
