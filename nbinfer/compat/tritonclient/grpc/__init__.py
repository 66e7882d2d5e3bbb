"""``tritonclient.grpc``, over nbinfer: change ``import tritonclient.grpc`` to this module.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example::

    import nbinfer.compat.tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url="localhost:8001")
    inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(data)
    client.infer("simple", inputs).as_numpy("OUTPUT0")

Answers are the v2 protobuf messages tritonclient's gRPC client returns (``as_json=True``: dicts).
See docs/compat.md for what differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbinfer.client import Client
from nbinfer.client import InferResult as _Result
from nbinfer.compat import _triton
from nbinfer.compat._triton import (
    MAX_GRPC_MESSAGE_SIZE,
    TRITON_RESERVED_REQUEST_PARAMS,
    TRITON_RESERVED_REQUEST_PARAMS_PREFIX,
    InferenceServerClientPlugin,
    InferenceServerException,
    InferInput,
    InferResult,
    Request,
    _as_dict,
    _mapped,
    np_to_triton_dtype,
    raise_error,
    triton_to_np_dtype,
)
from nbinfer.compat._triton_clients import TritonClient
from nbinfer.compat.tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
from nbinfer.compat.tritonclient.utils import (
    deserialize_bytes_tensor,
    serialize_byte_tensor,
    serialized_byte_size,
)
from nbinfer.config import ClientConfig, Timeouts, TLSConfig
from nbinfer.errors import NbinferError
from nbinfer.protocol import grpc as _grpc
from nbinfer.protocol import grpc_json as _grpc_json

__all__ = [
    "MAX_GRPC_MESSAGE_SIZE",
    "TRITON_RESERVED_REQUEST_PARAMS",
    "TRITON_RESERVED_REQUEST_PARAMS_PREFIX",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "KeepAliveOptions",
    "Request",
    "deserialize_bytes_tensor",
    "model_config_pb2",
    "np_to_triton_dtype",
    "raise_error",
    "raise_error_grpc",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "service_pb2",
    "service_pb2_grpc",
    "triton_to_np_dtype",
]


def raise_error_grpc(rpc_error: Any) -> None:
    """Raise a ``grpc.RpcError`` as :class:`InferenceServerException` (tritonclient's helper)."""
    code = rpc_error.code()
    raise InferenceServerException(
        str(rpc_error.details()),
        f"StatusCode.{code.name}" if code is not None else None,
        rpc_error.debug_error_string() if hasattr(rpc_error, "debug_error_string") else None,
    ) from rpc_error


#: ``callback(result, error)`` as tritonclient calls it.
Callback = Callable[[InferResult | None, InferenceServerException | None], None]

#: tritonclient's "keepalive off" period (INT32_MAX milliseconds).
_NEVER_MS = 2**31 - 1


@dataclasses.dataclass
class KeepAliveOptions:
    """gRPC keepalive settings, as tritonclient's ``KeepAliveOptions``.

    Passed to ``InferenceServerClient``, ``keepalive_time_ms`` sets the channel's ping period
    (INT32_MAX, the default: no pings). The other fields are kept for ported code; nbinfer's
    channel uses its own values for them (a 20 s ping timeout, pings allowed without calls).
    Without ``keepalive_options`` the client keeps nbinfer's default (a ping every 30 s).
    """

    keepalive_time_ms: int = _NEVER_MS
    keepalive_timeout_ms: int = 20000
    keepalive_permit_without_calls: bool = False
    http2_max_pings_without_data: int = 2


def _client_args(
    url: str,
    ssl: bool,
    root_certificates: str | None,
    private_key: str | None,
    certificate_chain: str | None,
    keepalive_options: KeepAliveOptions | None,
) -> dict[str, Any]:
    """The nbinfer client arguments of tritonclient's gRPC ``InferenceServerClient`` ones."""
    tls = (
        TLSConfig(ca_file=root_certificates, cert_file=certificate_chain, key_file=private_key)
        if ssl
        else None
    )
    args: dict[str, Any] = {
        "url": url if "://" in url else ("grpcs://" if ssl else "grpc://") + url,
        "ssl": tls,
        "timeout": Timeouts(total=None),
    }
    if keepalive_options is not None:
        ms = int(keepalive_options.keepalive_time_ms)
        args["config"] = dataclasses.replace(
            ClientConfig.from_env(), keepalive_seconds=ms / 1000 if 0 < ms < _NEVER_MS else None
        )
    return args


class InferRequestedOutput(_triton.InferRequestedOutput):
    """An output to return: ``InferRequestedOutput(name, class_count=0)`` (gRPC's signature)."""

    def __init__(self, name: str, class_count: int = 0) -> None:
        super().__init__(name, None, class_count)


_TO_PROTO: dict[str, Callable[[Any], Any]] = {
    "get_server_metadata": _grpc.server_metadata_to_proto,
    "get_model_metadata": _grpc.model_metadata_to_proto,
    "get_model_config": lambda c: _grpc.response_message(
        "ModelConfig", config=_grpc_json.config_json_to_proto(c, ignore_unknown_fields=True)
    ),
    "get_model_repository_index": _grpc.repository_index_to_proto,
    "get_inference_statistics": lambda s: _grpc_json.statistics_json_to_proto(
        s, ignore_unknown_fields=True
    ),
    "get_system_shared_memory_status": lambda r: _grpc.shm_status_to_proto("system", r),
    "get_cuda_shared_memory_status": lambda r: _grpc.shm_status_to_proto("cuda", r),
}


class _GrpcAnswers:
    """gRPC answers: the v2 protobuf messages (dicts with ``as_json=True``)."""

    def _render(self, method: str, value: Any, as_json: bool) -> Any:
        to_proto = _TO_PROTO.get(method)
        if to_proto is None:
            return value
        message = to_proto(value)
        return _as_dict(message) if as_json else message


class InferenceServerClient(_GrpcAnswers, TritonClient):
    """tritonclient's gRPC ``InferenceServerClient``: unary calls, ``async_infer``, streams.

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
        super().__init__(Client(args.pop("url"), **args))

    def _deliver(self, callback: Callback) -> Callable[[Any, Any], None]:
        def deliver(result: _Result | None, error: NbinferError | None) -> None:
            if error is not None:
                callback(None, _mapped(error, self._protocol))
            else:
                callback(None if result is None else self._wrap(result), None)

        return deliver

    def async_infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        callback: Callback,
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        client_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> None:
        """Start an inference; ``callback(result, error)`` gets the answer."""
        self._submit(
            self.client.async_infer,
            locals(),
            callback=self._deliver(callback),
            timeout=client_timeout,
        )

    def start_stream(
        self,
        callback: Callback,
        stream_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        """Open the bidirectional stream; every reply goes to ``callback(result, error)``."""
        self._call(
            self.client.start_stream,
            self._deliver(callback),
            headers=headers,
            timeout=stream_timeout,
        )

    def async_stream_infer(
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
        parameters: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> None:
        """Send one request on the open stream (its headers went with ``start_stream``)."""
        self._submit(self.client.stream_infer, locals(), _plug=False)

    def stop_stream(self, cancel_requests: bool = False) -> None:
        """Close the stream (waiting for outstanding replies unless ``cancel_requests``)."""
        self._call(self.client.stop_stream, cancel_requests=cancel_requests)
