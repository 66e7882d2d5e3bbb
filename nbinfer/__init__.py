"""nbinfer: KServe v2 / Open Inference Protocol inference, first-class inside Jupyter.

The public API is exactly ``__all__`` (a test checks it). IPython is never imported here;
``%load_ext nbinfer`` works through :func:`load_ipython_extension`, which imports it lazily;
imported inside a running IPython shell, nbinfer installs its error display there (your frames,
then the error card: see :mod:`nbinfer.notebook`).
Everything above the protocol layer is a lazy attribute, imported on first use: the clients and
the session (``Client``, ``Session``, ...), the server's names (``Model``, ``model``,
``FunctionModel``, ``LocalServer``) and the model browser's (``browse``, ``ModelBrowser``:
ipywidgets). A client-only ``import nbinfer`` never imports :mod:`nbinfer.server` or the notebook
layer, and the server process (``python -m nbinfer.server``) never imports the clients.
"""

from __future__ import annotations

import typing as _typing

from nbinfer import errors as _errors
from nbinfer._lazy import lazy_attributes as _lazy_attributes
from nbinfer.config import (
    BasicAuth,
    BearerAuth,
    ClientConfig,
    HeaderAuth,
    Retries,
    Timeouts,
    TLSConfig,
)
from nbinfer.errors import (
    ConnectError,
    DataTypeError,
    InferenceError,
    InvalidInputError,
    LimitExceededError,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    NbinferError,
    PayloadTooLargeError,
    PermissionDeniedError,
    QueueFullError,
    RemoteInvalidInputError,
    RemoteUnsupportedError,
    RequestTimeoutError,
    ServerError,
    ServerStartError,
    ServerUnavailableError,
    TransportError,
    UnauthenticatedError,
    UnsupportedError,
)
from nbinfer.protocol import (
    ClassificationResult,
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RepositoryModel,
    RequestedOutput,
    ServerMetadata,
    TensorSpec,
)

if _typing.TYPE_CHECKING:
    from nbinfer.capabilities import Capabilities
    from nbinfer.client import AsyncClient, Client, InferResult, InferSequence, Sequence
    from nbinfer.client.replicas import AsyncReplicaClient, ReplicaClient
    from nbinfer.interop.pandas import request_from_dataframe
    from nbinfer.interop.samples import SampleData, sample_data
    from nbinfer.notebook.widgets import ModelBrowser, browse
    from nbinfer.server.launcher import LocalServer
    from nbinfer.server.model import FunctionModel, Model, model
    from nbinfer.session import ModelHandle, Session, sessions
    from nbinfer.session.chat import Chat
    from nbinfer.session.generate import Generation

__version__ = "0.1.0"

#: Public names imported on first use, by the module that defines them.
_LAZY = {
    "AsyncClient": "nbinfer.client",
    "Client": "nbinfer.client",
    "InferResult": "nbinfer.client",
    "InferSequence": "nbinfer.client",
    "Sequence": "nbinfer.client",
    "AsyncReplicaClient": "nbinfer.client.replicas",
    "ReplicaClient": "nbinfer.client.replicas",
    "Capabilities": "nbinfer.capabilities",
    "ModelHandle": "nbinfer.session",
    "Session": "nbinfer.session",
    "sessions": "nbinfer.session",
    "Chat": "nbinfer.session.chat",
    "Generation": "nbinfer.session.generate",
    "ModelBrowser": "nbinfer.notebook.widgets",
    "browse": "nbinfer.notebook.widgets",
    "FunctionModel": "nbinfer.server.model",
    "LocalServer": "nbinfer.server.launcher",
    "Model": "nbinfer.server.model",
    "model": "nbinfer.server.model",
    "SampleData": "nbinfer.interop.samples",
    "sample_data": "nbinfer.interop.samples",
    "request_from_dataframe": "nbinfer.interop.pandas",
}


if not _typing.TYPE_CHECKING:  # mypy reads the imports above, and still flags unknown names
    _lazy_getattr, __dir__ = _lazy_attributes(__name__, _LAZY)

    def __getattr__(name: str) -> object:
        if name in _errors._DEPRECATED:
            return _errors.deprecated_name(__name__, name)  # warns at the caller
        return _lazy_getattr(name)


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext nbinfer``: register the ``%nbinfer`` / ``%%infer`` magics and error cards."""
    from nbinfer.notebook import load_ipython_extension as load

    load(ipython)


def _error_display_in_ipython() -> None:
    """Inside IPython / Jupyter, nbinfer's errors show your line and the card: no %load_ext."""
    import sys

    if "IPython" in sys.modules:  # never imports IPython itself
        from nbinfer.notebook import _install_in_running_shell

        _install_in_running_shell()


_error_display_in_ipython()


__all__ = [
    "AsyncClient",
    "AsyncReplicaClient",
    "BasicAuth",
    "BearerAuth",
    "Capabilities",
    "ClientConfig",
    "HeaderAuth",
    "Retries",
    "TLSConfig",
    "Timeouts",
    "ClassificationResult",
    "Client",
    "FunctionModel",
    "InferResult",
    "InferSequence",
    "LocalServer",
    "Model",
    "ModelBrowser",
    "ModelHandle",
    "Chat",
    "Generation",
    "SampleData",
    "Sequence",
    "Session",
    "browse",
    "model",
    "request_from_dataframe",
    "sample_data",
    "ConnectError",
    "DataTypeError",
    "InferInput",
    "InferOutput",
    "InferRequest",
    "InferResponse",
    "InferenceError",
    "InvalidInputError",
    "LimitExceededError",
    "ModelMetadata",
    "ModelNotFoundError",
    "ModelLoadError",
    "ModelNotReadyError",
    "NbinferError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QueueFullError",
    "RemoteInvalidInputError",
    "RemoteUnsupportedError",
    "ReplicaClient",
    "RepositoryModel",
    "RequestedOutput",
    "ServerError",
    "ServerMetadata",
    "ServerStartError",
    "ServerUnavailableError",
    "TensorSpec",
    "RequestTimeoutError",
    "TransportError",
    "UnauthenticatedError",
    "UnsupportedError",
    "__version__",
    "load_ipython_extension",
    "sessions",
]
