"""The core behind ``nbinfer.compat.tritonclient.http`` and ``.grpc``: one client, two faces.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

tritonclient's ``InferInput`` / ``InferRequestedOutput`` / ``InferResult`` /
``InferenceServerClient`` shapes over :class:`nbinfer.Client`. The HTTP and gRPC modules differ
only in what a few answers look like (dicts for HTTP, protobuf messages for gRPC) and in a few
argument names, exactly as tritonclient's do.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.client import Client
from nbinfer.client import InferResult as _Result
from nbinfer.errors import GRPC_CODE, NbinferError, ServerError, grpc_code_of
from nbinfer.protocol import jsonvalues as _json
from nbinfer.protocol.dtypes import datatype_of, numpy_dtype
from nbinfer.protocol.types import InferInput as _Input
from nbinfer.protocol.types import InferOutput, Parameters, RequestedOutput

__all__ = [
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerException",
    "TritonClient",
    "np_to_triton_dtype",
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
    """An output to return: ``InferRequestedOutput(name, binary_data=True, class_count=0)``."""

    def __init__(self, name: str, binary_data: bool | None = None, class_count: int = 0) -> None:
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

    def __init__(self, result: _Result, protocol: str) -> None:
        #: The nbinfer result (DataFrames, classification records, headers).
        self.result = result
        self._protocol = protocol

    def as_numpy(self, name: str) -> np.ndarray[Any, Any] | None:
        """The output as a numpy array, or ``None`` if the response has no such output."""
        if name not in self.result:
            return None
        out = self.result.get_output(name)
        if out.data is None and "shared_memory_region" in out.parameters:
            return None
        return self.result.as_numpy(name)

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


class InferAsyncRequest:
    """The handle ``async_infer`` returns over HTTP: ``get_result()`` waits for the answer."""

    def __init__(self, future: concurrent.futures.Future[_Result], protocol: str) -> None:
        self._future = future
        self._protocol = protocol

    def get_result(self, block: bool = True, timeout: float | None = None) -> InferResult | None:
        """The result (``None`` if ``block=False`` and it is not there yet).

        Raises:
            InferenceServerException: The call failed.
        """
        if not block and not self._future.done():
            return None
        try:
            return InferResult(self._future.result(timeout=timeout), self._protocol)
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


class TritonClient:
    """What the HTTP and gRPC ``InferenceServerClient`` share, over one nbinfer Client."""

    _protocol = "http"

    def __init__(self, client: Client) -> None:
        #: The nbinfer client doing the work.
        self.client = client

    # -- plumbing ------------------------------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NbinferError as exc:
            raise _mapped(exc, self._protocol) from exc

    def _submit(self, fn: Callable[..., Any], args: Mapping[str, Any], **extra: Any) -> Any:
        """Call an nbinfer infer method with the arguments of a tritonclient-shaped one.

        ``infer``, ``async_infer`` and ``async_stream_infer`` keep tritonclient's signatures
        (ported code passes them by keyword, in tritonclient's order); each hands its
        ``locals()`` here, so their translation to nbinfer's arguments is written once.
        """
        inputs: Sequence[InferInput] = args["inputs"]
        items = self._call(lambda: [i._to_nbinfer() for i in inputs])
        headers = args.get("headers")
        parameters = args["parameters"]
        kwargs: dict[str, Any] = {
            "outputs": [o._to_nbinfer() for o in args["outputs"] or ()] or None,
            "model_version": args["model_version"],
            "request_id": args["request_id"],
            "parameters": dict(parameters) if parameters else None,
            "headers": dict(headers) if headers else None,
            "priority": args["priority"] or None,
            **_sequence(args["sequence_id"], args["sequence_start"], args["sequence_end"]),
        }
        if self._protocol == "http" and inputs and not any(i._binary for i in inputs):
            kwargs["binary"] = False
        return self._call(fn, args["model_name"], items, **extra, **kwargs)

    def _wrap(self, result: _Result) -> InferResult:
        return InferResult(result, self._protocol)

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
        return bool(self._call(self.client.is_server_live, headers=headers))

    def is_server_ready(self, headers: Mapping[str, str] | None = None, **_: Any) -> bool:
        """Whether the server is ready."""
        return bool(self._call(self.client.is_server_ready, headers=headers))

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
        try:
            return bool(self.client.is_model_ready(model_name, model_version, headers=headers))
        except ServerError:
            return False
        except NbinferError as exc:
            raise _mapped(exc, self._protocol) from exc

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
        self._call(self.client.load_model, model_name, config=config, files=files, headers=headers)

    def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        unload_dependents: bool = False,
        **_: Any,
    ) -> None:
        """Unload a model."""
        self._call(
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
        self._call(
            self.client.register_system_shared_memory, name, key, byte_size, offset, headers=headers
        )

    def unregister_system_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, **_: Any
    ) -> None:
        """Unregister one region (all when no name)."""
        self._call(self.client.unregister_system_shared_memory, name, headers=headers)

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
        self._call(
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
        self._call(self.client.unregister_cuda_shared_memory, name, headers=headers)

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
        return self._wrap(self._submit(self.client.infer, locals(), timeout=client_timeout))

    # -- metadata, configuration, statistics, settings -------------------------------------

    def _render(self, method: str, value: Any, as_json: bool) -> Any:
        """``method``'s answer as this face returns it (HTTP: JSON; gRPC: a message)."""
        return value

    def _answer(
        self, method: str, *args: Any, headers: Mapping[str, str] | None, as_json: bool
    ) -> Any:
        """The nbinfer client's ``method`` answer, rendered as this face returns it."""
        value = self._call(getattr(self.client, method), *args, headers=headers)
        return self._render(method, value, as_json)

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
