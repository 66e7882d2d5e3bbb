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
import functools
import gzip
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from nbinfer.client import AsyncClient, Client
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
    "AsyncTritonClient",
    "BasicAuth",
    "InferenceServerClientPlugin",
    "Request",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerException",
    "TritonClient",
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
    status as text for HTTP clients, ``"StatusCode.<NAME>"`` for gRPC ones).
    """

    def __init__(
        self,
        msg: str,
        status: str | None = None,
        debug_details: Any = None,
        *,
        error: NbinferError | None = None,
    ) -> None:
        super().__init__(msg)
        self.message = _Text(msg)
        self._status = status
        self._debug_details = debug_details
        #: The nbinfer error this one stands for (``None`` when raised directly).
        self.error = error

    def __str__(self) -> str:
        return f"[{self._status}] {self.message}" if self._status is not None else self.message

    def status(self) -> str | None:
        """The status: the HTTP status as text, or ``"StatusCode.<NAME>"`` over gRPC."""
        return self._status

    def debug_details(self) -> Any:
        """Extra details (as tritonclient: usually ``None``)."""
        return self._debug_details


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


T = TypeVar("T")


class _Face:
    """The plumbing both faces share: translating tritonclient's arguments, mapping errors.

    Public methods are written once (on :class:`TritonClient`) as ``return self._call(fn, ...,
    _then=...)`` (always ``return``, also where the sync answer is ``None``: the asyncio face
    awaits what it gets): the sync face calls ``fn`` and returns, the asyncio face
    (:class:`AsyncTritonClient`) returns a coroutine awaiting it. Either way errors become
    :class:`InferenceServerException` and ``_then`` shapes the answer.
    """

    _protocol = "http"
    client: Any
    _plugin: InferenceServerClientPlugin | None = None

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        _then: Callable[[Any], Any] | None = None,
        _ready: bool = False,
        _plug: bool = True,
        **kwargs: Any,
    ) -> Any:
        raise NotImplementedError

    # -- plugins -------------------------------------------------------------------------

    def register_plugin(self, plugin: InferenceServerClientPlugin) -> None:
        """Have ``plugin`` see (and change) the headers of every call.

        Raises:
            InferenceServerException: A plugin is registered already.
        """
        if self._plugin is not None:
            raise_error(
                "A plugin is already registered. Please unregister the previous plugin first "
                "before registering a new plugin."
            )
        self._plugin = plugin

    def plugin(self) -> InferenceServerClientPlugin | None:
        """The registered plugin (``None`` if there is none)."""
        return self._plugin

    def unregister_plugin(self) -> None:
        """Drop the registered plugin.

        Raises:
            InferenceServerException: No plugin is registered.
        """
        if self._plugin is None:
            raise_error("No plugin has been registered.")
        self._plugin = None

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str] | None:
        """A call's headers once the plugin (if any) has seen them."""
        if self._plugin is None:
            return dict(headers) if headers else None
        request = Request(headers)
        self._plugin(request)
        return request.headers or None

    def _plugged(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._plugin is not None and "headers" in kwargs:
            kwargs["headers"] = self._headers(kwargs["headers"])
        return kwargs

    def _settle(self, exc: NbinferError, ready: bool) -> Any:
        """``False`` for a server's answer to a readiness question, else the mapped error."""
        if ready and isinstance(exc, ServerError):
            return False
        raise _mapped(exc, self._protocol) from exc

    def _request(self, args: Mapping[str, Any]) -> tuple[list[_Input], dict[str, Any]]:
        """The nbinfer inputs and infer keyword arguments for a tritonclient-shaped call.

        ``infer``, ``async_infer`` and ``async_stream_infer`` keep tritonclient's signatures
        (ported code passes them by keyword, in tritonclient's order); each hands its
        ``locals()`` here, so their translation to nbinfer's arguments is written once.
        """
        inputs: Sequence[InferInput] = args["inputs"]
        try:
            items = [i._to_nbinfer() for i in inputs]
        except NbinferError as exc:
            raise _mapped(exc, self._protocol) from exc
        headers = args.get("headers")
        parameters = dict(args["parameters"] or {})
        outputs = args["outputs"] or ()
        kwargs: dict[str, Any] = {
            "outputs": [o._to_nbinfer() for o in outputs] or None,
            "model_version": args["model_version"],
            "request_id": args["request_id"],
            "headers": dict(headers) if headers else None,
            "priority": args["priority"] or None,
            **_sequence(args["sequence_id"], args["sequence_start"], args["sequence_end"]),
        }
        if self._protocol == "http" and inputs and not any(i._binary for i in inputs):
            kwargs["binary"] = False
            if not outputs:  # tritonclient asks for binary outputs all the same
                parameters.setdefault("binary_data_output", True)
        kwargs["parameters"] = parameters or None
        return items, kwargs

    def _submit(self, fn: Callable[..., Any], args: Mapping[str, Any], **extra: Any) -> Any:
        """Call an nbinfer infer method with the arguments of a tritonclient-shaped one."""
        items, kwargs = self._request(args)
        return self._call(fn, args["model_name"], items, **extra, **kwargs)

    def _wrapper(self, args: Mapping[str, Any]) -> Callable[[_Result], InferResult]:
        """What turns the nbinfer result of a call with ``args`` into tritonclient's."""
        json = frozenset(
            o.name() for o in args["outputs"] or () if self._protocol == "http" and not o._binary
        )
        protocol = self._protocol
        return lambda result: InferResult(result, protocol, json)

    def _wrap(self, result: _Result) -> InferResult:
        return InferResult(result, self._protocol)

    def _render(self, method: str, value: Any, as_json: bool) -> Any:
        """``method``'s answer as this face returns it (HTTP: JSON; gRPC: a message)."""
        return value

    def _answer(
        self, method: str, *args: Any, headers: Mapping[str, str] | None, as_json: bool
    ) -> Any:
        """The nbinfer client's ``method`` answer, rendered as this face returns it."""
        return self._call(
            getattr(self.client, method),
            *args,
            headers=headers,
            _then=lambda value: self._render(method, value, as_json),
        )


class TritonClient(_Face):
    """What the HTTP and gRPC ``InferenceServerClient`` share, over one nbinfer Client."""

    _protocol = "http"

    def __init__(self, client: Client) -> None:
        #: The nbinfer client doing the work.
        self.client = client

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        _then: Callable[[Any], Any] | None = None,
        _ready: bool = False,
        _plug: bool = True,
        **kwargs: Any,
    ) -> Any:
        try:
            value = fn(*args, **(self._plugged(kwargs) if _plug else kwargs))
        except NbinferError as exc:
            return self._settle(exc, _ready)
        return value if _then is None else _then(value)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections (idempotent)."""
        self.client.close()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- health --------------------------------------------------------------------------

    def is_server_live(self, headers: Mapping[str, str] | None = None, **_: Any) -> bool:
        """Whether the server is live."""
        return self._call(self.client.is_server_live, headers=headers, _then=bool)  # type: ignore[no-any-return]

    def is_server_ready(self, headers: Mapping[str, str] | None = None, **_: Any) -> bool:
        """Whether the server is ready."""
        return self._call(self.client.is_server_ready, headers=headers, _then=bool)  # type: ignore[no-any-return]

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> bool:
        """Whether the model is ready (``False`` for an unknown model, as tritonclient).

        Raises:
            InferenceServerException: The server could not be reached.
        """
        return self._call(  # type: ignore[no-any-return]
            self.client.is_model_ready,
            model_name,
            model_version,
            headers=headers,
            _then=bool,
            _ready=True,
        )

    # -- repository and shared memory ------------------------------------------------------

    def load_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        **_: Any,
    ) -> None:
        """Load (or reload) a model."""
        return self._call(  # type: ignore[no-any-return]
            self.client.load_model, model_name, config=config, files=files, headers=headers
        )

    def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        unload_dependents: bool = False,
        **_: Any,
    ) -> None:
        """Unload a model."""
        return self._call(  # type: ignore[no-any-return]
            self.client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=headers,
        )

    def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        """Register a system shared-memory region."""
        return self._call(  # type: ignore[no-any-return]
            self.client.register_system_shared_memory, name, key, byte_size, offset, headers=headers
        )

    def unregister_system_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, **_: Any
    ) -> None:
        """Unregister one region (all when no name)."""
        return self._call(  # type: ignore[no-any-return]
            self.client.unregister_system_shared_memory, name, headers=headers
        )

    def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        """Register a CUDA shared-memory region."""
        return self._call(  # type: ignore[no-any-return]
            self.client.register_cuda_shared_memory,
            name,
            raw_handle,
            device_id,
            byte_size,
            headers=headers,
        )

    def unregister_cuda_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, **_: Any
    ) -> None:
        """Unregister one CUDA region (all when no name)."""
        return self._call(  # type: ignore[no-any-return]
            self.client.unregister_cuda_shared_memory, name, headers=headers
        )

    # -- inference -----------------------------------------------------------------------

    def infer(
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
        client_timeout: float | None = None,
        **_: Any,
    ) -> InferResult:
        """Run inference (tritonclient's arguments; ``query_params`` and compression are ignored).

        Raises:
            InferenceServerException: The call failed (the nbinfer error is its ``__cause__``).
        """
        args = locals()
        return self._submit(  # type: ignore[no-any-return]
            self.client.infer, args, timeout=client_timeout, _then=self._wrapper(args)
        )

    # -- metadata, configuration, statistics, settings -------------------------------------

    def get_server_metadata(
        self, headers: Mapping[str, str] | None = None, as_json: bool = False, **_: Any
    ) -> Any:
        """Server name, version and extensions."""
        return self._answer("get_server_metadata", headers=headers, as_json=as_json)

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """The model's metadata."""
        return self._answer(
            "get_model_metadata", model_name, model_version, headers=headers, as_json=as_json
        )

    def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """The model configuration."""
        return self._answer(
            "get_model_config", model_name, model_version, headers=headers, as_json=as_json
        )

    def get_model_repository_index(
        self, headers: Mapping[str, str] | None = None, as_json: bool = False, **_: Any
    ) -> Any:
        """The repository's models with their state."""
        return self._answer("get_model_repository_index", headers=headers, as_json=as_json)

    def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Statistics of one model (all models when no name)."""
        return self._answer(
            "get_inference_statistics", model_name, model_version, headers=headers, as_json=as_json
        )

    def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Registered system shared-memory regions."""
        return self._answer(
            "get_system_shared_memory_status", region_name, headers=headers, as_json=as_json
        )

    def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Registered CUDA shared-memory regions."""
        return self._answer(
            "get_cuda_shared_memory_status", region_name, headers=headers, as_json=as_json
        )

    def get_trace_settings(
        self,
        model_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Trace settings (global, or of one model)."""
        return self._call(self.client.get_trace_settings, model_name, headers=headers)

    def update_trace_settings(
        self,
        model_name: str = "",
        settings: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Update trace settings; returns the new ones."""
        return self._call(self.client.update_trace_settings, model_name, settings, headers=headers)

    def get_log_settings(
        self, headers: Mapping[str, str] | None = None, as_json: bool = False, **_: Any
    ) -> Any:
        """Log settings."""
        return self._call(self.client.get_log_settings, headers=headers)

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Update log settings; returns the new ones."""
        return self._call(self.client.update_log_settings, settings, headers=headers)


def _awaited(
    method: Callable[..., T],
) -> Callable[..., Coroutine[Any, Any, T]]:
    """The coroutine method of one :class:`TritonClient` method (same arguments and answer)."""

    async def call(self: AsyncTritonClient, /, *args: Any, **kwargs: Any) -> T:
        return await cast(Awaitable[T], method(self, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


class AsyncTritonClient(_Face):
    """What the asyncio faces (``http.aio`` / ``grpc.aio``) share, over one nbinfer AsyncClient.

    The same methods as :class:`TritonClient`, as coroutines: each runs the sync face's
    translation with the nbinfer call awaited on the running loop.
    """

    _protocol = "http"

    def __init__(self, client: AsyncClient) -> None:
        #: The nbinfer client doing the work.
        self.client = client

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        _then: Callable[[Any], Any] | None = None,
        _ready: bool = False,
        _plug: bool = True,
        **kwargs: Any,
    ) -> Any:
        async def run() -> Any:
            try:
                value = await fn(*args, **(self._plugged(kwargs) if _plug else kwargs))
            except NbinferError as exc:
                return self._settle(exc, _ready)
            return value if _then is None else _then(value)

        return run()

    async def close(self) -> None:
        """Close the connections (idempotent)."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    is_server_live = _awaited(TritonClient.is_server_live)
    is_server_ready = _awaited(TritonClient.is_server_ready)
    is_model_ready = _awaited(TritonClient.is_model_ready)
    load_model = _awaited(TritonClient.load_model)
    unload_model = _awaited(TritonClient.unload_model)
    register_system_shared_memory = _awaited(TritonClient.register_system_shared_memory)
    unregister_system_shared_memory = _awaited(TritonClient.unregister_system_shared_memory)
    register_cuda_shared_memory = _awaited(TritonClient.register_cuda_shared_memory)
    unregister_cuda_shared_memory = _awaited(TritonClient.unregister_cuda_shared_memory)
    infer = _awaited(TritonClient.infer)
    get_server_metadata = _awaited(TritonClient.get_server_metadata)
    get_model_metadata = _awaited(TritonClient.get_model_metadata)
    get_model_config = _awaited(TritonClient.get_model_config)
    get_model_repository_index = _awaited(TritonClient.get_model_repository_index)
    get_inference_statistics = _awaited(TritonClient.get_inference_statistics)
    get_system_shared_memory_status = _awaited(TritonClient.get_system_shared_memory_status)
    get_cuda_shared_memory_status = _awaited(TritonClient.get_cuda_shared_memory_status)
    get_trace_settings = _awaited(TritonClient.get_trace_settings)
    update_trace_settings = _awaited(TritonClient.update_trace_settings)
    get_log_settings = _awaited(TritonClient.get_log_settings)
    update_log_settings = _awaited(TritonClient.update_log_settings)
