"""The embedded inference server: model API, repository and the transport-neutral DataPlane.

The HTTP / gRPC frontends live in :mod:`nbinfer.server.rest` and :mod:`nbinfer.server.grpc`;
nothing here runs at import time.
"""

from __future__ import annotations

from nbinfer.server.dataplane import DataPlane
from nbinfer.server.demo import demo_models
from nbinfer.server.model import (
    FunctionModel,
    InferContext,
    Model,
    TensorDef,
    model,
    resolve_device,
)
from nbinfer.server.repository import ModelRepository

__all__ = [
    "DataPlane",
    "FunctionModel",
    "InferContext",
    "Model",
    "ModelRepository",
    "TensorDef",
    "demo_models",
    "model",
    "resolve_device",
]
