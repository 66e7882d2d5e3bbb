"""``tritonclient.http.aio``, over nbinfer: change ``import tritonclient.http.aio`` to this module.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example::

    import nbinfer.compat.tritonclient.http.aio as httpclient

    async with httpclient.InferenceServerClient(url="localhost:8000") as client:
        inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32")]
        inputs[0].set_data_from_numpy(data)
        result = await client.infer("simple", inputs)

The methods of :mod:`nbinfer.compat.tritonclient.http`'s client, as coroutines, over
:class:`nbinfer.AsyncClient` (aiohttp). See docs/compat.md for what differs.
"""

from __future__ import annotations

from typing import Any

from nbinfer.client import AsyncClient
from nbinfer.compat._triton import _mapped
from nbinfer.compat._triton_clients import AsyncTritonClient
from nbinfer.compat.tritonclient.http import (
    InferAsyncRequest,
    InferenceServerClientPlugin,
    InferenceServerException,
    InferInput,
    InferRequestedOutput,
    InferResult,
    Request,
    _HttpAnswers,
    np_to_triton_dtype,
    raise_error,
    triton_to_np_dtype,
)
from nbinfer.config import ClientConfig, TLSConfig
from nbinfer.errors import NbinferError, count_option

__all__ = [
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
    "np_to_triton_dtype",
    "raise_error",
    "triton_to_np_dtype",
]


class InferenceServerClient(_HttpAnswers, AsyncTritonClient):
    """tritonclient's asyncio HTTP ``InferenceServerClient`` (``await client.infer(...)``).

    Args:
        url: ``host:port`` (or a full ``http(s)://`` URL).
        verbose: Ignored (nbinfer logs to the ``nbinfer`` logger).
        conn_limit: Connections open at once (0: no bound), as aiohttp's connector limit.
        conn_timeout: Seconds allowed per call.
        ssl: Use https.
        ssl_context: The ``ssl.SSLContext`` https uses (default: the system's CAs).

    Raises:
        InferenceServerException: ``conn_limit`` is not a whole number >= 0.
    """

    _protocol = "http"

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        conn_limit: int = 100,
        conn_timeout: float = 60.0,
        ssl: bool = False,
        ssl_context: Any = None,
    ) -> None:
        try:
            limit = count_option("conn_limit", conn_limit, minimum=0)
        except NbinferError as exc:
            raise _mapped(exc, "http") from exc
        client = AsyncClient(
            url if "://" in url else ("https://" if ssl else "http://") + url,
            protocol="http",
            config=ClientConfig.from_env().replace(max_connections=limit or None),
            timeout=conn_timeout,
            ssl=TLSConfig(context=ssl_context) if ssl else None,
        )
        super().__init__(client)
