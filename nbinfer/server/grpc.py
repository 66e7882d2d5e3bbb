"""The gRPC frontend: a grpc.aio generic handler for ``inference.GRPCInferenceService``.

Each RPC is a few lines over the DataPlane: protobuf <-> types with :mod:`nbinfer.protocol.grpc`,
errors mapped with :func:`nbinfer.errors.grpc_code_of` onto ``context.abort``. With
``--access-log`` each method handler is wrapped to write one ``nbinfer.access`` line per call;
without it nothing is wrapped.

Imports the dataplane, auth, observability, protocol and errors; never the REST frontend or the
app.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from nbinfer.errors import InvalidInputError, ModelNotFoundError, NbinferError, grpc_code_of
from nbinfer.protocol import grpc as gcodec
from nbinfer.protocol import grpc_json as gjson
from nbinfer.protocol.grpc import RPCS, SERVICE_NAME, response_message
from nbinfer.protocol.grpc_settings import (
    log_settings_from_proto,
    log_settings_to_proto,
    trace_settings_from_proto,
    trace_settings_to_proto,
)
from nbinfer.protocol.grpc_tensors import count_field
from nbinfer.protocol.types import InferResponse
from nbinfer.server.auth import PUBLIC_GRPC_METHODS, authorized
from nbinfer.server.dataplane import EMPTY_FINAL, FINAL_RESPONSE, check_parameter_count
from nbinfer.server.observability import LogSettings, log_grpc_call, trace_settings
from nbinfer.server.offload import OFFLOAD_BYTES, off_loop

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane

__all__ = ["GrpcFrontend", "create_grpc_server"]

logger = logging.getLogger("nbinfer")

_Handler = Callable[[Any, Any], Awaitable[Any]]

_INFER = RPCS["ModelInfer"]
#: ``ModelInferRequest.parameters`` (a map: one top-level record per entry).
_PARAMETERS_FIELD = _INFER.request.DESCRIPTOR.fields_by_name["parameters"].number
_STREAM = RPCS["ModelStreamInfer"]


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


def _decode_infer(data: bytes, max_parameters: int) -> Any:
    """A ``ModelInferRequest``'s bytes as an InferRequest (see :func:`_convert`).

    A large message is first scanned for its parameters (at most ``max_parameters`` + 1 are
    counted): a parameter bomb is refused before protobuf parses it.
    """
    if max_parameters and len(data) >= OFFLOAD_BYTES:
        _check_parameter_records(data, max_parameters)
    return _convert(*gcodec.parse_request(data), max_parameters)


def _check_parameter_records(data: bytes, limit: int) -> None:
    if count_field(data, _PARAMETERS_FIELD, limit + 1) > limit:
        raise InvalidInputError(
            f"the request carries more than {limit} parameters, the server's limit "
            "(--max-parameters)"
        )


def _convert(message: Any, raw: Any, max_parameters: int) -> Any:
    """A parsed ``ModelInferRequest`` as an InferRequest (too many parameters: refused first)."""
    if max_parameters:
        count = len(message.parameters)
        for tensor in message.inputs:
            count += len(tensor.parameters)
        for out in message.outputs:
            count += len(out.parameters)
        check_parameter_count(count, max_parameters, message.model_name)
    return gcodec.request_from_proto(message, raw)


def _decode_stream(data: bytes, max_parameters: int) -> tuple[Any, Any]:
    """``(message, request)`` of a stream's message (request: the error if it does not convert).

    The error is returned, not raised, so that its answer can name the request's id.

    Raises:
        InvalidInputError: not a ``ModelInferRequest``.
    """
    if max_parameters and len(data) >= OFFLOAD_BYTES:
        _check_parameter_records(data, max_parameters)
    message, raw = gcodec.parse_request(data)
    try:
        return message, _convert(message, raw, max_parameters)
    except Exception as exc:
        return message, exc


def _guard(
    fn: _Handler, message_class: Any, token: str | None = None, dp: DataPlane | None = None
) -> _Handler:
    """Decode the request, check the token, map errors onto gRPC status codes.

    A large message is held against the in-flight budget of ``dp`` and parsed on a worker
    thread (see ``offload.py``).
    """

    async def handler(request: Any, context: Any) -> Any:
        if token is not None and not _authorized(context, token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)
        reservation = None
        try:
            if dp is None or len(request) < OFFLOAD_BYTES:
                return await fn(_parse(message_class, request), context)
            reservation = dp.inflight.reservation()
            reservation.take(len(request))
            return await fn(await off_loop(_parse, message_class, request), context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, exc)
        finally:
            if reservation is not None:
                reservation.release()

    handler.__name__ = getattr(fn, "__name__", "handler")
    return handler


def _bound_address(address: str, port: int) -> tuple[str, int] | None:
    """``(ip, port)`` of a server bound to one IP; None for a wildcard or a host name."""
    host = address.rpartition(":")[0].strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name ("localhost") may be bound on several addresses
    return None if ip.is_unspecified else (str(ip), port)


@contextlib.contextmanager
def _call_logged(method: str, context: Any) -> Iterator[None]:
    """Write the access log line of the call run inside, however it ends."""
    t0 = time.perf_counter()
    code = "OK"
    try:
        yield
    except (asyncio.CancelledError, GeneratorExit):
        code = "CANCELLED"
        raise
    except BaseException:
        code = "UNKNOWN"  # gRPC's answer to an unhandled error, unless the handler aborted
        raise
    finally:
        status = context.code()
        if isinstance(status, grpc.StatusCode) and code != "CANCELLED":
            code = str(status.name)
        log_grpc_call(context, method, code, time.perf_counter() - t0)


def _logged(rpc: str, handler: Any) -> Any:
    """``handler`` with its behaviour wrapped to write one access log line per call."""
    method = f"/{SERVICE_NAME}/{rpc}"
    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def logged_unary(request: Any, context: Any) -> Any:
            with _call_logged(method, context):
                return await unary(request, context)

        return handler._replace(unary_unary=logged_unary)
    stream = handler.stream_stream

    async def logged_stream(requests: Any, context: Any) -> AsyncIterator[Any]:
        with _call_logged(method, context):
            async for reply in stream(requests, context):
                yield reply

    return handler._replace(stream_stream=logged_stream)


class GrpcFrontend:
    """The v2 gRPC service implemented over a DataPlane.

    Args:
        dataplane: The transport-neutral server core.
        auth_token: When set, every call but ServerLive needs the metadata
            ``authorization: Bearer <token>`` (UNAUTHENTICATED otherwise).
        server_address: The ``(ip, port)`` the server is bound to, when it is one address:
            shared-memory owner lookups are then one exact netlink query per call, never a
            read of ``/proc`` on the event loop to learn which address a peer reached.
        access_log: Write one ``nbinfer.access`` line per RPC (off: nothing is wrapped).
    """

    def __init__(
        self,
        dataplane: DataPlane,
        *,
        auth_token: str | None = None,
        server_address: tuple[str, int] | None = None,
        access_log: bool = False,
    ) -> None:
        self.dp = dataplane
        self.auth_token = auth_token or None
        self.server_address = server_address
        self.access_log = access_log

    # -- health / metadata -----------------------------------------------------------------

    async def server_live(self, request: Any, context: Any) -> Any:
        """ServerLive."""
        return response_message("ServerLive", live=self.dp.live())

    async def server_ready(self, request: Any, context: Any) -> Any:
        """ServerReady."""
        return response_message("ServerReady", ready=self.dp.ready())

    async def model_ready(self, request: Any, context: Any) -> Any:
        """ModelReady: ``ready=false`` for an unknown model or version, as Triton answers.

        The not-found message goes in trailing metadata (nbinfer's client raises it).
        """
        try:
            ready = self.dp.model_ready(request.name, request.version)
        except ModelNotFoundError as exc:
            text = str(exc.args[0] if exc.args else exc)
            ascii_text = text.encode("ascii", "backslashreplace").decode("ascii")
            context.set_trailing_metadata(((gcodec.MODEL_NOT_FOUND_METADATA, ascii_text),))
            ready = False
        return response_message("ModelReady", ready=ready)

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
        return response_message(
            "ModelConfig", config=gjson.config_json_to_proto(config, ignore_unknown_fields=True)
        )

    async def model_statistics(self, request: Any, context: Any) -> Any:
        """ModelStatistics."""
        stats = self.dp.statistics(request.name, request.version)
        return gjson.statistics_json_to_proto(stats, ignore_unknown_fields=True)

    # -- inference -------------------------------------------------------------------------

    def _infer_handler(self, token: str | None) -> _Handler:
        """ModelInfer (the hot path) as one coroutine: :func:`_guard` inlined, answers bytes.

        The request is decoded by :func:`~nbinfer.protocol.grpc.request_from_bytes` (garbage is
        INVALID_ARGUMENT; large tensors are views of the received bytes) and the response
        serialized by :func:`~nbinfer.protocol.grpc.response_to_bytes` (tensor data copied once).
        """
        dp = self.dp
        infer = dp.infer
        encode = gcodec.response_to_bytes
        peers = dp.peers  # the caller's shm identity: asked only when it names a region
        here = self.server_address

        async def model_infer(request: Any, context: Any) -> Any:
            if token is not None and not _authorized(context, token):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)
            reservation = None
            try:
                if len(request) < OFFLOAD_BYTES:
                    decoded = _decode_infer(request, dp.max_parameters)
                else:  # held against the in-flight budget; parsed on a worker thread
                    reservation = dp.inflight.reservation()
                    reservation.take(len(request))
                    decoded = await off_loop(_decode_infer, request, dp.max_parameters)
                out_headers: dict[str, str] = {}
                response = await infer(
                    decoded,
                    headers=_MetadataView(context),
                    response_headers=out_headers,
                    caller=peers.grpc_caller(context.peer, here),
                )
                if out_headers:
                    await _send_headers(context, out_headers)
                return encode(response)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(context, exc)
            finally:
                if reservation is not None:
                    reservation.release()

        return model_infer

    async def model_stream_infer(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        """ModelStreamInfer: requests in order, each answered inline (responses or an error).

        Each request gets its response(s) or an ``error_message`` (with the request id), and
        the stream goes on.

        A decoupled model answers 0..N responses per request; when the request sets
        ``triton_enable_empty_final_response``, responses carry ``triton_final_response``
        and a decoupled model's last one is an empty response with it set to true. Answers
        are serialized here (tensor data copied once, as for ModelInfer).
        """
        if self.auth_token is not None and not _authorized(context, self.auth_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)

        def reply(**fields: Any) -> bytes:
            return bytes(_STREAM.response(**fields).SerializeToString())

        limit = self.dp.max_parameters
        async for data in request_iterator:
            reservation = None
            try:
                if len(data) < OFFLOAD_BYTES:
                    message, decoded = _decode_stream(data, limit)
                else:  # held against the in-flight budget; parsed on a worker thread
                    reservation = self.dp.inflight.reservation()
                    reservation.take(len(data))
                    message, decoded = await off_loop(_decode_stream, data, limit)
            except NbinferError as exc:
                if reservation is not None:
                    reservation.release()
                yield reply(error_message=exc.message)
                continue
            try:
                async for answer in self._stream_one(message, decoded, context, reply):
                    yield answer
            finally:
                if reservation is not None:
                    reservation.release()

    async def _stream_one(
        self, message: Any, decoded: Any, context: Any, reply: Callable[..., bytes]
    ) -> AsyncIterator[Any]:
        """The answers of one request on a stream (responses, or an error message)."""
        encode = gcodec.stream_response_to_bytes
        ids = _INFER.response(
            id=message.id, model_name=message.model_name, model_version=message.model_version
        )
        try:
            if isinstance(decoded, Exception):
                raise decoded
            request: Any = decoded
            flag = request.parameters.get(EMPTY_FINAL)
            final = flag is True or str(flag).lower() == "true"
            decoupled = final and self.dp.is_decoupled(request.model_name, request.model_version)
            stream = self.dp.infer_stream(
                request,
                headers=_MetadataView(context),
                caller=self.dp.peers.grpc_caller(context.peer, self.server_address),
            )
            async for response in stream:
                if final:
                    response.parameters[FINAL_RESPONSE] = not decoupled
                yield encode(response)
            if decoupled:
                last = InferResponse(
                    model_name=request.model_name,
                    outputs=[],
                    model_version=message.model_version,
                    id=request.id,
                    parameters={FINAL_RESPONSE: True},
                )
                yield encode(last)
        except NbinferError as exc:
            yield reply(error_message=exc.message, infer_response=ids)
        except Exception as exc:
            logger.exception("unhandled error in ModelStreamInfer")
            yield reply(
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
        self.dp.repository.check_remote_mode(request.model_name, "load")  # before the uploads
        if request.ByteSize() < OFFLOAD_BYTES:
            name, config, files = gcodec.load_request_from_proto(request)
        else:  # the uploads are copied out of the message: on a worker thread
            name, config, files = await off_loop(gcodec.load_request_from_proto, request)
        await self.dp.load_model(name, config=config, files=files or None, remote=True)
        return response_message("RepositoryModelLoad")

    async def repository_model_unload(self, request: Any, context: Any) -> Any:
        """RepositoryModelUnload."""
        await self.dp.unload_model(request.model_name, remote=True)
        return response_message("RepositoryModelUnload")

    # -- shared memory -----------------------------------------------------------------------

    def _owner(self, context: Any) -> str:
        """The caller's shared-memory identity (see ``peers.py``)."""
        return self.dp.peers.of_grpc_peer(context.peer(), self.server_address)

    async def system_shared_memory_status(self, request: Any, context: Any) -> Any:
        """SystemSharedMemoryStatus."""
        owner = self._owner(context)
        return gcodec.shm_status_to_proto(
            "system", self.dp.shm_status("system", request.name, owner=owner)
        )

    async def system_shared_memory_register(self, request: Any, context: Any) -> Any:
        """SystemSharedMemoryRegister."""
        body = {"key": request.key, "offset": request.offset, "byte_size": request.byte_size}
        owner = await asyncio.to_thread(self._owner, context)
        await asyncio.to_thread(self.dp.shm_register, "system", request.name, body, owner=owner)
        return response_message("SystemSharedMemoryRegister")

    async def system_shared_memory_unregister(self, request: Any, context: Any) -> Any:
        """SystemSharedMemoryUnregister (empty name: every region)."""
        owner = self._owner(context)
        self.dp.shm_unregister("system", request.name, owner=owner)
        return response_message("SystemSharedMemoryUnregister")

    async def cuda_shared_memory_status(self, request: Any, context: Any) -> Any:
        """CudaSharedMemoryStatus."""
        return gcodec.shm_status_to_proto("cuda", self.dp.shm_status("cuda", request.name))

    async def cuda_shared_memory_register(self, request: Any, context: Any) -> Any:
        """CudaSharedMemoryRegister (refused without a CUDA device)."""
        body = {
            "raw_handle": bytes(request.raw_handle),
            "device_id": request.device_id,
            "byte_size": request.byte_size,
        }
        self.dp.shm_register("cuda", request.name, body)
        return response_message("CudaSharedMemoryRegister")

    async def cuda_shared_memory_unregister(self, request: Any, context: Any) -> Any:
        """CudaSharedMemoryUnregister."""
        self.dp.shm_unregister("cuda", request.name)
        return response_message("CudaSharedMemoryUnregister")

    # -- trivial -----------------------------------------------------------------------------

    async def trace_setting(self, request: Any, context: Any) -> Any:
        """TraceSetting: tracing is ``OFF`` (asking for a level is UNIMPLEMENTED, as over HTTP)."""
        update = trace_settings_from_proto(request.settings)
        if request.model_name:
            self.dp.model_metadata(request.model_name)  # an unknown model is NOT_FOUND
        if update:
            self.dp.repository.control.check_settings_update("trace")
        reply: Any = response_message("TraceSetting")
        trace_settings_to_proto(trace_settings(request.model_name, update), reply.settings)
        return reply

    async def log_settings(self, request: Any, context: Any) -> Any:
        """LogSettings over the ``nbinfer`` logger (the same settings as ``/v2/logging``)."""
        update = log_settings_from_proto(request.settings)
        if update:
            self.dp.repository.control.check_settings_update("log")
        current = LogSettings.update(update) if update else LogSettings.get()
        reply: Any = response_message("LogSettings")
        log_settings_to_proto(current, reply.settings)
        return reply

    def _token(self, rpc: str) -> str | None:
        """The token ``rpc`` needs (None: a public RPC or no auth)."""
        return None if rpc in PUBLIC_GRPC_METHODS else self.auth_token

    def handler(self) -> Any:
        """Return the ``grpc.GenericRpcHandler`` serving ``inference.GRPCInferenceService``."""
        unary: dict[str, _Handler] = {
            "ServerLive": self.server_live,
            "ServerReady": self.server_ready,
            "ModelReady": self.model_ready,
            "ServerMetadata": self.server_metadata,
            "ModelMetadata": self.model_metadata,
            "ModelConfig": self.model_config,
            "ModelStatistics": self.model_statistics,
            "RepositoryIndex": self.repository_index,
            "RepositoryModelLoad": self.repository_model_load,
            "RepositoryModelUnload": self.repository_model_unload,
            "SystemSharedMemoryStatus": self.system_shared_memory_status,
            "SystemSharedMemoryRegister": self.system_shared_memory_register,
            "SystemSharedMemoryUnregister": self.system_shared_memory_unregister,
            "CudaSharedMemoryStatus": self.cuda_shared_memory_status,
            "CudaSharedMemoryRegister": self.cuda_shared_memory_register,
            "CudaSharedMemoryUnregister": self.cuda_shared_memory_unregister,
            "TraceSetting": self.trace_setting,
            "LogSettings": self.log_settings,
        }
        # requests are decoded by the handlers: garbage is INVALID_ARGUMENT, not UNKNOWN
        methods: dict[str, Any] = {
            rpc: grpc.unary_unary_rpc_method_handler(
                _guard(fn, RPCS[rpc].request, self._token(rpc), self.dp),
                response_serializer=RPCS[rpc].response.SerializeToString,
            )
            for rpc, fn in unary.items()
        }
        # ModelInfer and ModelStreamInfer answer bytes they serialized themselves
        methods["ModelInfer"] = grpc.unary_unary_rpc_method_handler(
            self._infer_handler(self._token("ModelInfer"))
        )
        methods["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(self.model_stream_infer)
        if self.access_log:
            methods = {rpc: _logged(rpc, handler) for rpc, handler in methods.items()}
        return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)


async def create_grpc_server(
    dataplane: DataPlane,
    address: str,
    *,
    max_message_bytes: int,
    auth_token: str | None = None,
    max_connections: int | None = None,
    handshake_timeout: float | None = None,
    access_log: bool = False,
) -> tuple[Any, int]:
    """Create (not start) a grpc.aio server for ``dataplane`` bound to ``address``.

    Args:
        dataplane: The transport-neutral server core.
        address: ``host:port``; port 0 picks a free port.
        max_message_bytes: Largest message received or sent.
        auth_token: Require ``authorization: Bearer <token>`` metadata (see ``auth.py``).
        max_connections: Open connections at once (more are refused by gRPC core).
        handshake_timeout: Seconds a new connection has to complete its HTTP/2 handshake.
        access_log: One ``nbinfer.access`` line per RPC (off: the handlers are not wrapped).

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
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"could not bind gRPC to {address}")
    frontend = GrpcFrontend(
        dataplane,
        auth_token=auth_token,
        server_address=_bound_address(address, port),
        access_log=access_log,
    )
    server.add_generic_rpc_handlers((frontend.handler(),))
    return server, port
