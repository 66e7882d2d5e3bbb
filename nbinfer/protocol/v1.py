"""KServe v1 (TensorFlow-Serving style) REST codec: ``{"instances"}`` -> ``{"predictions"}``.

Requests may also use the columnar/row ``{"inputs": ...}`` form and responses ``{"outputs": ...}``.
numpy arrays are written as nested JSON lists (non-contiguous, big-endian and bfloat16 arrays
included); ``bytes`` become UTF-8 strings, or ``{"b64": ...}`` when they are not valid UTF-8 (the
TensorFlow-Serving convention).

Example:
    >>> decode_v1_request(encode_v1_request([[1, 2], [3, 4]]))
    [[1, 2], [3, 4]]

Layer: protocol (pure); imports numpy, orjson, errors and protocol.dtypes; no I/O.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import orjson

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import bfloat16

__all__ = [
    "decode_v1_request",
    "decode_v1_response",
    "encode_v1_request",
    "encode_v1_response",
]

_OPTS = orjson.OPT_SERIALIZE_NUMPY


def _default(obj: Any) -> Any:
    """Serialize what orjson does not handle natively (its ``default`` hook)."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "OSU" or obj.dtype.kind == "T":
            return obj.tolist()
        if obj.dtype == bfloat16:
            return np.ascontiguousarray(obj.astype(np.float32))
        if not obj.dtype.isnative:
            return np.ascontiguousarray(obj.astype(obj.dtype.newbyteorder("=")))
        if obj.ndim == 0:
            return obj.item()
        return np.ascontiguousarray(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        raw = bytes(obj)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(raw).decode("ascii")}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj, default=_default, option=_OPTS)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise InvalidInputError(f"cannot encode as v1 JSON: {exc}") from exc


def _loads(body: bytes | bytearray | memoryview | str, what: str) -> Any:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError(f"malformed v1 {what} JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InvalidInputError(f"v1 {what} must be a JSON object, got {type(obj).__name__}")
    return obj


def encode_v1_request(instances: Any, *, key: str = "instances") -> bytes:
    """Encode ``{"instances": instances}`` (or ``{"inputs": ...}`` with ``key="inputs"``).

    Raises:
        InvalidInputError: ``instances`` holds something JSON cannot represent.
    """
    if key not in ("instances", "inputs"):
        raise InvalidInputError(f"v1 request key must be 'instances' or 'inputs', got {key!r}")
    return _dumps({key: instances})


def decode_v1_request(body: bytes | bytearray | memoryview | str) -> Any:
    """The instances of a v1 request (``instances``, or TF-Serving's ``inputs``), as parsed.

    Raises:
        InvalidInputError: malformed JSON, or neither ``instances`` (a list) nor ``inputs``.
    """
    obj = _loads(body, "request")
    if "instances" in obj:
        instances = obj["instances"]
        if not isinstance(instances, list):
            raise InvalidInputError(
                f"v1 'instances' must be a list, got {type(instances).__name__}"
            )
        return instances
    if "inputs" in obj:
        return obj["inputs"]
    raise InvalidInputError(
        f"v1 request needs 'instances' (or 'inputs'); got keys {sorted(obj)[:10]}"
    )


def encode_v1_response(predictions: Any) -> bytes:
    """Encode ``{"predictions": predictions}`` (numpy arrays become nested lists).

    Raises:
        InvalidInputError: ``predictions`` holds something JSON cannot represent.
    """
    return _dumps({"predictions": predictions})


def decode_v1_response(body: bytes | bytearray | memoryview | str) -> Any:
    """The predictions of a v1 response (``predictions`` or ``outputs``), as parsed.

    Raises:
        InvalidInputError: malformed JSON, an ``error`` body, or no predictions.
    """
    obj = _loads(body, "response")
    if "predictions" in obj:
        return obj["predictions"]
    if "outputs" in obj:
        return obj["outputs"]
    if "error" in obj:
        raise InvalidInputError(f"v1 response is an error: {obj['error']}")
    raise InvalidInputError(f"v1 response has no 'predictions'; got keys {sorted(obj)[:10]}")


def decode_v1_explanation(body: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """A v1 ``:explain`` answer, whole (nothing is unwrapped).

    Explainers answer any JSON object: nbinfer's ``explain()`` mapping, KServe's
    ``{"explanations": ...}``, an Alibi explanation.

    Raises:
        InvalidInputError: malformed JSON, not an object, or an ``error`` body.
    """
    obj = _loads(body, "explain response")
    if "error" in obj and len(obj) == 1:
        raise InvalidInputError(f"v1 explain response is an error: {obj['error']}")
    return dict(obj)
