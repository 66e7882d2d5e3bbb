"""``python -m nbinfer.server``: the embedded inference server process.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

Prints one machine-readable line on stdout once HTTP and gRPC are both listening::

    NBINFER READY http=http://127.0.0.1:PORT grpc=127.0.0.1:PORT pid=PID

Nothing heavy (pandas, matplotlib, IPython) is imported here, so the server is ready fast.
Once the server has shut down, the process exits at once (:func:`exit_now`): the interpreter's
teardown of gRPC's core and the uvloop loop adds about 0.4 s to every stop and does nothing the
shutdown has not already done.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence

from nbinfer.config import DEFAULT_MAX_REQUEST_BYTES

_STARTED = time.perf_counter()

__all__ = [
    "GRPC_PORT",
    "HTTP_PORT",
    "add_server_arguments",
    "build_parser",
    "choose_ports",
    "exit_now",
    "main",
]

#: Triton's conventional ports, which ``nbinfer serve`` takes when they are free.
HTTP_PORT = 8000
GRPC_PORT = 8001


#: Limit options: (flag, type, help); defaults are those of ``ServerOptions``.
_LIMIT_ARGUMENTS: tuple[tuple[str, type, str], ...] = (
    ("--max-header-bytes", int, "largest HTTP request line + headers (431 beyond)"),
    ("--max-header-count", int, "most HTTP header fields per request (431 beyond)"),
    ("--header-timeout", float, "seconds to send a complete HTTP header block (408)"),
    ("--body-timeout", float, "seconds of one HTTP body-read window (408 if too slow)"),
    ("--min-body-rate", int, "bytes/s an HTTP body must average per window"),
    ("--keep-alive-timeout", float, "seconds an idle HTTP keep-alive connection stays open"),
    ("--max-connections", int, "open HTTP connections at once (0: from ulimit -n)"),
    ("--max-grpc-connections", int, "open gRPC connections at once (0: from ulimit -n)"),
    ("--model-workers", int, "requests one model may run at once on threads (0: max(4, CPUs))"),
    ("--max-abandoned", int, "threads of given-up requests one model may leave finishing (16)"),
    (
        "--max-inflight-bytes",
        int,
        "request bytes all HTTP and gRPC requests may hold at once, 503 / RESOURCE_EXHAUSTED "
        "beyond (0: twice --max-request-bytes)",
    ),
    (
        "--max-json-bytes",
        int,
        "largest HTTP JSON body (no binary tensor data; a load's uploads count on top), 413 "
        "beyond (0: --max-request-bytes; default 64 MiB)",
    ),
    ("--max-parameters", int, "most parameters per inference request (400 beyond; 0: any)"),
    ("--max-sequences", int, "open sequences of stateful models at once (503 beyond; 0: any)"),
    ("--max-sequence-id-bytes", int, "longest string sequence_id in bytes (400 beyond)"),
    ("--max-shm-regions", int, "shared-memory regions held at once, all callers; 429 beyond"),
    ("--max-shm-regions-per-caller", int, "shm regions one local user may hold; 429 beyond"),
)


def _device(value: str) -> str:
    """``--device``: refused at start when it cannot be met (no NVIDIA driver for cuda:N)."""
    from nbinfer.errors import InvalidInputError
    from nbinfer.server.devices import check_device_request

    try:
        return check_device_request(value)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_server_arguments(
    parser: argparse.ArgumentParser, *, conventional_ports: bool = False
) -> None:
    """Add the server's options to ``parser`` (shared by ``python -m`` and ``nbinfer serve``).

    With ``conventional_ports`` the port options default to ``None``: Triton's 8000 / 8001
    when free (see :func:`choose_ports`), else free ports.
    """
    parser.add_argument(
        "--model-repository",
        metavar="DIR",
        action="append",
        default=None,
        help="Triton-style model repository directory to serve (repeatable)",
    )
    parser.add_argument(
        "--demo", action="store_true", help="also serve the demo models shipped with nbinfer"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (127.0.0.1)")
    for flag, conventional in (("--http-port", HTTP_PORT), ("--grpc-port", GRPC_PORT)):
        what = flag[2:6].upper().replace("GRPC", "gRPC")
        parser.add_argument(
            flag,
            type=int,
            default=None if conventional_ports else 0,
            help=f"{what} port (0: a free one; default: {conventional} when free, else a free one)"
            if conventional_ports
            else f"{what} port (0: a free one)",
        )
    parser.add_argument(
        "--device",
        default="auto",
        type=_device,
        help="device for the models: auto (a GPU when there is one, else the CPU with a "
        "warning), cpu or cuda:N (an error at start when the machine has no CUDA GPU) (auto)",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help=f"largest request body / gRPC message accepted ({DEFAULT_MAX_REQUEST_BYTES})",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log level (info)",
    )
    parser.add_argument(
        "--auth-token",
        metavar="TOKEN",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on HTTP and gRPC (default: "
        "$NBINFER_AUTH_TOKEN; prefer the variable: arguments are visible to other users)",
    )
    parser.add_argument(
        "--allow-code-upload",
        action="store_true",
        help="let model repository load requests upload code or pickled files (model.py, "
        "TorchScript); off by default: anyone reaching the port could run code as you",
    )
    parser.add_argument(
        "--allow-remote-shm",
        action="store_true",
        help="let callers whose local user the server cannot establish (not a loopback peer) "
        "register shared memory; off by default: the server opens the object with its own "
        "rights, so only a caller proven to own it may register it",
    )
    parser.add_argument(
        "--no-shm-socket",
        action="store_true",
        help="do not take sealed memfd shared-memory regions over a private Unix socket "
        "(Linux; on by default, advertised to the launcher on the READY line); POSIX shared "
        "memory registered over HTTP / gRPC works either way",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow binding a non-loopback --host without a token (anyone reaching it can "
        "run your models)",
    )
    _add_web_options(parser)
    _add_kserve_options(parser)
    _add_model_control_options(parser)
    import dataclasses

    from nbinfer.server.app import ServerOptions

    defaults = {f.name: f.default for f in dataclasses.fields(ServerOptions)}
    limits = parser.add_argument_group("limits and workers (see docs/server.md)")
    for flag, kind, text in _LIMIT_ARGUMENTS:
        default = defaults[flag[2:].replace("-", "_")]
        limits.add_argument(flag, type=kind, default=None, help=f"{text} ({default})")
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="exit when this process dies (set by LocalServer)",
    )
    parser.add_argument(
        "--control-fd",
        type=int,
        default=None,
        help=argparse.SUPPRESS,  # the launcher's private channel (an inherited socket)
    )
    parser.add_argument(
        "--pdeathsig",
        action="store_true",
        help="also ask Linux to send SIGTERM when the parent dies (prctl)",
    )


def _add_web_options(parser: argparse.ArgumentParser) -> None:
    """The defences against web pages in the user's browser (see ``webguard.py``)."""
    group = parser.add_argument_group("web pages (see docs/security.md#web-pages)")
    group.add_argument(
        "--allowed-hosts",
        metavar="HOST[,HOST...]",
        action="append",
        default=None,
        help="HTTP Host names or addresses accepted besides localhost, 127.0.0.1, ::1 and "
        "--host (any port; repeatable; '*': any Host). Others get 403 (DNS rebinding)",
    )
    group.add_argument(
        "--allowed-origins",
        metavar="ORIGIN[,ORIGIN...]",
        action="append",
        default=None,
        help="web page origins (scheme://host[:port]) allowed to call the HTTP API, with "
        "CORS (repeatable; '*': any). Default: none, a cross-site request gets 403",
    )


def _add_kserve_options(parser: argparse.ArgumentParser) -> None:
    """The ModelServer options KServe users look for: shutdown, access log, error mapping."""
    from nbinfer.server.app import SHUTDOWN_GRACE
    from nbinfer.server.observability import DEFAULT_ACCESS_LOG_FORMAT

    group = parser.add_argument_group("shutdown, access log, errors (see docs/server.md)")
    group.add_argument(
        "--grace-period",
        metavar="SECONDS",
        type=float,
        default=None,
        help="seconds a stop waits for requests in flight before abandoning them "
        f"({SHUTDOWN_GRACE:g}; KServe's --grace_period)",
    )
    group.add_argument(
        "--access-log",
        action="store_true",
        help="log one line per HTTP request and gRPC call: method, status, latency (ms), "
        "request id (off: no cost per request; KServe's --enable_latency_logging)",
    )
    group.add_argument(
        "--access-log-format",
        metavar="FORMAT",
        default=None,
        help="the access log line in gunicorn's atoms, as KServe's --access_log_format "
        f"({DEFAULT_ACCESS_LOG_FORMAT.replace('%', '%%')})",
    )
    group.add_argument(
        "--exception-handler",
        metavar="MODULE:EXC=MODULE:FUNC",
        action="append",
        default=None,
        help="answer a model's exception EXC with FUNC(exc) -> (status, message) on HTTP and "
        "gRPC (repeatable; both importable in the server)",
    )


def _add_model_control_options(parser: argparse.ArgumentParser) -> None:
    """Triton's model control modes and the caps on what network loads may create."""
    from nbinfer.config import (
        DEFAULT_MAX_MODELS,
        DEFAULT_MAX_UPLOAD_BYTES,
        DEFAULT_MAX_UPLOAD_FILES,
    )

    group = parser.add_argument_group("model control (see docs/security.md)")
    group.add_argument(
        "--model-control-mode",
        choices=["none", "explicit", "poll"],
        default=None,
        help="what the repository API may do, as Triton's: none = load / unload requests are "
        "refused; explicit = allowed (no replacing without --allow-model-replace); poll = "
        "the repository directories are rescanned and changes applied, the API refuses "
        "load / unload (none). Log / trace setting updates follow the same rule",
    )
    group.add_argument(
        "--allow-model-replace",
        action="store_true",
        default=None,
        help="let load requests replace a serving, repository or in-memory (demo, notebook) "
        "model with uploaded files or a config override, and unload in-memory models (off)",
    )
    group.add_argument(
        "--repository-poll-secs",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds between rescans of the repository in poll mode (15)",
    )
    for flag, default, text in (
        ("--max-models", DEFAULT_MAX_MODELS, "models known before a load of a new one is refused"),
        ("--max-upload-files", DEFAULT_MAX_UPLOAD_FILES, "uploaded files per load request"),
        ("--max-upload-bytes", DEFAULT_MAX_UPLOAD_BYTES, "uploaded bytes per load request"),
    ):
        group.add_argument(flag, type=int, default=None, help=f"most {text} ({default})")


def _port_free(host: str, port: int) -> bool:
    """Whether ``port`` can be bound on ``host`` now (as the server binds: SO_REUSEADDR)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def choose_ports(
    args: argparse.Namespace, ports: tuple[int, int] = (HTTP_PORT, GRPC_PORT)
) -> list[str]:
    """Fill unset ports with 8000 / 8001 when free, else 0 (a free port); the notices to print.

    Each port falls back on its own, and each fallback gets a notice that says so.
    """
    notices = []
    for attr, conventional in zip(("http_port", "grpc_port"), ports, strict=True):
        if getattr(args, attr) is not None:
            continue
        free = _port_free(args.host, conventional)
        setattr(args, attr, conventional if free else 0)
        if not free:
            what = "HTTP" if attr == "http_port" else "gRPC"
            flag = "--" + attr.replace("_", "-")
            notices.append(
                f"nbinfer serve: {what} port {conventional} is in use; serving {what} on a free "
                f"port instead (printed below). Choose one with {flag} PORT."
            )
    return notices


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m nbinfer.server``."""
    parser = argparse.ArgumentParser(
        prog="python -m nbinfer.server",
        description="nbinfer's embedded KServe v2 inference server (HTTP + gRPC).",
    )
    add_server_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM / SIGINT / parent death; return the exit code."""
    args = build_parser().parse_args(argv)
    if args.parent_pid is not None:
        # As early as possible, before the heavier imports below.
        from nbinfer.server.app import watch_parent_early

        watch_parent_early(args.parent_pid, pdeathsig=args.pdeathsig)
    from nbinfer.server.app import ServerOptions, run

    return run(ServerOptions.from_namespace(args), started_at=_STARTED)


def exit_now(code: int) -> None:
    """End the server process with ``code`` once :func:`main` has returned.

    Logs and stdio are flushed, then ``os._exit``: the graceful shutdown is done, and the
    interpreter's own teardown would only add time to every stop.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader that went away: nothing left to tell
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
