"""KServe's byte-tensor and parameter helpers and its ``InvalidInput`` error, over nbinfer.

Layer: compat. Re-exported by :mod:`nbinfer.compat.kserve` (import them from there): the
values ``serialize_byte_tensor`` / ``deserialize_bytes_tensor`` / ``to_grpc_parameters`` /
``to_http_parameters`` give are KServe's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

import numpy as np

from nbinfer.compat._codec import serialize_byte_tensor as _serialize
from nbinfer.errors import InvalidInputError, ServerError
from nbinfer.protocol import grpc as _grpc
from nbinfer.protocol import jsonvalues as _json
from nbinfer.protocol.tensors import decode_bytes_tensor

__all__ = [
    "InvalidInput",
    "deserialize_bytes_tensor",
    "serialize_byte_tensor",
    "to_grpc_parameters",
    "to_http_parameters",
]

_BINARY = "binary_data"

P = ParamSpec("P")
T = TypeVar("T")


class InvalidInput(InvalidInputError, ValueError):
    """KServe's ``InvalidInput``: bad arguments or a malformed request, also a ``ValueError``.

    Everything this module finds wrong locally (a dtype that does not fit, a body that does not
    decode, a parameter value it cannot carry) is raised as this class, so ported ``except
    ValueError:`` / ``except InvalidInput:`` code catches it, and it stays an
    :class:`~nbinfer.InvalidInputError` for nbinfer code. A server's refusal is
    :class:`~nbinfer.RemoteInvalidInputError`, as from every nbinfer client.
    """

    @property
    def reason(self) -> str:
        """The message (KServe's attribute name)."""
        return self.message


def _kserve_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """Raise nbinfer's local :class:`InvalidInputError` from ``fn`` as :class:`InvalidInput`."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except (InvalidInput, ServerError):
            raise
        except InvalidInputError as exc:
            raise InvalidInput(exc.message, **exc.context) from exc

    return call


@_kserve_errors
def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A BYTES tensor's wire form (4-byte little-endian lengths), as a 0-d object array.

    Row-major order; non-bytes, non-str elements are written as ``str(element)``; an empty
    tensor gives an empty object array, as KServe.

    Raises:
        InvalidInput: Not an object or ``S`` / ``U`` array.
    """
    return _serialize(input_tensor)


@_kserve_errors
def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray[Any, Any]:
    """The elements of a serialized BYTES tensor, as a 1-D object array of ``bytes``.

    Raises:
        InvalidInput: The lengths do not add up to the data.
    """
    return decode_bytes_tensor(encoded_tensor)


def _is_infer_parameter(value: Any) -> bool:
    """A v2 ``InferParameter`` message (nbinfer's, KServe's or tritonclient's class)."""
    descriptor = getattr(value, "DESCRIPTOR", None)
    return getattr(descriptor, "full_name", None) == "inference.InferParameter"


@_kserve_errors
def to_grpc_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """REST parameters as gRPC ``InferParameter`` messages (KServe's helper).

    ``str`` -> ``string_param``, ``bool`` -> ``bool_param``, ``int`` -> ``int64_param``
    (``uint64_param`` above the int64 range), ``float`` -> ``double_param`` (KServe refuses
    floats); an ``InferParameter`` is kept as it is.

    Raises:
        InvalidInput: A value of another type, or an int out of the uint64 range.
    """
    plain: dict[str, Any] = {}
    for key, value in parameters.items():
        if not _is_infer_parameter(value) and not isinstance(value, str | bool | int | float):
            raise InvalidInput(
                f"to_grpc: invalid parameter value: {value!r} for {key!r} (a str, bool, int, "
                "float or InferParameter is needed)"
            )
        plain[key] = value
    holder: Any = _grpc.request_message("ModelInfer")
    _grpc.params_to_proto(
        {k: v for k, v in plain.items() if not _is_infer_parameter(v)}, holder.parameters
    )
    return {k: v if _is_infer_parameter(v) else holder.parameters[k] for k, v in plain.items()}


def to_http_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The REST values of gRPC ``InferParameter`` messages (other values are kept as they are).

    A message with no value set is left out, as KServe does.
    """
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if _is_infer_parameter(value):
            which = value.WhichOneof("parameter_choice")
            if which is not None:
                out[key] = getattr(value, which)
        else:
            out[key] = value
    return out


def _rest_body(body: bytes, header_length: int | None) -> tuple[bytes | dict[str, Any], int | None]:
    """KServe's ``to_rest`` answer: the JSON as a dict, or the binary body with its JSON length."""
    if header_length is None:
        return _json.loads(body), None
    return body, header_length
