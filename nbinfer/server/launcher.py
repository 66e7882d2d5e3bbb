"""LocalServer: run the embedded inference server as a child process.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook. The session imports this
module, so it stays free of heavy imports (the server's own modules load in the child).

The child is ``sys.executable -m nbinfer.server``: its own process (own GIL, own CUDA context),
isolated from the notebook kernel. ``start()`` returns once the server has printed its ready line
(both HTTP and gRPC listening); a background thread drains the child's output into a bounded
buffer so the pipe never blocks; the child exits by itself when this process dies.

Example::

    with LocalServer(demo=True) as server:
        print(server.http_url, server.grpc_url)
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from nbinfer.config import (
    DEFAULT_MAX_REQUEST_BYTES,
    GENERATE_TOKEN,
    AuthTokenOption,
    register_local_server,
    resolve_auth_token,
    unregister_local_server,
)
from nbinfer.errors import InvalidInputError, ServerStartError

__all__ = ["READY_PREFIX", "LocalServer", "parse_ready_line"]

logger = logging.getLogger("nbinfer")

#: The first word of the machine-readable line the server prints once it is listening.
READY_PREFIX = "NBINFER READY"

_READY_RE = re.compile(r"^NBINFER READY http=(?P<http>\S+) grpc=(?P<grpc>\S+)")
_SHM_SOCKET_RE = re.compile(r" shm_socket=(?P<path>\S+)")

#: Default seconds ``start()`` waits for the ready line.
DEFAULT_STARTUP_TIMEOUT = 60.0

_LOG_LINES = 2000

#: The words of the server's log line that lists the requests a stop abandoned.
_ABANDONED = "grace period: abandoned"


def _remove_socket_dir(path: str | None) -> None:
    """Remove the stopped server's private socket directory (``nbinfer-*``, ours, 0700).

    Where ``XDG_RUNTIME_DIR`` is not usable that is the server's scratch root (``scratch.py``):
    its upload copies go with it.
    """
    if path is None:
        return
    directory = os.path.dirname(path)
    try:
        info = os.lstat(directory)
    except OSError:
        return
    if os.path.basename(directory).startswith("nbinfer-") and info.st_uid == os.geteuid():
        shutil.rmtree(directory, ignore_errors=True)


def parse_ready_line(line: str) -> tuple[str, str] | None:
    """Return ``(http_url, grpc_url)`` from a server ready line, or ``None`` for other lines."""
    match = _READY_RE.match(line.strip())
    if match is None:
        return None
    return match.group("http"), match.group("grpc")


def _allowlist(name: str, values: Sequence[str]) -> list[str]:
    """``allowed_hosts`` / ``allowed_origins`` as a list (a lone string is a mistake)."""
    if isinstance(values, str | bytes):
        raise InvalidInputError(f"{name} must be a list of strings, e.g. [{values!r}]")
    return [str(v) for v in values]


# Weak registry of live servers for atexit cleanup: a LocalServer that is garbage collected is
# dropped from it (its child then dies with the interpreter through the parent-death watch).
_LIVE: weakref.WeakSet[LocalServer] = weakref.WeakSet()
_ATEXIT_REGISTERED = False
_ATEXIT_LOCK = threading.Lock()


def _stop_all() -> None:
    servers = list(_LIVE)
    for server in servers:  # all told at once: they shut down side by side, not one by one
        server._terminate()
    for server in servers:
        try:
            server.stop(grace=2.0)
        except Exception:  # pragma: no cover - best effort at interpreter exit
            logger.debug("failed to stop local server at exit", exc_info=True)


def _register_atexit() -> None:
    global _ATEXIT_REGISTERED
    with _ATEXIT_LOCK:
        if not _ATEXIT_REGISTERED:
            atexit.register(_stop_all)
            _ATEXIT_REGISTERED = True


class LocalServer:
    """The embedded v2 inference server (HTTP + gRPC) running in a child process.

    Args:
        model_repository: A Triton-style model repository directory to serve.
        demo: Also serve the demo models shipped with nbinfer.
        host: Interface to bind (keep the default 127.0.0.1 unless you mean to expose it).
        http_port: HTTP port; 0 picks a free one.
        grpc_port: gRPC port; 0 picks a free one.
        device: ``"auto"``, ``"cpu"`` or ``"cuda:N"``.
        max_request_bytes: Largest request body / gRPC message the server accepts.
        env: Extra environment variables for the child.
        startup_timeout: Seconds ``start()`` waits for readiness.
        log_level: The child's log level (``"info"``, ``"debug"``, ...).
        extra_args: Extra command-line arguments for ``python -m nbinfer.server``.
        control: Open the private control channel that :meth:`add_model` uses to ship
            notebook-defined models to the server (a socket pair, never the network).
        auth_token: Require ``Authorization: Bearer <token>`` (HTTP) / ``authorization``
            metadata (gRPC) on every call but liveness; passed to the child through its
            environment, never its command line. :data:`~nbinfer.config.GENERATE_TOKEN`
            (the default) generates a random one: nbinfer's own clients made in this process
            for :attr:`http_url` / :attr:`grpc_url` (``Client``, ``AsyncClient``, ``Session``,
            ``%nbinfer connect``, the compat faces) send it without being told; other clients
            (tritonclient, curl, another process) pass :attr:`auth_token` as
            ``Authorization: Bearer <token>``. An ``NBINFER_AUTH_TOKEN`` in ``env`` is the
            token instead of a generated one. ``None`` is the explicit opt-out: no token, so
            any local user who finds the port can call the server (unsafe on a shared host).
        insecure_no_auth: Allow a non-loopback ``host`` without a token. Without it,
            ``start()`` refuses such a host with :class:`~nbinfer.errors.ServerStartError`.
        allow_code_upload: Let model repository load requests upload code or pickled files
            (``model.py``, TorchScript); off by default.
        allowed_hosts: HTTP ``Host`` names or addresses accepted besides loopback and
            ``host`` (any port; ``["*"]``: any). Other Hosts get 403: a web page reaching the
            server through DNS rebinding (see ``docs/security.md``, *Web pages*).
        allowed_origins: Web page origins (``"http://localhost:8888"``) allowed to call the
            HTTP API, answered with CORS headers (``["*"]``: any). Default: none, so a
            cross-site request from a browser gets 403.
        allow_remote_shm: Let callers whose local user the server cannot establish (not a
            loopback peer) register shared memory; off by default (``--allow-remote-shm``).
            The caps on regions are ``limits`` (``max_shm_regions``,
            ``max_shm_regions_per_caller``).
        shm_socket: Let this process's clients hand the server sealed memfd regions over a
            private Unix socket, mapped by both ends (Linux; see ``docs/server.md``); off:
            POSIX shared memory registered over HTTP / gRPC only (``--no-shm-socket``).
        limits: Connection limits, workers and resource caps by option name, e.g.
            ``{"header_timeout": 5, "max_connections": 200, "max_inflight_bytes": 1 << 29,
            "max_parameters": 1000, "max_sequences": 1000, "max_sequence_id_bytes": 256}``
            (see ``docs/server.md``); an unknown name raises
            :class:`~nbinfer.errors.InvalidInputError` when starting.
        grace_period: Seconds a stop gives requests in flight before the server abandons
            them (KServe's ``grace_period``); :meth:`stop` waits that long plus a margin.
        access_log: Log one line per HTTP request and gRPC call (method, status, latency in
            ms, request id) in the server's log; off by default (no cost per request).
        access_log_format: The line, in gunicorn's atoms (see ``docs/server.md``).
        exception_handlers: ``{MyError: handler}`` where ``handler(exc) -> (status, message)``
            answers a model's ``MyError`` on HTTP (that status) and gRPC (its code). Keys and
            handlers travel by reference: importable objects or ``"module:qualname"``
            strings; anything else raises :class:`~nbinfer.errors.InvalidInputError`.
        model_control_mode: What the repository API may do over the network: ``"explicit"``
            (the default here: load / unload allowed, no replacing), ``"none"`` (refused) or
            ``"poll"`` (the repository directory is rescanned). ``nbinfer serve`` defaults
            to ``"none"``. See ``docs/security.md``.
        allow_model_replace: Let network loads replace a serving, repository or in-memory
            model (uploaded files or a config override) and unload in-memory models.
        model_limits: Caps on what network loads create, by option name:
            ``{"max_models": 100, "max_upload_files": 100, "max_upload_bytes": 2**28,
            "repository_poll_secs": 15}``; an unknown name raises
            :class:`~nbinfer.errors.InvalidInputError` when starting.

    Example::

        server = LocalServer(demo=True).start()
        try:
            ...  # talk to server.http_url / server.grpc_url
        finally:
            server.stop()
    """

    def __init__(
        self,
        *,
        model_repository: str | os.PathLike[str] | None = None,
        demo: bool = True,
        host: str = "127.0.0.1",
        http_port: int = 0,
        grpc_port: int = 0,
        device: str = "auto",
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        log_level: str = "info",
        extra_args: Sequence[str] = (),
        control: bool = False,
        auth_token: AuthTokenOption = GENERATE_TOKEN,
        insecure_no_auth: bool = False,
        allow_code_upload: bool = False,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
        allow_remote_shm: bool = False,
        shm_socket: bool = True,
        limits: Mapping[str, float] | None = None,
        grace_period: float | None = None,
        access_log: bool = False,
        access_log_format: str | None = None,
        exception_handlers: Mapping[Any, Any] | None = None,
        model_control_mode: str = "explicit",
        allow_model_replace: bool = False,
        model_limits: Mapping[str, float] | None = None,
    ) -> None:
        self.model_repository = None if model_repository is None else os.fspath(model_repository)
        self.demo = demo
        self.host = host
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.device = device
        self.max_request_bytes = max_request_bytes
        self.env = dict(env) if env else {}
        self.startup_timeout = startup_timeout
        #: Server log lines naming the requests the last :meth:`stop` abandoned (empty: none).
        self.abandoned: list[str] = []
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.control = control
        #: The bearer token the server requires (``None``: none); generated once here for
        #: ``GENERATE_TOKEN``, so a :meth:`stop` and :meth:`start` keep it.
        self.auth_token: str | None = resolve_auth_token(
            self.env["NBINFER_AUTH_TOKEN"]
            if auth_token is GENERATE_TOKEN and self.env.get("NBINFER_AUTH_TOKEN")
            else auth_token
        )
        self.insecure_no_auth = insecure_no_auth
        self.allow_code_upload = allow_code_upload
        self.allowed_hosts = _allowlist("allowed_hosts", allowed_hosts)
        self.allowed_origins = _allowlist("allowed_origins", allowed_origins)
        self.allow_remote_shm = allow_remote_shm
        self.use_shm_socket = shm_socket
        self.limits = dict(limits or {})
        self.grace_period = grace_period
        self.access_log = access_log
        self.access_log_format = access_log_format
        self.exception_handlers = dict(exception_handlers or {})
        self.model_control_mode = model_control_mode
        self.allow_model_replace = allow_model_replace
        self.model_limits = dict(model_limits or {})
        self._control: socket.socket | None = None
        self._control_lock = threading.Lock()
        self._proc: Any = None  # subprocess.Popen, or a forkserver.ForkedProcess
        self._terminated_pid: int | None = None  # the child already sent SIGTERM
        self._lines: collections.deque[str] = collections.deque(maxlen=_LOG_LINES)
        self._lines_lock = threading.Lock()
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self._http_url: str | None = None
        self._grpc_address: str | None = None
        #: The server's Unix socket for sealed memfd regions (``fdpass.py``), from its READY
        #: line; this process's clients find it by the server's addresses.
        self.shm_socket: str | None = None
        self._lock = threading.RLock()
        #: Seconds from spawn to the ready line of the last successful start().
        self.startup_seconds: float | None = None

    # -- properties ------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        """``http://host:port`` of the running server.

        Raises:
            ServerStartError: The server has not been started.
        """
        if self._http_url is None:
            raise ServerStartError("the local server is not running; call start() first")
        return self._http_url

    @property
    def grpc_url(self) -> str:
        """``grpc://host:port`` of the running server's gRPC endpoint: ``Client(grpc_url)``.

        Raises:
            ServerStartError: The server has not been started.
        """
        return "grpc://" + self.grpc_address

    @property
    def grpc_address(self) -> str:
        """``host:port`` of the gRPC endpoint, as grpcio channels and tritonclient take it.

        Raises:
            ServerStartError: The server has not been started.
        """
        if self._grpc_address is None:
            raise ServerStartError("the local server is not running; call start() first")
        return self._grpc_address

    @property
    def pid(self) -> int | None:
        """Process id of the child, or ``None`` if never started."""
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the child process is alive and was ready."""
        return self._proc is not None and self._proc.poll() is None and self._ready.is_set()

    @property
    def forked(self) -> bool:
        """Whether the server was forked from this process's fork server, not spawned.

        A process's second and later starts fork a process that has already imported
        (:mod:`nbinfer.server.forkserver`): ready in ~40 ms instead of ~0.3 s.
        """
        from nbinfer.server.forkserver import ForkedProcess

        return isinstance(self._proc, ForkedProcess)

    def logs(self, tail: int | None = None) -> str:
        """Return the captured server output (stdout and stderr), optionally only the last lines."""
        with self._lines_lock:
            lines = list(self._lines)
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        return "".join(lines)

    # -- lifecycle ---------------------------------------------------------------------------

    def _check_device(self) -> None:
        """Refuse a device this machine cannot give before spawning (no NVIDIA driver)."""
        from nbinfer.errors import InvalidInputError
        from nbinfer.server.devices import check_device_request

        try:
            check_device_request(self.device)
        except InvalidInputError as exc:
            raise ServerStartError(f"the local server cannot start: {exc}") from exc

    def command(self) -> list[str]:
        """Return the command line that ``start()`` runs."""
        cmd = [
            sys.executable,
            "-m",
            "nbinfer.server",
            "--host",
            self.host,
            "--http-port",
            str(self.http_port),
            "--grpc-port",
            str(self.grpc_port),
            "--device",
            self.device,
            "--max-request-bytes",
            str(self.max_request_bytes),
            "--log-level",
            self.log_level,
            "--parent-pid",
            str(os.getpid()),
        ]
        if self.model_repository is not None:
            cmd += ["--model-repository", self.model_repository]
        if self.demo:
            cmd.append("--demo")
        if self.insecure_no_auth:
            cmd.append("--insecure-no-auth")
        if self.allow_code_upload:
            cmd.append("--allow-code-upload")
        if self.allowed_hosts or self.allowed_origins:
            from nbinfer.server.webguard import WebGuard

            # a bad entry raises InvalidInputError here, before anything is spawned
            WebGuard(
                bind_host=self.host,
                allowed_hosts=self.allowed_hosts,
                allowed_origins=self.allowed_origins,
            )
            if self.allowed_hosts:
                cmd += ["--allowed-hosts", ",".join(self.allowed_hosts)]
            if self.allowed_origins:
                cmd += ["--allowed-origins", ",".join(self.allowed_origins)]
        if self.allow_remote_shm:
            cmd.append("--allow-remote-shm")
        if not self.use_shm_socket:
            cmd.append("--no-shm-socket")
        cmd += self._control_options()
        cmd += self._kserve_options()
        if self.limits:
            from nbinfer.server.app import LIMIT_OPTIONS

            for name, value in self.limits.items():
                if name not in LIMIT_OPTIONS:
                    raise InvalidInputError(
                        f"unknown server limit {name!r}; known: {', '.join(LIMIT_OPTIONS)}"
                    )
                cmd += ["--" + name.replace("_", "-"), str(value)]
        # PR_SET_PDEATHSIG fires when the spawning *thread* exits: only ask for it when spawned
        # from the main thread (the getppid watchdog covers the other cases).
        if threading.current_thread() is threading.main_thread():
            cmd.append("--pdeathsig")
        cmd += self.extra_args
        return cmd

    def _control_options(self) -> list[str]:
        """Model control mode, replace permission and caps as command-line options."""
        from nbinfer.server.app import CONTROL_OPTIONS
        from nbinfer.server.repository import MODEL_CONTROL_MODES

        if self.model_control_mode not in MODEL_CONTROL_MODES:
            raise InvalidInputError(
                f"model_control_mode {self.model_control_mode!r} is not one of "
                f"{', '.join(MODEL_CONTROL_MODES)}"
            )
        out = ["--model-control-mode", self.model_control_mode]
        if self.allow_model_replace:
            out.append("--allow-model-replace")
        caps = CONTROL_OPTIONS[2:]
        for name, value in self.model_limits.items():
            if name not in caps:
                raise InvalidInputError(f"unknown model limit {name!r}; known: {', '.join(caps)}")
            out += ["--" + name.replace("_", "-"), str(value)]
        return out

    def _kserve_options(self) -> list[str]:
        """Grace period, access log and exception handlers as command-line options."""
        out: list[str] = []
        if self.grace_period is not None:
            if self.grace_period < 0:
                raise InvalidInputError(f"grace_period must be >= 0 s, got {self.grace_period}")
            out += ["--grace-period", repr(float(self.grace_period))]
        if self.access_log:
            out.append("--access-log")
        if self.access_log_format is not None:
            from nbinfer.server.observability import check_access_log_format

            out += ["--access-log-format", check_access_log_format(self.access_log_format)]
        if self.exception_handlers:
            from nbinfer.server.exception_handlers import ExceptionHandlers

            for option in ExceptionHandlers.options(self.exception_handlers):
                out += ["--exception-handler", option]
        return out

    def start(self) -> LocalServer:
        """Spawn the server and wait until it is ready; a no-op when already running.

        Returns:
            ``self``, so ``server = LocalServer().start()`` works.

        Raises:
            ServerStartError: The process exited or did not become ready in time; the message
                carries the tail of its log.
        """
        with self._lock:
            if self.running:
                return self
            if self._proc is not None:
                self.stop()
            from nbinfer.server.auth import check_exposure

            token = self.auth_token or self.env.get("NBINFER_AUTH_TOKEN")
            check_exposure(self.host, token=token, insecure_no_auth=self.insecure_no_auth)
            self._check_device()
            self._ready.clear()
            with self._lines_lock:
                self._lines.clear()
            env = dict(os.environ)
            env.update(self.env)
            env.setdefault("PYTHONUNBUFFERED", "1")
            if self.auth_token is not None:
                env["NBINFER_AUTH_TOKEN"] = self.auth_token
            elif "NBINFER_AUTH_TOKEN" not in self.env:
                # an inherited variable would silently protect a server the caller did not ask
                # to protect (and whose token its clients do not know)
                env.pop("NBINFER_AUTH_TOKEN", None)
            t0 = time.perf_counter()
            cmd = self.command()
            child_end: socket.socket | None = None
            if self.control:
                parent_end, child_end = socket.socketpair()
                self._control = parent_end
                cmd += ["--control-fd", str(child_end.fileno())]
            try:
                proc = self._fork(cmd, env, child_end) or subprocess.Popen(
                    cmd,
                    pass_fds=() if child_end is None else (child_end.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=env,
                    # Own session: a kernel interrupt (SIGINT to the process group) must not
                    # kill the server; parent death is handled by the child itself.
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServerStartError(f"could not spawn the local server: {exc}") from exc
            finally:
                if child_end is not None:
                    child_end.close()
            self._proc = proc
            self._reader = threading.Thread(
                target=self._drain, args=(proc,), name=f"nbinfer-server-log-{proc.pid}", daemon=True
            )
            self._reader.start()
            _LIVE.add(self)
            _register_atexit()
            deadline = t0 + self.startup_timeout
            while not self._ready.wait(0.02):
                if proc.poll() is not None:
                    if self._reader is not None:
                        self._reader.join(timeout=2.0)
                    if self._ready.is_set():  # pragma: no cover - printed ready then died
                        break
                    raise ServerStartError(
                        f"the local server exited with code {proc.returncode} before it was ready."
                        f"\n--- server log (tail) ---\n{self.logs(tail=40)}"
                    )
                if time.perf_counter() > deadline:
                    self.stop(grace=1.0)
                    raise ServerStartError(
                        f"the local server was not ready after {self.startup_timeout:.1f} s."
                        f"\n--- server log (tail) ---\n{self.logs(tail=40)}"
                    )
            if proc.poll() is not None:
                raise ServerStartError(
                    f"the local server exited with code {proc.returncode} right after start."
                    f"\n--- server log (tail) ---\n{self.logs(tail=40)}"
                )
            self.startup_seconds = time.perf_counter() - t0
            self._register_token()
            logger.info(
                "nbinfer local server ready in %.2f s: %s (gRPC %s)",
                self.startup_seconds,
                self._http_url,
                self._grpc_address,
            )
            return self

    @staticmethod
    def _fork(cmd: list[str], env: dict[str, str], control: socket.socket | None) -> Any:
        """The server forked from this process's fork server, or ``None``: spawn it instead.

        ``None`` on the first start, on another platform, for a subclass's own ``command()``
        (see :mod:`nbinfer.server.forkserver`).
        """
        if cmd[:3] != [sys.executable, "-m", "nbinfer.server"]:
            return None
        from nbinfer.server.forkserver import fork_server

        server = fork_server(env)
        if server is None:
            return None
        try:
            return server.fork(cmd, env, control)
        except OSError as exc:
            logger.debug("fork server failed (%s): spawning the server", exc)
            server.retire()
            return None

    def _register_token(self) -> None:
        """Let nbinfer's clients in this process find the token by this server's addresses.

        The registry (:func:`nbinfer.config.register_local_server`) holds the server weakly and
        asks it whether it still runs on every lookup; :meth:`stop` removes the entries.
        """
        if self._http_url is None or self._grpc_address is None:
            return
        if self.auth_token is None and self.shm_socket is None:
            return
        ref = weakref.ref(self)

        def alive() -> bool:
            server = ref()
            return server is not None and server.running

        register_local_server(
            (self._http_url, self._grpc_address),
            self.auth_token,
            alive,
            self,
            shm_socket=self.shm_socket,
        )

    def _drain(self, proc: Any) -> None:
        stream = proc.stdout
        if stream is None:  # pragma: no cover
            return
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            with self._lines_lock:
                self._lines.append(line)
            if not self._ready.is_set():
                urls = parse_ready_line(line)
                if urls is not None:
                    self._http_url, self._grpc_address = urls
                    found = _SHM_SOCKET_RE.search(line)
                    self.shm_socket = found.group("path") if found else None
                    self._ready.set()
        stream.close()

    def _terminate(self) -> None:
        """Send the child SIGTERM without waiting (best effort); :meth:`stop` then waits."""
        proc = self._proc
        if proc is not None and proc.poll() is None and self._terminated_pid != proc.pid:
            try:
                proc.send_signal(signal.SIGTERM)
                self._terminated_pid = proc.pid
            except ProcessLookupError:  # pragma: no cover - died in between
                pass

    def stop(self, *, grace: float | None = None) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``grace`` seconds. Idempotent.

        The server gives requests in flight its grace period (``grace_period``, 3 s by
        default) and exits about 1 s later even when a model is stuck in ``predict``; the
        requests it abandoned are logged here (logger ``nbinfer``, warning) and kept in
        :attr:`abandoned`. ``grace`` defaults to that grace period plus 7 s.
        """
        if grace is None:
            from nbinfer.server.app import SHUTDOWN_GRACE

            period = SHUTDOWN_GRACE if self.grace_period is None else self.grace_period
            grace = period + 7.0
        with self._lock:
            unregister_local_server(self)
            proc = self._proc
            if proc is None:
                return
            if proc.poll() is None:
                self._terminate()  # unless _stop_all told it already
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    logger.warning("local server %d ignored SIGTERM; killing it", proc.pid)
                    proc.kill()
                    proc.wait(timeout=5.0)
            if self._reader is not None:
                self._reader.join(timeout=2.0)
                self._reader = None
            self.abandoned = [
                line for line in self.logs(tail=20).splitlines() if _ABANDONED in line
            ]
            for line in self.abandoned:
                logger.warning("local server %d: %s", proc.pid, line.split(": ", 2)[-1])
            self._ready.clear()
            self._http_url = None
            self._grpc_address = None
            _remove_socket_dir(self.shm_socket)  # a killed server leaves it behind
            self.shm_socket = None
            if self._control is not None:
                self._control.close()
                self._control = None
            _LIVE.discard(self)

    def add_model(self, model: Any, *, timeout: float = 120.0) -> str:
        """Ship an in-memory :class:`~nbinfer.server.model.Model` to the running server.

        The model is cloudpickled over the private control channel (``control=True``), loaded
        by the server and served like any other; a model of the same name is replaced.

        Returns:
            The model's name, once the server reports it READY.

        Raises:
            ServerStartError: The server is not running or was started without ``control``.
            InvalidInputError: The model could not be pickled.
            ModelLoadError: The model's ``load()`` raised (its error text in the message).
        """
        from nbinfer.server.control import send_model

        with self._control_lock:
            if self._control is None or not self.running:
                raise ServerStartError(
                    "add_model() needs a running LocalServer started with control=True"
                )
            return send_model(self._control, model, timeout=timeout)

    def repository(
        self,
        op: str,
        model: str,
        *,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        timeout: float = 120.0,
    ) -> None:
        """Load (``op="load"``) or unload a model as the operator, over the control channel.

        The server's model control mode and replace rule bind network callers only: the
        process that started the server may load, replace and unload any model.

        Raises:
            ServerStartError: The server is not running or was started without ``control``.
            ServerError: What the server answered (``ModelNotFoundError``, ...).
        """
        from nbinfer.server.control import repository_call

        with self._control_lock:
            if self._control is None or not self.running:
                raise ServerStartError(
                    "repository() needs a running LocalServer started with control=True"
                )
            repository_call(self._control, op, model, config=config, files=files, timeout=timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the child to exit; return its exit code (``None`` on timeout / not started)."""
        proc = self._proc
        if proc is None:
            return None
        try:
            return int(proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            return None

    def serve(self) -> None:
        """Start (if needed) and block until the server exits or Ctrl-C; then stop it."""
        self.start()
        try:
            self.wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = f" http={self._http_url} grpc={self._grpc_address}" if self._http_url else ""
        return f"<LocalServer {state} pid={self.pid}{where}>"
