"""A compatible shim of Triton's ``triton_python_backend_utils`` for the embedded server.

Triton Python-backend models (``<N>/model.py`` defining ``class TritonPythonModel``) run unchanged:
when such a model is loaded, this module is registered as ``triton_python_backend_utils`` (unless
a module of that name is already imported, e.g. inside Triton itself), so the usual
``import triton_python_backend_utils as pb_utils`` finds it. Implemented: :class:`Tensor`,
:class:`InferenceRequest`, :class:`InferenceResponse`, :class:`TritonError`,
:class:`TritonModelException`, :class:`Logger`, :class:`ModelConfig` (``auto_complete_config``),
the ``get_*_by_name`` helpers, dtype conversions and the BYTES (de)serialisers. Not available:
BLS (``InferenceRequest.exec``), DLPack device tensors other than the CPU.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.protocol.dtypes import TRITON_TYPES, numpy_dtype
from nbinfer.protocol.tensors import decode_bytes_tensor, encode_bytes_tensor

__all__ = [
    "MODULE_NAME",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "ModelConfig",
    "ResponseSender",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "install",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
]

#: The import name Triton models use.
MODULE_NAME = "triton_python_backend_utils"

logger = logging.getLogger("nbinfer")

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

_ENUM_TO_NAME = {v: k for k, v in TRITON_TYPES.items()}


def install() -> Any:
    """Register this module as ``triton_python_backend_utils`` unless one is already imported.

    Returns the module that the name resolves to afterwards.
    """
    return sys.modules.setdefault(MODULE_NAME, sys.modules[__name__])


# -- errors -----------------------------------------------------------------------------------
class TritonError(Exception):
    """An error a model returns in an :class:`InferenceResponse` (or raises).

    Example::

        pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("bad input"))
    """

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        super().__init__(message)
        self._message = str(message)
        self._code = int(code)

    def message(self) -> str:
        """The error message."""
        return self._message

    def code(self) -> int:
        """The error code (``TritonError.INTERNAL`` by default)."""
        return self._code


class TritonModelException(Exception):
    """Raised by the utilities on misuse (Triton raises it for failed BLS calls too)."""

    def message(self) -> str:
        """The error message."""
        return str(self)


# -- tensors ----------------------------------------------------------------------------------
class Tensor:
    """A named tensor backed by a NumPy array (on the CPU).

    Args:
        name: Tensor name.
        array: The data (anything ``np.asarray`` accepts; str / bytes -> object array).
    """

    def __init__(self, name: str, array: Any) -> None:
        if not isinstance(name, str):
            raise TritonModelException(f"Tensor name must be a str, got {type(name).__name__}")
        arr = array if isinstance(array, np.ndarray) else np.asarray(array)
        if arr.dtype.kind in "SU":
            arr = arr.astype(object)
        self._name = name
        self._array = arr

    def name(self) -> str:
        """The tensor's name."""
        return self._name

    def as_numpy(self) -> np.ndarray[Any, Any]:
        """The data as a NumPy array (BYTES: object array of ``bytes``)."""
        return self._array

    def shape(self) -> list[int]:
        """The tensor's shape."""
        return list(self._array.shape)

    def triton_dtype(self) -> int:
        """Triton's DataType enum value of the tensor."""
        return numpy_to_triton_type(self._array.dtype) or 0

    def is_cpu(self) -> bool:
        """Always True: the shim keeps tensors on the CPU."""
        return True

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the data (fixed-width types only)."""
        return self._array.__dlpack__()

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> Tensor:
        """A tensor from a DLPack-capable object (e.g. a CPU torch tensor)."""
        if hasattr(capsule, "__dlpack__"):
            return Tensor(name, np.from_dlpack(capsule))
        raise TritonModelException(
            "Tensor.from_dlpack: pass an object with __dlpack__ (e.g. a torch tensor); "
            "raw capsules are not supported by nbinfer's shim"
        )

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, shape={list(self._array.shape)}, dtype={self._array.dtype})"


# -- requests / responses -------------------------------------------------------------------
class ResponseSender:
    """Takes the responses a decoupled model sends for one request (from any thread).

    Without a ``stream`` queue the responses are collected in :attr:`responses`; with one, each
    ``send`` puts ``(response or None, final)`` on it as it happens, so the server streams it.
    """

    def __init__(self, stream: queue.SimpleQueue[Any] | None = None, cancelled: Any = None) -> None:
        self.responses: list[InferenceResponse] = []
        self.final = False
        self._stream = stream
        self._cancelled = cancelled

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        """Send a response (``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL`` closes the stream)."""
        if self.final:
            raise TritonModelException("the response sender was already closed")
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException(
                f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}"
            )
        if final:
            self.final = True
        if self._stream is not None:
            self._stream.put((response, final))
        elif response is not None:
            self.responses.append(response)

    def is_cancelled(self) -> bool:
        """Whether the client gave up on the request (disconnect, cancellation, deadline)."""
        return bool(self._cancelled is not None and self._cancelled())


class InferenceRequest:
    """One inference request handed to ``TritonPythonModel.execute``.

    Built by the server; a model constructing one for BLS gets an error on ``exec()``.
    """

    def __init__(
        self,
        model_name: str = "",
        inputs: Sequence[Tensor] = (),
        requested_output_names: Sequence[str] = (),
        correlation_id: int | str = 0,
        request_id: str = "",
        flags: int = 0,
        timeout: int = 0,
        parameters: str | Mapping[str, Any] | None = None,
        model_version: int = -1,
        sender: ResponseSender | None = None,
        **_: Any,
    ) -> None:
        self._model_name = model_name
        self._inputs = list(inputs)
        self._requested = list(requested_output_names)
        self._correlation_id = correlation_id
        self._request_id = request_id
        self._flags = flags
        self._timeout = timeout
        if parameters is None:
            parameters = "{}"
        elif not isinstance(parameters, str):
            parameters = json.dumps(dict(parameters), default=str)
        self._parameters = parameters
        self._model_version = model_version
        self._sender = sender if sender is not None else ResponseSender()

    def inputs(self) -> list[Tensor]:
        """The input tensors."""
        return list(self._inputs)

    def get_input_tensor_by_name(self, name: str) -> Tensor | None:
        """The input tensor called ``name`` (None if absent)."""
        for t in self._inputs:
            if t.name() == name:
                return t
        return None

    def requested_output_names(self) -> list[str]:
        """The outputs the client asked for (all the model's outputs when it named none)."""
        return list(self._requested)

    def parameters(self) -> str:
        """The request parameters as a JSON string."""
        return self._parameters

    def request_id(self) -> str:
        """The request's id ("" if none)."""
        return self._request_id

    def correlation_id(self) -> int | str:
        """The sequence correlation id (0 if none)."""
        return self._correlation_id

    def flags(self) -> int:
        """Sequence flags (``TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`` / ``_END``)."""
        return self._flags

    def timeout(self) -> int:
        """The request timeout in microseconds (0: none)."""
        return self._timeout

    def model_name(self) -> str:
        """The model's name."""
        return self._model_name

    def model_version(self) -> int:
        """The model's version (-1: unspecified)."""
        return self._model_version

    def is_cancelled(self) -> bool:
        """Whether the client gave up on the request (as its response sender sees it)."""
        return self._sender.is_cancelled()

    def get_response_sender(self) -> ResponseSender:
        """The sender a decoupled model uses to return its response(s)."""
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        """Accepted for compatibility; the server owns request lifetimes."""

    def exec(self, *args: Any, **kwargs: Any) -> InferenceResponse:
        """BLS is not available in the embedded server.

        Raises:
            TritonModelException: always.
        """
        raise TritonModelException(
            "BLS (InferenceRequest.exec) is not supported by nbinfer's Python-backend shim"
        )

    async def async_exec(self, *args: Any, **kwargs: Any) -> InferenceResponse:
        """BLS is not available in the embedded server.

        Raises:
            TritonModelException: always.
        """
        return self.exec(*args, **kwargs)


class InferenceResponse:
    """The response ``execute`` returns for one request: output tensors or an error.

    Args:
        output_tensors: The output :class:`Tensor` objects.
        error: A :class:`TritonError` (or message) when the request failed.
        parameters: Response parameters (JSON string or mapping).
    """

    def __init__(
        self,
        output_tensors: Iterable[Tensor] | None = None,
        error: TritonError | str | None = None,
        parameters: str | Mapping[str, Any] | None = None,
    ) -> None:
        self._tensors = list(output_tensors or [])
        for t in self._tensors:
            if not isinstance(t, Tensor):
                raise TritonModelException(
                    f"InferenceResponse output_tensors must be pb_utils.Tensor, got "
                    f"{type(t).__name__}"
                )
        self._error = TritonError(error) if isinstance(error, str) else error
        if parameters is None:
            parameters = "{}"
        elif not isinstance(parameters, str):
            parameters = json.dumps(dict(parameters), default=str)
        self._parameters = parameters

    def output_tensors(self) -> list[Tensor]:
        """The output tensors."""
        return list(self._tensors)

    def has_error(self) -> bool:
        """Whether the response carries an error."""
        return self._error is not None

    def error(self) -> TritonError | None:
        """The error (None if the request succeeded)."""
        return self._error

    def parameters(self) -> str:
        """The response parameters as a JSON string."""
        return self._parameters


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    """The input tensor ``name`` of ``request`` (None if absent)."""
    return request.get_input_tensor_by_name(name)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    """The output tensor ``name`` of ``response`` (None if absent)."""
    for t in response.output_tensors():
        if t.name() == name:
            return t
    return None


def _config_entry(model_config: Mapping[str, Any], key: str, name: str) -> Any:
    for item in model_config.get(key) or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            return dict(item)
    return None


def get_input_config_by_name(model_config: Mapping[str, Any], name: str) -> Any:
    """The config entry (dict) of input ``name`` (None if absent)."""
    return _config_entry(model_config, "input", name)


def get_output_config_by_name(model_config: Mapping[str, Any], name: str) -> Any:
    """The config entry (dict) of output ``name`` (None if absent)."""
    return _config_entry(model_config, "output", name)


# -- dtypes -----------------------------------------------------------------------------------
def triton_string_to_numpy(triton_type_string: str) -> Any:
    """``"TYPE_FP32"`` -> ``np.float32`` (``TYPE_STRING`` -> ``np.object_``, BF16 -> ml_dtypes).

    Returns None for an unknown name, as Triton does.
    """
    name = str(triton_type_string).upper()
    if name == "TYPE_STRING":
        return np.object_
    if name == "TYPE_BOOL":
        return np.bool_
    if not name.startswith("TYPE_"):
        return None
    try:
        return numpy_dtype(name[5:]).type
    except Exception:
        return None


def triton_to_numpy_type(data_type: int) -> Any:
    """Triton's DataType enum value -> numpy type (None for unknown)."""
    name = _ENUM_TO_NAME.get(int(data_type))
    return None if name is None else triton_string_to_numpy(name)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """A numpy dtype / type -> Triton's DataType enum value (None for unknown)."""
    try:
        dt = np.dtype(data_type)
    except TypeError:
        return None
    if dt.kind in "OSU":
        return TRITON_TYPES["TYPE_STRING"]
    for enum_name, value in TRITON_TYPES.items():
        if enum_name in ("TYPE_INVALID", "TYPE_STRING"):
            continue
        if (
            triton_string_to_numpy(enum_name) is not None
            and np.dtype(triton_string_to_numpy(enum_name)) == dt
        ):
            return value
    return None


def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """BYTES array -> a 0-d object array holding the length-prefixed serialisation."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.object_)
    return np.asarray(encode_bytes_tensor(input_tensor), dtype=np.object_)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray[Any, Any]:
    """Length-prefixed serialisation -> 1-D object array of ``bytes``."""
    decoded: np.ndarray[Any, Any] = decode_bytes_tensor(encoded_tensor)
    return decoded


# -- logging / config -------------------------------------------------------------------------
class Logger:
    """Triton's model logger, writing to the ``nbinfer`` logger."""

    INFO = logging.INFO
    WARNING = logging.WARNING
    ERROR = logging.ERROR
    VERBOSE = logging.DEBUG

    @staticmethod
    def log(message: str, level: int = logging.INFO) -> None:
        """Log ``message`` at ``level``."""
        logger.log(level, "%s", message)

    @staticmethod
    def log_info(message: str) -> None:
        """Log at INFO."""
        logger.info("%s", message)

    @staticmethod
    def log_warn(message: str) -> None:
        """Log at WARNING."""
        logger.warning("%s", message)

    @staticmethod
    def log_error(message: str) -> None:
        """Log at ERROR."""
        logger.error("%s", message)

    @staticmethod
    def log_verbose(message: str) -> None:
        """Log at DEBUG."""
        logger.debug("%s", message)


class ModelConfig:
    """The config a model's ``auto_complete_config`` may complete (Triton's API)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config: dict[str, Any] = json.loads(json.dumps(dict(config), default=str))
        self._config.setdefault("max_batch_size", 0)
        self._config.setdefault("input", [])
        self._config.setdefault("output", [])

    def as_dict(self) -> dict[str, Any]:
        """The config as Triton-shaped JSON."""
        return self._config

    def max_batch_size(self) -> int:
        """The configured max_batch_size (0: no batching)."""
        return int(self._config.get("max_batch_size", 0) or 0)

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Set max_batch_size."""
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        """Enable dynamic batching (recorded in the config)."""
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, policy: Mapping[str, Any]) -> None:
        """Set ``model_transaction_policy`` (e.g. ``{"decoupled": True}``)."""
        self._config["model_transaction_policy"] = dict(policy)

    def _add(self, key: str, item: Mapping[str, Any]) -> None:
        entry = dict(item)
        if "name" not in entry:
            raise TritonModelException(f"add_{key}: the {key} needs a 'name'")
        if "dims" in entry:
            entry["dims"] = [int(d) for d in entry["dims"]]
        entries = self._config.setdefault(key, [])
        for existing in entries:
            if existing.get("name") != entry["name"]:
                continue
            # already configured: fine when it agrees, an error when it does not
            for field in ("data_type", "dims"):
                if field in entry and field in existing and entry[field] != existing[field]:
                    raise TritonModelException(
                        f"add_{key}: {key} {entry['name']!r} has {field} {existing[field]!r} "
                        f"in the config but auto_complete_config gives {entry[field]!r}"
                    )
            return
        entries.append(entry)

    def add_input(self, input: Mapping[str, Any]) -> None:
        """Add an input (``{"name", "data_type", "dims"}``)."""
        self._add("input", input)

    def add_output(self, output: Mapping[str, Any]) -> None:
        """Add an output (``{"name", "data_type", "dims"}``)."""
        self._add("output", output)
