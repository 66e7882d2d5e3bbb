"""The embedded inference server: model API, repository and the transport-neutral DataPlane.

The HTTP / gRPC frontends live in :mod:`nbinfer.server.rest` and :mod:`nbinfer.server.grpc`.
Nothing runs or is imported here: the names below are lazy attributes, so importing a submodule
(``nbinfer.server.launcher`` for a client's ``LocalServer``) does not import the dataplane. The
``model`` decorator is not re-exported here: ``nbinfer.server.model`` is the module (use
``nbinfer.model``).
"""

from __future__ import annotations

import typing as _typing

from nbinfer._lazy import lazy_attributes as _lazy_attributes

if _typing.TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane
    from nbinfer.server.demo import demo_models
    from nbinfer.server.devices import resolve_device
    from nbinfer.server.model import FunctionModel, InferContext, Model, TensorDef
    from nbinfer.server.repository import ModelRepository

#: Public names imported on first use, by the module that defines them.
_LAZY = {
    "DataPlane": "nbinfer.server.dataplane",
    "FunctionModel": "nbinfer.server.model",
    "InferContext": "nbinfer.server.model",
    "Model": "nbinfer.server.model",
    "ModelRepository": "nbinfer.server.repository",
    "TensorDef": "nbinfer.server.model",
    "demo_models": "nbinfer.server.demo",
    "resolve_device": "nbinfer.server.devices",
}


if not _typing.TYPE_CHECKING:  # mypy reads the imports above, and still flags unknown names
    __getattr__, __dir__ = _lazy_attributes(__name__, _LAZY)


__all__ = [
    "DataPlane",
    "FunctionModel",
    "InferContext",
    "Model",
    "ModelRepository",
    "TensorDef",
    "demo_models",
    "resolve_device",
]
