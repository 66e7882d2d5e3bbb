"""Assemble and run the embedded server: one DataPlane, HTTP (uvicorn) + gRPC on ONE event loop.

``run(options)`` is what ``python -m nbinfer.server`` and ``nbinfer serve`` call. It binds both
ports (0 = a free port, read back from the bound socket, so there is no race), prints the ready
line, and shuts down gracefully on SIGTERM / SIGINT or when the parent process dies.

The heavy imports (uvicorn, grpc, the data plane) happen inside :func:`run`, so the parent-death
guard in :func:`watch_parent_early` is armed before them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from nbinfer.config import (
    DEFAULT_MAX_JSON_BYTES,
    DEFAULT_MAX_MODELS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_MAX_UPLOAD_FILES,
)
from nbinfer.errors import InvalidInputError
from nbinfer.server.observability import DEFAULT_ACCESS_LOG_FORMAT
from nbinfer.server.offload import DEFAULT_MAX_PARAMETERS
from nbinfer.server.sequence import DEFAULT_MAX_SEQUENCE_ID_BYTES, DEFAULT_MAX_SEQUENCES
from nbinfer.server.shm import MAX_SHM_REGIONS, MAX_SHM_REGIONS_PER_CALLER

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane
    from nbinfer.server.repository import ModelControl

__all__ = [
    "AUTH_TOKEN_ENV",
    "CONTROL_OPTIONS",
    "LIMIT_OPTIONS",
    "NO_TOKEN_WARNING",
    "ServerOptions",
    "build_dataplane",
    "model_control",
    "run",
    "serve_async",
    "watch_parent_early",
]

logger = logging.getLogger("nbinfer")

_PR_SET_PDEATHSIG = 1

#: Default seconds a stop gives requests in flight to finish (HTTP and gRPC drain together;
#: ``--grace-period``); whatever still runs then is abandoned, logged by model, and the process
#: exits anyway.
SHUTDOWN_GRACE = 3.0
#: Environment variable holding the server's bearer token (kept out of the command line).
AUTH_TOKEN_ENV = "NBINFER_AUTH_TOKEN"

#: What a server started without a token warns once (loopback stays open to curl users).
NO_TOKEN_WARNING = (
    "no auth token: any local user (and any process on this host) can call this server's "
    "models. Set NBINFER_AUTH_TOKEN (clients then send 'Authorization: Bearer <token>') on a "
    "shared host"
)
_T0 = time.perf_counter()


@dataclass(slots=True)
class ServerOptions:
    """Options of the server process (mirrors the command line)."""

    model_repository: list[str] = field(default_factory=list)
    demo: bool = False
    host: str = "127.0.0.1"
    http_port: int = 0
    grpc_port: int = 0
    device: str = "auto"
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    log_level: str = "info"
    parent_pid: int | None = None
    #: Inherited socket of the launcher's private control channel (see ``control.py``).
    control_fd: int | None = None
    #: Bearer token required on HTTP and gRPC (None: no authentication; see ``auth.py``).
    auth_token: str | None = field(default=None, repr=False)
    #: Allow binding a non-loopback host without a token.
    insecure_no_auth: bool = False
    #: Let repository load requests upload code / pickles (model.py, TorchScript, ...).
    allow_code_upload: bool = False
    #: HTTP Host names accepted besides loopback and the bound address (``*``: any; webguard.py).
    allowed_hosts: list[str] = field(default_factory=list)
    #: Cross-site origins allowed to call the HTTP API, answered with CORS (``*``: any).
    allowed_origins: list[str] = field(default_factory=list)
    #: Largest HTTP request line + header block (431 beyond).
    max_header_bytes: int = 64 * 1024
    #: Most HTTP header fields per request (431 beyond).
    max_header_count: int = 100
    #: Seconds a client has to send a complete HTTP header block (408 after).
    header_timeout: float = 15.0
    #: Seconds of one HTTP body-read window (408 when it brings less than ``min_body_rate``).
    body_timeout: float = 30.0
    #: Bytes per second an HTTP request body must average over each window.
    min_body_rate: int = 1024
    #: Seconds an idle HTTP keep-alive connection stays open.
    keep_alive_timeout: float = 65.0
    #: Open HTTP connections at once (0: from the file-descriptor limit, see connections.py).
    max_connections: int = 0
    #: Open gRPC connections at once (0: from the file-descriptor limit).
    max_grpc_connections: int = 0
    #: Requests one model without a scheduler may run at once on its threads (0: max(4, CPUs)).
    model_workers: int = 0
    #: Threads of given-up requests one such model may leave finishing in the background while
    #: their slots serve new requests (0: a given-up request keeps its slot; see workers.py).
    max_abandoned: int = 16
    #: Request body bytes all HTTP and gRPC requests may hold at once (0: twice
    #: ``max_request_bytes``); beyond, 503 / RESOURCE_EXHAUSTED naming the limit.
    max_inflight_bytes: int = 0
    #: Largest HTTP JSON body (no binary tensor data; a load's uploads count on top), 413 beyond
    #: (0: ``max_request_bytes``): a JSON body is parsed whole, holding the GIL.
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES
    #: Most parameters one inference request may carry (400 / INVALID_ARGUMENT beyond; 0: any).
    max_parameters: int = DEFAULT_MAX_PARAMETERS
    #: Open sequences of stateful models at once (503 / RESOURCE_EXHAUSTED beyond; 0: any).
    max_sequences: int = DEFAULT_MAX_SEQUENCES
    #: Longest string ``sequence_id`` in UTF-8 bytes (400 / INVALID_ARGUMENT beyond; 0: any).
    max_sequence_id_bytes: int = DEFAULT_MAX_SEQUENCE_ID_BYTES
    #: Shared-memory regions registered at once, all callers together (one descriptor each).
    max_shm_regions: int = MAX_SHM_REGIONS
    #: Shared-memory regions one caller (a local uid) may hold at once.
    max_shm_regions_per_caller: int = MAX_SHM_REGIONS_PER_CALLER
    #: Let callers whose uid cannot be established register shared memory (see shm.py).
    allow_remote_shm: bool = False
    #: Take sealed memfd regions over a private Unix socket (Linux; see fdpass.py).
    shm_socket: bool = True
    #: Seconds a stop waits for requests in flight before abandoning them.
    grace_period: float = SHUTDOWN_GRACE
    #: One log line per HTTP request and gRPC call (logger ``nbinfer.access``); off: no cost.
    access_log: bool = False
    #: The access log line, in gunicorn's atoms (see ``observability.AccessLog``).
    access_log_format: str = DEFAULT_ACCESS_LOG_FORMAT
    #: ``"module:Exception=module:handler"`` custom exception handlers (exception_handlers.py).
    exception_handlers: list[str] = field(default_factory=list)
    #: Triton's model control mode: ``none`` (the repository API refuses load / unload),
    #: ``explicit`` (allowed, no replacing) or ``poll`` (the repository is rescanned).
    model_control_mode: str = "none"
    #: Let network loads replace a serving / operator / in-memory model, and unload in-memory ones.
    allow_model_replace: bool = False
    #: Most models known before a network load of a new name is refused (429).
    max_models: int = DEFAULT_MAX_MODELS
    #: Most uploaded files per load request (413).
    max_upload_files: int = DEFAULT_MAX_UPLOAD_FILES
    #: Most uploaded bytes per load request (413).
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    #: Seconds between two rescans of the repository in ``poll`` mode.
    repository_poll_secs: float = 15.0

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> ServerOptions:
        """Build options from parsed command-line arguments."""
        repos = ns.model_repository or []
        if isinstance(repos, str):
            repos = [repos]
        return cls(
            model_repository=list(repos),
            demo=bool(ns.demo),
            host=ns.host,
            http_port=ns.http_port,
            grpc_port=ns.grpc_port,
            device=ns.device,
            max_request_bytes=ns.max_request_bytes,
            log_level=ns.log_level,
            parent_pid=ns.parent_pid,
            control_fd=getattr(ns, "control_fd", None),
            auth_token=getattr(ns, "auth_token", None) or os.environ.get(AUTH_TOKEN_ENV) or None,
            insecure_no_auth=bool(getattr(ns, "insecure_no_auth", False)),
            allow_code_upload=bool(getattr(ns, "allow_code_upload", False)),
            allowed_hosts=list(getattr(ns, "allowed_hosts", None) or []),
            allowed_origins=list(getattr(ns, "allowed_origins", None) or []),
            allow_remote_shm=bool(getattr(ns, "allow_remote_shm", False)),
            shm_socket=not getattr(ns, "no_shm_socket", False),
            access_log=bool(getattr(ns, "access_log", False)),
            exception_handlers=list(getattr(ns, "exception_handler", None) or []),
            **{k: getattr(ns, k) for k in CONTROL_OPTIONS if getattr(ns, k, None) is not None},
            **{k: getattr(ns, k) for k in OPTIONAL_OPTIONS if getattr(ns, k, None) is not None},
            **{k: getattr(ns, k) for k in LIMIT_OPTIONS if getattr(ns, k, None) is not None},
        )


#: Options of the connection limits and workers, same names on the command line (the first
#: six are fields of ``connections.HttpLimits``).
LIMIT_OPTIONS = (
    "max_header_bytes",
    "max_header_count",
    "header_timeout",
    "body_timeout",
    "min_body_rate",
    "keep_alive_timeout",
    "max_connections",
    "max_grpc_connections",
    "model_workers",
    "max_abandoned",
    "max_inflight_bytes",
    "max_json_bytes",
    "max_parameters",
    "max_sequences",
    "max_sequence_id_bytes",
    "max_shm_regions",
    "max_shm_regions_per_caller",
)
#: Options that keep the ServerOptions default when not given (``None`` on the command line).
OPTIONAL_OPTIONS = ("grace_period", "access_log_format")
#: Model control options (see ``repository.ModelControl``), same names on the command line.
CONTROL_OPTIONS = (
    "model_control_mode",
    "allow_model_replace",
    "max_models",
    "max_upload_files",
    "max_upload_bytes",
    "repository_poll_secs",
)


def model_control(options: ServerOptions) -> ModelControl:
    """The repository's :class:`~nbinfer.server.repository.ModelControl` from ``options``.

    Raises:
        InvalidInputError: an unknown mode or a negative cap.
    """
    from nbinfer.server.repository import ModelControl

    return ModelControl(
        mode=options.model_control_mode,
        allow_replace=options.allow_model_replace,
        max_models=options.max_models,
        max_upload_files=options.max_upload_files,
        max_upload_bytes=options.max_upload_bytes,
        poll_seconds=options.repository_poll_secs,
    )


# -- parent death ---------------------------------------------------------------------------


def watch_parent_early(parent_pid: int, *, pdeathsig: bool = False, pidfd: bool = False) -> None:
    """Exit when ``parent_pid`` dies: Linux PR_SET_PDEATHSIG (optional) + a polling thread.

    The polling thread catches what the prctl cannot (non-Linux, a parent that spawned us from a
    thread, a parent that died before the prctl). It first asks for a graceful shutdown (SIGTERM
    to ourselves) and hard-exits if that has not finished a few seconds later. With ``pidfd``
    (a server forked by :mod:`nbinfer.server.forkserver`, whose parent is the fork server) it
    watches ``parent_pid`` through a pidfd instead, which wakes the moment that process ends.
    """
    if pidfd:
        try:
            handle = os.pidfd_open(parent_pid)
        except ProcessLookupError:
            _parent_gone_before(parent_pid)
        threading.Thread(
            target=_on_parent_exit,
            args=(parent_pid, handle),
            name="nbinfer-parent-watch",
            daemon=True,
        ).start()
        return
    if pdeathsig and sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # re-parented to init / a subreaper
        _parent_gone_before(parent_pid)

    def _poll() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.25)
        _parent_gone(parent_pid)

    threading.Thread(target=_poll, name="nbinfer-parent-watch", daemon=True).start()


def _parent_gone_before(parent_pid: int) -> NoReturn:
    """The parent died before the server could watch it: exit at once."""
    sys.stderr.write(f"nbinfer server: parent process {parent_pid} is gone; exiting\n")
    sys.stderr.flush()
    os._exit(3)


def _on_parent_exit(parent_pid: int, handle: int) -> None:
    import select

    select.select([handle], [], [])
    _parent_gone(parent_pid)


def _parent_gone(parent_pid: int) -> None:
    """Shut down gracefully (SIGTERM to ourselves); hard-exit if that takes over 5 s."""
    logger.warning("parent process %d is gone; shutting down", parent_pid)
    with contextlib.suppress(Exception):
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5.0)
    os._exit(3)


# -- assembly -------------------------------------------------------------------------------


def build_dataplane(options: ServerOptions) -> DataPlane:
    """Build the model repository (disk + demo models) and the DataPlane over it."""
    from nbinfer.server.dataplane import DataPlane
    from nbinfer.server.repository import ModelRepository

    models: list[Any] = []
    if options.demo:
        from nbinfer.server.demo import demo_models

        models = list(demo_models())
    repo = ModelRepository(
        options.model_repository or None,
        models=models,
        device=options.device,
        allow_code_upload=options.allow_code_upload,
        control=model_control(options),
    )
    return DataPlane(
        repo,
        model_workers=options.model_workers or None,
        max_abandoned=options.max_abandoned,
        max_inflight_bytes=options.max_inflight_bytes or 2 * options.max_request_bytes,
        max_parameters=options.max_parameters,
        max_sequences=options.max_sequences,
        max_sequence_id_bytes=options.max_sequence_id_bytes,
        max_shm_regions=options.max_shm_regions,
        max_shm_regions_per_caller=options.max_shm_regions_per_caller,
        allow_remote_shm=options.allow_remote_shm,
    )


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it (Linux): small responses are never held back by Nagle.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve_async(
    options: ServerOptions,
    *,
    stop: asyncio.Event | None = None,
    on_ready: Any = None,
    dataplane: DataPlane | None = None,
    on_shm_socket: Any = None,
) -> dict[str, int]:
    """Serve HTTP and gRPC on the running loop until ``stop`` is set.

    A stop waits at most ``options.grace_period`` seconds for requests in flight.

    Args:
        options: Server options.
        stop: Event that ends serving (a new one if omitted: then only cancellation stops it).
        on_ready: Callback ``on_ready(http_url, grpc_url)`` once both frontends listen.
        dataplane: Serve this DataPlane instead of building one from ``options``.
        on_shm_socket: Callback ``on_shm_socket(path)`` with the Unix socket that takes
            sealed memfd regions (``fdpass.py``), before ``on_ready``; not called when off.

    Returns:
        The requests abandoned at the stop: ``{"model (version)": count}`` (empty when every
        request finished within the grace period).
    """
    import uvicorn

    from nbinfer.server.auth import check_exposure
    from nbinfer.server.connections import HttpLimits, close_all, fd_budget, limited_protocol
    from nbinfer.server.exception_handlers import ExceptionHandlers
    from nbinfer.server.grpc import create_grpc_server
    from nbinfer.server.observability import AccessLog, check_access_log_format
    from nbinfer.server.rest import RestApp
    from nbinfer.server.scratch import sweep_in_background
    from nbinfer.server.webguard import WebGuard

    check_exposure(
        options.host, token=options.auth_token, insecure_no_auth=options.insecure_no_auth
    )
    if options.insecure_no_auth and not options.auth_token:
        logger.warning("serving %s WITHOUT authentication (--insecure-no-auth)", options.host)
    elif not options.auth_token:
        logger.warning("%s", NO_TOKEN_WARNING)
    if options.grace_period < 0:
        raise InvalidInputError(f"grace period must be >= 0 s, got {options.grace_period}")
    grace = options.grace_period
    guard = WebGuard(  # a bad entry stops the start before anything listens
        bind_host=options.host,
        allowed_hosts=options.allowed_hosts,
        allowed_origins=options.allowed_origins,
    )
    handlers = ExceptionHandlers.from_options(options.exception_handlers)
    if options.access_log:  # a bad format stops the start before anything listens
        check_access_log_format(options.access_log_format)
    stop = stop or asyncio.Event()
    dp = dataplane if dataplane is not None else build_dataplane(options)
    # What this user's killed servers left (upload copies, memfd sockets: scratch.py).
    sweep_in_background()
    if handlers:
        dp.exception_handlers = handlers
    sock = _bind(options.host, options.http_port)
    http_port = sock.getsockname()[1]
    app: Any = RestApp(
        dp,
        max_request_bytes=options.max_request_bytes,
        max_json_bytes=options.max_json_bytes,
        max_upload_bytes=options.max_upload_bytes,
        auth_token=options.auth_token,
        guard=guard,
    )
    if options.access_log:
        app = AccessLog(app, options.access_log_format)
    http_cap, grpc_cap = fd_budget()
    limits = HttpLimits(
        **{name: getattr(options, name) for name in LIMIT_OPTIONS[:6]},
        max_connections=options.max_connections or http_cap,
    )
    protocol = limited_protocol(limits)
    config = uvicorn.Config(
        app,
        loop="none",
        http=protocol,
        ws="none",
        interface="asgi3",
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=grace,  # type: ignore[arg-type]
        # Notebook clients idle for long stretches between cells: keep connections open.
        timeout_keep_alive=limits.keep_alive_timeout,  # type: ignore[arg-type]
    )
    config.load()
    http_server = uvicorn.Server(config)
    # Server.serve() would install its own signal handlers; we drive startup / main_loop /
    # shutdown ourselves so that both frontends share one loop and one shutdown path.
    http_server.lifespan = config.lifespan_class(config)

    grpc_server, grpc_port = await create_grpc_server(
        dp,
        f"{_url_host(options.host)}:{options.grpc_port}",
        max_message_bytes=options.max_request_bytes,
        auth_token=options.auth_token,
        max_connections=options.max_grpc_connections or grpc_cap,
        handshake_timeout=options.header_timeout,
        access_log=options.access_log,
    )
    await grpc_server.start()
    await http_server.startup(sockets=[sock])
    main_loop = asyncio.ensure_future(http_server.main_loop())
    http_url = f"http://{_url_host(options.host)}:{http_port}"
    grpc_url = f"{_url_host(options.host)}:{grpc_port}"
    poller: asyncio.Future[None] | None = None
    if dp.repository.control.mode == "poll":
        poller = asyncio.ensure_future(_poll_repository(dp))
    control: asyncio.Future[None] | None = None
    if options.control_fd is not None:
        from nbinfer.server.control import serve_control

        control = asyncio.ensure_future(serve_control(options.control_fd, dp))
    fdpass = _start_fdpass(options, dp)
    if fdpass is not None and on_shm_socket is not None:
        on_shm_socket(fdpass.path)
    if on_ready is not None:
        on_ready(http_url, grpc_url)
    try:
        stop_wait = asyncio.ensure_future(stop.wait())
        await asyncio.wait({stop_wait, main_loop}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
    finally:
        logger.info("nbinfer server shutting down")
        if control is not None:
            control.cancel()
        if fdpass is not None:
            fdpass.close()
        if poller is not None:
            poller.cancel()
        http_server.should_exit = True
        main_loop.cancel()  # asleep until its next 0.1 s tick, which would only see should_exit
        with contextlib.suppress(BaseException):
            await main_loop
        grpc_stop = asyncio.ensure_future(grpc_server.stop(grace=grace))
        with contextlib.suppress(Exception):
            await http_server.shutdown(sockets=[sock])
        close_all(protocol)
        with contextlib.suppress(Exception):
            await grpc_stop
        abandoned = {
            f"{mv.name} ({mv.version})": mv.inflight
            for mv in dp.repository.ready_versions()
            if mv.inflight > 0
        }
        if abandoned:
            listed = ", ".join(f"{n} request(s) of model {m}" for m, n in abandoned.items())
            logger.warning("stopping after the %g s grace period: abandoned %s", grace, listed)
        with contextlib.suppress(Exception):  # a stuck predict cannot hold the stop
            await asyncio.wait_for(dp.close(), 1.0 if abandoned else None)
    return abandoned


def _start_fdpass(options: ServerOptions, dp: DataPlane) -> Any:
    """The memfd registration socket (``fdpass.py``), or None (off, or not Linux)."""
    from nbinfer.server import fdpass

    if not options.shm_socket or not fdpass.supported():
        return None
    try:
        return fdpass.FdPassServer(dp.shm, scratch=dp.repository.scratch)
    except OSError as exc:  # no writable temporary directory: the POSIX path still works
        logger.warning("no memfd shared memory socket: %s", exc)
        return None


async def _poll_repository(dp: DataPlane) -> None:
    """``poll`` mode: rescan the repository every ``poll_seconds`` and apply the changes."""
    seconds = dp.repository.control.poll_seconds
    while True:
        await asyncio.sleep(seconds)
        try:
            changed = await dp.repository.poll()
        except Exception:
            logger.exception("polling the model repository failed")
            continue
        if changed:
            dp.models.purge()
            dp.models.check_scheduling()
            for name in changed:
                dp.sequences.drop_model(name)
            logger.info("model repository polled: %s changed", ", ".join(changed))


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    lvl = getattr(logging, level.upper(), logging.INFO)
    for name in ("nbinfer", "uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers[:] = [handler]
        lg.setLevel(lvl)
        lg.propagate = False


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - Windows
        loop = asyncio.new_event_loop()
    return loop


def run(options: ServerOptions, *, started_at: float | None = None) -> int:
    """Run the server in this process until SIGTERM / SIGINT / parent death.

    Args:
        options: Server options.
        started_at: ``time.perf_counter()`` at process start, for the reported ready time.

    Returns:
        The process exit code (0 after a graceful shutdown, 1 when startup failed).
    """
    _configure_logging(options.log_level)
    from nbinfer.server.malloc import keep_freed_memory

    keep_freed_memory()  # big tensors reuse freed memory, no page faults per request
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    stop = asyncio.Event()

    def _on_signal(signum: int) -> None:
        if stop.is_set():
            # Second signal: do not wait for the graceful shutdown any longer (its files go).
            logger.warning("second signal %d: exiting now", signum)
            from nbinfer.server.scratch import close_all

            with contextlib.suppress(Exception):
                close_all()
            os._exit(1)
        logger.info("signal %d received", signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, _on_signal, sig)

    shm_socket: list[str] = []

    def _ready(http_url: str, grpc_url: str) -> None:
        elapsed = time.perf_counter() - (_T0 if started_at is None else started_at)
        out = sys.stdout
        out.write(f"nbinfer server: HTTP {http_url}  gRPC {grpc_url}  (ready in {elapsed:.2f} s)\n")
        extra = f" shm_socket={shm_socket[0]}" if shm_socket else ""
        out.write(f"NBINFER READY http={http_url} grpc={grpc_url} pid={os.getpid()}{extra}\n")
        out.flush()

    abandoned: dict[str, int] = {}
    try:
        abandoned = loop.run_until_complete(
            serve_async(options, stop=stop, on_ready=_ready, on_shm_socket=shm_socket.append)
        )
    except Exception as exc:
        logger.error("nbinfer server failed: %s", exc, exc_info=options.log_level == "debug")
        sys.stderr.write(f"nbinfer server failed to start: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        return 1
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    if abandoned:  # threads still in a model's predict: do not wait for them at exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
