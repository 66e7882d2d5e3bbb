"""What the HTTP engines share: the base URL, default headers, request compression, TLS context.

Used by :mod:`~nbinfer.transports.curl_engine`, :mod:`~nbinfer.transports.socket_engine`,
:mod:`~nbinfer.transports.aiohttp_engine` and :mod:`~nbinfer.transports.httpx_engine`; no
engine library is imported here. ``FORKS`` counts the forks this process is a child of, so a
sync engine knows a kept-alive connection is its parent's.
"""

from __future__ import annotations

import gzip
import os
import ssl

from nbinfer.config import ClientConfig

__all__ = ["FORKS", "base_url", "compress", "default_headers", "ssl_context"]

#: Bumped in a forked child: connections made before the fork are the parent's.
FORKS = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: FORKS.__setitem__(0, FORKS[0] + 1))


def base_url(url: str) -> str:
    """Normalise a client URL into ``scheme://host:port/prefix/`` (a bare host:port -> http)."""
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/") + "/"


def default_headers(config: ClientConfig) -> dict[str, str]:
    """The headers every request carries: user agent, auth, the configured extras."""
    headers = {"user-agent": config.user_agent}
    if config.auth is not None:
        headers.update(config.auth.headers())
    headers.update({k.lower(): v for k, v in config.headers.items()})
    return headers


def compress(body: bytes | None, headers: dict[str, str], config: ClientConfig) -> bytes | None:
    """Gzip ``body`` when the config asks for it (setting ``content-encoding`` in ``headers``)."""
    if body and config.compression == "gzip":
        headers["content-encoding"] = "gzip"
        return gzip.compress(body, compresslevel=1)
    return body


def ssl_context(config: ClientConfig) -> ssl.SSLContext | bool:
    """The TLS context for asyncio engines (``True``: system defaults, ``False``: no checks)."""
    tls = config.tls
    if tls is None:
        return True
    if tls.context is not None:
        return tls.context
    if not tls.verify:
        return False
    ctx = ssl.create_default_context(cafile=tls.ca_file)
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    return ctx
