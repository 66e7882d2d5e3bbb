"""The one exception tree of nbinfer.

Every error nbinfer raises is an :class:`NbinferError`. Transports translate engine errors (HTTP
engine, grpc) into the most specific class with ``raise ... from exc``; the server maps the same
classes onto HTTP statuses and gRPC codes, which each class declares once (``http_status`` /
``grpc_code``; :data:`HTTP_STATUS` / :data:`GRPC_CODE` are views of them)::

    NbinferError
    ├── TransportError                   the request did not complete
    │   ├── ConnectError                 could not reach the server
    │   └── RequestTimeoutError          connect / read / per-call deadline passed
    ├── InvalidInputError  (400)         bad tensors, shapes, datatypes, sizes, malformed messages
    │   └── DataTypeError                unknown or unsupported v2 datatype / numpy dtype
    ├── UnsupportedError                 the server lacks the extension / route a call needs
    ├── ServerError(status)              the server answered with an error
    │   ├── RemoteUnsupportedError (501) ... said by the server: also an UnsupportedError
    │   ├── ModelNotFoundError  (404)    unknown model, version or route
    │   ├── ModelNotReadyError  (503)    model known but not ready (loading, unloaded, failed)
    │   │   └── ModelLoadError (400)     loading it failed: carries the model's own error text
    │   ├── ServerUnavailableError (503) server not ready, overloaded, request timed out in queue
    │   │   └── QueueFullError (503)     a model's request queue is full (gRPC RESOURCE_EXHAUSTED)
    │   ├── PayloadTooLargeError (413)   request body above the server's limit
    │   ├── LimitExceededError (429)     a cap on what callers create or hold (regions, models)
    │   ├── UnauthenticatedError (401)   missing / wrong credentials
    │   │   └── PermissionDeniedError (403) the server refuses the action (model control)
    │   └── InferenceError  (500)        the model raised while running
    └── ServerStartError                 the local server process failed to start

Not-ready is recognised from every peer by status and message (nbinfer and KServe answer
503 / UNAVAILABLE; Triton 2.x 404 / NOT_FOUND "has no available versions" for a model without
a loaded version, 503 / UNAVAILABLE "is not at ready state" for a named version). A failed load
is 400 / INVALID_ARGUMENT on the wire, as Triton answers it, told apart by its message.

``InvalidInputError`` raised by a server response is also a ``ServerError``: clients raise
``RemoteInvalidInputError``, which inherits from both, so ``except InvalidInputError`` catches bad
input whether it was detected locally or by the server. The same holds for a missing extension or
route: HTTP 501, gRPC ``UNIMPLEMENTED`` (grpcio's "Method not found!" for an RPC the server lacks)
and a bare 404 "Not Found" (the wording of KServe's FastAPI, aiohttp and nbinfer's own router for
a route it lacks, unlike the 404s naming a model) are ``RemoteUnsupportedError``, a
``ServerError`` and an ``UnsupportedError``, from every peer and on both transports.

When a model on an nbinfer server raises, the server appends the model-side traceback (text only)
to its message after :data:`MODEL_TRACEBACK_MARKER`; clients split it off into
``ServerError.model_traceback`` (source lines filled in from this process's ``linecache``, so
code defined in a notebook cell shows its lines). Other servers' messages stay as they are.

Every error says what to try: :attr:`NbinferError.hints`, the error's own ``hint=`` when the code
that raised it knows better (a cast to make, the spec to fix), else its class's
``default_hints``. The notebook's error card shows them under "What to try".

Layer: the leaf of the package; imports nothing of nbinfer (and no grpc: codes are names).
"""

from __future__ import annotations

import builtins
import difflib
import linecache
import operator
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

__all__ = [
    "GRPC_CODE",
    "HTTP_STATUS",
    "ConnectError",
    "DataTypeError",
    "MODEL_TRACEBACK_MARKER",
    "InferenceError",
    "InvalidInputError",
    "LimitExceededError",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelNotReadyError",
    "NbinferError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QueueFullError",
    "RemoteInvalidInputError",
    "RemoteUnsupportedError",
    "ServerError",
    "ServerStartError",
    "ServerUnavailableError",
    "RequestTimeoutError",
    "TransportError",
    "UnauthenticatedError",
    "UnsupportedError",
    "connect_error",
    "count_option",
    "error_for_grpc_code",
    "split_model_traceback",
    "error_for_status",
    "grpc_code_of",
    "status_of",
]


class NbinferError(Exception):
    """Base class of every error nbinfer raises.

    Args:
        message: What went wrong, naming the model / tensor / argument.
        hint: What to try for this very error (one line or several; `backticks` mark code),
            replacing the class's ``default_hints``: e.g. the cast that fixes a datatype.
        **context: Details shown on the error card (``model``, ``tensor``, ...).

    Example::

        raise DataTypeError("input 'x' is FP64, the model wants FP32",
                            hint="Cast it: `x.astype(np.float32)`.", model="iris")
    """

    #: The HTTP status and gRPC code name a server answers this class with (declared once per
    #: class, here and on each subclass; 500 / ``INTERNAL`` unless a class says otherwise).
    http_status: ClassVar[int] = 500
    grpc_code: ClassVar[str] = "INTERNAL"

    #: A generate stream's responses received before this error (None: not from a stream).
    chunks_received: int | None = None

    #: What to try for errors of this class, when an error carries no ``hint`` of its own.
    #: ``{model}`` stands for the model the error names (``'iris'``), else ``name``.
    default_hints: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self, message: str, *, hint: str | Sequence[str] | None = None, **context: Any
    ) -> None:
        super().__init__(message)
        self.message = message
        #: Extra details (model, tensor, request_id, ...), always a dict.
        self.context: dict[str, Any] = context
        if hint is None:
            model = context.get("model")
            name = repr(model) if isinstance(model, str) and model else "name"
            own: tuple[str, ...] = tuple(h.replace("{model}", name) for h in self.default_hints)
        else:
            own = (hint,) if isinstance(hint, str) else tuple(hint)
        #: What to try, most useful first (the card's "What to try"; may be empty).
        self.hints: tuple[str, ...] = own
        #: True when ``hints`` came with the error (``hint=``), not from its class's defaults.
        self.hint_given = hint is not None

    def __str__(self) -> str:
        return self.message

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.error_card import error_bundle  # the renderer, below every layer

        return error_bundle(self)


class TransportError(NbinferError):
    """The request did not complete (network, TLS, protocol framing)."""

    default_hints: ClassVar[tuple[str, ...]] = (
        "Check the network path to the server and its TLS settings.",
    )


class ConnectError(TransportError):
    """The server could not be reached."""

    default_hints: ClassVar[tuple[str, ...]] = (
        "Is the server running? `%nbinfer status` or `session.client.is_server_live()`.",
        "Check the URL and port (HTTP and gRPC listen on different ports).",
    )


#: What a failed connection's message says about TLS -> what to try (the first that matches).
_TLS_CAUSES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (  # a plaintext server asked for a TLS handshake
        (
            "wrong version number",
            "wrong_version_number",
            "packet length too long",
            "packet_length_too_long",
            "record layer failure",
            "unknown protocol",
            "http_request",
            "does not look like a tls handshake",
        ),
        (
            "The server does not speak TLS on this port: use `http://` / `grpc://` without "
            "`ssl=`, or the port where it serves TLS.",
        ),
    ),
    (  # the certificate names another host
        (
            "hostname mismatch",
            "doesn't match",
            "does not match",
            "no alternative certificate subject name",
            "ip address mismatch",
            "peer name",
            "hostname verification",
        ),
        (
            "The server's certificate does not name the host in the URL: connect by a name it "
            "was issued for, or (gRPC) set `TLSConfig(server_hostname=...)`.",
        ),
    ),
    (  # a certificate nobody here vouches for
        (
            "certificate verify failed",
            "certificate_verify_failed",
            "self-signed",
            "self signed",
            "unable to get local issuer",
            "unknown ca",
            "certificate problem",
            "peer failed verification",
        ),
        (
            "The server's TLS certificate is not trusted here: pass the CA that signed it, "
            '`ssl=TLSConfig(ca_file="ca.pem")` (or set `NBINFER_CA_FILE`).',
            "For a throwaway test server only: `ssl=TLSConfig(verify=False)` (HTTP; gRPC always "
            "verifies).",
        ),
    ),
    (  # any other TLS failure (an expired certificate, a client certificate asked for, ...)
        ("ssl", "tls", "handshake", "certificate"),
        (
            "Check that the URL's scheme (`https://`, `grpcs://`) and `ssl=TLSConfig(...)` match "
            "the server's TLS setup (its CA, and a client certificate if it asks for one).",
        ),
    ),
)


def connect_error(url: str, detail: object) -> ConnectError:
    """The :class:`ConnectError` for a connection to ``url`` that failed with ``detail``.

    ``detail`` is the engine's message or exception. What to try follows the cause: a TLS
    failure (an untrusted certificate, another host's certificate, a plaintext server) says
    what to change instead of asking whether the server runs.
    """
    text = str(detail)
    lowered = text.lower()
    hint = next((tips for marks, tips in _TLS_CAUSES if any(m in lowered for m in marks)), None)
    return ConnectError(f"cannot connect to {url}: {text}", hint=hint, url=url)


class RequestTimeoutError(TransportError, builtins.TimeoutError):
    """A connect, read or per-call deadline passed (also a builtin ``TimeoutError``).

    Named so that it does not shadow the builtin; ``nbinfer.TimeoutError`` is a deprecated alias
    (it warns, and goes away in the next release).
    """

    default_hints: ClassVar[tuple[str, ...]] = (
        "Raise the deadline: `timeout=` on the call or `Timeouts(...)` in the client config.",
        "Send smaller batches if the model is slow on large inputs.",
    )


class InvalidInputError(NbinferError):
    """The request is malformed: unknown tensor, wrong shape, datatype or size."""

    http_status: ClassVar[int] = 400
    grpc_code: ClassVar[str] = "INVALID_ARGUMENT"

    default_hints: ClassVar[tuple[str, ...]] = (
        "Compare your inputs with `session.model({model}).metadata` (names, datatypes, shapes).",
    )


class DataTypeError(InvalidInputError):
    """An unknown or unsupported v2 datatype or numpy dtype."""

    default_hints: ClassVar[tuple[str, ...]] = (
        "Cast the data to the datatype in `session.model({model}).metadata` (e.g. "
        "`x.astype(np.float32)` for FP32).",
    )


class UnsupportedError(NbinferError):
    """The server does not offer what a call needs (a protocol extension or route).

    Raised by a :class:`~nbinfer.Session` from what the server advertises (its metadata
    ``extensions``) or from one probe, never by guessing from an unrelated error. The message names
    the server, its version, the missing extension and what to do instead.

    Attributes:
        server: The server's name (from its metadata).
        version: The server's version.
        extension: The missing extension or feature (``"statistics"``, ``"model_repository"``).
    """

    http_status: ClassVar[int] = 501
    grpc_code: ClassVar[str] = "UNIMPLEMENTED"

    def __init__(
        self,
        message: str,
        *,
        server: str = "",
        version: str = "",
        extension: str = "",
        **context: Any,
    ) -> None:
        super().__init__(message, server=server, version=version, extension=extension, **context)
        self.server = server
        self.version = version
        self.extension = extension


class ServerError(NbinferError):
    """The server answered with an error status.

    Attributes:
        status: The HTTP status (gRPC codes are mapped onto the equivalent HTTP status).
        request_id: The request id the call carried, if any.
        model_traceback: An nbinfer server's model raised: its traceback as text (the frames
            of the model's own code, last call last), else None. Part of ``str(error)``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        model_traceback: str | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, **context)
        self.status: int = self.http_status if status is None else status
        self.request_id = request_id
        self.model_traceback = model_traceback

    def __str__(self) -> str:
        if self.model_traceback:
            return f"{self.message}\n\n{self.model_traceback}"
        return self.message


class ModelNotFoundError(ServerError):
    """Unknown model, model version or route."""

    http_status: ClassVar[int] = 404
    grpc_code: ClassVar[str] = "NOT_FOUND"

    default_hints: ClassVar[tuple[str, ...]] = (
        "List the served models: `session.models` or `%nbinfer models`.",
        "Check the name and version; load it with `session.load(name)` if it is in the repository.",
    )


class ModelNotReadyError(ServerError):
    """The model exists but is not ready (loading, unloaded or failed to load)."""

    http_status: ClassVar[int] = 503
    grpc_code: ClassVar[str] = "UNAVAILABLE"

    default_hints: ClassVar[tuple[str, ...]] = (
        "Load the model: `session.load({model})`; the `reason` column of `session.models` "
        "says why it is not ready.",
    )


class ModelLoadError(ModelNotReadyError):
    """Loading (or reloading) a model failed; the message carries the model's own error.

    Raised by the repository API (``load``) when no version of the model came up: ``load()``
    raised or returned False, its code did not import, or its configuration is unusable. The
    server keeps the previous versions serving, if any.
    """

    http_status: ClassVar[int] = 400
    grpc_code: ClassVar[str] = "INVALID_ARGUMENT"

    default_hints: ClassVar[tuple[str, ...]] = (
        "The model's own error is in the message: fix its `load()` or its files, then "
        "`session.load({model})` again.",
    )


class ServerUnavailableError(ServerError):
    """The server is not ready or is overloaded."""

    http_status: ClassVar[int] = 503
    grpc_code: ClassVar[str] = "UNAVAILABLE"

    default_hints: ClassVar[tuple[str, ...]] = (
        "The server is not ready or is overloaded: retry, or check its log.",
    )


class QueueFullError(ServerUnavailableError):
    """A model's request queue is full; the request was rejected without waiting."""

    http_status: ClassVar[int] = 503
    grpc_code: ClassVar[str] = "RESOURCE_EXHAUSTED"

    default_hints: ClassVar[tuple[str, ...]] = (
        "Retry later, or lower the concurrency of your requests.",
    )


class PayloadTooLargeError(ServerError):
    """The request body is larger than the server accepts."""

    http_status: ClassVar[int] = 413
    grpc_code: ClassVar[str] = "RESOURCE_EXHAUSTED"

    default_hints: ClassVar[tuple[str, ...]] = (
        "Send the data in smaller batches (e.g. `batch_size=`), or raise the server's limit.",
    )


class LimitExceededError(ServerError):
    """A cap on what callers may hold on the server was reached (HTTP 429 / RESOURCE_EXHAUSTED).

    The message names the limit and the server option that sets it (e.g. shared-memory regions
    per caller, ``--max-shm-regions-per-caller``; models the server knows, ``--max-models``).
    Retrying as is does not help: free something first (unregister regions, unload a model) or
    ask the operator to raise the limit.
    """

    http_status: ClassVar[int] = 429
    grpc_code: ClassVar[str] = "RESOURCE_EXHAUSTED"


class UnauthenticatedError(ServerError):
    """Missing or wrong credentials."""

    http_status: ClassVar[int] = 401
    grpc_code: ClassVar[str] = "UNAUTHENTICATED"

    default_hints: ClassVar[tuple[str, ...]] = (
        "Pass credentials: `auth=` (a token or BearerAuth / BasicAuth) or `%nbinfer connect "
        "URL --token T`.",
    )


class PermissionDeniedError(UnauthenticatedError):
    """The server refuses this action whoever asks (HTTP 403 / gRPC PERMISSION_DENIED).

    E.g. a model load or unload that the server's model control mode does not allow; the
    message names the model, the mode and the option that would allow it.
    """

    http_status: ClassVar[int] = 403
    grpc_code: ClassVar[str] = "PERMISSION_DENIED"


class InferenceError(ServerError):
    """The model raised an error while running."""

    http_status: ClassVar[int] = 500
    grpc_code: ClassVar[str] = "INTERNAL"

    default_hints: ClassVar[tuple[str, ...]] = (
        "The model raised while running: its traceback (above, on an nbinfer server) points "
        "at the line; `error.model_traceback` has it as text; the server log has the rest.",
    )


class RemoteInvalidInputError(ServerError, InvalidInputError):
    """The server rejected the request as invalid input (HTTP 400 / INVALID_ARGUMENT)."""

    http_status: ClassVar[int] = 400
    grpc_code: ClassVar[str] = "INVALID_ARGUMENT"


class RemoteUnsupportedError(ServerError, UnsupportedError):
    """The server lacks the route, RPC or extension a call needs (HTTP 501 / UNIMPLEMENTED).

    Takes :class:`ServerError`'s arguments and :class:`UnsupportedError`'s keywords. A client call
    that needs an extension names itself and the server: ``server`` is then the URL it called,
    ``context["call"]`` the call, and ``__cause__`` the error as the server sent it.
    """

    http_status: ClassVar[int] = 501
    grpc_code: ClassVar[str] = "UNIMPLEMENTED"


class ServerStartError(NbinferError):
    """The local server process failed to start; the message carries its log tail."""

    default_hints: ClassVar[tuple[str, ...]] = (
        "Read the server log tail in the message; check the model repository and device.",
    )


#: The classes a server maps exceptions onto; each declares its ``http_status`` / ``grpc_code``.
_MAPPED: tuple[type[NbinferError], ...] = (
    DataTypeError,
    InvalidInputError,
    ModelNotFoundError,
    ModelLoadError,
    ModelNotReadyError,
    QueueFullError,
    ServerUnavailableError,
    PayloadTooLargeError,
    LimitExceededError,
    PermissionDeniedError,
    UnauthenticatedError,
    InferenceError,
    UnsupportedError,
)

#: Error class -> HTTP status: a read-only view of the classes' ``http_status``.
HTTP_STATUS: dict[type[NbinferError], int] = {cls: cls.http_status for cls in _MAPPED}

#: Error class -> gRPC status code name (``grpc.StatusCode[name]``): a view of the classes'
#: ``grpc_code``, kept as strings so this module stays a leaf with no grpc import.
GRPC_CODE: dict[type[NbinferError], str] = {cls: cls.grpc_code for cls in _MAPPED}


def status_of(exc: BaseException) -> int:
    """Return the HTTP status for an exception (500 for anything not an :class:`NbinferError`)."""
    return exc.http_status if isinstance(exc, NbinferError) else 500


def grpc_code_of(exc: BaseException) -> str:
    """Return the gRPC status code name for an exception (``INTERNAL`` for anything else)."""
    return exc.grpc_code if isinstance(exc, NbinferError) else "INTERNAL"


#: HTTP status -> the class a client raises for it (before :func:`_refine` reads the message).
_BY_STATUS: dict[int, type[ServerError]] = {
    cls.http_status: cls
    for cls in (
        RemoteInvalidInputError,
        UnauthenticatedError,
        PermissionDeniedError,
        ModelNotFoundError,
        PayloadTooLargeError,
        LimitExceededError,
        RemoteUnsupportedError,
        ServerUnavailableError,
    )
}
_BY_STATUS[422] = RemoteInvalidInputError  # FastAPI's validation errors (KServe)

#: gRPC code name -> the class a client raises for it; its status is the class's ``http_status``.
_BY_GRPC_CODE: dict[str, type[ServerError]] = {
    cls.grpc_code: cls
    for cls in (
        RemoteInvalidInputError,
        ModelNotFoundError,
        ServerUnavailableError,
        QueueFullError,
        UnauthenticatedError,
        PermissionDeniedError,
        RemoteUnsupportedError,
        InferenceError,
    )
}
_BY_GRPC_CODE["UNKNOWN"] = InferenceError


#: A model (not the server) that is not ready, in the words of nbinfer ("model 'm' is not
#: ready (UNAVAILABLE: unloaded)"), KServe ("Model with name m is not ready.") and Triton 2.x
#: ("Request for unknown model: 'm' has no available versions" / "... version 1 is not at ready
#: state"). "Server is not ready." names no model and stays ServerUnavailableError.
_NOT_READY = re.compile(
    r"\bmodel\b.*\b(?:is not ready|is not at ready state|has no available versions)", re.I | re.S
)
#: A failed load: nbinfer and Triton ("failed to load 'm': ..." / "failed to load 'm', failed to
#: poll from model repository", "load failed for model 'm'"), nbinfer before 0.x ("failed to load
#: model 'm'").
_LOAD_FAILED = re.compile(r"failed to load (?:model\b|['\"])|load failed for model\b", re.I)


#: A 404 for a route the server lacks, not for a model: KServe's FastAPI ({"detail": "Not
#: Found"}), aiohttp ("404: Not Found") and nbinfer's router ("no route for GET /x").
_NO_ROUTE = re.compile(r"(?:404: )?Not Found|no route for \S+ \S+", re.I)


def _refine(cls: type[ServerError], code: str, message: str) -> type[ServerError]:
    """The class a status (HTTP status as a string, or gRPC code name) gets from its message."""
    if code == "404" and _NO_ROUTE.fullmatch(message.strip()):
        return RemoteUnsupportedError
    if code in ("404", "503", "NOT_FOUND", "UNAVAILABLE") and _NOT_READY.search(message):
        return ModelNotReadyError
    if code in ("400", "INVALID_ARGUMENT") and _LOAD_FAILED.search(message):
        return ModelLoadError
    return cls


#: An nbinfer server's refusal at a cap ("... the limit of 64 shared memory regions per caller is
#: reached (--max-shm-regions-per-caller)"): RESOURCE_EXHAUSTED that is neither a full queue
#: nor a message size.
_LIMIT_REACHED = re.compile(r"\blimit of \d+\b.*\bis reached \(--max-[a-z-]+\)", re.S)

#: Between an nbinfer server's error message and the model's traceback text.
MODEL_TRACEBACK_MARKER = "\n\n--- model traceback ---\n"

_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in ')


def split_model_traceback(message: str) -> tuple[str, str | None]:
    """An error message and the model traceback an nbinfer server appended to it (or None).

    Frames without a source line (code the server cannot read, e.g. defined in a notebook
    cell) get it from this process's ``linecache`` when it knows the file.
    """
    message, marker, text = message.partition(MODEL_TRACEBACK_MARKER)
    if not marker:
        return message, None
    lines = text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        frame = _FRAME.match(line)
        has_source = i + 1 < len(lines) and lines[i + 1].startswith("    ")
        if frame and not has_source:
            source = linecache.getline(frame["file"], int(frame["line"])).strip()
            if source:
                out.append(f"    {source}")
    return message, "\n".join(out)


#: An nbinfer server's unknown model: Triton's text, then the known models ("Request for
#: unknown model: 'irs' is not found; known models: iris"; before: "unknown model 'irs'; ...").
_UNKNOWN_MODEL = re.compile(
    r"unknown model:? '(?P<name>[^']*)'(?: is not found)?; known models: (?P<known>[^\n]*)"
)


#: An nbinfer server's shape mismatch ("input 'x' of model 'iris': shape [1,3] does not match
#: the expected [-1,4]").
_SHAPE_MISMATCH = re.compile(
    r"input '(?P<tensor>[^']*)' of model '(?P<model>[^']*)': shape \[(?P<got>[-\d,]*)\] "
    r"does not match the expected \[(?P<want>[-\d,]*)\]"
)


def _shape_hint(found: re.Match[str]) -> str:
    """What a shape mismatch means in rows and columns (``'iris' needs 4 columns, got 3``)."""
    got = [int(d) for d in found["got"].split(",") if d]
    want = [int(d) for d in found["want"].split(",") if d]
    model, tensor = found["model"], found["tensor"]
    same_but_last = len(got) == len(want) >= 1 and all(
        w in (-1, g) for g, w in zip(got[:-1], want[:-1], strict=True)
    )
    if same_but_last and want[-1] != -1 and len(want) == 2:
        return (
            f"{model!r} needs {want[-1]} columns in input {tensor!r}, got {got[-1]}: pass rows "
            f"of {want[-1]} values."
        )
    return f"{model!r} takes input {tensor!r} of shape {want} (-1: any size), got {got}."


def _fitting_hints(error: ServerError) -> None:
    """Hints read off a server's words, before the class's: a close model name, a shape."""
    if error.hint_given:
        return
    unknown = _UNKNOWN_MODEL.search(error.message)
    if isinstance(error, ModelNotFoundError) and unknown is not None:
        known = [name.strip() for name in unknown["known"].split(",") if name.strip()]
        close = difflib.get_close_matches(unknown["name"], known, n=1, cutoff=0.6)
        if close:
            error.hints = (f"Did you mean `{close[0]!r}`?", *error.hints)
    shape = _SHAPE_MISMATCH.search(error.message)
    if isinstance(error, InvalidInputError) and shape is not None:
        error.hints = (_shape_hint(shape), *error.hints)


def error_for_status(
    status: int, message: str, *, request_id: str | None = None, **context: Any
) -> ServerError:
    """Build the most specific :class:`ServerError` for an HTTP status and server message.

    404 / 503 naming a model that is not ready (nbinfer, KServe, Triton wording) is
    :class:`ModelNotReadyError`; 400 reporting a failed load is :class:`ModelLoadError`.
    """
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = InferenceError if status >= 500 else ServerError
    cls = _refine(cls, str(status), message)
    message, model_tb = split_model_traceback(message)
    error = cls(message, status=status, request_id=request_id, model_traceback=model_tb, **context)
    _fitting_hints(error)
    return error


def error_for_grpc_code(
    code: str, message: str, *, request_id: str | None = None, **context: Any
) -> ServerError:
    """Build the most specific :class:`ServerError` for a gRPC status code name.

    RESOURCE_EXHAUSTED means either a full model queue (retryable, 503), a message above a
    size limit (grpc's "larger than max" / "exceeds" wording: not retryable, 413) or an
    nbinfer server's cap on what callers hold ("the limit of N ... is reached (--max-...)":
    429). UNAVAILABLE with Triton's "protocol is restricted" wording is a missing access
    header (not retryable, 403), not a busy server. NOT_FOUND / UNAVAILABLE naming a model
    that is not ready is :class:`ModelNotReadyError` (503); INVALID_ARGUMENT reporting a failed
    load is :class:`ModelLoadError`.
    """
    cls = _refine(_BY_GRPC_CODE.get(code, ServerError), code, message)
    status = None  # the class's http_status
    if code == "UNAVAILABLE" and "is restricted" in message:
        cls, status = UnauthenticatedError, 403  # as Triton's REST side answers the same refusal
    if code == "RESOURCE_EXHAUSTED" and ("larger than max" in message or "exceeds" in message):
        cls = PayloadTooLargeError
    elif code == "RESOURCE_EXHAUSTED" and _LIMIT_REACHED.search(message):
        cls = LimitExceededError
    message, model_tb = split_model_traceback(message)
    error = cls(
        message,
        status=status,
        request_id=request_id,
        grpc_code=code,
        model_traceback=model_tb,
        **context,
    )
    _fitting_hints(error)
    return error


#: Deprecated names -> (the name to use, the class).
_DEPRECATED: dict[str, tuple[str, type[NbinferError]]] = {
    "TimeoutError": ("RequestTimeoutError", RequestTimeoutError),
}


def deprecated_name(module: str, name: str) -> type[NbinferError]:
    """The class behind a deprecated error name, with a ``DeprecationWarning`` at the caller.

    Raises:
        AttributeError: ``name`` is not a deprecated name.
    """
    if name not in _DEPRECATED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new, cls = _DEPRECATED[name]
    warnings.warn(
        f"{module}.{name} is deprecated and will be removed in the next release; use "
        f"{module}.{new} (it no longer shadows the builtin {name})",
        DeprecationWarning,
        stacklevel=3,
    )
    return cls


if TYPE_CHECKING:
    TimeoutError = RequestTimeoutError  # deprecated alias, see deprecated_name
else:

    def __getattr__(name: str) -> type[NbinferError]:
        return deprecated_name(__name__, name)


def count_option(option: str, value: Any, *, minimum: int = 1) -> int:
    """A whole-number option (``batch_size=``, ``concurrency=``, ``top_k=`` ...) as an ``int``.

    Takes Python and NumPy integers (not ``bool``, not a float, not text).

    Raises:
        InvalidInputError: ``value`` is not a whole number or is below ``minimum``; the
            message names the option and the value.
    """
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError as exc:
        raise InvalidInputError(
            f"{option}= takes a whole number >= {minimum}, not {value!r}"
        ) from exc
    if number is None or number < minimum:
        raise InvalidInputError(f"{option}= takes a whole number >= {minimum}, not {value!r}")
    return number
