"""Sealed-memfd shared memory: regions a local client hands over a Unix socket (``SCM_RIGHTS``).

Layer: the server (stdlib and the server's ``shm.py``); never the client, transports, session,
interop or notebook.

The POSIX path (``shm.py``) never maps a client's object, since a client could truncate it and
fault the server with SIGBUS. A memfd sealed with ``F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL``
cannot change size any more, by anyone, so the server maps it: inputs are read zero-copy from
the mapping and outputs written straight into it; the client reads them from its own mapping.

Registration: the client connects to a ``SOCK_SEQPACKET`` Unix socket in a directory of mode
0700 that only the server's user can enter (a fresh ``mkdtemp`` under ``XDG_RUNTIME_DIR`` or the
temporary directory), advertised on the server's READY line (``shm_socket=``) to the launcher
that started it, never on the network. One message per request: a small JSON object
(``{"op": "register", "name": ...}`` with one descriptor attached, ``{"op": "unregister",
"name": ...}``) answered by ``{"ok": true, ...}`` or ``{"error": ..., "status": 400 | 429}``.
The region belongs to the uid the kernel reports for the socket's peer (``SO_PEERCRED``), the
same ``uid:N`` identity HTTP and gRPC callers get from ``peers.py``: another user's requests
answer as for an unknown name. The region holds while its connection is open and goes away
with it (a killed client frees its regions; a request in flight keeps its views of the mapping
until it ends). Refused: a descriptor that is not a memfd, a hugetlb memfd, one without the three
seals, or with a write seal.

Bounds: at most :data:`MAX_CONNECTIONS` connections, messages of :data:`MAX_MESSAGE` bytes with
one descriptor (extra descriptors are closed), the region caps of ``shm.py``. One thread serves
the socket without ever blocking on a peer (non-blocking sockets and ``selectors``; a peer that
does not read its replies is dropped), so a slow or hostile client cannot stall it or the
server's event loop. The socket and its directory are removed at :meth:`FdPassServer.close`.

Zero-copy reads are only for callers of the server's own uid (they could ptrace the server
anyway); another user's inputs are copied out of the mapping first, so that changing them
during an inference cannot change what the model already checked.

Example::

    fdpass = FdPassServer(shm)
    print(fdpass.path)  # /tmp/nbinfer-xxxx/shm.sock
    fdpass.close()
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import logging
import mmap
import os
import selectors
import shutil
import socket
import stat
import struct
import sys
import tempfile
import threading
from typing import Any

from nbinfer.errors import InvalidInputError, LimitExceededError, NbinferError
from nbinfer.server.scratch import Scratch
from nbinfer.server.shm import SharedMemoryManager

__all__ = [
    "MAX_CONNECTIONS",
    "MAX_MESSAGE",
    "REQUIRED_SEALS",
    "FdPassServer",
    "check_memfd",
    "supported",
]

logger = logging.getLogger("nbinfer")

#: Connections served at once (further ones are closed at once).
MAX_CONNECTIONS = 64
#: Bytes of one request message (its JSON).
MAX_MESSAGE = 4096
#: Seals a region must carry: its size can never change again.
REQUIRED_SEALS = (
    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    if sys.platform.startswith("linux")
    else 0
)
_WRITE_SEALS = (
    getattr(fcntl, "F_SEAL_WRITE", 0) | getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x10)
    if sys.platform.startswith("linux")
    else 0
)
_HUGETLBFS_MAGIC = 0x958458F6
_SOCKET_NAME = "shm.sock"
#: A Unix socket's path must fit ``sun_path`` (108 bytes on Linux, NUL included).
_MAX_SOCKET_PATH = 108


def supported() -> bool:
    """Whether this platform has sealable memfds and descriptor passing (Linux)."""
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "memfd_create")
        and hasattr(fcntl, "F_ADD_SEALS")
        and hasattr(socket, "SOCK_SEQPACKET")
        and hasattr(socket, "SO_PEERCRED")
    )


def check_memfd(fd: int, name: str) -> int:
    """Validate a descriptor handed over for region ``name``; returns its (sealed) size.

    Raises:
        InvalidInputError: not a memfd (or a hugetlb one), seals missing, a write seal, or
            empty; the message names what is wrong.
    """
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
        info = os.fstat(fd)
    except OSError as exc:
        raise InvalidInputError(f"shared memory region {name!r}: bad descriptor: {exc}") from exc
    if not target.startswith("/memfd:") or not stat.S_ISREG(info.st_mode):
        raise InvalidInputError(
            f"shared memory region {name!r}: refused, the descriptor is not a memfd "
            f"({target!r}); create it with os.memfd_create(..., MFD_ALLOW_SEALING)"
        )
    if info.st_blksize != mmap.PAGESIZE:  # hugetlb pages can run out under a mapping: SIGBUS
        raise InvalidInputError(
            f"shared memory region {name!r}: refused, hugetlb memfds are not accepted"
        )
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as exc:
        raise InvalidInputError(
            f"shared memory region {name!r}: refused, its seals cannot be read: {exc}"
        ) from exc
    if seals & REQUIRED_SEALS != REQUIRED_SEALS:
        raise InvalidInputError(
            f"shared memory region {name!r}: refused, the memfd is not sealed against "
            "resizing; add F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL (fcntl F_ADD_SEALS) "
            f"before handing it over (it has seals {seals:#x})"
        )
    if seals & _WRITE_SEALS:
        raise InvalidInputError(
            f"shared memory region {name!r}: refused, the memfd is sealed against writes "
            "(the server writes outputs into it)"
        )
    if info.st_size == 0:
        raise InvalidInputError(f"shared memory region {name!r}: refused, the memfd is empty")
    return int(info.st_size)


def _runtime_directory() -> str | None:
    """``XDG_RUNTIME_DIR`` when it is usable: this user's, mode 0700."""
    base = os.environ.get("XDG_RUNTIME_DIR") or None
    if base is not None:
        try:
            info = os.stat(base)
            if info.st_uid != os.geteuid() or info.st_mode & 0o077:
                base = None
        except OSError:
            base = None
    return base


def _private_directory(runtime: str | None) -> str:
    """A fresh directory of mode 0700 for the socket (under ``runtime``, else the temp dir)."""
    path = tempfile.mkdtemp(prefix="nbinfer-", dir=runtime)
    os.chmod(path, 0o700)
    return path


def _in_scratch(scratch: Scratch | None) -> str | None:
    """The server's scratch root for the socket (``scratch.py``: swept after a crash).

    None when there is no scratch or the socket's path would not fit ``sun_path``.
    """
    if scratch is None:
        return None
    try:
        root = str(scratch.root)
    except OSError:
        return None
    return root if len(os.fsencode(os.path.join(root, _SOCKET_NAME))) < _MAX_SOCKET_PATH else None


class _Connection:
    __slots__ = ("owner", "regions", "sock", "trusted")

    def __init__(self, sock: socket.socket, uid: int) -> None:
        self.sock = sock
        self.owner = f"uid:{uid}"
        self.trusted = uid == os.geteuid()
        #: name -> the region object registered over this connection
        self.regions: dict[str, Any] = {}


class FdPassServer:
    """The Unix socket that takes sealed memfd regions for ``shm`` (one thread, never blocks).

    Args:
        shm: The server's regions (their caps apply).
        directory: Where the socket lives (default: a fresh private directory, removed at
            :meth:`close`); an existing directory must be the server user's, mode 0700.
        scratch: The server's scratch space: without ``directory``, the socket goes into its
            root when ``XDG_RUNTIME_DIR`` is not usable, so a killed server's is swept too.

    Raises:
        UnsupportedError: the platform has no sealable memfds (see :func:`supported`).
    """

    def __init__(
        self,
        shm: SharedMemoryManager,
        *,
        directory: str | None = None,
        scratch: Scratch | None = None,
    ) -> None:
        if not supported():
            from nbinfer.errors import UnsupportedError

            raise UnsupportedError("memfd regions over a Unix socket need Linux")
        self.shm = shm
        runtime = _runtime_directory() if directory is None else None
        if directory is None and runtime is None:  # no XDG_RUNTIME_DIR to use
            directory = _in_scratch(scratch)  # removed with the scratch root, not here
        self._own_dir = directory is None
        self.directory = _private_directory(runtime) if directory is None else directory
        self.path = os.path.join(self.directory, _SOCKET_NAME)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._listener.bind(self.path)
            os.chmod(self.path, 0o600)
            self._listener.listen(16)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            self._remove_dir()
            raise
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._connections: dict[int, _Connection] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="nbinfer-shm-fdpass", daemon=True)
        self._thread.start()

    # -- the loop ---------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._closed:
            try:
                events = self._selector.select(timeout=1.0)
            except OSError:  # pragma: no cover - the selector was closed under us
                return
            for key, _ in events:
                sock = key.fileobj
                if sock is self._wake_r:
                    return
                if sock is self._listener:
                    self._accept()
                else:
                    conn = self._connections.get(key.fd)
                    if conn is not None:
                        self._readable(key.fd, conn)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except OSError:
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            logger.warning("shm socket: refused a connection, %d are open", MAX_CONNECTIONS)
            sock.close()
            return
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            sock.setblocking(False)
        except OSError:
            sock.close()
            return
        self._connections[sock.fileno()] = _Connection(sock, uid)
        self._selector.register(sock, selectors.EVENT_READ, None)

    def _readable(self, fd: int, conn: _Connection) -> None:
        fds = array.array("i")
        try:
            data, ancdata, flags, _ = conn.sock.recvmsg(
                MAX_MESSAGE + 1, socket.CMSG_SPACE(4 * fds.itemsize)
            )
        except BlockingIOError:
            return
        except OSError:
            data = b""
            ancdata, flags = [], 0
        for level, kind, cdata in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(cdata[: len(cdata) - len(cdata) % fds.itemsize])
        if not data:  # the peer closed (or died): its regions go with it
            for extra in fds:
                os.close(extra)
            self._drop(fd, conn)
            return
        pending = list(fds)
        try:
            reply = self._handle(conn, data, flags, pending)
        except NbinferError as exc:
            status = 429 if isinstance(exc, LimitExceededError) else 400
            reply = {"error": str(exc), "status": status}
        except Exception as exc:  # pragma: no cover - a bug must not end the loop
            logger.exception("shm socket: request failed")
            reply = {"error": f"internal error: {exc}", "status": 500}
        finally:
            for extra in pending:
                with contextlib.suppress(OSError):
                    os.close(extra)
        try:
            conn.sock.send(json.dumps(reply).encode(), socket.MSG_DONTWAIT)
        except OSError:  # a peer that does not read its replies is dropped
            self._drop(fd, conn)

    def _handle(self, conn: _Connection, data: bytes, flags: int, fds: list[int]) -> dict[str, Any]:
        """One request; ``fds`` (closed by the caller) holds the descriptors it came with."""
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(data) > MAX_MESSAGE:
            raise InvalidInputError(
                f"shm socket: a request must be one JSON object of at most {MAX_MESSAGE} bytes "
                "with at most one descriptor"
            )
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise InvalidInputError(f"shm socket: the request is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise InvalidInputError("shm socket: the request must be a JSON object")
        op, name = body.get("op"), body.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInputError("shm socket: 'name' must be a non-empty string")
        if op == "unregister":
            region = conn.regions.pop(name, None)
            if region is not None:
                self.shm.unregister_region(region)
            return {"ok": True}
        if op != "register":
            raise InvalidInputError(f"shm socket: unknown op {op!r} (register, unregister)")
        if len(fds) != 1:
            raise InvalidInputError(
                f"shared memory region {name!r}: register needs exactly one descriptor "
                f"(SCM_RIGHTS), got {len(fds)}"
            )
        fd = fds.pop()
        try:
            size = check_memfd(fd, name)
            region = self.shm.register_mapped(
                name, fd, size, owner=conn.owner, trusted=conn.trusted
            )
        finally:
            os.close(fd)  # the mapping holds the memory
        conn.regions[name] = region
        return {"ok": True, "byte_size": size}

    def _drop(self, fd: int, conn: _Connection) -> None:
        self._connections.pop(fd, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()
        for region in conn.regions.values():
            self.shm.unregister_region(region)
        conn.regions.clear()

    # -- lifecycle --------------------------------------------------------------------------
    def _remove_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def close(self) -> None:
        """Stop serving, drop every connection's regions, remove the socket. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        for fd, conn in list(self._connections.items()):
            self._drop(fd, conn)
        self._selector.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        self._remove_dir()
