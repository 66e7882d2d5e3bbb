"""The v2 gRPC codec: protobuf messages <-> :mod:`nbinfer.protocol.types`.

The only module that touches the generated stubs. Messages are those of ``protos/*.proto``
(package ``inference``, wire-compatible with Triton's ``grpc_service.proto``), registered in a
private descriptor pool, so nbinfer coexists with tritonclient and kserve in one process::

    from nbinfer.protocol.grpc import pb, request_to_proto, response_from_proto

    msg = request_to_proto(request)          # raw_input_contents, one entry per tensor
    reply = stub_call(msg)                   # any transport
    response = response_from_proto(reply)    # zero-copy numpy views on the raw bytes

Tensor data travels in ``raw_input_contents`` / ``raw_output_contents`` by default; typed
``contents`` are decoded too, and produced with ``raw=False`` (FP16 / BF16 have no typed form
and always go raw). The gRPC service, its method paths and streaming kinds are in :data:`RPCS`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar, cast

import numpy as np
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from nbinfer.errors import InvalidInputError
from nbinfer.protocol._generated import grpc_service_pb2 as pb
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.tensors import (
    bytes_element,
    decode_encoded_elements,
    tensor_from_bytes,
    tensor_to_bytes,
)
from nbinfer.protocol.types import (
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    Parameters,
    ParamValue,
    RepositoryModel,
    RequestedOutput,
    ServerMetadata,
    TensorSpec,
)

__all__ = [
    "RPCS",
    "SERVICE_NAME",
    "RequestTemplate",
    "ResponseReader",
    "Rpc",
    "config_json_to_proto",
    "config_proto_to_json",
    "load_request_from_proto",
    "load_request_to_proto",
    "method_path",
    "model_metadata_from_proto",
    "model_metadata_to_proto",
    "params_from_proto",
    "params_to_proto",
    "pb",
    "repository_index_from_proto",
    "repository_index_to_proto",
    "request_from_proto",
    "request_to_proto",
    "response_from_proto",
    "response_to_bytes",
    "response_to_proto",
    "server_metadata_from_proto",
    "server_metadata_to_proto",
    "statistics_json_to_proto",
    "statistics_proto_to_json",
]

logger = logging.getLogger("nbinfer")

#: Full name of the v2 gRPC service (method paths are ``/<SERVICE_NAME>/<Rpc>``).
SERVICE_NAME: Final = "inference.GRPCInferenceService"

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


def method_path(rpc: str) -> str:
    """Return ``/inference.GRPCInferenceService/<rpc>``.

    Raises:
        KeyError: ``rpc`` is not an RPC of the service.
    """
    try:
        return RPCS[rpc].path
    except KeyError:
        raise KeyError(f"unknown RPC {rpc!r}; known: {', '.join(RPCS)}") from None


# ---------------------------------------------------------------------------------------------
# Parameters

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_UINT64_MAX: Final = 2**64 - 1

_ParamMap = MutableMapping[str, pb.InferParameter]


def _set_param(target: pb.InferParameter, key: str, value: Any) -> None:
    if isinstance(value, bool | np.bool_):
        target.bool_param = bool(value)
    elif isinstance(value, int | np.integer):
        number = int(value)
        if _INT64_MIN <= number <= _INT64_MAX:
            target.int64_param = number
        elif 0 <= number <= _UINT64_MAX:
            target.uint64_param = number
        else:
            raise InvalidInputError(
                f"parameter {key!r}: integer {number} does not fit in int64 or uint64",
                parameter=key,
            )
    elif isinstance(value, float | np.floating):
        target.double_param = float(value)
    elif isinstance(value, str):
        target.string_param = value
    else:
        raise InvalidInputError(
            f"parameter {key!r}: {type(value).__name__} is not a v2 parameter type "
            "(bool, int, float or str)",
            parameter=key,
        )


def params_to_proto(params: Mapping[str, ParamValue], target: _ParamMap) -> None:
    """Write a parameters dict into a protobuf ``map<string, InferParameter>``.

    ``bool`` -> ``bool_param``, ``int`` -> ``int64_param`` (``uint64_param`` above int64),
    ``float`` -> ``double_param``, ``str`` -> ``string_param``.

    Raises:
        InvalidInputError: a value has no v2 parameter type or is out of range.
    """
    for key, value in params.items():
        _set_param(target[key], key, value)


def params_from_proto(source: Mapping[str, pb.InferParameter]) -> Parameters:
    """Read a protobuf ``map<string, InferParameter>`` into a parameters dict (unset skipped)."""
    if not source:
        return {}
    out: Parameters = {}
    for key, param in source.items():
        kind = param.WhichOneof("parameter_choice")
        if kind is not None:
            out[key] = getattr(param, kind)
    return out


# ---------------------------------------------------------------------------------------------
# Tensor contents

#: v2 datatype -> the InferTensorContents list that carries it in typed form.
_CONTENTS_FIELD: Final[dict[str, str]] = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}

#: Typed lists whose packed wire form is the little-endian array itself (bool: one 0/1 byte).
_PACKED_FIXED: Final[dict[str, tuple[int, np.dtype[Any]]]] = {
    "BOOL": (pb.InferTensorContents.BOOL_CONTENTS_FIELD_NUMBER, np.dtype("u1")),
    "FP32": (pb.InferTensorContents.FP32_CONTENTS_FIELD_NUMBER, np.dtype("<f4")),
    "FP64": (pb.InferTensorContents.FP64_CONTENTS_FIELD_NUMBER, np.dtype("<f8")),
}

#: Fixed-width datatypes whose raw bytes need no check beyond their size (BOOL checks values);
#: their raw bytes are the little-endian array itself.
_PLAIN: Final[dict[str, np.dtype[Any]]] = {
    name: numpy_dtype(name)
    for name in (
        *("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"),
        *("FP16", "FP32", "FP64", "BF16"),
    )
}

_CONTENTS_FIELDS: Final = tuple(f.name for f in pb.InferTensorContents.DESCRIPTOR.fields)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidInputError("truncated varint in tensor contents")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _packed_payloads(buf: bytes, field_number: int) -> list[bytes]:
    """The length-delimited payloads of ``field_number`` in a serialized InferTensorContents.

    Every field of InferTensorContents is repeated and (proto3) packed or bytes, so each record
    is length-delimited (wire type 2), which is all this reader needs.
    """
    pieces = []
    pos = 0
    while pos < len(buf):
        tag, pos = _read_varint(buf, pos)
        if tag & 7 != 2:
            raise InvalidInputError(f"unexpected wire type {tag & 7} in tensor contents")
        length, pos = _read_varint(buf, pos)
        if tag >> 3 == field_number:
            pieces.append(buf[pos : pos + length])
        pos += length
    return pieces


def _element_count(shape: Sequence[int], name: str) -> int:
    if any(dim < 0 for dim in shape):
        raise InvalidInputError(
            f"tensor {name!r}: shape {list(shape)} has a negative dimension", tensor=name
        )
    return math.prod(shape)


def _fill_contents(contents: pb.InferTensorContents, arr: np.ndarray[Any, Any], dtype: str) -> None:
    """Put ``arr`` into the typed list for ``dtype`` (floats / bools without a per-element loop).

    Numeric data is first normalised by :func:`tensor_to_bytes` (same casting rules as raw).
    """
    if dtype == "BYTES":
        contents.bytes_contents.extend(bytes_element(item) for item in arr.reshape(-1))
        return
    payload = tensor_to_bytes(arr, dtype)
    if dtype in _PACKED_FIXED:
        number = _PACKED_FIXED[dtype][0]
        if len(payload):
            contents.MergeFromString(
                _varint(number << 3 | 2) + _varint(len(payload)) + bytes(payload)
            )
        return
    values = np.frombuffer(payload, dtype=numpy_dtype(dtype)).tolist()
    getattr(contents, _CONTENTS_FIELD[dtype]).extend(values)


def _decode_contents(
    contents: pb.InferTensorContents, datatype: str, shape: list[int], name: str
) -> np.ndarray[Any, Any]:
    """Typed ``contents`` -> array of ``shape`` (checks the element count)."""
    field = _CONTENTS_FIELD.get(datatype)
    if field is None:
        numpy_dtype(datatype)  # raises DataTypeError for unknown datatypes
        raise InvalidInputError(
            f"tensor {name!r}: {datatype} has no typed contents in the v2 gRPC protocol; "
            "send it in raw_input_contents / raw_output_contents",
            tensor=name,
        )
    count = _element_count(shape, name)
    values = getattr(contents, field)
    if len(values) != count:
        used = [f for f in _CONTENTS_FIELDS if f != field and len(getattr(contents, f))]
        hint = f" (data found in {', '.join(used)})" if used else ""
        raise InvalidInputError(
            f"tensor {name!r}: {datatype} shape {shape} needs {count} elements in "
            f"contents.{field}, got {len(values)}{hint}",
            tensor=name,
            expected=count,
            actual=len(values),
        )
    dt = numpy_dtype(datatype)
    if datatype in _PACKED_FIXED:
        number, wire_dtype = _PACKED_FIXED[datatype]
        payload = b"".join(_packed_payloads(contents.SerializeToString(), number))
        flat = np.frombuffer(payload, dtype=wire_dtype)
        if datatype == "BOOL":
            flat = flat.view(np.bool_)
    elif datatype == "BYTES":
        flat = np.empty(count, dtype=object)
        flat[:] = list(values)
    else:
        try:
            flat = np.fromiter(values, dtype=dt, count=count)
        except OverflowError as exc:
            raise InvalidInputError(
                f"tensor {name!r}: contents.{field} holds a value out of range for {datatype}",
                tensor=name,
            ) from exc
    return flat.reshape(shape)


def _tensor_bytes(arr: np.ndarray[Any, Any], datatype: str) -> bytes:
    data = tensor_to_bytes(arr, datatype)
    return data if isinstance(data, bytes) else bytes(data)


def _check_data(data: np.ndarray[Any, Any], datatype: str, shape: list[int], name: str) -> None:
    count = _element_count(shape, name)
    if data.size != count:
        raise InvalidInputError(
            f"tensor {name!r}: shape {shape} has {count} elements but the data has {data.size}",
            tensor=name,
            expected=count,
            actual=int(data.size),
        )


_AnyTensorMsg = pb.ModelInferRequest.InferInputTensor | pb.ModelInferResponse.InferOutputTensor
_TensorMsg = TypeVar(
    "_TensorMsg", pb.ModelInferRequest.InferInputTensor, pb.ModelInferResponse.InferOutputTensor
)


def _encode_tensors(
    tensors: Sequence[InferInput] | Sequence[InferOutput],
    add: Callable[..., _TensorMsg],
    raw_out: list[bytes],
    *,
    raw: bool,
) -> None:
    typed = not raw and all(t.data is None or t.datatype in _CONTENTS_FIELD for t in tensors)
    if not raw and not typed:
        logger.debug("FP16/BF16 tensor present: sending every tensor as raw contents")
    for tensor in tensors:
        data = tensor.data
        if raw and type(data) is np.ndarray:
            # the common case: a native little-endian array of its datatype and shape
            dtype = _PLAIN.get(tensor.datatype)
            if dtype is not None and data.dtype == dtype and data.shape == tuple(tensor.shape):
                msg = add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
                if tensor.parameters:
                    params_to_proto(tensor.parameters, msg.parameters)
                raw_out.append(data.tobytes())
                continue
        msg = add()
        msg.name = tensor.name
        msg.datatype = tensor.datatype
        msg.shape.extend(tensor.shape)
        if tensor.parameters:
            params_to_proto(tensor.parameters, msg.parameters)
        if tensor.data is None:  # lives in shared memory: no contents of its own
            continue
        _check_data(tensor.data, tensor.datatype, tensor.shape, tensor.name)
        if typed:
            _fill_contents(msg.contents, tensor.data, tensor.datatype)
        else:
            raw_out.append(_tensor_bytes(tensor.data, tensor.datatype))


_Tensor = TypeVar("_Tensor", InferInput, InferOutput)


def _raw_tensor(buf: bytes, datatype: str, shape: list[int], name: str) -> np.ndarray[Any, Any]:
    """One raw contents entry; BYTES also as OVMS sends one encoded image: unprefixed."""
    if datatype == "BYTES":
        return decode_encoded_elements(buf, shape, name=name)
    return tensor_from_bytes(buf, datatype, shape, name=name)


def _decode_tensors(
    msgs: Sequence[_AnyTensorMsg],
    raw: Sequence[bytes],
    kind: str,
    make: type[_Tensor],
    *,
    lenient: bool = False,
) -> list[_Tensor]:
    """Decode tensor messages and their data into ``make`` (InferInput or InferOutput).

    The common message (one raw entry per tensor, no parameters, no typed contents) is decoded
    here: fixed-width data of the right size becomes a view of the (immutable, so read-only)
    bytes, the rest goes through :func:`tensor_from_bytes` (which raises every size error).
    Anything else is left to :func:`_decode_tensor_data`.
    """
    if len(raw) == len(msgs):
        out = []
        for msg, buf in zip(msgs, raw, strict=True):
            if msg.parameters or msg.HasField("contents"):
                break
            name = msg.name
            datatype = msg.datatype
            shape = list(msg.shape)
            dtype = _PLAIN.get(datatype)
            if (
                dtype is None
                or type(buf) is not bytes
                or len(buf) != math.prod(shape) * dtype.itemsize
                or (shape and min(shape) < 0)
            ):
                data = _raw_tensor(buf, datatype, shape, name)
            else:
                data = np.frombuffer(buf, dtype=dtype).reshape(shape)
            out.append(make(name, datatype, shape, data))
        else:
            return out
    return [
        make(m.name, m.datatype, shape, data, params)
        for m, shape, params, data in _decode_tensor_data(msgs, raw, kind, lenient=lenient)
    ]


def _decode_tensor_data(
    msgs: Sequence[_AnyTensorMsg],
    raw: Sequence[bytes],
    kind: str,
    *,
    lenient: bool = False,
) -> list[tuple[Any, list[int], Parameters, np.ndarray[Any, Any] | None]]:
    """Pair each tensor message with its data: raw entry, typed contents, or none (shm).

    Raw entries go one per tensor in order; tensors in shared memory or with typed contents
    take none (as tritonclient sends them) unless there is exactly one raw entry per tensor.
    Strict (requests, as Triton reads them): raw and typed contents in one message are refused.
    Lenient (responses, as tritonclient reads them; Seldon MLServer sends both): one raw entry
    per tensor wins over any typed contents, else tensors whose typed contents hold data use
    them and the others take the raw entries in order.
    """
    one_to_one = len(raw) == len(msgs)
    if not lenient and raw and any(m.HasField("contents") for m in msgs):
        raise InvalidInputError(
            f"raw_{kind}_contents and typed contents cannot be mixed in one message"
        )
    out = []
    next_raw = 0
    for index, msg in enumerate(msgs):
        name = msg.name
        shape = list(msg.shape)
        params = params_from_proto(msg.parameters)
        data: np.ndarray[Any, Any] | None
        typed = msg.HasField("contents") and (not lenient or msg.contents.ByteSize() > 0)
        if one_to_one:
            data = _raw_tensor(raw[index], msg.datatype, shape, name)
        elif typed:
            data = _decode_contents(msg.contents, msg.datatype, shape, name)
        elif "shared_memory_region" in params:
            data = None
        elif next_raw < len(raw):
            data = _raw_tensor(raw[next_raw], msg.datatype, shape, name)
            next_raw += 1
        elif not raw and _element_count(shape, name) == 0:
            data = np.empty(shape, dtype=numpy_dtype(msg.datatype))
        else:
            raise InvalidInputError(
                f"{kind} tensor {name!r} has no data: {len(raw)} raw_{kind}_contents entries "
                f"for {len(msgs)} {kind}s and no typed contents",
                tensor=name,
            )
        out.append((msg, shape, params, data))
    if not one_to_one and next_raw != len(raw):
        raise InvalidInputError(
            f"{len(raw)} raw_{kind}_contents entries but only {next_raw} {kind}s take raw data"
        )
    return out


# ---------------------------------------------------------------------------------------------
# Inference request / response

_CLASSIFICATION: Final = "classification"


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
    _encode_tensors(req.inputs, msg.inputs.add, raw_contents, raw=raw)
    if raw_contents:
        msg.raw_input_contents.extend(raw_contents)
    for out in req.outputs:
        tensor = msg.outputs.add(name=out.name)
        if out.parameters:
            params_to_proto(out.parameters, tensor.parameters)
        if out.class_count > 0:
            tensor.parameters[_CLASSIFICATION].int64_param = out.class_count
    return msg


def request_from_proto(msg: pb.ModelInferRequest) -> InferRequest:
    """Decode a ``ModelInferRequest``; raw tensors become zero-copy read-only views.

    Raises:
        InvalidInputError: data and shape disagree, data is missing, or contents are mixed.
        DataTypeError: an unknown datatype.
    """
    inputs = _decode_tensors(msg.inputs, msg.raw_input_contents, "input", InferInput)
    outputs = []
    for tensor in msg.outputs:
        if not tensor.parameters:
            outputs.append(RequestedOutput(tensor.name))
            continue
        params = params_from_proto(tensor.parameters)
        class_count = params.pop(_CLASSIFICATION, 0)
        if isinstance(class_count, bool) or not isinstance(class_count, int):
            raise InvalidInputError(
                f"output {tensor.name!r}: parameter 'classification' must be an integer, "
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
    _encode_tensors(resp.outputs, msg.outputs.add, raw_contents, raw=raw)
    if raw_contents:
        msg.raw_output_contents.extend(raw_contents)
    return msg


def response_to_bytes(resp: InferResponse) -> bytes:
    """The serialized ``ModelInferResponse`` of ``resp`` with raw contents (a server's answer).

    Raises:
        InvalidInputError: data size does not match a shape, or a parameter has no v2 type.
    """
    return bytes(response_to_proto(resp).SerializeToString())


def response_from_proto(msg: pb.ModelInferResponse) -> InferResponse:
    """Decode a ``ModelInferResponse``; raw tensors become zero-copy read-only views.

    Read leniently, as tritonclient does: a reply carrying ``raw_output_contents`` next to
    typed contents (Seldon MLServer's) is accepted (see :func:`_decode_tensor_data`).

    Raises:
        InvalidInputError: data and shape disagree, or data is missing.
        DataTypeError: an unknown datatype.
    """
    outputs = _decode_tensors(
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

_RAW_INPUT_TAG: Final = _varint(pb.ModelInferRequest.RAW_INPUT_CONTENTS_FIELD_NUMBER << 3 | 2)
_ID_TAG: Final = _varint(pb.ModelInferRequest.ID_FIELD_NUMBER << 3 | 2)


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
        self.heads = [_RAW_INPUT_TAG + _varint(nbytes) for *_, nbytes in inputs]

    def encode(self, buffers: Sequence[Any], request_id: str = "") -> bytes:
        """The serialized request carrying ``buffers`` (bytes-like, one per input, in order)."""
        parts: list[Any] = [self.prefix]
        for head, buf in zip(self.heads, buffers, strict=True):
            parts.append(head)
            parts.append(buf)
        if request_id:
            rid = request_id.encode()
            parts.append(_ID_TAG + _varint(len(rid)))
            parts.append(rid)
        return b"".join(parts)


class ResponseReader:
    """A ``ModelInferResponse`` whose outputs are decoded on first access.

    Sizes are checked up front, so a malformed reply fails at once as with
    :func:`response_from_proto`; arrays are zero-copy read-only views made when first asked
    for. Replies this reader does not take apart cheaply (typed contents, shared memory, BYTES,
    BOOL) are decoded eagerly by :func:`response_from_proto`.

    Raises:
        InvalidInputError: data and shape disagree, or data is missing.
        DataTypeError: an unknown datatype.
    """

    __slots__ = ("_arrays", "_full", "_msg", "_raw", "_specs", "names")

    def __init__(self, msg: pb.ModelInferResponse) -> None:
        self._msg = msg
        outs = msg.outputs
        self.names: list[str] = [o.name for o in outs]
        self._full: InferResponse | None = None
        self._raw: list[bytes] = []
        self._specs: list[tuple[np.dtype[Any], tuple[int, ...]]] = []
        raw = msg.raw_output_contents
        if len(raw) == len(outs):
            raws = list(raw)
            specs = []
            for out, data in zip(outs, raws, strict=True):
                dtype = _PLAIN.get(out.datatype)
                shape = tuple(out.shape)
                if (
                    dtype is None
                    or len(data) != math.prod(shape) * dtype.itemsize
                    or any(d < 0 for d in shape)
                    or out.HasField("contents")
                ):
                    break
                specs.append((dtype, shape))
            else:
                self._raw, self._specs = raws, specs
                self._arrays: list[np.ndarray[Any, Any] | None] = [None] * len(raws)
                return
        self._full = response_from_proto(msg)

    @property
    def model_name(self) -> str:
        """The model that answered."""
        return str(self._msg.model_name)

    @property
    def model_version(self) -> str:
        """The model version that answered."""
        return str(self._msg.model_version)

    @property
    def id(self) -> str:
        """The request id echoed by the server."""
        return str(self._msg.id)

    @property
    def parameters(self) -> Parameters:
        """Response parameters."""
        return params_from_proto(self._msg.parameters)

    def array(self, index: int) -> np.ndarray[Any, Any] | None:
        """The data of output ``index`` (None: it was written to shared memory)."""
        if self._full is not None:
            return self._full.outputs[index].data
        arr = self._arrays[index]
        if arr is None:
            dtype, shape = self._specs[index]
            arr = self._arrays[index] = np.frombuffer(self._raw[index], dtype=dtype).reshape(shape)
        return arr

    def output(self, index: int) -> InferOutput:
        """Output ``index`` with its datatype, shape and parameters."""
        if self._full is not None:
            return self._full.outputs[index]
        out = self._msg.outputs[index]
        data = self.array(index)
        params = params_from_proto(out.parameters)
        return InferOutput(out.name, out.datatype, list(out.shape), data, params)

    def response(self) -> InferResponse:
        """The whole reply as an :class:`InferResponse`."""
        if self._full is None:
            self._full = InferResponse(
                model_name=self.model_name,
                outputs=[self.output(i) for i in range(len(self.names))],
                model_version=self.model_version,
                id=self.id,
                parameters=self.parameters,
            )
        return self._full


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
# JSON-shaped documents: model configuration and statistics

_INT64_TYPES: Final = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


def _ints_as_numbers(doc: dict[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    """Turn the 64-bit integers that protobuf's JSON writes as strings back into numbers.

    Triton's JSON (REST config and statistics) writes ``"dims": [16]``, not ``["16"]``.
    """
    for field in descriptor.fields:
        if field.name not in doc:
            continue
        value = doc[field.name]
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            value_field = sub.fields_by_name["value"]
            if value_field.message_type is not None:
                for item in value.values():
                    _ints_as_numbers(item, value_field.message_type)
            elif value_field.type in _INT64_TYPES:
                doc[field.name] = {k: int(v) for k, v in value.items()}
        elif sub is not None:
            for item in value if isinstance(value, list) else [value]:
                _ints_as_numbers(item, sub)
        elif field.type in _INT64_TYPES:
            doc[field.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
    return doc


def _to_json(msg: Message, include_defaults: bool) -> dict[str, Any]:
    doc = json_format.MessageToDict(
        msg,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=include_defaults,
    )
    return _ints_as_numbers(doc, cast(Descriptor, msg.DESCRIPTOR))


_M = TypeVar("_M", bound=Message)


def _from_json(doc: Mapping[str, Any], msg: _M, what: str, ignore_unknown: bool) -> _M:
    try:
        json_format.ParseDict(dict(doc), msg, ignore_unknown_fields=ignore_unknown)
    except json_format.ParseError as exc:
        raise InvalidInputError(f"invalid {what}: {exc}") from exc
    return msg


def config_json_to_proto(
    config: Mapping[str, Any], *, ignore_unknown_fields: bool = False
) -> pb.ModelConfig:
    """Triton-shaped model configuration JSON -> ``ModelConfig``.

    The JSON uses Triton's names: snake_case fields, enum names (``"data_type": "TYPE_FP32"``,
    ``"kind": "KIND_CPU"``), integers as numbers or strings.

    Raises:
        InvalidInputError: an unknown field (unless ``ignore_unknown_fields``) or a bad value.
    """
    return _from_json(config, pb.ModelConfig(), "model configuration", ignore_unknown_fields)


def config_proto_to_json(msg: pb.ModelConfig, *, include_defaults: bool = True) -> dict[str, Any]:
    """``ModelConfig`` -> Triton-shaped JSON dict (what ``GET v2/models/{m}/config`` returns).

    Args:
        msg: The configuration.
        include_defaults: Also write fields left at their default (as Triton does).
    """
    return _to_json(msg, include_defaults)


def statistics_json_to_proto(
    stats: Mapping[str, Any], *, ignore_unknown_fields: bool = False
) -> pb.ModelStatisticsResponse:
    """Triton-shaped statistics JSON (``{"model_stats": [...]}``) -> ``ModelStatisticsResponse``.

    Raises:
        InvalidInputError: an unknown field (unless ``ignore_unknown_fields``) or a bad value.
    """
    return _from_json(
        stats, pb.ModelStatisticsResponse(), "model statistics", ignore_unknown_fields
    )


def statistics_proto_to_json(
    msg: pb.ModelStatisticsResponse, *, include_defaults: bool = True
) -> dict[str, Any]:
    """``ModelStatisticsResponse`` -> Triton-shaped statistics JSON (integers as numbers)."""
    return _to_json(msg, include_defaults)
