"""The asyncio HTTP engine: aiohttp, one ``ClientSession`` per event loop (I/O only).

Chosen by measurement (``benchmarks/client.py``): the fastest asyncio engine here. Same seam as
:class:`~nbinfer.transports.curl_engine.CurlEngine`, ``await request(method, path, body,
headers) -> HttpReply``; raises only :mod:`nbinfer.errors`. aiohttp is imported on first use.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from nbinfer.config import ClientConfig
from nbinfer.errors import RequestTimeoutError, TransportError, connect_error
from nbinfer.protocol.calls import HttpReply
from nbinfer.transports.http_common import base_url, compress, default_headers, ssl_context
from nbinfer.transports.loops import PerLoop

__all__ = ["AiohttpEngine"]


class AiohttpEngine:
    """Asyncio HTTP engine over aiohttp: one ``ClientSession`` per event loop, made on first use.

    Each loop's session is closed in that loop when the loop shuts down (``asyncio.run``
    returning) or when the engine is closed (see :class:`~nbinfer.transports.loops.PerLoop`), so
    one client serves successive and concurrent loops without leaving connections open.

    Args:
        url: The server base URL.
        config: Timeouts, TLS, auth, compression.
    """

    def __init__(self, url: str, config: ClientConfig) -> None:
        self._base = base_url(url)
        self._config = config
        self._sessions: PerLoop[Any] = PerLoop(_close_session)
        self._headers = default_headers(config)
        self._closed = False

    @property
    def url(self) -> str:
        """The base URL requests are sent under."""
        return self._base

    def _new_session(self) -> Any:
        import aiohttp

        cfg = self._config
        connector = aiohttp.TCPConnector(
            limit=cfg.max_connections or 0,
            ssl=ssl_context(cfg),
            keepalive_timeout=cfg.keepalive_seconds or 15.0,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(
                total=cfg.timeouts.total, sock_connect=cfg.timeouts.connect
            ),
            auto_decompress=True,
        )
        return self._sessions.add(session)

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> HttpReply:
        """Perform one request; the same contract as the curl engine's ``request``."""
        import aiohttp

        if self._closed:
            raise TransportError("the client is closed")
        session = self._sessions.get()
        if session is None or session.closed:
            session = self._new_session()
        url = self._base + path
        if self._config.compression is not None:
            all_headers = dict(headers)
            body = compress(body, all_headers, self._config)
            if self._config.compression == "gzip":
                all_headers["accept-encoding"] = "gzip"
            headers = all_headers
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs["timeout"] = aiohttp.ClientTimeout(
                total=timeout, sock_connect=self._config.timeouts.connect
            )
        try:
            async with session.request(method, url, data=body, headers=headers, **kwargs) as resp:
                data = await resp.read()
                return HttpReply(resp.status, {k.lower(): v for k, v in resp.headers.items()}, data)
        except aiohttp.ClientConnectorError as exc:
            raise connect_error(url, exc) from exc
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise RequestTimeoutError(f"request to {url} timed out", url=url) from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"HTTP request to {url} failed: {exc}", url=url) from exc

    async def stream_request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        timeout: float | None = None,
    ) -> AiohttpStream:
        """Start a request whose body is read as it arrives; its head is read before returning.

        ``timeout`` bounds the whole stream (``None``: no limit).

        Raises:
            ConnectError / RequestTimeoutError / TransportError: as ``request``.
        """
        import aiohttp

        if self._closed:
            raise TransportError("the client is closed")
        session = self._sessions.get()
        if session is None or session.closed:
            session = self._new_session()
        url = self._base + path
        all_headers = dict(headers)
        body = compress(body, all_headers, self._config)
        limit = aiohttp.ClientTimeout(total=timeout, sock_connect=self._config.timeouts.connect)
        try:
            resp = await session.request(method, url, data=body, headers=all_headers, timeout=limit)
        except aiohttp.ClientConnectorError as exc:
            raise connect_error(url, exc) from exc
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise RequestTimeoutError(f"request to {url} timed out", url=url) from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"HTTP request to {url} failed: {exc}", url=url) from exc
        return AiohttpStream(resp, url)

    async def aclose(self) -> None:
        """Close the sessions (idempotent): this loop's now, other running loops' in their loop."""
        self._closed = True
        await self._sessions.aclose()


class AiohttpStream:
    """A response read as it arrives: ``status``, ``headers``, then ``chunks()``; ``aclose``."""

    def __init__(self, resp: Any, url: str) -> None:
        self._resp = resp
        self.url = url
        self.status: int = resp.status
        self.headers = {k.lower(): v for k, v in resp.headers.items()}

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (the connection is closed when this ends)."""
        import aiohttp

        try:
            async for chunk in self._resp.content.iter_any():
                yield chunk
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise RequestTimeoutError(f"stream from {self.url} timed out", url=self.url) from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"stream from {self.url} failed: {exc}", url=self.url) from exc
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Done: a fully read body frees its connection; an unread one closes it (a cancel)."""
        if self._resp.content.at_eof():
            self._resp.release()
        else:
            self._resp.close()


async def _close_session(session: Any) -> None:
    await session.close()
