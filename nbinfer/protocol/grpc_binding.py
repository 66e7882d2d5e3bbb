"""The v2 gRPC binding: API calls mapped onto RPCs, request messages and reply decoding (no I/O).

Each API call is an :data:`~nbinfer.protocol.calls.Op`: a generator that yields
:class:`~nbinfer.protocol.calls.GrpcCall` objects for an engine (:mod:`nbinfer.transports.grpc`)
to perform and receives the reply message (or a :class:`~nbinfer.protocol.calls.GrpcReply` for
``ModelInfer``). Messages, RPC paths and the lazy response reader are
:mod:`nbinfer.protocol.grpc`'s; grpcio itself is never imported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

from nbinfer.errors import InferenceError, NbinferError, UnsupportedError, error_for_grpc_code
from nbinfer.protocol import grpc as pgrpc
from nbinfer.protocol.calls import CallOptions, GrpcCall, GrpcReply, Headers, Op, read_headers
from nbinfer.protocol.dtypes import datatype_of
from nbinfer.protocol.grpc_json import config_proto_to_json, statistics_proto_to_json
from nbinfer.protocol.grpc_reply import ResponseReader
from nbinfer.protocol.grpc_settings import (
    log_settings_from_proto,
    log_settings_to_proto,
    trace_settings_from_proto,
    trace_settings_to_proto,
)
from nbinfer.protocol.types import InferRequest, InferResponse, ModelMetadata, RepositoryModel
from nbinfer.protocol.types import ServerMetadata as ServerMetadataT

__all__ = ["GrpcBinding"]

#: Request templates kept per binding (one per model / input signature).
_TEMPLATES = 256


def _unwrap(reply: Any) -> tuple[Any, Headers]:
    """The message, and its headers or what reads them (read only when asked)."""
    if type(reply) is GrpcReply:
        return reply.message, reply.headers
    return reply, {}


def _metadata(opts: CallOptions) -> tuple[tuple[str, str], ...]:
    return tuple((k.lower(), str(v)) for k, v in opts.headers.items())


class GrpcBinding:
    """The v2 gRPC RPCs and messages, as ops (generators of :class:`GrpcCall`)."""

    protocol = "grpc"

    def __init__(self) -> None:
        self._templates: dict[Any, pgrpc.RequestTemplate] = {}

    def fast_infer_call(
        self,
        key: tuple[Any, ...],
        arrays: list[Any],
        request_id: str,
        timeout: float | None,
        retry: bool,
        binary: bool | None = None,
    ) -> GrpcCall | None:
        """The ``ModelInfer`` call for plain arrays, serialized from a cached template.

        The same contract as :meth:`nbinfer.protocol.http_binding.HttpBinding.fast_infer_call`
        (``binary`` is HTTP's and ignored here); None when the inputs need the general path.
        """
        template = self._templates.get(key)
        if template is None:
            try:
                specs = [
                    (name, datatype_of(dtype), shape, math.prod(shape) * dtype.itemsize)
                    for name, dtype, shape in key[3:]
                ]
            except NbinferError:
                return None
            template = pgrpc.RequestTemplate(key[0], key[1], specs, key[2])
            if len(self._templates) >= _TEMPLATES:
                self._templates.clear()
            self._templates[key] = template
        message = template.encode(arrays, request_id)
        return GrpcCall("ModelInfer", message, (), timeout, retry, request_id or None)

    @staticmethod
    def fast_infer_reply(model_name: str, reply: Any) -> tuple[ResponseReader, Headers]:
        """Decode the reply to a :meth:`fast_infer_call` lazily, with its response metadata."""
        message, headers = _unwrap(reply)
        return ResponseReader(message), headers

    def _call(self, rpc: str, message: Any, opts: CallOptions, *, idempotent: bool = True) -> Any:
        return GrpcCall(
            rpc, message, _metadata(opts), opts.timeout, idempotent, request_id=opts.request_id
        )

    def server_live(self, opts: CallOptions) -> Op[bool]:
        """``ServerLive``."""
        reply = yield self._call("ServerLive", pgrpc.request_message("ServerLive"), opts)
        return bool(reply.live)

    def server_ready(self, opts: CallOptions) -> Op[bool]:
        """``ServerReady``."""
        reply = yield self._call("ServerReady", pgrpc.request_message("ServerReady"), opts)
        return bool(reply.ready)

    def model_ready(self, name: str, version: str, opts: CallOptions) -> Op[bool]:
        """``ModelReady``."""
        msg = pgrpc.request_message("ModelReady", name=name, version=version)
        reply, headers = _unwrap((yield self._call("ModelReady", msg, opts)))
        missing = read_headers(headers).get(pgrpc.MODEL_NOT_FOUND_METADATA)
        if missing is not None and not reply.ready:  # nbinfer's server: unknown, not unready
            raise error_for_grpc_code("NOT_FOUND", missing)
        return bool(reply.ready)

    def server_metadata(self, opts: CallOptions) -> Op[ServerMetadataT]:
        """``ServerMetadata``."""
        reply = yield self._call("ServerMetadata", pgrpc.request_message("ServerMetadata"), opts)
        return pgrpc.server_metadata_from_proto(reply)

    def model_metadata(self, name: str, version: str, opts: CallOptions) -> Op[ModelMetadata]:
        """``ModelMetadata``."""
        msg = pgrpc.request_message("ModelMetadata", name=name, version=version)
        reply = yield self._call("ModelMetadata", msg, opts)
        return pgrpc.model_metadata_from_proto(reply)

    def model_config(self, name: str, version: str, opts: CallOptions) -> Op[dict[str, Any]]:
        """``ModelConfig`` (returned as Triton-shaped JSON)."""
        msg = pgrpc.request_message("ModelConfig", name=name, version=version)
        reply = yield self._call("ModelConfig", msg, opts)
        return dict(config_proto_to_json(reply.config))

    def infer(
        self,
        request: InferRequest,
        opts: CallOptions,
        *,
        binary: bool | None = None,
        retry: bool = False,
    ) -> Op[tuple[ResponseReader, Headers]]:
        """``ModelInfer`` with raw tensor contents; outputs are decoded on access."""
        msg = pgrpc.request_to_proto(request, raw=True)
        call = GrpcCall(
            "ModelInfer", msg, _metadata(opts), opts.timeout, retry, request_id=request.id or None
        )
        message, headers = _unwrap((yield call))
        return ResponseReader(message), headers

    def stream_request(self, request: InferRequest) -> Any:
        """The ``ModelInferRequest`` sent on a stream."""
        return pgrpc.request_to_proto(request, raw=True)

    def stream_reply(self, reply: Any) -> InferResponse:
        """Decode one ``ModelStreamInferResponse``.

        Raises:
            InferenceError: The reply carries an error message.
        """
        if reply.error_message:
            request_id = reply.infer_response.id if reply.HasField("infer_response") else None
            raise InferenceError(reply.error_message, request_id=request_id or None)
        return pgrpc.response_from_proto(reply.infer_response)

    def repository_index(self, ready_only: bool, opts: CallOptions) -> Op[list[RepositoryModel]]:
        """``RepositoryIndex``."""
        msg = pgrpc.request_message("RepositoryIndex", ready=ready_only)
        reply = yield self._call("RepositoryIndex", msg, opts)
        return list(pgrpc.repository_index_from_proto(reply))

    def load_model(
        self,
        name: str,
        config: str | None,
        files: Mapping[str, bytes] | None,
        opts: CallOptions,
    ) -> Op[None]:
        """``RepositoryModelLoad`` with an optional config and file overrides."""
        msg = pgrpc.load_request_to_proto(name, config=config, files=files)
        yield self._call("RepositoryModelLoad", msg, opts, idempotent=False)
        return None

    def unload_model(self, name: str, unload_dependents: bool, opts: CallOptions) -> Op[None]:
        """``RepositoryModelUnload``."""
        msg = pgrpc.request_message("RepositoryModelUnload", model_name=name)
        pgrpc.params_to_proto({"unload_dependents": unload_dependents}, cast(Any, msg).parameters)
        yield self._call("RepositoryModelUnload", msg, opts, idempotent=False)
        return None

    def statistics(self, name: str, version: str, opts: CallOptions) -> Op[dict[str, Any]]:
        """``ModelStatistics`` (returned as Triton-shaped JSON)."""
        msg = pgrpc.request_message("ModelStatistics", name=name, version=version)
        reply = yield self._call("ModelStatistics", msg, opts)
        return dict(statistics_proto_to_json(reply))

    def trace_settings(
        self, name: str, settings: Mapping[str, Any] | None, opts: CallOptions
    ) -> Op[dict[str, Any]]:
        """``TraceSetting`` (get when ``settings`` is None)."""
        msg: Any = pgrpc.request_message("TraceSetting", model_name=name)
        trace_settings_to_proto(settings or {}, msg.settings)
        reply = yield self._call("TraceSetting", msg, opts, idempotent=settings is None)
        return trace_settings_from_proto(reply.settings)

    def log_settings(
        self, settings: Mapping[str, Any] | None, opts: CallOptions
    ) -> Op[dict[str, Any]]:
        """``LogSettings`` (get when ``settings`` is None)."""
        msg: Any = pgrpc.request_message("LogSettings")
        log_settings_to_proto(settings or {}, msg.settings)
        reply = yield self._call("LogSettings", msg, opts, idempotent=settings is None)
        return log_settings_from_proto(reply.settings)

    def shm_status(self, kind: str, name: str, opts: CallOptions) -> Op[list[dict[str, Any]]]:
        """``{System,Cuda}SharedMemoryStatus`` as a list of region dicts."""
        rpc = "SystemSharedMemoryStatus" if kind == "system" else "CudaSharedMemoryStatus"
        msg = pgrpc.request_message(rpc, name=name)
        reply = yield self._call(rpc, msg, opts)
        return pgrpc.shm_status_from_proto(kind, reply)

    def shm_register(
        self, kind: str, name: str, body: Mapping[str, Any], opts: CallOptions
    ) -> Op[None]:
        """``{System,Cuda}SharedMemoryRegister``."""
        rpc = "SystemSharedMemoryRegister" if kind == "system" else "CudaSharedMemoryRegister"
        msg = pgrpc.request_message(rpc, name=name, **dict(body))
        yield self._call(rpc, msg, opts, idempotent=False)
        return None

    def shm_unregister(self, kind: str, name: str, opts: CallOptions) -> Op[None]:
        """``{System,Cuda}SharedMemoryUnregister`` (empty name: all regions)."""
        rpc = "SystemSharedMemoryUnregister" if kind == "system" else "CudaSharedMemoryUnregister"
        msg = pgrpc.request_message(rpc, name=name)
        yield self._call(rpc, msg, opts, idempotent=False)
        return None

    def model_list(self, opts: CallOptions) -> Op[list[str]]:
        """KServe's model list is REST only (``GET v2/models``).

        Raises:
            UnsupportedError: always.
        """
        raise UnsupportedError(
            "the v2 gRPC protocol has no model list besides the repository index "
            "(KServe lists its models over REST: GET v2/models)",
            extension="model_repository",
        )
        yield  # pragma: no cover - makes this a generator

    def v1_call(self, name: str, verb: str, instances: Any, opts: CallOptions) -> Op[Any]:
        """KServe v1 has no gRPC binding.

        Raises:
            NbinferError: always.
        """
        raise NbinferError(
            f"KServe v1 {verb} is REST only; use an http:// client for model {name!r}"
        )
        yield  # pragma: no cover - makes this a generator
