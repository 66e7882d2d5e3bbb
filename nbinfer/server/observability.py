"""Observability shared by the REST and gRPC frontends: Prometheus metrics, trace and log settings.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

* :func:`metrics_text` renders the statistics the dataplane keeps in the Prometheus text format
  with Triton's metric names (``nv_inference_request_success``, ``nv_inference_count``, ...), so
  dashboards built for Triton read nbinfer unchanged.
* :class:`LogSettings` is Triton's logging extension over the ``nbinfer`` logger (process-wide,
  as the logger is).
* :func:`trace_settings` answers Triton's trace extension: nbinfer does not trace, so the settings
  read ``trace_level: ["OFF"]`` and asking for any other level is an
  :class:`~nbinfer.errors.UnsupportedError` (HTTP 501 / gRPC ``UNIMPLEMENTED``).
* :class:`AccessLog` is the opt-in access / latency log of the HTTP frontend (one line per
  request on the ``nbinfer.access`` logger, in gunicorn's format atoms as KServe offers them);
  :func:`log_grpc_call` writes the gRPC frontend's line per RPC on the same logger.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from nbinfer.errors import InvalidInputError, UnsupportedError

__all__ = [
    "DEFAULT_ACCESS_LOG_FORMAT",
    "METRICS_CONTENT_TYPE",
    "AccessLog",
    "LogSettings",
    "check_access_log_format",
    "log_grpc_call",
    "metrics_text",
    "trace_settings",
]

#: The content type of the Prometheus text exposition format.
METRICS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

# (Triton metric name, help, how to read it from one ``model_stats`` entry)
_COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "nv_inference_request_success",
        "Number of successful inference requests, all batch sizes",
        ("inference_stats", "success", "count"),
    ),
    (
        "nv_inference_request_failure",
        "Number of failed inference requests, all batch sizes",
        ("inference_stats", "fail", "count"),
    ),
    (
        "nv_inference_count",
        "Number of inferences performed (does not include cached requests)",
        ("inference_count",),
    ),
    (
        "nv_inference_exec_count",
        "Number of model executions performed (does not include cached requests)",
        ("execution_count",),
    ),
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        ("inference_stats", "success", "ns"),
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        ("inference_stats", "queue", "ns"),
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        ("inference_stats", "compute_input", "ns"),
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        ("inference_stats", "compute_infer", "ns"),
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds "
        "(does not include cached requests)",
        ("inference_stats", "compute_output", "ns"),
    ),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _read(entry: Mapping[str, Any], path: tuple[str, ...]) -> int:
    value: Any = entry
    for key in path:
        value = value[key]
    return int(value)


def metrics_text(model_stats: Iterable[Mapping[str, Any]]) -> bytes:
    """Prometheus text for Triton-schema ``model_stats`` entries (durations in microseconds).

    Example:
        >>> text = metrics_text(dataplane.statistics()["model_stats"])  # doctest: +SKIP
    """
    rows = list(model_stats)
    lines: list[str] = []
    for name, help_text, path in _COUNTERS:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} counter")
        scale = 1000 if path[-1] == "ns" else 1
        for entry in rows:
            labels = (
                f'model="{_label(str(entry["name"]))}",version="{_label(str(entry["version"]))}"'
            )
            lines.append(f"{name}{{{labels}}} {_read(entry, path) // scale}")
    return ("\n".join(lines) + "\n").encode()


# -- trace ------------------------------------------------------------------------------------

_TRACE_DEFAULTS: dict[str, Any] = {
    "trace_file": "",
    "trace_level": ["OFF"],
    "trace_rate": "1000",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_mode": "triton",
}


def trace_settings(model: str, update: Mapping[str, Any] | None) -> dict[str, Any]:
    """Triton trace settings (global or of ``model``): tracing is always ``OFF`` in nbinfer.

    An update may reset settings or set ``trace_level`` to ``OFF``; other values change nothing.

    Raises:
        UnsupportedError: an update asks for a trace level other than ``OFF``.
        InvalidInputError: an unknown setting.
    """
    for key, value in (update or {}).items():
        if key not in _TRACE_DEFAULTS:
            raise InvalidInputError(
                f"unknown trace setting {key!r}; known: {sorted(_TRACE_DEFAULTS)}"
            )
        if key != "trace_level" or value is None:
            continue
        levels = value if isinstance(value, list | tuple) else [value]
        if any(str(v).upper() != "OFF" for v in levels):
            where = f" for model {model!r}" if model else ""
            raise UnsupportedError(
                f"tracing is not available in nbinfer (trace extension absent): cannot set "
                f"trace_level {list(levels)}{where}; only ['OFF'] is accepted"
            )
    return {k: list(v) if isinstance(v, list) else v for k, v in _TRACE_DEFAULTS.items()}


# -- log --------------------------------------------------------------------------------------


class LogSettings:
    """Triton's log settings over the ``nbinfer`` logger (shared by both frontends)."""

    _lock = threading.Lock()
    _values: ClassVar[dict[str, Any]] = {"log_file": "", "log_format": "default"}

    @classmethod
    def get(cls) -> dict[str, Any]:
        """The current settings (``log_info`` / ``log_warning`` / ``log_error`` / verbosity)."""
        logger = logging.getLogger("nbinfer")
        level = logger.getEffectiveLevel()
        return {
            "log_file": cls._values["log_file"],
            "log_info": level <= logging.INFO,
            "log_warning": level <= logging.WARNING,
            "log_error": level <= logging.ERROR,
            "log_verbose_level": 1 if level <= logging.DEBUG else 0,
            "log_format": cls._values["log_format"],
        }

    @classmethod
    def update(cls, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Apply an update and return the new settings.

        Raises:
            InvalidInputError: an unknown setting or a value of the wrong type.
            UnsupportedError: ``log_file`` (the server logs to its parent's stream).
        """
        current = cls.get()
        for key, value in settings.items():
            if key not in current:
                raise InvalidInputError(f"unknown log setting {key!r}; known: {sorted(current)}")
            if value is None:
                continue
            if key == "log_file":
                if value:
                    raise UnsupportedError(
                        "log_file is not supported: the nbinfer server logs to its stream"
                    )
                continue
            if key == "log_format":
                cls._values["log_format"] = str(value)
                continue
            expected = int if key == "log_verbose_level" else bool
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise InvalidInputError(
                    f"log setting {key!r} must be {expected.__name__}, got {value!r}"
                )
            current[key] = value
        if current["log_verbose_level"]:
            level = logging.DEBUG
        elif current["log_info"]:
            level = logging.INFO
        elif current["log_warning"]:
            level = logging.WARNING
        elif current["log_error"]:
            level = logging.ERROR
        else:
            level = logging.CRITICAL
        with cls._lock:
            logging.getLogger("nbinfer").setLevel(level)
        return cls.get()


# -- access log -------------------------------------------------------------------------------

#: The access log line of ``--access-log`` (gunicorn's atoms, as KServe's ``--access_log_format``).
DEFAULT_ACCESS_LOG_FORMAT = '%(h)s "%(r)s" %(s)s %(b)s %(M)s ms request_id=%(request_id)s'

access_logger = logging.getLogger("nbinfer.access")


class _Atoms(dict[str, str]):
    """The atoms of one line; ``%({name}i)s`` reads a request header (gunicorn's form)."""

    headers: dict[bytes, bytes]

    def __missing__(self, key: str) -> str:
        if key.startswith("{") and key.endswith("}i"):
            value = self.headers.get(key[1:-2].lower().encode("latin-1"))
            return "-" if value is None else value.decode("latin-1")
        raise KeyError(key)


def _atoms(scope: Mapping[str, Any], status: int, size: int, seconds: float) -> _Atoms:
    headers: dict[bytes, bytes] = dict(scope.get("headers") or ())
    client = scope.get("client")
    query = scope.get("query_string") or b""
    path = scope.get("path", "")
    target = f"{path}?{query.decode('latin-1')}" if query else path
    method = scope.get("method", "-")
    protocol = f"HTTP/{scope.get('http_version', '1.1')}"
    ident = headers.get(b"x-request-id")
    atoms = _Atoms(
        h=client[0] if client else "-",
        t=time.strftime("[%d/%b/%Y:%H:%M:%S %z]"),
        r=f"{method} {target} {protocol}",
        m=method,
        U=path,
        q=query.decode("latin-1"),
        H=protocol,
        s=str(status) if status else "-",
        b=str(size) if size else "-",
        B=str(size),
        D=str(int(seconds * 1e6)),
        M=f"{seconds * 1e3:.3f}",
        L=f"{seconds:.6f}",
        a=headers.get(b"user-agent", b"-").decode("latin-1"),
        f=headers.get(b"referer", b"-").decode("latin-1"),
        request_id="-" if ident is None else ident.decode("latin-1"),
    )
    atoms.headers = headers
    return atoms


def check_access_log_format(fmt: str) -> str:
    """Return ``fmt`` once it formats a sample request.

    Raises:
        InvalidInputError: an unknown atom or a malformed ``%(...)`` directive.
    """
    sample = {"type": "http", "method": "GET", "path": "/", "headers": []}
    try:
        fmt % _atoms(sample, 200, 2, 0.001)
    except (KeyError, ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"invalid access log format {fmt!r}: {type(exc).__name__}: {exc}; atoms: h t r m U "
            "q H s b B D M L a f request_id %({header}i)s"
        ) from exc
    return fmt


class AccessLog:
    """ASGI middleware writing one ``nbinfer.access`` line per HTTP request (``--access-log``).

    Wraps the app only when asked for, so the default (off) costs nothing per request. The
    latency runs from the request's arrival at the app to its last response byte handed to
    the server; a request whose client went away before an answer logs status ``-``.
    """

    def __init__(self, app: Any, fmt: str = DEFAULT_ACCESS_LOG_FORMAT) -> None:
        self.app = app
        self.fmt = check_access_log_format(fmt)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve through the wrapped app and log the request once it is answered."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 0
        size = 0

        async def send_logged(message: Any) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        finally:
            if access_logger.isEnabledFor(logging.INFO):
                seconds = time.perf_counter() - t0
                access_logger.info(self.fmt % _atoms(scope, status, size, seconds))


def log_grpc_call(context: Any, method: str, code: str, seconds: float) -> None:
    """Write the access log line of one finished gRPC call (the gRPC frontend's ``--access-log``).

    The line is fixed (``--access-log-format`` shapes HTTP lines only: its atoms are HTTP's):
    the peer as gRPC names it, the full method, the status code name, the latency in ms (from
    the handler's start to its answer) and the ``x-request-id`` metadata (``-`` when absent).

    Args:
        context: The call's ``grpc.aio.ServicerContext``.
        method: ``/inference.GRPCInferenceService/ModelInfer`` and the like.
        code: The status code's name (``OK``, ``NOT_FOUND``, ...).
        seconds: The call's latency.
    """
    if not access_logger.isEnabledFor(logging.INFO):
        return
    request_id = "-"
    for key, value in context.invocation_metadata() or ():
        if key == "x-request-id":
            request_id = value if isinstance(value, str) else bytes(value).decode("latin-1")
            break
    access_logger.info(
        '%s "%s" %s %.3f ms request_id=%s',
        urllib.parse.unquote(context.peer()),
        method,
        code,
        seconds * 1e3,
        request_id,
    )
