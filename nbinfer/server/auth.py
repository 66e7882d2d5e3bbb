"""Optional bearer-token authentication of the embedded server, and the exposure guard.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

With a token (``--auth-token``, ``NBINFER_AUTH_TOKEN`` or ``LocalServer(auth_token=...)``) every
HTTP request needs ``Authorization: Bearer <token>`` (else 401 with a JSON error) and every gRPC
call the metadata ``authorization: Bearer <token>`` (else UNAUTHENTICATED). Only liveness stays
open (``GET /v2/health/live`` and gRPC ``ServerLive``) so that probes work without the secret; it
reveals nothing but "the process is up". Tokens are compared in constant time.

Binding an interface other than loopback without a token is refused unless
``--insecure-no-auth`` says so explicitly: an inference server runs whatever models it serves on
whatever inputs it gets.

Example::

    check_exposure("0.0.0.0", token=None, insecure_no_auth=False)   # raises ServerStartError
    authorized(b"Bearer s3cret", "s3cret")                          # True
"""

from __future__ import annotations

import hmac
import ipaddress

from nbinfer.errors import ServerStartError

__all__ = [
    "PUBLIC_GRPC_METHODS",
    "PUBLIC_HTTP_PATHS",
    "authorized",
    "check_exposure",
    "is_loopback",
]

#: HTTP paths served without a token (liveness only).
PUBLIC_HTTP_PATHS = frozenset({"/v2/health/live"})
#: gRPC methods served without a token (liveness only).
PUBLIC_GRPC_METHODS = frozenset({"ServerLive"})

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback interface (127.0.0.0/8, ::1, ``localhost``)."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, token: str | None, insecure_no_auth: bool) -> None:
    """Refuse to serve a non-loopback interface without a token (unless explicitly insecure).

    Raises:
        ServerStartError: ``host`` is not loopback, no token is set and ``insecure_no_auth`` is
            False.
    """
    if token or insecure_no_auth or is_loopback(host):
        return
    raise ServerStartError(
        f"refusing to bind {host!r} without authentication: anyone who can reach it could run "
        "inference on your models. Set a token (--auth-token / NBINFER_AUTH_TOKEN / "
        "LocalServer(auth_token=...)), bind 127.0.0.1, or pass --insecure-no-auth if you really "
        "mean to expose it"
    )


def authorized(header: bytes | str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>`` (constant-time compare)."""
    if header is None:
        return False
    raw = header.encode("latin-1") if isinstance(header, str) else bytes(header)
    scheme, _, given = raw.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(given.strip(), token.encode("utf-8"))
