"""The core behind ``nbinfer.compat.tritonclient.http`` and ``.grpc``: one client, two faces.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

tritonclient's ``InferInput`` / ``InferRequestedOutput`` / ``InferResult`` /
``InferenceServerClient`` shapes over :class:`nbinfer.Client`. The HTTP and gRPC modules differ
only in what a few answers look like (dicts for HTTP, protobuf messages for gRPC) and in a few
argument names, exactly as tritonclient's do.
"""

from __future__ import annotations

import abc
import base64
import concurrent.futures
import gzip
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.client import InferResult as _Result
from nbinfer.errors import GRPC_CODE, NbinferError, ServerError, grpc_code_of
from nbinfer.protocol import jsonvalues as _json
from nbinfer.protocol import rest as _rest_codec
from nbinfer.protocol.dtypes import datatype_of, numpy_dtype
from nbinfer.protocol.types import InferInput as _Input
from nbinfer.protocol.types import InferOutput, Parameters, RequestedOutput
from nbinfer.protocol.types import InferRequest as _Request

__all__ = [
    "MAX_GRPC_MESSAGE_SIZE",
    "TRITON_RESERVED_REQUEST_PARAMS",
    "TRITON_RESERVED_REQUEST_PARAMS_PREFIX",
    "BasicAuth",
    "InferenceServerClientPlugin",
    "Request",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerException",
    "generate_request_body",
    "np_to_triton_dtype",
    "parse_response_body",
    "raise_error",
    "triton_to_np_dtype",
]


class _Text(str):
    """A string that can also be called: ``exc.message`` and tritonclient's ``exc.message()``."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class InferenceServerException(NbinferError):
    """tritonclient's one exception, as an :class:`~nbinfer.NbinferError`.

    The specific nbinfer error (``ModelNotFoundError``, ``RemoteInvalidInputError``, ...) is its
    ``__cause__`` and :attr:`error`, so new code can still branch on types. ``message()``,
    ``status()`` and ``debug_details()`` answer as tritonclient's do (``status()`` is the HTTP
    status as text for HTTP clients, ``"StatusCode.<NAME>"`` for gRPC ones). What to try (the
    error's :attr:`hints`, those not about nbinfer's ``Session``) follows the message in
    ``str(e)``, what a traceback and ``print(e)`` show; ``message()`` stays the text alone.
    """

    def __init__(
        self,
        msg: str,
        status: str | None = None,
        debug_details: Any = None,
        *,
        error: NbinferError | None = None,
    ) -> None:
        super().__init__(msg, hint=_hints(error))
        self.message = _Text(msg)
        self._status = status
        self._debug_details = debug_details
        #: The nbinfer error this one stands for (``None`` when raised directly).
        self.error = error

    def __str__(self) -> str:
        text = f"[{self._status}] {self.message}" if self._status is not None else self.message
        return "\n".join([text, *(f"  hint: {h}" for h in self.hints)])

    def status(self) -> str | None:
        """The status: the HTTP status as text, or ``"StatusCode.<NAME>"`` over gRPC."""
        return self._status

    def debug_details(self) -> Any:
        """Extra details (as tritonclient: usually ``None``)."""
        return self._debug_details


def _hints(error: NbinferError | None) -> tuple[str, ...]:
    """``error``'s hints that a tritonclient program can follow (not ``session.`` / magics)."""
    if error is None:
        return ()
    return tuple(h for h in error.hints if "session" not in h and "%nbinfer" not in h)


def _status_text(exc: NbinferError, protocol: str) -> str | None:
    if protocol == "grpc":
        code = exc.context.get("grpc_code")
        if code is None and (isinstance(exc, ServerError) or type(exc) in GRPC_CODE):
            code = grpc_code_of(exc)
        return f"StatusCode.{code}" if code else None
    return str(exc.status) if isinstance(exc, ServerError) else None


def _mapped(exc: NbinferError, protocol: str) -> InferenceServerException:
    if isinstance(exc, InferenceServerException):
        return exc
    return InferenceServerException(exc.message, _status_text(exc, protocol), error=exc)


#: Request parameters Triton keeps for itself (tritonclient refuses them in ``parameters``).
TRITON_RESERVED_REQUEST_PARAMS = [
    "sequence_id",
    "sequence_start",
    "sequence_end",
    "priority",
    "timeout",
    "headers",
    "binary_data_output",
]
#: The prefix of Triton's own request parameters.
TRITON_RESERVED_REQUEST_PARAMS_PREFIX = "triton_"
#: tritonclient's gRPC message size limit (INT32_MAX).
MAX_GRPC_MESSAGE_SIZE = 2**31 - 1


class Request:
    """What a client plugin is handed before each call: its ``headers`` (change them in place)."""

    def __init__(self, headers: Mapping[str, str] | None) -> None:
        self.headers: dict[str, str] = dict(headers or {})


class InferenceServerClientPlugin(abc.ABC):
    """A client plugin: called with a :class:`Request` before every call the client makes."""

    @abc.abstractmethod
    def __call__(self, request: Request) -> None:
        """Change ``request.headers`` in place."""


class BasicAuth(InferenceServerClientPlugin):
    """HTTP basic authentication as a client plugin (tritonclient's ``auth.BasicAuth``)."""

    def __init__(self, username: str, password: str) -> None:
        pair = f"{username}:{password}".encode("ascii")
        self._auth = "Basic " + base64.b64encode(pair).decode("ascii")

    def __call__(self, request: Request) -> None:
        request.headers["authorization"] = self._auth


def raise_error(msg: str) -> None:
    """Raise an :class:`InferenceServerException` (tritonclient's helper)."""
    raise InferenceServerException(msg)


def np_to_triton_dtype(np_dtype: Any) -> str | None:
    """The v2 datatype of a numpy dtype (``None`` when it has none, as tritonclient)."""
    try:
        return datatype_of(np.dtype(np_dtype))
    except (NbinferError, TypeError):
        return None


def triton_to_np_dtype(dtype: str) -> Any:
    """The numpy scalar type of a v2 datatype (``np.object_`` for BYTES, ``bool`` for BOOL)."""
    if dtype == "BOOL":
        return bool
    try:
        return numpy_dtype(dtype).type
    except NbinferError:
        return None


def _set_shared_memory(parameters: Parameters, region: str, byte_size: int, offset: int) -> None:
    """The v2 parameters naming a tensor's shared-memory place (inputs and outputs alike)."""
    parameters["shared_memory_region"] = region
    parameters["shared_memory_byte_size"] = int(byte_size)
    if offset:
        parameters["shared_memory_offset"] = int(offset)


class InferInput:
    """An input tensor: ``InferInput(name, shape, datatype)`` then ``set_data_from_numpy``."""

    def __init__(self, name: str, shape: Sequence[int], datatype: str) -> None:
        self._name = name
        self._shape = [int(d) for d in shape]
        self._datatype = datatype
        self._data: np.ndarray[Any, Any] | None = None
        self._parameters: Parameters = {}
        self._binary = True

    def name(self) -> str:
        """The input's name."""
        return self._name

    def datatype(self) -> str:
        """The input's v2 datatype."""
        return self._datatype

    def shape(self) -> list[int]:
        """The input's shape."""
        return self._shape

    def set_shape(self, shape: Sequence[int]) -> InferInput:
        """Change the shape."""
        self._shape = [int(d) for d in shape]
        return self

    def set_data_from_numpy(
        self, input_tensor: np.ndarray[Any, Any], binary_data: bool = True
    ) -> InferInput:
        """Attach the data (checked against the datatype and shape).

        Raises:
            InferenceServerException: Not a numpy array, or its dtype or shape does not match.
        """
        if not isinstance(input_tensor, np.ndarray):
            raise_error("input_tensor must be a numpy array")
        got = np_to_triton_dtype(input_tensor.dtype)
        if got != self._datatype:
            raise_error(
                f"got unexpected datatype {got} from numpy array, expected {self._datatype}"
            )
        if list(input_tensor.shape) != self._shape:
            raise_error(
                f"got unexpected numpy array shape {list(input_tensor.shape)}, "
                f"expected {self._shape}"
            )
        for key in ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset"):
            self._parameters.pop(key, None)
        self._data = input_tensor
        self._binary = binary_data
        return self

    def set_shared_memory(self, region_name: str, byte_size: int, offset: int = 0) -> InferInput:
        """Read the data from a registered shared-memory region instead."""
        self._data = None
        _set_shared_memory(self._parameters, region_name, byte_size, offset)
        return self

    def _to_nbinfer(self) -> _Input:
        if self._data is None and "shared_memory_region" not in self._parameters:
            raise_error(f"input {self._name!r} has no data; call set_data_from_numpy first")
        return _Input(
            self._name, self._datatype, list(self._shape), self._data, dict(self._parameters)
        )


class InferRequestedOutput:
    """An output to return: ``InferRequestedOutput(name, binary_data=True, class_count=0)``.

    ``binary_data=False`` asks for the output as JSON: as with tritonclient, a BYTES output
    sent that way comes back from ``as_numpy`` as an object array of ``str`` (binary ones: of
    ``bytes``).
    """

    def __init__(self, name: str, binary_data: bool | None = True, class_count: int = 0) -> None:
        self._name = name
        self._binary = binary_data
        self._class_count = class_count
        self._parameters: Parameters = {}

    def name(self) -> str:
        """The output's name."""
        return self._name

    def set_shared_memory(self, region_name: str, byte_size: int, offset: int = 0) -> None:
        """Have the server write this output into a registered shared-memory region."""
        _set_shared_memory(self._parameters, region_name, byte_size, offset)

    def unset_shared_memory(self) -> None:
        """Return the output in the response again."""
        self._parameters.clear()

    def _to_nbinfer(self) -> RequestedOutput:
        binary = None if "shared_memory_region" in self._parameters else self._binary
        return RequestedOutput(self._name, binary, self._class_count, dict(self._parameters))


def output_json(out: InferOutput) -> dict[str, Any]:
    """An output as the v2 JSON object tritonclient's HTTP ``get_output`` returns."""
    doc: dict[str, Any] = {"name": out.name, "datatype": out.datatype, "shape": list(out.shape)}
    if out.parameters:
        doc["parameters"] = dict(out.parameters)
    if out.data is not None:
        doc["data"] = _json.tensor_to_json(out.data, out.datatype, name=out.name)
    return doc


def _as_dict(message: Any) -> dict[str, Any]:
    """A protobuf message as tritonclient's gRPC ``as_json=True`` gives it."""
    from google.protobuf import json_format

    doc: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return doc


class InferResult:
    """The answer of ``infer``: ``as_numpy(name)``, ``get_output(name)``, ``get_response()``.

    As tritonclient, ``as_numpy`` / ``get_output`` return ``None`` for an output the response does
    not hold. :attr:`result` is the underlying :class:`nbinfer.InferResult`.
    """

    def __init__(
        self, result: _Result, protocol: str, json_outputs: frozenset[str] = frozenset()
    ) -> None:
        #: The nbinfer result (DataFrames, classification records, headers).
        self.result = result
        self._protocol = protocol
        self._json = json_outputs

    def as_numpy(self, name: str) -> np.ndarray[Any, Any] | None:
        """The output as a numpy array, or ``None`` if the response has no such output.

        BYTES outputs are object arrays of ``bytes``, except those an HTTP request asked for as
        JSON (``InferRequestedOutput(name, binary_data=False)``): their elements are ``str``,
        as tritonclient gives them.
        """
        if name not in self.result:
            return None
        out = self.result.get_output(name)
        if out.data is None and "shared_memory_region" in out.parameters:
            return None
        arr = self.result.as_numpy(name)
        if name in self._json and out.datatype == "BYTES":
            return _as_text(arr)
        return arr

    @classmethod
    def from_response_body(
        cls,
        response_body: bytes,
        verbose: bool = False,
        header_length: int | None = None,
        content_encoding: str | None = None,
    ) -> InferResult:
        """The result an HTTP response body holds (tritonclient's HTTP ``InferResult`` method).

        Raises:
            InferenceServerException: The body does not decode.
        """
        return parse_response_body(response_body, verbose, header_length, content_encoding)

    def get_output(self, name: str, as_json: bool = False) -> Any:
        """The output's description (HTTP: a dict; gRPC: an ``InferOutputTensor`` message)."""
        if name not in self.result:
            return None
        if self._protocol == "http":
            return output_json(self.result.get_output(name))
        from nbinfer.protocol.grpc import response_to_proto

        proto = response_to_proto(self.result.response, raw=False)
        message = next(o for o in proto.outputs if o.name == name)
        return _as_dict(message) if as_json else message

    def get_response(self, as_json: bool = False) -> Any:
        """The whole response (HTTP: the JSON dict; gRPC: a ``ModelInferResponse`` message)."""
        result = self.result
        if self._protocol == "http":
            doc: dict[str, Any] = {
                "model_name": result.model_name,
                "model_version": result.model_version,
                "outputs": [output_json(o) for o in result.outputs],
            }
            if result.id:
                doc["id"] = result.id
            if result.parameters:
                doc["parameters"] = dict(result.parameters)
            return doc
        from nbinfer.protocol.grpc import response_to_proto

        message = response_to_proto(result.response)
        return _as_dict(message) if as_json else message


def _as_text(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A BYTES array whose UTF-8 elements are ``str`` (JSON BYTES data, as tritonclient)."""

    def text(item: Any) -> Any:
        if isinstance(item, bytes | bytearray | memoryview):
            try:
                return bytes(item).decode("utf-8")
            except UnicodeDecodeError:
                return bytes(item)
        return item

    out = np.empty(arr.shape, dtype=np.object_)
    out.ravel()[:] = [text(item) for item in arr.ravel()]
    return out


class InferAsyncRequest:
    """The handle ``async_infer`` returns over HTTP: ``get_result()`` waits for the answer."""

    def __init__(
        self,
        future: concurrent.futures.Future[_Result],
        protocol: str,
        wrap: Callable[[_Result], InferResult] | None = None,
    ) -> None:
        self._future = future
        self._protocol = protocol
        self._wrap = wrap or (lambda result: InferResult(result, protocol))

    def get_result(self, block: bool = True, timeout: float | None = None) -> InferResult | None:
        """The result (``None`` if ``block=False`` and it is not there yet).

        Raises:
            InferenceServerException: The call failed.
        """
        if not block and not self._future.done():
            return None
        try:
            return self._wrap(self._future.result(timeout=timeout))
        except NbinferError as exc:
            raise _mapped(exc, self._protocol) from exc


def _sequence(sequence_id: int | str, sequence_start: bool, sequence_end: bool) -> dict[str, Any]:
    if not sequence_id:
        return {}
    return {
        "sequence_id": sequence_id,
        "sequence_start": sequence_start,
        "sequence_end": sequence_end,
    }


def generate_request_body(
    inputs: Sequence[InferInput],
    outputs: Sequence[InferRequestedOutput] | None = None,
    request_id: str = "",
    sequence_id: int | str = 0,
    sequence_start: bool = False,
    sequence_end: bool = False,
    priority: int = 0,
    timeout: int | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> tuple[bytes, int | None]:
    """The body ``infer`` would send: ``(body, json_size)`` (``json_size`` is ``None`` for JSON).

    Raises:
        InferenceServerException: An input has no data, or a value cannot be encoded.
    """
    try:
        params: dict[str, Any] = dict(parameters or {})
        if sequence_id:
            params.update(
                sequence_id=sequence_id, sequence_start=sequence_start, sequence_end=sequence_end
            )
        if priority:
            params["priority"] = priority
        if timeout is not None:
            params["timeout"] = timeout
        request = _Request(
            [i._to_nbinfer() for i in inputs],
            [o._to_nbinfer() for o in outputs or ()],
            id=request_id,
            parameters=params,
        )
        binary = any(i._binary for i in inputs)
        body, json_size = _rest_codec.encode_request(request, binary=binary, binary_outputs=True)
    except NbinferError as exc:
        raise InferenceServerException(exc.message, error=exc) from exc
    return bytes(body), json_size


def parse_response_body(
    response_body: bytes,
    verbose: bool = False,
    header_length: int | None = None,
    content_encoding: str | None = None,
) -> InferResult:
    """An :class:`InferResult` from a response body (and its ``Inference-Header-Content-Length``).

    Raises:
        InferenceServerException: The body does not decode.
    """
    try:
        if content_encoding == "gzip":
            response_body = gzip.decompress(response_body)
        elif content_encoding == "deflate":
            response_body = zlib.decompress(response_body)
        length = None if header_length is None else int(header_length)
        header = _json.loads(response_body if length is None else response_body[:length])
        response = _rest_codec.decode_response(response_body, length)
    except (NbinferError, OSError, zlib.error) as exc:
        message = exc.message if isinstance(exc, NbinferError) else str(exc)
        raise InferenceServerException(message) from exc
    json_outputs = frozenset(
        o.get("name", "")
        for o in header.get("outputs", [])
        if isinstance(header, dict)
        if isinstance(o, dict) and "data" in o
    )
    return InferResult(_Result(response), "http", json_outputs)
