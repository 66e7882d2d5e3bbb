"""Transport-neutral v2 protocol types: plain data, no I/O, no codecs.

Tensor data is always a numpy array in these types (BYTES: ``object`` array of ``bytes``). The
codecs in :mod:`nbinfer.protocol.rest`, :mod:`nbinfer.protocol.grpc` and :mod:`nbinfer.protocol.v1`
turn these into wire messages and back.

Layer: protocol (pure); imports numpy, errors and protocol modules; no I/O. Each displayable
type's ``_repr_mimebundle_`` names its renderer in :mod:`nbinfer.render` (imported lazily).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ClassificationResult",
    "InferInput",
    "InferOutput",
    "InferRequest",
    "InferResponse",
    "ModelMetadata",
    "ParamValue",
    "Parameters",
    "RepositoryModel",
    "RequestedOutput",
    "ServerMetadata",
    "TensorSpec",
]

#: A v2 parameter value (the gRPC ``InferParameter`` oneof: bool, int64, uint64, double, string).
ParamValue = bool | int | float | str
#: A parameters map as carried by requests, responses, inputs and outputs.
Parameters = dict[str, ParamValue]


@dataclass(slots=True)
class TensorSpec:
    """A declared input or output of a model: name, v2 datatype and shape (-1 = variable)."""

    name: str
    datatype: str
    shape: list[int]
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class ServerMetadata:
    """Answer of ``GET /v2``: server name, version and the protocol extensions it supports."""

    name: str
    version: str
    extensions: list[str] = field(default_factory=list)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.cards import server_metadata_bundle

        return server_metadata_bundle(self)


@dataclass(slots=True)
class ModelMetadata:
    """Answer of ``GET /v2/models/{m}``: the model's versions, platform and tensor specs."""

    name: str
    versions: list[str] = field(default_factory=list)
    platform: str = ""
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    parameters: Parameters = field(default_factory=dict)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.cards import metadata_bundle

        return metadata_bundle(self)


@dataclass(slots=True)
class _Tensor:
    """The fields a request's input and a response's output share (distinct types, one layout)."""

    name: str
    datatype: str
    shape: list[int]
    data: np.ndarray[Any, Any] | None = None
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class InferInput(_Tensor):
    """One input tensor of a request.

    ``data`` is ``None`` only when the tensor lives in a shared-memory region named by
    ``parameters["shared_memory_region"]``.
    """


def infer_inputs(tensors: Iterable[tuple[str, str, np.ndarray[Any, Any]]]) -> list[InferInput]:
    """:class:`InferInput` objects from ``(name, datatype, array)`` (shape from the array)."""
    return [InferInput(name, datatype, list(arr.shape), arr) for name, datatype, arr in tensors]


@dataclass(slots=True)
class RequestedOutput:
    """An output the client asks for.

    Attributes:
        binary_data: REST only: ask for the output as binary tensor data (``None``: transport
            default).
        class_count: > 0 asks for the classification extension's top-N ``value:index[:label]``.
    """

    name: str
    binary_data: bool | None = None
    class_count: int = 0
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class InferRequest:
    """A v2 inference request. Request-level ``parameters`` carry extensions (sequence ids, ...).

    One built from a table's rows: :func:`nbinfer.request_from_dataframe` (this layer reads no
    tables).
    """

    inputs: list[InferInput]
    outputs: list[RequestedOutput] = field(default_factory=list)
    id: str = ""
    parameters: Parameters = field(default_factory=dict)
    model_name: str = ""
    model_version: str = ""


@dataclass(slots=True)
class InferOutput(_Tensor):
    """One output tensor of a response."""


@dataclass(slots=True)
class InferResponse:
    """A v2 inference response."""

    model_name: str
    outputs: list[InferOutput]
    model_version: str = ""
    id: str = ""
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class RepositoryModel:
    """One row of the model repository index."""

    name: str
    version: str = ""
    state: str = ""
    reason: str = ""


@dataclass(slots=True, frozen=True)
class ClassificationResult:
    """One decoded entry of a classification-extension output (``"value:index[:label]"``)."""

    score: float
    index: int
    label: str | None = None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.tensors import classification_bundle

        return classification_bundle(self)
