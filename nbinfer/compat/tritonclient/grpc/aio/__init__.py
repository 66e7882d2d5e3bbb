"""``tritonclient.grpc.aio``, over nbinfer: change ``import tritonclient.grpc.aio`` to this module.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example::

    import nbinfer.compat.tritonclient.grpc.aio as grpcclient

    async with grpcclient.InferenceServerClient(url="localhost:8001") as client:
        result = await client.infer("simple", inputs)
        async for result, error in client.stream_infer(request_dicts()):
            ...

The methods of :mod:`nbinfer.compat.tritonclient.grpc`'s client, as coroutines, over
:class:`nbinfer.AsyncClient` (grpc.aio), and ``stream_infer``. See docs/compat.md for what
differs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from nbinfer.client import AsyncClient
from nbinfer.client import InferResult as _Result
from nbinfer.compat._triton import _mapped
from nbinfer.compat._triton_clients import AsyncTritonClient
from nbinfer.compat.tritonclient.grpc import (
    MAX_GRPC_MESSAGE_SIZE,
    InferenceServerClientPlugin,
    InferenceServerException,
    InferInput,
    InferRequestedOutput,
    InferResult,
    KeepAliveOptions,
    Request,
    _client_args,
    _GrpcAnswers,
    model_config_pb2,
    np_to_triton_dtype,
    raise_error,
    raise_error_grpc,
    service_pb2,
    service_pb2_grpc,
    triton_to_np_dtype,
)
from nbinfer.errors import InferenceError, NbinferError
from nbinfer.protocol.types import InferRequest

__all__ = [
    "MAX_GRPC_MESSAGE_SIZE",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "KeepAliveOptions",
    "Request",
    "raise_error_grpc",
    "model_config_pb2",
    "np_to_triton_dtype",
    "raise_error",
    "service_pb2",
    "service_pb2_grpc",
    "triton_to_np_dtype",
]

#: What ``stream_infer`` fills in for the keys a request dict leaves out (tritonclient's set).
_STREAM_DEFAULTS: Mapping[str, Any] = {
    "model_version": "",
    "outputs": None,
    "request_id": "",
    "sequence_id": 0,
    "sequence_start": False,
    "sequence_end": False,
    "priority": 0,
    "timeout": None,
    "parameters": None,
}


class StreamResponses:
    """What ``stream_infer`` returns: ``async for result, error in ...``; ``cancel()`` ends it.

    Each item is ``(InferResult, None)`` or, for a reply carrying an error, ``(None,
    InferenceServerException)``; the stream goes on after an error reply, as tritonclient's.
    """

    def __init__(self, replies: AsyncIterator[_Result | InferenceError]) -> None:
        self._replies = replies
        self._done = False
        #: What went wrong reading the caller's requests (grpc only sees a cancelled call).
        self.request_error: BaseException | None = None

    def __aiter__(self) -> StreamResponses:
        return self

    async def __anext__(self) -> tuple[InferResult | None, InferenceServerException | None]:
        if self._done:
            raise StopAsyncIteration
        try:
            reply = await self._replies.__anext__()
        except StopAsyncIteration:
            self._done = True
            raise
        except asyncio.CancelledError:
            if self.request_error is None:
                raise
            self._done = True
            raise self.request_error from None
        except NbinferError as exc:
            self._done = True
            raise _mapped(exc, "grpc") from exc
        if isinstance(reply, InferenceError):  # one request failed: the stream goes on
            return None, _mapped(reply, "grpc")
        return InferResult(reply, "grpc"), None

    def cancel(self) -> bool:
        """End the stream (outstanding replies are dropped)."""
        self._done = True
        aclose = getattr(self._replies, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):  # no loop, or a reply being awaited
                asyncio.get_running_loop().create_task(aclose())
        return True


class InferenceServerClient(_GrpcAnswers, AsyncTritonClient):
    """tritonclient's asyncio gRPC ``InferenceServerClient`` (``await client.infer(...)``).

    Args:
        url: ``host:port`` (or ``grpc(s)://host:port``).
        verbose: Ignored (nbinfer logs to the ``nbinfer`` logger).
        ssl: Use TLS.
        root_certificates: PEM file of trusted CAs.
        private_key: PEM file of the client key (mutual TLS).
        certificate_chain: PEM file of the client certificate (mutual TLS).
        keepalive_options: :class:`KeepAliveOptions` (its ping period is used).
    """

    _protocol = "grpc"

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        ssl: bool = False,
        root_certificates: str | None = None,
        private_key: str | None = None,
        certificate_chain: str | None = None,
        creds: Any = None,
        keepalive_options: KeepAliveOptions | None = None,
        channel_args: Any = None,
    ) -> None:
        args = _client_args(
            url, ssl, root_certificates, private_key, certificate_chain, keepalive_options
        )
        super().__init__(AsyncClient(args.pop("url"), protocol="grpc", **args))

    def stream_infer(
        self,
        inputs_iterator: AsyncIterable[Mapping[str, Any]],
        stream_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        compression_algorithm: str | None = None,
    ) -> StreamResponses:
        """Stream requests over ``ModelStreamInfer``; iterate the answer for the replies.

        ``inputs_iterator`` yields dicts of ``async_stream_infer``'s arguments (``model_name``
        and ``inputs`` required).

        Raises:
            InferenceServerException: A yielded item is not such a dict (while iterating).
        """

        async def requests() -> AsyncIterator[InferRequest]:
            try:
                async for item in inputs_iterator:
                    if not isinstance(item, Mapping):
                        raise_error("inputs_iterator is not yielding a dict")
                    if "model_name" not in item or "inputs" not in item:
                        raise_error(
                            "model_name and/or inputs is missing from inputs_iterator's "
                            "yielded dict"
                        )
                    args = {**_STREAM_DEFAULTS, **item}
                    items, kwargs = self._request(args)
                    yield await self.client.build_request(args["model_name"], items, **kwargs)
            except Exception as exc:
                responses.request_error = exc
                raise

        replies = self.client._stream_replies(
            requests(), headers=self._headers(headers), timeout=stream_timeout
        )
        responses = StreamResponses(replies)
        return responses
