"""Client and server settings: timeouts, retries, TLS, auth.

Precedence is explicit argument > environment variable > default. This module is a leaf: it
imports nothing from nbinfer but :mod:`nbinfer.errors`. It also holds the in-process registry of
local servers' tokens (:func:`register_local_server`, :func:`local_server_token`), the one place
both the launcher (server layer) and the clients can reach.

Example::

    from nbinfer.config import ClientConfig, Retries, Timeouts

    config = ClientConfig(timeouts=Timeouts(connect=2.0, total=30.0), retries=Retries(attempts=5))
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import os
import random
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from nbinfer.errors import InvalidInputError, count_option

if TYPE_CHECKING:  # annotations only: ssl costs ~7 ms to import, and the server never needs it
    import ssl

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_JSON_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "GENERATE_TOKEN",
    "Auth",
    "AuthTokenOption",
    "BasicAuth",
    "BearerAuth",
    "ClientConfig",
    "HeaderAuth",
    "Retries",
    "TLSConfig",
    "Timeouts",
    "adopt_local_server_tokens",
    "as_auth",
    "env_float",
    "env_int",
    "env_str",
    "local_server_shm_socket",
    "local_server_token",
    "local_server_tokens",
    "new_token",
    "register_local_server",
    "resolve_auth_token",
    "unregister_local_server",
]

#: Default bound on a request body accepted by the embedded server (bytes).
DEFAULT_MAX_REQUEST_BYTES = 256 * 1024 * 1024
#: Default bound on a JSON request body (no binary tensor data), parsed whole by the embedded
#: server: 64 MiB, tritonserver's default ``--http-max-input-size``.
DEFAULT_MAX_JSON_BYTES = 64 * 1024 * 1024

#: Embedded server: most models known before a network load of a new name is refused.
DEFAULT_MAX_MODELS = 100
#: Embedded server: most ``file:`` uploads in one load request.
DEFAULT_MAX_UPLOAD_FILES = 100
#: Embedded server: most uploaded bytes in one load request (below the body limit).
DEFAULT_MAX_UPLOAD_BYTES = 128 * 1024 * 1024

#: Default bound on a gRPC message a client sends or receives (bytes, the grpc maximum is 2 GiB).
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 * 1024


_N = TypeVar("_N", int, float)


class _GenerateToken(enum.Enum):
    """The type of :data:`GENERATE_TOKEN` (a one-member enum, so type checkers narrow it)."""

    GENERATE = "GENERATE_TOKEN"

    def __repr__(self) -> str:
        return "GENERATE_TOKEN"

    __str__ = __repr__


#: The default ``auth_token`` of ``Session()`` / ``Session.local()``: generate a random token
#: for the local server and send it from the session's own clients. ``auth_token=None`` (no
#: token: any local user can call the server) is the explicit opt-out.
GENERATE_TOKEN: Final = _GenerateToken.GENERATE

#: What an ``auth_token=`` option takes: a token, ``None`` (no token) or :data:`GENERATE_TOKEN`.
AuthTokenOption = str | None | Literal[_GenerateToken.GENERATE]


def new_token() -> str:
    """A fresh random bearer token (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def resolve_auth_token(value: AuthTokenOption) -> str | None:
    """The token an ``auth_token=`` option means: ``GENERATE_TOKEN`` makes a new one.

    Raises:
        InvalidInputError: ``value`` is not a string, ``None`` or ``GENERATE_TOKEN``, or is a
            string that cannot travel in an HTTP header (empty, whitespace, non-ASCII).
    """
    if value is GENERATE_TOKEN:
        return new_token()
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(
            f"auth_token must be a string, None (no token) or GENERATE_TOKEN, not {value!r}"
        )
    if not value or not value.isascii() or not value.isprintable() or value != value.strip():
        raise InvalidInputError(
            "auth_token must be non-empty printable ASCII without surrounding whitespace "
            "(it travels in the Authorization header); pass None for no token"
        )
    return value


# -- the in-process registry of local servers' tokens -------------------------------------
#
# A LocalServer started by this process registers its exact loopback addresses (host:port as
# its READY line gives them) with its token; a client made in this process without any
# credentials for one of those addresses sends that token. Nothing leaves the process: no
# file, no environment variable; a forked child (another pid) finds nothing.

_LOOPBACK_NAMES: Final = {"localhost": "127.0.0.1", "127.0.0.1": "127.0.0.1"}


@dataclass(frozen=True, slots=True)
class _Registration:
    token: str | None = field(repr=False)
    running: Callable[[], bool]
    pid: int
    owner: int
    #: The server's Unix socket for sealed memfd regions (``server/fdpass.py``), if any.
    shm_socket: str | None = None


_LOCAL_SERVERS: dict[str, _Registration] = {}
_LOCAL_SERVERS_LOCK = threading.Lock()


def _local_address(url: str) -> str | None:
    """``host:port`` of a plaintext loopback ``url`` (``localhost`` -> ``127.0.0.1``), or None.

    Accepts ``host:port``, ``http://host:port`` and ``grpc://host:port`` (a trailing ``/`` is
    ignored). TLS schemes, paths, other hosts and missing ports give ``None``.
    """
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        scheme, rest = "", url.strip()
    if scheme.lower() not in ("", "http", "grpc"):
        return None
    rest = rest.rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or "/" in rest:
        return None
    canonical = _LOOPBACK_NAMES.get(host.lower())
    return None if canonical is None else f"{canonical}:{int(port)}"


def register_local_server(
    urls: tuple[str, ...],
    token: str | None,
    running: Callable[[], bool],
    owner: object,
    *,
    shm_socket: str | None = None,
) -> None:
    """Record that this process runs a local server at ``urls`` requiring ``token``.

    Called by :class:`nbinfer.server.launcher.LocalServer` once its server is ready; a client
    of this process made without credentials for one of those exact loopback addresses then
    sends ``token`` (see :func:`local_server_token`).

    Args:
        urls: The server's addresses (``host:port`` as its READY line gives them).
        token: The bearer token the server requires (``None``: none).
        running: Whether the server is still running (checked on every lookup).
        owner: The registering object; :func:`unregister_local_server` removes only its entries.
        shm_socket: The server's Unix socket for sealed memfd regions (see
            :func:`local_server_shm_socket`).
    """
    entry = _Registration(token, running, os.getpid(), id(owner), shm_socket)
    with _LOCAL_SERVERS_LOCK:
        for url in urls:
            address = _local_address(url)
            if address is not None:
                _LOCAL_SERVERS[address] = entry


def unregister_local_server(owner: object) -> None:
    """Forget every address ``owner`` registered (its server stopped)."""
    with _LOCAL_SERVERS_LOCK:
        for address in [a for a, e in _LOCAL_SERVERS.items() if e.owner == id(owner)]:
            del _LOCAL_SERVERS[address]


def _local_entry(url: str) -> _Registration | None:
    address = _local_address(url)
    if address is None:
        return None
    with _LOCAL_SERVERS_LOCK:
        entry = _LOCAL_SERVERS.get(address)
    if entry is None or entry.pid != os.getpid() or not entry.running():
        return None
    return entry


def local_server_shm_socket(url: str) -> str | None:
    """The memfd-region socket of the running local server this process started at ``url``.

    Same rules as :func:`local_server_token`; ``None`` when the server has none.
    """
    entry = _local_entry(url)
    return None if entry is None else entry.shm_socket


def local_server_token(url: str) -> str | None:
    """The token of the running local server this process started at ``url``, or ``None``.

    ``url`` must name the server's exact loopback address (scheme-less, ``http://`` or
    ``grpc://``; ``localhost`` and ``127.0.0.1`` are the same host). A server that has exited,
    or one registered by another process (a forked parent), gives ``None``.
    """
    entry = _local_entry(url)
    return None if entry is None else entry.token


def local_server_tokens(urls: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``(url, token)`` of each of ``urls`` that is a running local server this process started.

    What a worker process (Dask, Spark) needs to call them: it did not start them, so its own
    registry does not know their tokens until :func:`adopt_local_server_tokens`.
    """
    found = ((url, local_server_token(url)) for url in urls)
    return tuple((url, token) for url, token in found if token is not None)


def adopt_local_server_tokens(tokens: Sequence[tuple[str, str]], owner: object) -> None:
    """In a worker process: clients of these URLs send these tokens (``local_server_tokens``).

    A URL this process already knows (a server it started itself) keeps its own entry.
    """
    for url, token in tokens:
        if local_server_token(url) is None:
            register_local_server((url,), token, lambda: True, owner)


def env_str(name: str, default: str | None = None) -> str | None:
    """Return the environment variable ``name`` (``NBINFER_`` prefixed) or ``default``."""
    return os.environ.get(f"NBINFER_{name}", default)


def _env_number(name: str, raw: str, parse: Callable[[str], _N]) -> _N:
    try:
        return parse(raw)
    except ValueError as exc:  # a typo in the environment must say where it is
        raise InvalidInputError(
            f"environment variable NBINFER_{name}={raw!r} is not a valid {parse.__name__}"
        ) from exc


def env_int(name: str, default: int) -> int:
    """Return the integer environment variable ``NBINFER_<name>`` or ``default``.

    Raises:
        InvalidInputError: The variable is set but not an integer.
    """
    raw = os.environ.get(f"NBINFER_{name}")
    return default if raw is None or raw == "" else _env_number(name, raw, int)


def env_float(name: str, default: float | None) -> float | None:
    """Return the float environment variable ``NBINFER_<name>`` or ``default`` (``none`` = None).

    Raises:
        InvalidInputError: The variable is set but not a number.
    """
    raw = os.environ.get(f"NBINFER_{name}")
    if raw is None or raw == "":
        return default
    if raw.lower() in ("none", "off", "inf"):
        return None
    return _env_number(name, raw, float)


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(f"NBINFER_{name}")
    if raw is None or raw == "":
        return default
    return raw.strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Client timeouts in seconds; ``None`` disables one.

    Attributes:
        connect: Time allowed to establish a connection.
        total: Time allowed for a whole call (a per-call ``timeout=`` overrides it).
        stream: Time allowed for a whole gRPC stream (``None``: no limit).
    """

    connect: float | None = 10.0
    total: float | None = 120.0
    stream: float | None = None

    @classmethod
    def from_env(cls) -> Timeouts:
        """Timeouts from ``NBINFER_CONNECT_TIMEOUT`` / ``NBINFER_TIMEOUT`` or the defaults."""
        base = cls()
        return cls(
            connect=env_float("CONNECT_TIMEOUT", base.connect),
            total=env_float("TIMEOUT", base.total),
            stream=env_float("STREAM_TIMEOUT", base.stream),
        )


@dataclass(frozen=True, slots=True)
class Retries:
    """Retry policy: exponential backoff with jitter for connection errors and 503/UNAVAILABLE.

    Attributes:
        attempts: Total attempts per call (1 = no retry).
        backoff: Delay before the first retry (seconds); doubles on each further retry.
        max_backoff: Cap on one delay.
        infer: Also retry inference calls (off by default: inference may not be idempotent).
    """

    attempts: int = 3
    backoff: float = 0.05
    max_backoff: float = 2.0
    infer: bool = False

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based), with +-25% jitter."""
        base = min(self.max_backoff, self.backoff * float(2 ** max(0, retry - 1)))
        return base * (0.75 + 0.5 * random.random())

    @classmethod
    def from_env(cls) -> Retries:
        """Retries from ``NBINFER_RETRIES`` (attempts) or the defaults."""
        return cls(attempts=max(1, env_int("RETRIES", cls().attempts)))


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """TLS settings (used for ``https://`` and ``grpcs://`` URLs).

    Passed as a client's ``ssl=``, it also turns an ``http://`` / ``grpc://`` URL into
    ``https://`` / ``grpcs://`` (as ``ssl=True`` does); as ``ClientConfig.tls`` (or from
    ``NBINFER_CA_FILE`` ...) it is only the settings a TLS URL uses.

    Attributes:
        verify: Verify the server certificate (HTTP only: gRPC always verifies).
        ca_file: PEM bundle of trusted CAs (``None``: the system / grpc default roots).
        cert_file: Client certificate (PEM) for mutual TLS.
        key_file: Client private key (PEM) for mutual TLS.
        server_hostname: Override the name checked against the certificate (gRPC).
        context: An ``ssl.SSLContext`` used as it is, in place of the fields above, by the
            asyncio and httpx HTTP engines (tritonclient.http.aio's ``ssl_context``); the
            sync curl engine and gRPC take files only and refuse it.
    """

    verify: bool = True
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_hostname: str | None = None
    context: ssl.SSLContext | None = None

    def files_only(self, where: str) -> None:
        """Refuse an ``ssl.SSLContext`` where only files can be used (``where`` names it).

        Raises:
            InvalidInputError: ``context`` is set.
        """
        if self.context is not None:
            raise InvalidInputError(
                f"TLSConfig(context=...) works over HTTP with the asyncio or httpx engine; "
                f"{where} takes files: give ca_file= / cert_file= / key_file= instead"
            )

    def read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """Return ``(root CAs, private key, certificate chain)`` file contents for grpc."""
        self.files_only("gRPC")

        def load(path: str | None) -> bytes | None:
            if path is None:
                return None
            with open(path, "rb") as fh:
                return fh.read()

        return load(self.ca_file), load(self.key_file), load(self.cert_file)

    @classmethod
    def from_env(cls) -> TLSConfig:
        """TLS settings from ``NBINFER_{CA,CERT,KEY}_FILE`` and ``NBINFER_TLS_VERIFY``."""
        return cls(
            verify=_env_bool("TLS_VERIFY", True),
            ca_file=env_str("CA_FILE"),
            cert_file=env_str("CERT_FILE"),
            key_file=env_str("KEY_FILE"),
        )


class Auth:
    """Credentials sent with every call, as request headers (HTTP) or call metadata (gRPC)."""

    def headers(self) -> dict[str, str]:
        """The headers carrying the credentials (lower-case names)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class BasicAuth(Auth):
    """HTTP basic authentication."""

    username: str
    password: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        """``authorization: Basic ...``."""
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
        return {"authorization": f"Basic {token}"}


@dataclass(frozen=True, slots=True)
class BearerAuth(Auth):
    """Bearer token authentication (``authorization: Bearer <token>``)."""

    token: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        """``authorization: Bearer <token>``."""
        return {"authorization": f"Bearer {self.token}"}


@dataclass(frozen=True, slots=True)
class HeaderAuth(Auth):
    """Credentials in an arbitrary header (API keys, ``x-api-key: ...``)."""

    name: str
    value: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        """The one header."""
        return {self.name.lower(): self.value}


def as_auth(value: Auth | tuple[str, str] | str | None) -> Auth | None:
    """Normalise ``auth=``: an :class:`Auth`, a ``(user, password)`` pair or a bearer token."""
    if value is None or isinstance(value, Auth):
        return value
    if isinstance(value, str):
        return BearerAuth(value)
    if isinstance(value, tuple) and len(value) == 2:
        return BasicAuth(str(value[0]), str(value[1]))
    raise InvalidInputError(
        f"auth must be an Auth, a (username, password) pair or a bearer token, not {value!r}"
    )


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything a :class:`nbinfer.Client` needs besides its URL.

    Attributes:
        timeouts: Connect / call / stream timeouts.
        retries: Retry policy.
        tls: TLS settings (``None``: defaults; only used for https / grpcs).
        auth: Credentials sent with every call.
        headers: Extra headers (HTTP) / metadata (gRPC) sent with every call.
        binary: HTTP only: ``True`` / ``False`` forces binary tensor data on or off; ``None``
            uses it when the server lists the ``binary_tensor_data`` extension.
        compression: ``"gzip"`` compresses request bodies / gRPC messages (``None``: off).
        http2: Sync HTTP only (aiohttp has no HTTP/2): ALPN for https, prior knowledge (h2c)
            for http, which needs an h2c-capable server.
        max_message_bytes: gRPC send / receive message limit.
        keepalive_seconds: TCP / gRPC keepalive ping interval (``None``: engine default).
        user_agent: ``User-Agent`` sent over HTTP.
        max_connections: asyncio HTTP (aiohttp): connections open at once per event loop,
            further calls wait for one (tritonclient.http.aio's ``conn_limit``; ``None``: no
            bound). The sync client opens one per worker thread.
    """

    timeouts: Timeouts = field(default_factory=Timeouts)
    retries: Retries = field(default_factory=Retries)
    tls: TLSConfig | None = None
    auth: Auth | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    binary: bool | None = None
    compression: str | None = None
    http2: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    keepalive_seconds: float | None = 30.0
    user_agent: str = "nbinfer"
    max_connections: int | None = None

    def __post_init__(self) -> None:
        if self.max_connections is not None:
            count_option("max_connections", self.max_connections)
        if self.compression not in (None, "gzip"):
            raise InvalidInputError(
                f"unsupported compression {self.compression!r}; supported: 'gzip' or None"
            )
        if self.retries.attempts < 1:
            raise InvalidInputError(f"retries.attempts must be >= 1, not {self.retries.attempts}")

    def replace(self, **changes: Any) -> ClientConfig:
        """A copy with some fields changed (``None`` values are ignored)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls) -> ClientConfig:
        """Defaults overridden by ``NBINFER_*`` environment variables.

        Reads ``NBINFER_TIMEOUT``, ``NBINFER_CONNECT_TIMEOUT``, ``NBINFER_RETRIES``,
        ``NBINFER_CA_FILE`` / ``NBINFER_CERT_FILE`` / ``NBINFER_KEY_FILE`` / ``NBINFER_TLS_VERIFY``,
        ``NBINFER_TOKEN`` (bearer token), ``NBINFER_BINARY`` and ``NBINFER_HTTP2``.
        """
        token = env_str("TOKEN")
        binary_raw = env_str("BINARY")
        return cls(
            timeouts=Timeouts.from_env(),
            retries=Retries.from_env(),
            tls=TLSConfig.from_env(),
            auth=BearerAuth(token) if token else None,
            binary=None if not binary_raw else _env_bool("BINARY", True),
            http2=_env_bool("HTTP2", False),
        )

    @classmethod
    def from_rest_config(cls, rest_config: Any) -> ClientConfig:
        """Translate a KServe ``RESTConfig`` (object or mapping) into a :class:`ClientConfig`.

        Accepts what ``RESTConfig`` accepts:

        - ``timeout``: seconds, ``None`` (no limit), an ``httpx.Timeout`` or a
          ``(connect, read[, write, pool])`` tuple (``connect`` -> ``Timeouts.connect``,
          ``read`` -> ``Timeouts.total``);
        - ``verify``: a bool, a CA bundle path, or an ``ssl.SSLContext`` (only whether it
          verifies is kept);
        - ``cert``: a certificate path, or ``(cert, key)`` / ``(cert, key, password)``;
        - ``auth``: ``(user, password)``, a bearer token, an :class:`Auth` or an
          ``httpx.BasicAuth``;
        - ``retries`` and ``http2``. ``transport``, ``protocol`` and ``verbose`` are ignored.

        Raises:
            InvalidInputError: A value of a kind ``RESTConfig`` does not take (the message names
                the field).
        """

        def get(name: str, default: Any = None) -> Any:
            if isinstance(rest_config, Mapping):
                return rest_config.get(name, default)
            return getattr(rest_config, name, default)

        base = cls.from_env()
        retries = get("retries", None)
        tls = _rest_tls(get("verify", True), get("cert", None))
        return dataclasses.replace(
            base,
            timeouts=_rest_timeouts(get("timeout", 60), base.timeouts),
            retries=base.retries
            if retries is None
            else dataclasses.replace(base.retries, attempts=int(retries) + 1),
            http2=bool(get("http2", False)),
            tls=tls,
            auth=_rest_auth(get("auth", None)) or base.auth,
        )


def _rest_timeouts(timeout: Any, base: Timeouts) -> Timeouts:
    """KServe / httpx timeouts: a number, ``None``, an ``httpx.Timeout`` or a tuple."""
    if timeout is None:
        return dataclasses.replace(base, connect=None, total=None)
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return dataclasses.replace(base, total=float(timeout))
    if isinstance(timeout, (tuple, list)) and 1 <= len(timeout) <= 4:
        parts = [None if t is None else float(t) for t in timeout]
        read = parts[1] if len(parts) > 1 else parts[0]
        return dataclasses.replace(base, connect=parts[0], total=read)
    if all(hasattr(timeout, a) for a in ("connect", "read", "write", "pool")):  # httpx.Timeout
        connect, read = timeout.connect, timeout.read
        return dataclasses.replace(
            base,
            connect=None if connect is None else float(connect),
            total=None if read is None else float(read),
        )
    raise InvalidInputError(
        f"RESTConfig.timeout must be seconds, None, an httpx.Timeout or a tuple, not {timeout!r}"
    )


def _rest_tls(verify: Any, cert: Any) -> TLSConfig:
    """KServe's ``verify`` (bool, CA path, SSLContext) and ``cert`` (path or tuple)."""
    if isinstance(verify, (str, os.PathLike)):
        verify_flag, ca_file = True, os.fspath(verify)
    elif isinstance(verify, bool):
        verify_flag, ca_file = verify, None
    elif hasattr(verify, "verify_mode"):  # ssl.SSLContext
        verify_flag, ca_file = int(verify.verify_mode) != 0, None
    else:
        raise InvalidInputError(
            f"RESTConfig.verify must be a bool, a CA bundle path or an ssl.SSLContext, "
            f"not {verify!r}"
        )
    if cert is None:
        cert_file, key_file = None, None
    elif isinstance(cert, (str, os.PathLike)):
        cert_file, key_file = os.fspath(cert), None
    elif isinstance(cert, (tuple, list)) and 1 <= len(cert) <= 3:
        cert_file = os.fspath(cert[0])
        key_file = os.fspath(cert[1]) if len(cert) > 1 and cert[1] is not None else None
    else:
        raise InvalidInputError(
            f"RESTConfig.cert must be a path or a (cert, key[, password]) tuple, not {cert!r}"
        )
    return TLSConfig(verify=verify_flag, ca_file=ca_file, cert_file=cert_file, key_file=key_file)


def _rest_auth(auth: Any) -> Auth | None:
    """KServe's ``auth``: what :func:`as_auth` takes, or an ``httpx.BasicAuth``."""
    header = getattr(auth, "_auth_header", None)  # httpx.BasicAuth keeps its header ready
    if isinstance(header, str):
        return HeaderAuth("authorization", header)
    if isinstance(auth, list) and len(auth) == 2:
        auth = tuple(auth)
    return as_auth(auth)
