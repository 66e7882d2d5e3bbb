"""The gRPC frontend: a grpc.aio generic handler for ``inference.GRPCInferenceService``.

Each RPC is a few lines over the DataPlane: protobuf <-> types with :mod:`nbinfer.protocol.grpc`,
errors mapped with :func:`nbinfer.errors.grpc_code_of` onto ``context.abort``.

Imports the dataplane, auth, observability, protocol and errors; never the REST frontend or the
app.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from nbinfer.errors import InvalidInputError, NbinferError, grpc_code_of
from nbinfer.protocol import grpc as gcodec
from nbinfer.protocol.grpc import SERVICE_NAME, pb
from nbinfer.protocol.types import InferResponse
from nbinfer.server.auth import PUBLIC_GRPC_METHODS, authorized
from nbinfer.server.dataplane import EMPTY_FINAL, FINAL_RESPONSE
from nbinfer.server.observability import LogSettings, trace_settings

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane

__all__ = ["GrpcFrontend", "create_grpc_server"]

logger = logging.getLogger("nbinfer")

_Handler = Callable[[Any, Any], Awaitable[Any]]


async def _abort(context: Any, exc: BaseException) -> None:
    if isinstance(exc, NbinferError):
        code, message = grpc_code_of(exc), exc.message
    else:
        logger.exception("unhandled error in gRPC handler", exc_info=exc)
        code, message = "INTERNAL", f"internal server error: {type(exc).__name__}: {exc}"
    await context.abort(grpc.StatusCode[code], message)


_UNAUTHENTICATED = "unauthorized: send the metadata 'authorization: Bearer <token>'"


def _authorized(context: Any, token: str) -> bool:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return authorized(value, token)
    return False


class _MetadataView(Mapping[str, str]):
    """A call's invocation metadata as a read-only mapping, read only when a hook asks."""

    __slots__ = ("_context", "_items")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._items: dict[str, str] | None = None

    def _all(self) -> dict[str, str]:
        if self._items is None:
            self._items = {
                str(k): v if isinstance(v, str) else bytes(v).decode("latin-1")
                for k, v in (self._context.invocation_metadata() or ())
            }
        return self._items

    def __getitem__(self, key: str) -> str:
        return self._all()[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


async def _send_headers(context: Any, headers: dict[str, str]) -> None:
    """Headers a model set (``context.response_headers``) as gRPC initial metadata."""
    await context.send_initial_metadata(tuple((k.lower(), str(v)) for k, v in headers.items()))


def _parse(message_class: Any, data: bytes) -> Any:
    """Decode a request message; garbage is the caller's error (INVALID_ARGUMENT)."""
    try:
        return message_class.FromString(data)
    except DecodeError as exc:
        raise InvalidInputError(
            f"malformed {message_class.DESCRIPTOR.name} message: {exc}"
        ) from exc


def _guard(fn: _Handler, message_class: Any, token: str | None = None) -> _Handler:
    """Decode the request, check the token, map errors onto gRPC status codes."""

    async def handler(request: Any, context: Any) -> Any:
        if token is not None and not _authorized(context, token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)
        try:
            return await fn(_parse(message_class, request), context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, exc)

    handler.__name__ = getattr(fn, "__name__", "handler")
    return handler


class GrpcFrontend:
    """The v2 gRPC service implemented over a DataPlane.

    Args:
        dataplane: The transport-neutral server core.
        auth_token: When set, every call but ServerLive needs the metadata
            ``authorization: Bearer <token>`` (UNAUTHENTICATED otherwise).
    """

    def __init__(self, dataplane: DataPlane, *, auth_token: str | None = None) -> None:
        self.dp = dataplane
        self.auth_token = auth_token or None

    # -- health / metadata -----------------------------------------------------------------

    async def server_live(self, request: Any, context: Any) -> Any:
        """ServerLive."""
        return pb.ServerLiveResponse(live=self.dp.live())

    async def server_ready(self, request: Any, context: Any) -> Any:
        """ServerReady."""
        return pb.ServerReadyResponse(ready=self.dp.ready())

    async def model_ready(self, request: Any, context: Any) -> Any:
        """ModelReady."""
        return pb.ModelReadyResponse(ready=self.dp.model_ready(request.name, request.version))

    async def server_metadata(self, request: Any, context: Any) -> Any:
        """ServerMetadata."""
        return gcodec.server_metadata_to_proto(self.dp.server_metadata())

    async def model_metadata(self, request: Any, context: Any) -> Any:
        """ModelMetadata."""
        meta = self.dp.model_metadata(request.name, request.version)
        return gcodec.model_metadata_to_proto(meta)

    async def model_config(self, request: Any, context: Any) -> Any:
        """ModelConfig."""
        config = self.dp.model_config(request.name, request.version)
        return pb.ModelConfigResponse(
            config=gcodec.config_json_to_proto(config, ignore_unknown_fields=True)
        )

    async def model_statistics(self, request: Any, context: Any) -> Any:
        """ModelStatistics."""
        stats = self.dp.statistics(request.name, request.version)
        return gcodec.statistics_json_to_proto(stats, ignore_unknown_fields=True)

    # -- inference -------------------------------------------------------------------------

    async def model_infer(self, request: Any, context: Any) -> Any:
        """ModelInfer (the hot path): answers the serialized response."""
        out_headers: dict[str, str] = {}
        response = await self.dp.infer(
            gcodec.request_from_proto(request),
            headers=_MetadataView(context),
            response_headers=out_headers,
        )
        if out_headers:
            await _send_headers(context, out_headers)
        return gcodec.response_to_bytes(response)

    def _infer_handler(self, token: str | None) -> _Handler:
        """ModelInfer as one coroutine (:func:`_guard` + :meth:`model_infer` inlined)."""
        infer = self.dp.infer
        decode = gcodec.request_from_proto
        encode = gcodec.response_to_bytes
        parse = pb.ModelInferRequest.FromString

        async def model_infer(request: Any, context: Any) -> Any:
            if token is not None and not _authorized(context, token):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)
            try:
                try:
                    message = parse(request)
                except DecodeError as exc:
                    raise InvalidInputError(f"malformed ModelInferRequest message: {exc}") from exc
                out_headers: dict[str, str] = {}
                response = await infer(
                    decode(message), headers=_MetadataView(context), response_headers=out_headers
                )
                if out_headers:
                    await _send_headers(context, out_headers)
                return encode(response)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(context, exc)

        return model_infer

    async def model_stream_infer(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        """ModelStreamInfer: requests in order, each answered inline (responses or an error).

        Each request gets its response(s) or an ``error_message`` (with the request id), and
        the stream goes on.

        A decoupled model answers 0..N responses per request; when the request sets
        ``triton_enable_empty_final_response``, responses carry ``triton_final_response``
        and a decoupled model's last one is an empty response with it set to true.
        """
        if self.auth_token is not None and not _authorized(context, self.auth_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)
        async for data in request_iterator:
            try:
                message = _parse(pb.ModelInferRequest, data)
            except InvalidInputError as exc:
                yield pb.ModelStreamInferResponse(error_message=exc.message)
                continue
            ids = pb.ModelInferResponse(
                id=message.id, model_name=message.model_name, model_version=message.model_version
            )
            try:
                request = gcodec.request_from_proto(message)
                request.model_name = message.model_name
                request.model_version = message.model_version
                flag = request.parameters.get(EMPTY_FINAL)
                final = flag is True or str(flag).lower() == "true"
                decoupled = final and self.dp.is_decoupled(
                    request.model_name, request.model_version
                )
                stream = self.dp.infer_stream(request, headers=_MetadataView(context))
                async for response in stream:
                    if final:
                        response.parameters[FINAL_RESPONSE] = not decoupled
                    yield pb.ModelStreamInferResponse(
                        infer_response=gcodec.response_to_proto(response)
                    )
                if decoupled:
                    last = InferResponse(
                        model_name=request.model_name,
                        outputs=[],
                        model_version=message.model_version,
                        id=request.id,
                        parameters={FINAL_RESPONSE: True},
                    )
                    yield pb.ModelStreamInferResponse(infer_response=gcodec.response_to_proto(last))
            except NbinferError as exc:
                yield pb.ModelStreamInferResponse(error_message=exc.message, infer_response=ids)
            except Exception as exc:
                logger.exception("unhandled error in ModelStreamInfer")
                yield pb.ModelStreamInferResponse(
                    error_message=f"internal server error: {type(exc).__name__}: {exc}",
                    infer_response=ids,
                )

    # -- repository ------------------------------------------------------------------------

    async def repository_index(self, request: Any, context: Any) -> Any:
        """RepositoryIndex."""
        index = self.dp.repository_index(ready_only=request.ready)
        return gcodec.repository_index_to_proto(index)

    async def repository_model_load(self, request: Any, context: Any) -> Any:
        """RepositoryModelLoad (parameters: ``config`` JSON string, ``file:<path>`` bytes)."""
        name, config, files = gcodec.load_request_from_proto(request)
        await self.dp.load_model(name, config=config, files=files or None)
        return pb.RepositoryModelLoadResponse()

    async def repository_model_unload(self, request: Any, context: Any) -> Any:
        """RepositoryModelUnload."""
        await self.dp.unload_model(request.model_name)
        return pb.RepositoryModelUnloadResponse()

    # -- shared memory -----------------------------------------------------------------------

    async def system_shared_memory_status(self, request: Any, context: Any) -> Any:
        """SystemSharedMemoryStatus."""
        reply = pb.SystemSharedMemoryStatusResponse()
        for row in self.dp.shm_status("system", request.name):
            region = reply.regions[row["name"]]
            region.name = row["name"]
            region.key = row["key"]
            region.offset = row["offset"]
            region.byte_size = row["byte_size"]
        return reply

    async def system_shared_memory_register(self, request: Any, context: Any) -> Any:
        """SystemSharedMemoryRegister."""
        body = {"key": request.key, "offset": request.offset, "byte_size": request.byte_size}
        await asyncio.to_thread(self.dp.shm_register, "system", request.name, body)
        return pb.SystemSharedMemoryRegisterResponse()

    async def system_shared_memory_unregister(self, request: Any, context: Any) -> Any:
        """SystemSharedMemoryUnregister (empty name: every region)."""
        self.dp.shm_unregister("system", request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    async def cuda_shared_memory_status(self, request: Any, context: Any) -> Any:
        """CudaSharedMemoryStatus."""
        reply = pb.CudaSharedMemoryStatusResponse()
        for row in self.dp.shm_status("cuda", request.name):
            region = reply.regions[row["name"]]
            region.name = row["name"]
            region.device_id = row["device_id"]
            region.byte_size = row["byte_size"]
        return reply

    async def cuda_shared_memory_register(self, request: Any, context: Any) -> Any:
        """CudaSharedMemoryRegister (refused without a CUDA device)."""
        body = {
            "raw_handle": bytes(request.raw_handle),
            "device_id": request.device_id,
            "byte_size": request.byte_size,
        }
        self.dp.shm_register("cuda", request.name, body)
        return pb.CudaSharedMemoryRegisterResponse()

    async def cuda_shared_memory_unregister(self, request: Any, context: Any) -> Any:
        """CudaSharedMemoryUnregister."""
        self.dp.shm_unregister("cuda", request.name)
        return pb.CudaSharedMemoryUnregisterResponse()

    # -- trivial -----------------------------------------------------------------------------

    async def trace_setting(self, request: Any, context: Any) -> Any:
        """TraceSetting: tracing is ``OFF`` (asking for a level is UNIMPLEMENTED, as over HTTP)."""
        update: dict[str, Any] = {}
        for key, entry in request.settings.items():
            values = list(entry.value)
            update[key] = (values if key == "trace_level" else values[0]) if values else None
        if request.model_name:
            self.dp.model_metadata(request.model_name)  # an unknown model is NOT_FOUND
        reply = pb.TraceSettingResponse()
        for key, value in trace_settings(request.model_name, update).items():
            reply.settings[key].value.extend(value if isinstance(value, list) else [str(value)])
        return reply

    async def log_settings(self, request: Any, context: Any) -> Any:
        """LogSettings over the ``nbinfer`` logger (the same settings as ``/v2/logging``)."""
        update = {}
        for key, entry in request.settings.items():
            which = entry.WhichOneof("parameter_choice")
            update[key] = None if which is None else getattr(entry, which)
        current = LogSettings.update(update) if update else LogSettings.get()
        reply = pb.LogSettingsResponse()
        for key, value in current.items():
            field = (
                "bool_param"
                if isinstance(value, bool)
                else ("uint32_param" if isinstance(value, int) else "string_param")
            )
            setattr(reply.settings[key], field, value)
        return reply

    def handler(self) -> Any:
        """Return the ``grpc.GenericRpcHandler`` serving ``inference.GRPCInferenceService``."""
        unary: dict[str, tuple[_Handler, str, str]] = {
            "ServerLive": (self.server_live, "ServerLiveRequest", "ServerLiveResponse"),
            "ServerReady": (self.server_ready, "ServerReadyRequest", "ServerReadyResponse"),
            "ModelReady": (self.model_ready, "ModelReadyRequest", "ModelReadyResponse"),
            "ServerMetadata": (
                self.server_metadata,
                "ServerMetadataRequest",
                "ServerMetadataResponse",
            ),
            "ModelMetadata": (
                self.model_metadata,
                "ModelMetadataRequest",
                "ModelMetadataResponse",
            ),
            "ModelInfer": (self.model_infer, "ModelInferRequest", "ModelInferResponse"),
            "ModelConfig": (self.model_config, "ModelConfigRequest", "ModelConfigResponse"),
            "ModelStatistics": (
                self.model_statistics,
                "ModelStatisticsRequest",
                "ModelStatisticsResponse",
            ),
            "RepositoryIndex": (
                self.repository_index,
                "RepositoryIndexRequest",
                "RepositoryIndexResponse",
            ),
            "RepositoryModelLoad": (
                self.repository_model_load,
                "RepositoryModelLoadRequest",
                "RepositoryModelLoadResponse",
            ),
            "RepositoryModelUnload": (
                self.repository_model_unload,
                "RepositoryModelUnloadRequest",
                "RepositoryModelUnloadResponse",
            ),
            "SystemSharedMemoryStatus": (
                self.system_shared_memory_status,
                "SystemSharedMemoryStatusRequest",
                "SystemSharedMemoryStatusResponse",
            ),
            "CudaSharedMemoryStatus": (
                self.cuda_shared_memory_status,
                "CudaSharedMemoryStatusRequest",
                "CudaSharedMemoryStatusResponse",
            ),
            "TraceSetting": (self.trace_setting, "TraceSettingRequest", "TraceSettingResponse"),
            "LogSettings": (self.log_settings, "LogSettingsRequest", "LogSettingsResponse"),
        }
        shm_rpcs: tuple[tuple[str, _Handler], ...] = (
            ("SystemSharedMemoryRegister", self.system_shared_memory_register),
            ("SystemSharedMemoryUnregister", self.system_shared_memory_unregister),
            ("CudaSharedMemoryRegister", self.cuda_shared_memory_register),
            ("CudaSharedMemoryUnregister", self.cuda_shared_memory_unregister),
        )
        for rpc, fn in shm_rpcs:
            unary[rpc] = (fn, f"{rpc}Request", f"{rpc}Response")
        methods: dict[str, Any] = {}
        for rpc, (fn, req_name, resp_name) in unary.items():
            token = None if rpc in PUBLIC_GRPC_METHODS else self.auth_token
            methods[rpc] = grpc.unary_unary_rpc_method_handler(
                self._infer_handler(token)
                if rpc == "ModelInfer"
                else _guard(fn, getattr(pb, req_name), token),
                # requests are decoded by the handlers: garbage is INVALID_ARGUMENT, not UNKNOWN
                # ModelInfer answers bytes it serialized itself
                response_serializer=None
                if rpc == "ModelInfer"
                else getattr(pb, resp_name).SerializeToString,
            )
        methods["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(
            self.model_stream_infer,
            response_serializer=pb.ModelStreamInferResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)


async def create_grpc_server(
    dataplane: DataPlane,
    address: str,
    *,
    max_message_bytes: int,
    auth_token: str | None = None,
    max_connections: int | None = None,
    handshake_timeout: float | None = None,
) -> tuple[Any, int]:
    """Create (not start) a grpc.aio server for ``dataplane`` bound to ``address``.

    Args:
        dataplane: The transport-neutral server core.
        address: ``host:port``; port 0 picks a free port.
        max_message_bytes: Largest message received or sent.
        auth_token: Require ``authorization: Bearer <token>`` metadata (see ``auth.py``).
        max_connections: Open connections at once (more are refused by gRPC core).
        handshake_timeout: Seconds a new connection has to complete its HTTP/2 handshake.

    Returns:
        ``(server, bound_port)``.
    """
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    if max_connections:
        options.append(("grpc.max_allowed_incoming_connections", int(max_connections)))
    if handshake_timeout:
        options.append(("grpc.server_handshake_timeout_ms", int(handshake_timeout * 1000)))
    server = grpc.aio.server(options=options)
    frontend = GrpcFrontend(dataplane, auth_token=auth_token)
    server.add_generic_rpc_handlers((frontend.handler(),))
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"could not bind gRPC to {address}")
    return server, port
