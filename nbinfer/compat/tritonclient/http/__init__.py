"""``tritonclient.http``, over nbinfer: change ``import tritonclient.http`` to this module.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example::

    import nbinfer.compat.tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url="localhost:8000")
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(data)
    result = client.infer("simple", inputs)
    result.as_numpy("OUTPUT0")

Answers are JSON dicts as tritonclient's HTTP client returns them. See docs/compat.md for what
differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbinfer.client import Client
from nbinfer.compat._triton import (
    TRITON_RESERVED_REQUEST_PARAMS,
    TRITON_RESERVED_REQUEST_PARAMS_PREFIX,
    InferAsyncRequest,
    InferenceServerClientPlugin,
    InferenceServerException,
    InferInput,
    InferRequestedOutput,
    InferResult,
    Request,
    generate_request_body,
    np_to_triton_dtype,
    parse_response_body,
    raise_error,
    triton_to_np_dtype,
)
from nbinfer.compat._triton_clients import TritonClient
from nbinfer.compat.tritonclient.utils import (
    deserialize_bytes_tensor,
    serialize_byte_tensor,
    serialized_byte_size,
)
from nbinfer.config import Timeouts, TLSConfig
from nbinfer.protocol import rest_metadata as _rest_metadata

__all__ = [
    "TRITON_RESERVED_REQUEST_PARAMS",
    "TRITON_RESERVED_REQUEST_PARAMS_PREFIX",
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
    "deserialize_bytes_tensor",
    "generate_request_body",
    "np_to_triton_dtype",
    "parse_response_body",
    "raise_error",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "triton_to_np_dtype",
]

_TO_JSON: dict[str, Callable[[Any], Any]] = {
    "get_server_metadata": _rest_metadata.server_metadata_to_json,
    "get_model_metadata": _rest_metadata.model_metadata_to_json,
    "get_model_repository_index": _rest_metadata.repository_index_to_json,
}


class _HttpAnswers:
    """HTTP answers: the v2 JSON documents, as dicts."""

    generate_request_body = staticmethod(generate_request_body)
    parse_response_body = staticmethod(parse_response_body)

    def _render(self, method: str, value: Any, as_json: bool) -> Any:
        to_json = _TO_JSON.get(method)
        return to_json(value) if to_json is not None else value


class InferenceServerClient(_HttpAnswers, TritonClient):
    """tritonclient's HTTP ``InferenceServerClient`` (blocking; ``async_infer`` on threads).

    Args:
        url: ``host:port`` (or a full ``http(s)://`` URL).
        verbose: Ignored (nbinfer logs to the ``nbinfer`` logger).
        concurrency: Threads behind ``async_infer``.
        connection_timeout: Seconds to connect.
        network_timeout: Seconds per call.
        ssl: Use https.
        ssl_options: ``{"ca_certs": ..., "certfile": ..., "keyfile": ...}`` as gevent's.
        insecure: Do not verify the server certificate.
    """

    _protocol = "http"

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        concurrency: int = 1,
        connection_timeout: float = 60.0,
        network_timeout: float = 60.0,
        max_greenlets: int | None = None,
        ssl: bool = False,
        ssl_options: Mapping[str, Any] | None = None,
        ssl_context_factory: Any = None,
        insecure: bool = False,
    ) -> None:
        options = dict(ssl_options or {})
        tls = (
            TLSConfig(
                verify=not insecure,
                ca_file=options.get("ca_certs"),
                cert_file=options.get("certfile"),
                key_file=options.get("keyfile"),
            )
            if ssl
            else None
        )
        client = Client(
            url if "://" in url else ("https://" if ssl else "http://") + url,
            timeout=Timeouts(connect=connection_timeout, total=network_timeout),
            ssl=tls,
            max_workers=max(1, concurrency),
        )
        super().__init__(client)

    def async_infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        headers: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> InferAsyncRequest:
        """Start an inference; ``.get_result()`` on the handle waits for it."""
        args = locals()
        future = self._submit(self.client.async_infer, args)
        return InferAsyncRequest(future, self._protocol, self._wrapper(args))
