"""The v2 gRPC codec: protobuf messages <-> :mod:`nbinfer.protocol.types`.

The only module that imports the generated stubs: everything else (the client's transports, the
server's servicer) gets messages, RPC paths and request builders (:func:`request_message`) from
here. Tensors inside messages are coded by :mod:`nbinfer.protocol.grpc_tensors`, which works on
the message objects handed to it. Imports protobuf, numpy and the protocol's own modules; never
grpcio (that is :mod:`nbinfer.transports.grpc`), no I/O. Messages are those of ``protos/*.proto``
(package ``inference``, wire-compatible with Triton's ``grpc_service.proto``), registered in a
private descriptor pool, so nbinfer coexists with tritonclient and kserve in one process::

    from nbinfer.protocol.grpc import request_to_proto, response_from_proto

    msg = request_to_proto(request)          # raw_input_contents, one entry per tensor
    reply = stub_call(msg)                   # any transport
    response = response_from_proto(reply)    # zero-copy numpy views on the raw bytes

Tensor data travels in ``raw_input_contents`` / ``raw_output_contents`` by default; typed
``contents`` are decoded too, and produced with ``raw=False`` (FP16 / BF16 have no typed form
and always go raw). The gRPC service, its method paths and streaming kinds are in :data:`RPCS`.
Model configuration and statistics as Triton-shaped JSON are :mod:`nbinfer.protocol.grpc_json`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, cast

import numpy as np
from google.protobuf.message import DecodeError, Message

from nbinfer.errors import InvalidInputError, UnsupportedError
from nbinfer.protocol._generated import grpc_service_pb2 as pb
from nbinfer.protocol.bytes_codec import encode_bytes_tensor
from nbinfer.protocol.grpc_tensors import (
    VIEW_MIN_BYTES,
    decode_tensors,
    encode_tensors,
    params_from_proto,
    params_to_proto,
    split_field,
    varint,
)
from nbinfer.protocol.reader import PLAIN_DTYPES
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RepositoryModel,
    RequestedOutput,
    ServerMetadata,
    TensorSpec,
)

__all__ = [
    "RAW_OUTPUT_FIELD",
    "RAW_OUTPUT_TAG",
    "RPCS",
    "SERVICE_NAME",
    "RequestTemplate",
    "Rpc",
    "config_message",
    "load_request_from_proto",
    "load_request_to_proto",
    "method_path",
    "shm_status_from_proto",
    "shm_status_to_proto",
    "request_message",
    "response_message",
    "rpc_of",
    "model_metadata_from_proto",
    "model_metadata_to_proto",
    "params_from_proto",
    "params_to_proto",
    "parse_request",
    "pb",
    "repository_index_from_proto",
    "repository_index_to_proto",
    "request_from_bytes",
    "request_from_proto",
    "request_to_proto",
    "read_response",
    "response_from_proto",
    "response_to_bytes",
    "response_to_proto",
    "server_metadata_from_proto",
    "server_metadata_to_proto",
    "stream_response_to_bytes",
]

logger = logging.getLogger("nbinfer")

#: Full name of the v2 gRPC service (method paths are ``/<SERVICE_NAME>/<Rpc>``).
SERVICE_NAME: Final = "inference.GRPCInferenceService"

#: Trailing metadata of a ``ModelReady`` answer ``ready=false`` for a model (version) the server
#: does not know: the not-found message (ASCII). Triton answers ``ready=false`` there and
#: tritonclient reads the flag; nbinfer's client reads this and raises ``ModelNotFoundError``.
MODEL_NOT_FOUND_METADATA: Final = "nbinfer-model-not-found"

RpcKind = Literal["unary_unary", "stream_stream"]


@dataclass(frozen=True, slots=True)
class Rpc:
    """One RPC of the service: its name, message classes and streaming kind.

    Servers build handlers and clients build multicallables from it, e.g.
    ``channel.unary_unary(rpc.path, request_serializer=..., response_deserializer=
    rpc.response.FromString)``.
    """

    name: str
    request: type[Message]
    response: type[Message]
    kind: RpcKind = "unary_unary"

    @property
    def path(self) -> str:
        """The method path, ``/inference.GRPCInferenceService/<name>``."""
        return f"/{SERVICE_NAME}/{self.name}"


def _rpcs(*rpcs: Rpc) -> dict[str, Rpc]:
    return {rpc.name: rpc for rpc in rpcs}


#: Every RPC of ``inference.GRPCInferenceService``, by name (Triton's set, in Triton's order).
RPCS: Final[Mapping[str, Rpc]] = _rpcs(
    Rpc("ServerLive", pb.ServerLiveRequest, pb.ServerLiveResponse),
    Rpc("ServerReady", pb.ServerReadyRequest, pb.ServerReadyResponse),
    Rpc("ModelReady", pb.ModelReadyRequest, pb.ModelReadyResponse),
    Rpc("ServerMetadata", pb.ServerMetadataRequest, pb.ServerMetadataResponse),
    Rpc("ModelMetadata", pb.ModelMetadataRequest, pb.ModelMetadataResponse),
    Rpc("ModelInfer", pb.ModelInferRequest, pb.ModelInferResponse),
    Rpc("ModelStreamInfer", pb.ModelInferRequest, pb.ModelStreamInferResponse, "stream_stream"),
    Rpc("ModelConfig", pb.ModelConfigRequest, pb.ModelConfigResponse),
    Rpc("ModelStatistics", pb.ModelStatisticsRequest, pb.ModelStatisticsResponse),
    Rpc("RepositoryIndex", pb.RepositoryIndexRequest, pb.RepositoryIndexResponse),
    Rpc("RepositoryModelLoad", pb.RepositoryModelLoadRequest, pb.RepositoryModelLoadResponse),
    Rpc("RepositoryModelUnload", pb.RepositoryModelUnloadRequest, pb.RepositoryModelUnloadResponse),
    Rpc(
        "SystemSharedMemoryStatus",
        pb.SystemSharedMemoryStatusRequest,
        pb.SystemSharedMemoryStatusResponse,
    ),
    Rpc(
        "SystemSharedMemoryRegister",
        pb.SystemSharedMemoryRegisterRequest,
        pb.SystemSharedMemoryRegisterResponse,
    ),
    Rpc(
        "SystemSharedMemoryUnregister",
        pb.SystemSharedMemoryUnregisterRequest,
        pb.SystemSharedMemoryUnregisterResponse,
    ),
    Rpc(
        "CudaSharedMemoryStatus",
        pb.CudaSharedMemoryStatusRequest,
        pb.CudaSharedMemoryStatusResponse,
    ),
    Rpc(
        "CudaSharedMemoryRegister",
        pb.CudaSharedMemoryRegisterRequest,
        pb.CudaSharedMemoryRegisterResponse,
    ),
    Rpc(
        "CudaSharedMemoryUnregister",
        pb.CudaSharedMemoryUnregisterRequest,
        pb.CudaSharedMemoryUnregisterResponse,
    ),
    Rpc("TraceSetting", pb.TraceSettingRequest, pb.TraceSettingResponse),
    Rpc("LogSettings", pb.LogSettingsRequest, pb.LogSettingsResponse),
)


def rpc_of(name: str) -> Rpc:
    """The RPC called ``name``.

    Raises:
        UnsupportedError: ``name`` is not an RPC of the service (the message lists them).
    """
    try:
        return RPCS[name]
    except KeyError as exc:
        raise UnsupportedError(f"unknown RPC {name!r}; known: {', '.join(RPCS)}") from exc


def method_path(rpc: str) -> str:
    """Return ``/inference.GRPCInferenceService/<rpc>``.

    Raises:
        UnsupportedError: ``rpc`` is not an RPC of the service.
    """
    return rpc_of(rpc).path


def request_message(rpc: str, **fields: Any) -> Message:
    """A new request message of ``rpc`` with ``fields`` set (what a client sends).

    Raises:
        UnsupportedError: ``rpc`` is not an RPC of the service.
        InvalidInputError: a field the message does not have, or a value of the wrong type.
    """
    return _message(rpc, "request", fields)


def response_message(rpc: str, **fields: Any) -> Message:
    """A new response message of ``rpc`` with ``fields`` set (what a server answers).

    Raises:
        UnsupportedError: ``rpc`` is not an RPC of the service.
        InvalidInputError: a field the message does not have, or a value of the wrong type.
    """
    return _message(rpc, "response", fields)


def config_message() -> pb.ModelConfig:
    """An empty ``ModelConfig``: the message a model configuration travels in."""
    return pb.ModelConfig()


def _message(rpc: str, kind: Literal["request", "response"], fields: dict[str, Any]) -> Message:
    cls = getattr(rpc_of(rpc), kind)
    try:
        msg: Message = cls(**fields)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"{rpc} {kind}: {exc}") from exc
    return msg


# ---------------------------------------------------------------------------------------------
# Inference request / response

_CLASSIFICATION: Final = "classification"
_RAW_INPUT_FIELD: Final = pb.ModelInferRequest.RAW_INPUT_CONTENTS_FIELD_NUMBER
_RAW_INPUT_TAG: Final = varint(_RAW_INPUT_FIELD << 3 | 2)
#: The ``ModelInferResponse`` field of the raw output records (one per output, in order).
RAW_OUTPUT_FIELD: Final = pb.ModelInferResponse.RAW_OUTPUT_CONTENTS_FIELD_NUMBER
#: The tag that opens each of those records (a length follows it).
RAW_OUTPUT_TAG: Final = varint(RAW_OUTPUT_FIELD << 3 | 2)
_STREAM_RESPONSE_TAG: Final = varint(
    pb.ModelStreamInferResponse.INFER_RESPONSE_FIELD_NUMBER << 3 | 2
)


def request_to_proto(req: InferRequest, *, raw: bool = True) -> pb.ModelInferRequest:
    """Encode an :class:`InferRequest` as a ``ModelInferRequest``.

    Args:
        req: The request; ``model_name`` / ``model_version`` are copied into the message.
        raw: Put tensor data in ``raw_input_contents`` (fast, the default); ``False`` uses typed
            ``contents`` unless a tensor is FP16 / BF16 (then everything goes raw).

    ``RequestedOutput.class_count`` becomes the output parameter ``classification``;
    ``binary_data`` is REST-only and not sent.

    Raises:
        InvalidInputError: data size does not match a shape, or a parameter has no v2 type.
    """
    msg = pb.ModelInferRequest(model_name=req.model_name, model_version=req.model_version)
    msg.id = req.id
    if req.parameters:
        params_to_proto(req.parameters, msg.parameters)
    raw_contents: list[bytes] = []
    encode_tensors(req.inputs, msg.inputs.add, raw_contents, raw=raw)
    if raw_contents:
        msg.raw_input_contents.extend(raw_contents)
    for out in req.outputs:
        tensor = msg.outputs.add(name=out.name)
        if out.parameters:
            params_to_proto(out.parameters, tensor.parameters)
        if out.class_count:  # a negative count is the server's to refuse, as over REST
            tensor.parameters[_CLASSIFICATION].int64_param = out.class_count
    return msg


def request_from_bytes(data: bytes) -> InferRequest:
    """Decode a serialized ``ModelInferRequest`` (what a server receives): :func:`parse_request`.

    Raises:
        InvalidInputError: not a ``ModelInferRequest``, or the errors of
            :func:`request_from_proto`.
        DataTypeError: an unknown datatype.
    """
    return request_from_proto(*parse_request(data))


def parse_request(data: bytes) -> tuple[pb.ModelInferRequest, Sequence[Any]]:
    """Parse a serialized ``ModelInferRequest`` into the message and its raw input contents.

    In a large message the ``raw_input_contents`` are taken out before protobuf parses the
    rest (the message then has none): they are views of ``data`` itself, where protobuf would
    copy them twice (into the message, then into a ``bytes`` per entry).

    Raises:
        InvalidInputError: not a ``ModelInferRequest`` (malformed protobuf).
    """
    split = split_field(data, _RAW_INPUT_FIELD) if len(data) >= VIEW_MIN_BYTES else None
    try:
        if split is None:
            msg = pb.ModelInferRequest.FromString(data)
            return msg, msg.raw_input_contents
        rest, raw = split
        return pb.ModelInferRequest.FromString(rest), raw
    except DecodeError as exc:
        raise InvalidInputError(f"malformed ModelInferRequest message: {exc}") from exc


def request_from_proto(msg: pb.ModelInferRequest, raw: Sequence[Any] | None = None) -> InferRequest:
    """Decode a ``ModelInferRequest``; raw tensors become zero-copy read-only views.

    Args:
        msg: The message.
        raw: Its raw input contents when they are not in ``msg`` (:func:`parse_request`).

    Raises:
        InvalidInputError: data and shape disagree, data is missing, or contents are mixed.
        DataTypeError: an unknown datatype.
    """
    if raw is None:
        raw = msg.raw_input_contents
    inputs = decode_tensors(msg.inputs, raw, "input", InferInput, model=msg.model_name)
    outputs = []
    for tensor in msg.outputs:
        if not tensor.parameters:
            outputs.append(RequestedOutput(tensor.name))
            continue
        params = params_from_proto(tensor.parameters)
        class_count = params.pop(_CLASSIFICATION, 0)
        if isinstance(class_count, bool) or not isinstance(class_count, int) or class_count < 0:
            raise InvalidInputError(
                f"output {tensor.name!r}: parameter 'classification' must be an integer >= 0, "
                f"got {class_count!r}",
                tensor=tensor.name,
            )
        outputs.append(RequestedOutput(tensor.name, class_count=class_count, parameters=params))
    return InferRequest(
        inputs=inputs,
        outputs=outputs,
        id=msg.id,
        parameters=params_from_proto(msg.parameters),
        model_name=msg.model_name,
        model_version=msg.model_version,
    )


def response_to_proto(resp: InferResponse, *, raw: bool = True) -> pb.ModelInferResponse:
    """Encode an :class:`InferResponse` as a ``ModelInferResponse``.

    Args:
        resp: The response.
        raw: ``raw_output_contents`` (default) or typed ``contents`` (see :func:`request_to_proto`).

    Raises:
        InvalidInputError: data size does not match a shape, or a parameter has no v2 type.
    """
    msg = pb.ModelInferResponse(
        model_name=resp.model_name, model_version=resp.model_version, id=resp.id
    )
    if resp.parameters:
        params_to_proto(resp.parameters, msg.parameters)
    raw_contents: list[bytes] = []
    encode_tensors(resp.outputs, msg.outputs.add, raw_contents, raw=raw)
    if raw_contents:
        msg.raw_output_contents.extend(raw_contents)
    return msg


def response_to_bytes(resp: InferResponse) -> bytes:
    """The serialized ``ModelInferResponse`` of ``resp`` with raw contents (a server's answer).

    When an output is large, the message without its tensor data is serialized by protobuf
    and the ``raw_output_contents`` records (the last field, so the bytes are those protobuf
    would write) are appended by hand from the arrays' own buffers: one copy of each tensor,
    where going through the message costs three (``tobytes``, the message's field and
    ``SerializeToString``, which is slow on large fields). Small outputs go through the
    message, which is quicker for them.

    Raises:
        InvalidInputError: data size does not match a shape, or a parameter has no v2 type.
    """
    return b"".join(_response_parts(resp))


def stream_response_to_bytes(resp: InferResponse) -> bytes:
    """The serialized ``ModelStreamInferResponse`` carrying ``resp`` (as :func:`response_to_bytes`).

    Raises:
        InvalidInputError: data size does not match a shape, or a parameter has no v2 type.
    """
    parts = _response_parts(resp)
    size = sum(len(part) for part in parts)
    return b"".join([_STREAM_RESPONSE_TAG + varint(size), *parts])


#: Serialized message prefixes reused across responses (a token stream answers the same
#: model, id, parameters and output names, datatypes and shapes each time); cleared when full.
_PREFIXES: dict[tuple[Any, ...], bytes] = {}
_PREFIXES_MAX = 512
_OUTPUT_TAG: Final = varint(pb.ModelInferResponse.OUTPUTS_FIELD_NUMBER << 3 | 2)
_SCALARS = (bool, int, float, str)


def _prefix(key: tuple[Any, ...], make: Callable[[], bytes]) -> bytes:
    data = _PREFIXES.get(key)
    if data is None:
        if len(_PREFIXES) >= _PREFIXES_MAX:
            _PREFIXES.clear()
        data = _PREFIXES[key] = make()
    return data


def _small_body(resp: InferResponse) -> bytes | None:
    """The message of a response of small, plain outputs from reused prefixes, or None.

    The same bytes as going through the message (fields in number order): the head (fields 1-4)
    and each output's tensor record are serialized once per distinct value, the data appended.
    """
    params = resp.parameters
    if params and not all(type(v) in _SCALARS for v in params.values()):
        return None
    # True and 1 are different parameters: the key holds the types too
    head_key: tuple[Any, ...] = (resp.model_name, resp.model_version, resp.id, *params.items())
    head_key += tuple(map(type, params.values()))
    parts = [_prefix(head_key, partial(_head_bytes, resp))]
    raws: list[bytes] = []
    for out in resp.outputs:
        data = out.data
        if out.parameters or type(data) is not np.ndarray or data.shape != tuple(out.shape):
            return None
        if out.datatype == "BYTES":
            if data.dtype != object:
                return None
            raw = encode_bytes_tensor(data)
        elif data.dtype == PLAIN_DTYPES.get(out.datatype) and data.nbytes < VIEW_MIN_BYTES:
            raw = data.tobytes()
        else:
            return None
        parts.append(_prefix((out.name, out.datatype, *out.shape), partial(_output_bytes, out)))
        raws.append(RAW_OUTPUT_TAG + varint(len(raw)) + raw)
    return b"".join(parts + raws)


def _head_bytes(resp: InferResponse) -> bytes:
    msg = pb.ModelInferResponse(
        model_name=resp.model_name, model_version=resp.model_version, id=resp.id
    )
    if resp.parameters:
        params_to_proto(resp.parameters, msg.parameters)
    return bytes(msg.SerializeToString())


def _output_bytes(out: InferOutput) -> bytes:
    """The ``outputs`` record (tag, length, tensor message) of an output without parameters."""
    msg = pb.ModelInferResponse.InferOutputTensor(
        name=out.name, datatype=out.datatype, shape=out.shape
    )
    data = msg.SerializeToString()
    return _OUTPUT_TAG + varint(len(data)) + data


def _response_parts(resp: InferResponse) -> list[Any]:
    """The buffers whose concatenation is the serialized ``ModelInferResponse``."""
    small = _small_body(resp)
    if small is not None:
        return [small]
    msg = pb.ModelInferResponse(
        model_name=resp.model_name, model_version=resp.model_version, id=resp.id
    )
    if resp.parameters:
        params_to_proto(resp.parameters, msg.parameters)
    raw_contents: list[Any] = []
    encode_tensors(resp.outputs, msg.outputs.add, raw_contents, raw=True, views=True)
    if all(type(data) is bytes for data in raw_contents):  # no large output
        msg.raw_output_contents.extend(raw_contents)
        return [msg.SerializeToString()]
    parts: list[Any] = [msg.SerializeToString()]
    for data in raw_contents:
        parts.append(RAW_OUTPUT_TAG + varint(len(data)))
        parts.append(data)
    return parts


def read_response(data: bytes) -> pb.ModelInferResponse:
    """Parse a serialized ``ModelInferResponse`` (or the part of one before its raw contents).

    Raises:
        InvalidInputError: not a ``ModelInferResponse`` (malformed protobuf).
    """
    try:
        return pb.ModelInferResponse.FromString(data)
    except DecodeError as exc:
        raise InvalidInputError(f"malformed ModelInferResponse from the server: {exc}") from exc


def response_from_proto(msg: pb.ModelInferResponse) -> InferResponse:
    """Decode a ``ModelInferResponse``; raw tensors become zero-copy read-only views.

    Read leniently, as tritonclient does: a reply carrying ``raw_output_contents`` next to
    typed contents (Seldon MLServer's) is accepted (see :func:`_decode_tensor_data`).

    Raises:
        InvalidInputError: data and shape disagree, or data is missing.
        DataTypeError: an unknown datatype.
    """
    outputs = decode_tensors(
        msg.outputs, msg.raw_output_contents, "output", InferOutput, lenient=True
    )
    return InferResponse(
        model_name=msg.model_name,
        outputs=outputs,
        model_version=msg.model_version,
        id=msg.id,
        parameters=params_from_proto(msg.parameters),
    )


# ---------------------------------------------------------------------------------------------
# The client hot path: a request serialized once per signature, outputs decoded on access

_ID_TAG: Final = varint(pb.ModelInferRequest.ID_FIELD_NUMBER << 3 | 2)


class RequestTemplate:
    """A ``ModelInferRequest`` without its tensor data, serialized once and reused.

    Protobuf readers accept fields in any order, so a call's message is the template followed
    by one ``raw_input_contents`` record per input (and the ``id``): one copy of the data and
    no message objects per call. :func:`request_from_proto` reads the bytes back unchanged.

    Args:
        model_name: The model.
        model_version: The version ("" = the server's policy).
        inputs: ``(name, datatype, shape, nbytes)`` per input, in order.
        outputs: Requested output names (none: all outputs).
    """

    __slots__ = ("heads", "prefix")

    def __init__(
        self,
        model_name: str,
        model_version: str,
        inputs: Sequence[tuple[str, str, Sequence[int], int]],
        outputs: Sequence[str] = (),
    ) -> None:
        msg = pb.ModelInferRequest(model_name=model_name, model_version=model_version)
        for name, datatype, shape, _ in inputs:
            msg.inputs.add(name=name, datatype=datatype, shape=shape)
        for name in outputs:
            msg.outputs.add(name=name)
        self.prefix: bytes = msg.SerializeToString()
        self.heads = [_RAW_INPUT_TAG + varint(nbytes) for *_, nbytes in inputs]

    def encode(self, buffers: Sequence[Any], request_id: str = "") -> bytes:
        """The serialized request carrying ``buffers`` (bytes-like, one per input, in order)."""
        parts: list[Any] = [self.prefix]
        for head, buf in zip(self.heads, buffers, strict=True):
            parts.append(head)
            parts.append(buf)
        if request_id:
            rid = request_id.encode()
            parts.append(_ID_TAG + varint(len(rid)))
            parts.append(rid)
        return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# Metadata and repository


def server_metadata_to_proto(meta: ServerMetadata) -> pb.ServerMetadataResponse:
    """Encode server metadata."""
    return pb.ServerMetadataResponse(
        name=meta.name, version=meta.version, extensions=list(meta.extensions)
    )


def server_metadata_from_proto(msg: pb.ServerMetadataResponse) -> ServerMetadata:
    """Decode server metadata."""
    return ServerMetadata(name=msg.name, version=msg.version, extensions=list(msg.extensions))


def _specs_to_proto(
    specs: Iterable[TensorSpec],
) -> list[pb.ModelMetadataResponse.TensorMetadata]:
    return [
        pb.ModelMetadataResponse.TensorMetadata(name=s.name, datatype=s.datatype, shape=s.shape)
        for s in specs
    ]


def model_metadata_to_proto(meta: ModelMetadata) -> pb.ModelMetadataResponse:
    """Encode model metadata (``parameters`` have no place in the gRPC message and are dropped)."""
    return pb.ModelMetadataResponse(
        name=meta.name,
        versions=list(meta.versions),
        platform=meta.platform,
        inputs=_specs_to_proto(meta.inputs),
        outputs=_specs_to_proto(meta.outputs),
    )


def model_metadata_from_proto(msg: pb.ModelMetadataResponse) -> ModelMetadata:
    """Decode model metadata."""

    def specs(
        items: Iterable[pb.ModelMetadataResponse.TensorMetadata],
    ) -> list[TensorSpec]:
        return [TensorSpec(t.name, t.datatype, list(t.shape)) for t in items]

    return ModelMetadata(
        name=msg.name,
        versions=list(msg.versions),
        platform=msg.platform,
        inputs=specs(msg.inputs),
        outputs=specs(msg.outputs),
    )


def repository_index_to_proto(models: Iterable[RepositoryModel]) -> pb.RepositoryIndexResponse:
    """Encode the repository index."""
    return pb.RepositoryIndexResponse(
        models=[
            pb.RepositoryIndexResponse.ModelIndex(
                name=m.name, version=m.version, state=m.state, reason=m.reason
            )
            for m in models
        ]
    )


def repository_index_from_proto(msg: pb.RepositoryIndexResponse) -> list[RepositoryModel]:
    """Decode the repository index."""
    return [RepositoryModel(m.name, m.version, m.state, m.reason) for m in msg.models]


_FILE_PREFIX: Final = "file:"


def load_request_to_proto(
    name: str, *, config: str | None = None, files: Mapping[str, bytes] | None = None
) -> pb.RepositoryModelLoadRequest:
    """Build a ``RepositoryModelLoadRequest``.

    Args:
        name: The model to load.
        config: Model configuration as JSON text (parameter ``config``).
        files: ``{"<path>": content}``; sent as parameters ``file:<path>`` (bytes).
    """
    msg = pb.RepositoryModelLoadRequest(model_name=name)
    if config is not None:
        msg.parameters["config"].string_param = config
    for path, content in (files or {}).items():
        key = path if path.startswith(_FILE_PREFIX) else _FILE_PREFIX + path
        msg.parameters[key].bytes_param = bytes(content)
    return msg


def load_request_from_proto(
    msg: pb.RepositoryModelLoadRequest,
) -> tuple[str, str | None, dict[str, bytes]]:
    """Decode a ``RepositoryModelLoadRequest`` into ``(name, config, files)``.

    ``files`` maps ``<path>`` (the ``file:`` prefix removed) to its content.

    Raises:
        InvalidInputError: ``config`` is not a string or a ``file:`` parameter is not bytes.
    """
    config: str | None = None
    files: dict[str, bytes] = {}
    for key, param in msg.parameters.items():
        kind = param.WhichOneof("parameter_choice")
        if key == "config":
            if kind != "string_param":
                raise InvalidInputError(
                    f"load {msg.model_name!r}: parameter 'config' must be a string (JSON), "
                    f"got {kind}"
                )
            config = param.string_param
        elif key.startswith(_FILE_PREFIX):
            if kind != "bytes_param":
                raise InvalidInputError(
                    f"load {msg.model_name!r}: parameter {key!r} must be bytes, got {kind}"
                )
            files[key[len(_FILE_PREFIX) :]] = param.bytes_param
    return msg.model_name, config, files


# ---------------------------------------------------------------------------------------------
# Shared-memory status (the same dict shapes as the REST routes; settings: grpc_settings.py)


#: The fields of a shared-memory region's status, by kind (``system`` / ``cuda``).
SHM_STATUS_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "system": ("name", "key", "offset", "byte_size"),
    "cuda": ("name", "device_id", "byte_size"),
}


def _shm_fields(kind: str) -> tuple[str, ...]:
    try:
        return SHM_STATUS_FIELDS[kind]
    except KeyError as exc:
        known = ", ".join(SHM_STATUS_FIELDS)
        raise InvalidInputError(f"unknown shared-memory kind {kind!r}; known: {known}") from exc


def shm_status_to_proto(kind: str, rows: Iterable[Mapping[str, Any]]) -> Message:
    """Region dicts (the REST shape) as a ``{System,Cuda}SharedMemoryStatusResponse``.

    Raises:
        InvalidInputError: ``kind`` is neither ``system`` nor ``cuda``.
    """
    fields = _shm_fields(kind)
    msg = response_message(f"{kind.capitalize()}SharedMemoryStatus")
    regions = cast(Any, msg).regions
    for row in rows:
        region = regions[row["name"]]
        for field in fields:
            setattr(region, field, row[field])
    return msg


def shm_status_from_proto(kind: str, msg: Message) -> list[dict[str, Any]]:
    """A ``{System,Cuda}SharedMemoryStatusResponse`` as region dicts (the REST shape).

    Raises:
        InvalidInputError: ``kind`` is neither ``system`` nor ``cuda``.
    """
    fields = _shm_fields(kind)
    regions = cast(Any, msg).regions
    return [{f: getattr(region, f) for f in fields} for region in regions.values()]
