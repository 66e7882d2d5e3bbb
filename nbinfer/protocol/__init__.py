"""The pure v2 protocol layer: datatypes, tensor codecs, plain types and wire codecs.

Imports numpy, ml_dtypes and the stdlib only (the generated protobuf stubs only in ``grpc.py``).
"""

from __future__ import annotations

from nbinfer.protocol.dtypes import DATATYPES, bfloat16, datatype_of, element_size, numpy_dtype
from nbinfer.protocol.types import (
    ClassificationResult,
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
    "DATATYPES",
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
    "bfloat16",
    "datatype_of",
    "element_size",
    "numpy_dtype",
]
