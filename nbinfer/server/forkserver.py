"""A kernel's fork server: later ``LocalServer`` starts fork a process that has already imported.

Layer: the server (the standard library; the forked child runs :mod:`nbinfer.server.__main__`).

A server started with ``sys.executable -m nbinfer.server`` spends about 0.3 s of CPU before it
listens, nearly all of it importing (NumPy, gRPC, protobuf, uvicorn, the server's own modules).
A kernel that starts a second server (a re-run cell, a restart, a new session) starts, once, a
*fork server*: ``python -m nbinfer.server.forkserver``, which imports all that and waits. Each
later start is one ``fork()`` of it: the child is ready in about 40 ms for 0.04 s of CPU.

Multiprocessing's own ``forkserver`` is one per process and shared with the user's code (its
preload list and its environment are global, fixed when it starts), so the server keeps its own:

* **One per environment.** It is started with the environment of the server that needed it (less
  the token), and used only by starts whose environment is the same (variables such as
  ``OMP_NUM_THREADS`` or ``PYTHONPATH`` act at import time); another environment retires it
  (it exits once its children have) and starts a new one.
* **The child is the server a spawn would have made:** a session of its own, ``stdin`` on
  ``/dev/null``, ``stdout`` / ``stderr`` on the launcher's pipe, its own environment (the token
  too), working directory and ``sys.path[0]``, no descriptor but the control socket, freshly
  seeded random generators (Python's, NumPy's global one; the hash seed stays the fork
  server's: it is fixed at interpreter start); it watches
  the kernel itself (a ``pidfd``: its parent is the fork server), so it never outlives it.
* **Waiting, exit codes and signals** go through pidfds (no PID can be reused under us):
  the fork server reaps each child and reports its exit code on that child's own socket.
* **Never older code than a spawn:** a fork server whose imported files changed on disk since (a
  package upgraded, an edited source) refuses; that start spawns, the next gets a new one.
* **It never outlives the kernel:** the end of its socket (the kernel's exit, however it dies) or
  a retirement ends it once its children are gone, and they end with the kernel.

Linux only (``pidfd_open``, ``SCM_RIGHTS``); elsewhere, or with ``NBINFER_FORKSERVER=0``, or when
the fork server cannot start, every start spawns as before. A subclass whose ``command()`` is not
``python -m nbinfer.server ...`` always spawns.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PER_START", "ForkServer", "ForkedProcess", "available", "fork_server", "main"]

logger = logging.getLogger("nbinfer")

#: Environment variables that may differ between starts sharing a fork server: the token (read
#: at run time) and pytest's name of the running test (it changes at every test; nothing reads
#: it at import).
PER_START = frozenset({"NBINFER_AUTH_TOKEN", "PYTEST_CURRENT_TEST"})
#: Largest request / reply message in bytes.
_MESSAGE = 1 << 20


def available() -> bool:
    """Whether this platform can fork servers (Linux with ``pidfd_open``) and it is not off."""
    if os.environ.get("NBINFER_FORKSERVER", "1") == "0":
        return False
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


def _send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _readable(files: Sequence[Any], timeout: float | None) -> bool:
    """Whether any of ``files`` (sockets, descriptors) is readable within ``timeout`` seconds."""
    with selectors.DefaultSelector() as selector:
        for f in files:
            selector.register(f, selectors.EVENT_READ)
        return bool(selector.select(timeout))


def _receive(sock: socket.socket, max_fds: int = 4) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and its descriptors; ``(None, [])`` at the end of the socket."""
    data, fds, _flags, _addr = socket.recv_fds(sock, _MESSAGE, max_fds)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), fds


class ForkedProcess:
    """A server the fork server forked, with the parts of ``subprocess.Popen`` the launcher uses.

    Like ``Popen``: :meth:`poll` never blocks (it answers ``None`` while another thread waits),
    and signals go out whatever another thread does.

    Args:
        pid: The child's PID.
        pidfd: A pidfd of the child (owned: closed once the exit code is read, so that a signal
            can never reach another process).
        status: This child's socket; the fork server writes the exit code there once it reaped
            the child.
        stdout: The read end of the child's ``stdout`` / ``stderr`` pipe.
        args: The command line the child runs (for ``TimeoutExpired``).
    """

    def __init__(
        self, pid: int, pidfd: int, status: socket.socket, stdout: Any, args: list[str]
    ) -> None:
        self.pid = pid
        self.args = args
        self.stdout = stdout
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status
        self._lock = threading.Lock()  # held by a waiting thread
        self._fd_lock = threading.Lock()  # never held while blocking: signals vs closing the pidfd

    def _collect(self, timeout: float | None) -> bool:
        """With the lock: read the exit code if the child exits within ``timeout``."""
        if self.returncode is not None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        if not _readable((self._status, self._pidfd), timeout):
            return False
        # Exited, or the fork server reported (or went away): its report follows the exit
        # within a moment, unless the fork server is gone.
        code: int | None = None
        if _readable((self._status,), 5.0):
            with contextlib.suppress(OSError, ValueError):
                data = self._status.recv(64)
                code = int(data) if data else None
        if code is None:  # no report: the fork server is gone; the child decides
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not _readable((self._pidfd,), left):
                return False
            code = 1  # exited unreaped by its fork server: its exit code is lost
        with self._fd_lock:
            self.returncode = code
            self._status.close()
            os.close(self._pidfd)  # after the exit code: no signal is sent through it any more
        return True

    def poll(self) -> int | None:
        """The exit code, or ``None`` while the child runs (or another thread waits for it)."""
        if self.returncode is None and self._lock.acquire(blocking=False):
            try:
                self._collect(0)
            finally:
                self._lock.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to exit and return its exit code.

        Raises:
            subprocess.TimeoutExpired: It still runs after ``timeout`` seconds.
        """
        with self._lock:
            if not self._collect(timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the child (nothing once it has exited)."""
        with self._fd_lock:
            if self.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The launcher's end of one fork server process (see the module docstring).

    Args:
        env: The environment it runs with (and its children, but for :data:`PER_START`).
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = {k: v for k, v in env.items() if k not in PER_START}
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._retired = False
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "nbinfer.server.forkserver", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._sock = ours
        ours.settimeout(60.0)
        message, _ = _receive(ours)
        if message is None or not message.get("ready"):
            self.retire()
            raise OSError("the fork server did not start")

    def usable(self, env: Mapping[str, str]) -> bool:
        """Whether a start with ``env`` may fork from this fork server."""
        return (
            not self._retired
            and self._owner == os.getpid()
            and self._proc.poll() is None
            and {k: v for k, v in env.items() if k not in PER_START} == self.env
        )

    def fork(
        self, cmd: Sequence[str], env: Mapping[str, str], control: socket.socket | None
    ) -> ForkedProcess:
        """Fork a server running ``cmd`` (``python -m nbinfer.server ARGS``) with ``env``.

        Raises:
            OSError: The fork server is gone or refused.
        """
        read_end, write_end = os.pipe()
        status_ours, status_theirs = socket.socketpair()
        fds = [write_end, status_theirs.fileno()]
        if control is not None:
            fds.append(control.fileno())
        request = {"argv": list(cmd[3:]), "env": dict(env), "cwd": os.getcwd()}
        try:
            with self._lock:
                _send(self._sock, request, fds)
                reply, pidfds = _receive(self._sock, max_fds=1)
        except BaseException:
            os.close(read_end)
            status_ours.close()
            raise
        finally:
            os.close(write_end)
            status_theirs.close()
        if reply is None or "pid" not in reply or len(pidfds) != 1:
            os.close(read_end)
            status_ours.close()
            for fd in pidfds:
                os.close(fd)
            raise OSError(f"the fork server did not fork: {reply}")
        stdout = os.fdopen(read_end, "rb")
        return ForkedProcess(int(reply["pid"]), pidfds[0], status_ours, stdout, list(cmd))

    def retire(self) -> None:
        """Take no more starts; the process exits once its children have."""
        self._retired = True
        with contextlib.suppress(OSError):
            self._sock.close()

    def ended(self) -> bool:
        """Whether the process has exited (and is reaped)."""
        return self._proc.poll() is not None

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the process to exit (reaping it)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout)


_CURRENT: ForkServer | None = None
#: Retired fork servers still running (kept, so that they are reaped, not left as zombies).
_RETIRED: list[ForkServer] = []
_CURRENT_LOCK = threading.Lock()
_STARTS = 0
_ATEXIT = False


def _retire_all() -> None:
    """At exit (after the launcher stopped its servers): retire every fork server and reap it."""
    with _CURRENT_LOCK:
        servers = [*_RETIRED, *([_CURRENT] if _CURRENT is not None else [])]
    for server in servers:
        server.retire()
    for server in servers:
        server.wait(2.0)


def fork_server(env: Mapping[str, str]) -> ForkServer | None:
    """This process's fork server for ``env``, started on the second call.

    ``None`` on the first call or when it cannot run: the caller spawns instead.
    """
    global _CURRENT, _STARTS, _ATEXIT
    if not available():
        return None
    with _CURRENT_LOCK:
        _STARTS += 1
        _RETIRED[:] = [server for server in _RETIRED if not server.ended()]
        current = _CURRENT
        if current is not None and current.usable(env):
            return current
        if current is not None:
            current.retire()
            _RETIRED.append(current)
            _CURRENT = None
        if not _ATEXIT:
            atexit.register(_retire_all)  # after LocalServer's: atexit runs in reverse order
            _ATEXIT = True
        if _STARTS < 2:
            return None  # a process that starts one server pays for one interpreter
        try:
            _CURRENT = ForkServer(env)
        except OSError as exc:
            logger.debug("no fork server (%s): spawning servers", exc)
            return None
        return _CURRENT


# -- the fork server process ----------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int], keep: int | None) -> None:
    """In the forked child: become the server the launcher asked for; never returns."""
    code = 1
    try:
        os.setsid()
        # as a fresh interpreter has them (SIGPIPE stays ignored, as Python sets it)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[0], 2)
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2 and fd != keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        # a spawned server seeds its generators from the OS, a fork inherits the fork server's
        # state: Python's random reseeds itself at fork, NumPy's global generator does not (once
        # imported before the fork, by a sitecustomize or a later preload, siblings would draw
        # the same numbers)
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None:
            numpy_random.seed()
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]
        argv = list(request["argv"])
        if keep is not None and "--control-fd" in argv:
            argv[argv.index("--control-fd") + 1] = str(keep)
        parent = None
        if "--parent-pid" in argv:
            at = argv.index("--parent-pid")
            parent = int(argv[at + 1])
            del argv[at : at + 2]
        if "--pdeathsig" in argv:
            argv.remove("--pdeathsig")  # its parent is this fork server, not the kernel
        sys.argv = [sys.argv[0], *argv]
        import nbinfer.server.__main__ as entry
        from nbinfer.server.app import watch_parent_early

        entry._STARTED = time.perf_counter()
        if parent is not None:
            watch_parent_early(parent, pidfd=True)
        try:
            code = entry.main(argv)
        except SystemExit as exc:  # argparse: a bad option
            code = exc.code if isinstance(exc.code, int) else 1
        entry.exit_now(code)
    except BaseException:
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
    os._exit(code)


def _module_files() -> dict[str, int]:
    """The file of every module imported so far, with its modification time (ns)."""
    files: dict[str, int] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            with contextlib.suppress(OSError):
                files[path] = os.stat(path).st_mtime_ns
    return files


def _changed(files: Mapping[str, int]) -> str | None:
    """The first of ``files`` changed on disk since (an upgrade, an edit), or ``None``."""
    for path, mtime in files.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return path
        except OSError:
            return path
    return None


def serve(sock: socket.socket, files: Mapping[str, int]) -> None:
    """The fork server's loop: fork on request, reap and report, until the end (see module).

    A request after a module it imported changed on disk (``files``: a package upgraded, an
    edited source) is refused, so that the launcher spawns that server instead (and a new fork
    server for the next): a forked child must not run older code than a spawned one would.
    """
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ, None)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, status socket)
    open_for_requests = True
    while open_for_requests or children:
        for key, _ in selector.select():
            if key.data is None:  # a request, or the end of the launcher's socket
                try:
                    request, fds = _receive(sock)
                except OSError:
                    request, fds = None, []
                if request is None:
                    selector.unregister(sock)
                    sock.close()
                    open_for_requests = False
                    continue
                stale = _changed(files)
                if stale is not None:
                    for fd in fds:
                        os.close(fd)
                    _send(sock, {"error": f"{stale} changed since the fork server imported it"})
                    continue
                _fork_one(request, fds, sock, selector, children)
            else:
                pidfd = key.fd
                pid, status = children.pop(pidfd)
                selector.unregister(pidfd)
                _pid, raw = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    status.sendall(str(os.waitstatus_to_exitcode(raw)).encode())
                status.close()
                os.close(pidfd)


def _fork_one(
    request: dict[str, Any],
    fds: list[int],
    sock: socket.socket,
    selector: selectors.BaseSelector,
    children: dict[int, tuple[int, socket.socket]],
) -> None:
    if len(fds) < 2:
        for fd in fds:
            os.close(fd)
        _send(sock, {"error": "expected a pipe and a status socket"})
        return
    control = fds[2] if len(fds) > 2 else None
    pid = os.fork()
    if pid == 0:
        _child(request, fds, control)
    status = socket.socket(fileno=fds[1])
    for fd in (fds[0], *fds[2:]):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    children[pidfd] = (pid, status)
    selector.register(pidfd, selectors.EVENT_READ, pid)
    _send(sock, {"pid": pid}, [pidfd])


def _preload() -> None:
    """What a server start imports (the rest loads in the child, as it would have anyway)."""
    import uvicorn  # noqa: F401
    import uvloop  # noqa: F401

    import nbinfer.server.__main__
    import nbinfer.server.app
    import nbinfer.server.control
    import nbinfer.server.demo
    import nbinfer.server.fdpass
    import nbinfer.server.grpc
    import nbinfer.server.rest  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nbinfer.server.forkserver FD``: import, say ready on socket FD, serve."""
    args = list(sys.argv[1:] if argv is None else argv)
    sock = socket.socket(fileno=int(args[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session; the kernel ends it
    _preload()
    files = _module_files()
    _send(sock, {"ready": True, "pid": os.getpid()})
    serve(sock, files)
    return 0


if __name__ == "__main__":
    os._exit(main())
