"""Defences against web pages: the Host allowlist and the refusal of cross-site requests.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

A page open in the user's browser can send requests to ``127.0.0.1``: through DNS rebinding (a
name the attacker controls, re-pointed at 127.0.0.1, so the page is "same-origin" with the
server in the browser's eyes but the request carries ``Host: evil.example``), or directly as a
cross-site "simple" request (a ``text/plain`` POST needs no CORS preflight; the page cannot read
the answer, but the server has already acted on it). As Jupyter Server does, every HTTP request
is screened before routing:

- **Host**: must be a loopback name or address (``localhost``, ``127.0.0.0/8``, ``::1``, any
  port), the address the server is bound to (any IP address when bound to a wildcard: an IP
  literal cannot be rebound), or a name on ``allowed_hosts`` (``*``: any). A request without a
  ``Host`` (HTTP/1.0) passes.
- **Origin**: a request carrying ``Origin`` passes only when it is the server's own origin (the
  scheme-less Origin equals the Host) or is on ``allowed_origins`` (``*``: any). Without
  ``Origin``, ``Sec-Fetch-Site: cross-site`` or ``same-site`` (another port of localhost, e.g.
  JupyterLab's page) is refused too.

Refusals are 403 with a JSON error naming the Host / Origin and the option that allows it.
curl, tritonclient, the KServe SDK and nbinfer's clients send no ``Origin`` and a loopback
``Host``, so they pass. CORS headers are sent only to an origin on ``allowed_origins``.

Example::

    guard = WebGuard(bind_host="127.0.0.1")
    guard.refusal({b"host": b"localhost:8000"})          # None: allowed
    guard.refusal({b"host": b"evil.example:8000"})       # "... Host 'evil.example:8000' ..."
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from nbinfer.errors import InvalidInputError

__all__ = ["WebGuard", "parse_allowlist"]

_LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost", "ip6-loopback"})
_CROSS = frozenset({b"cross-site", b"same-site"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}
#: Distinct allowed Host values remembered (one dict lookup per request once seen).
_CACHE_SIZE = 256
#: Response headers an allowed cross-site page may read (binary responses need the first).
_CORS_EXPOSE = b"Inference-Header-Content-Length, Content-Encoding"


def parse_allowlist(values: Iterable[str]) -> list[str]:
    """Split comma-separated option values into entries (``["a,b", "c"]`` -> ``[a, b, c]``)."""
    out: list[str] = []
    for value in values:
        out += [part.strip() for part in str(value).split(",") if part.strip()]
    return out


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None


def _host_name(value: str) -> str | None:
    """The name or address of a ``Host`` value (lower-case, port dropped); None if malformed."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1 :]
        if rest and not (rest[0] == ":" and rest[1:].isdigit()):
            return None
        return name if _ip(name) is not None else None
    name, sep, port = text.rpartition(":")
    if not sep:
        name = text
    elif not port.isdigit() or ":" in name:
        return None
    name = name[:-1] if name.endswith(".") else name
    return name or None


def _host_entry(entry: str) -> str:
    """One ``allowed_hosts`` entry, normalized: a name or an address, without a port."""
    text = entry.strip().lower()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    ip = _ip(bare)
    if ip is not None:
        return str(ip)
    if not text or ":" in text or "/" in text or text.startswith("."):
        raise InvalidInputError(
            f"allowed host {entry!r} is not a host name or IP address (no scheme, port or path; "
            "'*' allows any)"
        )
    return text[:-1] if text.endswith(".") else text


def _origin_entry(entry: str) -> str:
    """One ``allowed_origins`` entry, normalized as browsers send it: ``scheme://host[:port]``."""
    text = entry.strip().rstrip("/").lower()
    scheme, sep, authority = text.partition("://")
    if not sep or not scheme or not authority or "/" in authority or "@" in authority:
        raise InvalidInputError(
            f"allowed origin {entry!r} is not an origin: write scheme://host[:port] as the "
            "browser's address bar shows it (e.g. http://localhost:8888), or '*' for any"
        )
    if authority.startswith("["):
        end = authority.find("]") + 1
        name, rest = authority[:end], authority[end:]
        port = rest[1:] if rest.startswith(":") else rest
        if not end or (rest and not rest.startswith(":")):
            port = "?"
    else:
        name, _, port = authority.partition(":")
    if port and not port.isdigit():
        raise InvalidInputError(f"allowed origin {entry!r} has an invalid host or port")
    if not port or _DEFAULT_PORTS.get(scheme) == port:
        authority = name
    return f"{scheme}://{authority}"


class WebGuard:
    """Screens each HTTP request's ``Host``, ``Origin`` and ``Sec-Fetch-Site`` (see module doc).

    Args:
        bind_host: The address the server is bound to (also allowed as a Host).
        allowed_hosts: More Host names or addresses to accept, any port (``"*"``: any Host).
        allowed_origins: Cross-site origins to accept and answer with CORS headers
            (``"*"``: any origin).

    Raises:
        InvalidInputError: An entry is not a host name / address, or not an origin.
    """

    __slots__ = (
        "_any_ip",
        "_bound_ip",
        "_hosts",
        "_ok",
        "any_host",
        "any_origin",
        "cors",
        "origins",
    )

    def __init__(
        self,
        *,
        bind_host: str = "127.0.0.1",
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
    ) -> None:
        hosts = parse_allowlist(allowed_hosts)
        origins = parse_allowlist(allowed_origins)
        self.any_host = "*" in hosts
        self.any_origin = "*" in origins
        bind = bind_host.strip().strip("[]").lower()
        bound = _ip(bind)
        self._any_ip = bound is not None and bound.is_unspecified
        self._bound_ip = bound
        names = set(_LOOPBACK_NAMES)
        if bound is None and bind:
            names.add(bind[:-1] if bind.endswith(".") else bind)
        names.update(_host_entry(h) for h in hosts if h != "*")
        self._hosts = frozenset(names)
        #: Origins allowed cross-site (as browsers send them), answered with CORS headers.
        self.origins = frozenset(_origin_entry(o).encode("latin-1") for o in origins if o != "*")
        #: Whether any cross-site origin is allowed (then CORS headers may be sent).
        self.cors = self.any_origin or bool(self.origins)
        self._ok: dict[bytes, bool] = {}

    def host_allowed(self, value: bytes) -> bool:
        """Whether a ``Host`` header value names this server (loopback, bound or allowed)."""
        if self.any_host or value in self._ok:
            return True
        name = _host_name(value.decode("latin-1"))
        if name is None:
            return False
        allowed = name in self._hosts
        if not allowed:
            ip = _ip(name)
            if ip is not None:
                allowed = (
                    ip.is_loopback or self._any_ip or ip == self._bound_ip or str(ip) in self._hosts
                )
        if allowed:
            if len(self._ok) >= _CACHE_SIZE:
                self._ok.clear()
            self._ok[value] = True
        return allowed

    def origin_allowed(self, origin: bytes) -> bool:
        """Whether ``origin`` is on the cross-site allowlist (not merely same-origin)."""
        return self.any_origin or origin.lower() in self.origins

    def refusal(self, headers: Mapping[bytes, bytes]) -> str | None:
        """None when the request may proceed; else the reason (the body of a 403)."""
        host = headers.get(b"host")
        if host and not self.host_allowed(host):
            shown = host.decode("latin-1")
            return (
                f"forbidden: Host {shown!r} is not a name of this server (a web page may be "
                f"reaching it through DNS rebinding); to serve it, start the server with "
                f"--allowed-hosts {_host_name(shown) or shown} "
                "(LocalServer(allowed_hosts=[...]))"
            )
        origin = headers.get(b"origin")
        fetch = headers.get(b"sec-fetch-site")
        if origin is None:
            if fetch is not None and fetch.strip().lower() in _CROSS:
                return (
                    f"forbidden: a {fetch.decode('latin-1')} request from a web page "
                    "(Sec-Fetch-Site) without an Origin; pages on other origins may not call "
                    "this server"
                )
            return None
        if self.origin_allowed(origin):
            return None
        # same-origin: the Origin without its scheme is the Host (and the browser agrees)
        if (
            host
            and origin.lower().partition(b"://")[2] == host.lower()
            and (fetch is None or fetch.strip().lower() not in _CROSS)
        ):
            return None
        shown = origin.decode("latin-1")
        return (
            f"forbidden: cross-origin request from {shown!r}; web pages on other origins may "
            f"not call this server. To allow that origin, start the server with "
            f"--allowed-origins {shown} (LocalServer(allowed_origins=[...]))"
        )

    def cors_headers(self, origin: bytes) -> list[tuple[bytes, bytes]]:
        """The CORS response headers for an allowed cross-site ``origin`` (empty otherwise)."""
        if not self.origin_allowed(origin):
            return []
        return [
            (b"access-control-allow-origin", origin),
            (b"vary", b"Origin"),
            (b"access-control-expose-headers", _CORS_EXPOSE),
        ]

    def preflight_headers(
        self, origin: bytes, methods: tuple[str, ...], requested: bytes | None
    ) -> list[tuple[bytes, bytes]]:
        """The headers answering a CORS preflight (OPTIONS) from an allowed ``origin``."""
        out = self.cors_headers(origin)
        out += [
            (b"access-control-allow-methods", ", ".join(methods).encode("latin-1")),
            (b"access-control-max-age", b"600"),
        ]
        if requested:
            out.append((b"access-control-allow-headers", requested))
        return out
