"""What a server offers: its metadata read once, probes cached, one typed error for the rest.

Layer: imports ``nbinfer.errors`` and ``nbinfer.client`` (it reads metadata through a client, no
I/O of its own); never the session, server or notebook layer, which build on it.

A :class:`~nbinfer.Session` pointed at a server it did not start (a team's Triton, a KServe
InferenceService, an MLServer) asks :class:`Capabilities` before it calls an optional part of the
protocol. The record starts from the server metadata (``name``, ``version``, ``extensions``) and
learns from one probe where servers under-report (MLServer answers the repository index without
listing ``model_repository``; KServe takes binary tensors without listing
``binary_tensor_data``) or over-report (KServe lists ``model_repository_extension`` but has no
index). A feature the server lacks becomes an :class:`~nbinfer.errors.UnsupportedError` naming the
server, its version, the missing extension and what to do; a restricted API becomes an
:class:`~nbinfer.errors.UnauthenticatedError` saying which header to pass.

Example::

    caps = session.capabilities
    caps.name, caps.version     # ('kserve', '0.21.0')
    caps.extensions             # ('model_repository_extension',)
    caps.statistics             # False: session.stats() raises UnsupportedError
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

from nbinfer.errors import (
    ModelNotFoundError,
    NbinferError,
    ServerError,
    UnauthenticatedError,
    UnsupportedError,
)

if TYPE_CHECKING:
    from nbinfer.client import Client

__all__ = ["Capabilities", "is_missing_route", "read_capabilities"]

#: HTTP statuses (gRPC codes are mapped onto them) meaning "no such route / method here".
_MISSING_STATUS = (404, 405, 501)
_HEADER = re.compile(r"expecting header '([^']+)'")
#: Triton prefixes the key of ``--grpc-restricted-protocol`` with this on the wire.
TRITON_GRPC_PREFIX = "triton-grpc-protocol-"


def is_missing_route(exc: ServerError) -> bool:
    """Whether a server error means the route or RPC does not exist (404, 405, UNIMPLEMENTED).

    A :class:`~nbinfer.errors.RemoteUnsupportedError` (501, UNIMPLEMENTED, a route-level 404)
    always is; a 404 naming a model may be too (a server without the route may answer it so).
    """
    return isinstance(exc, ModelNotFoundError | UnsupportedError) or exc.status in _MISSING_STATUS


class Capabilities:
    """What one server offers: advertised extensions plus what probes found (thread-safe).

    Args:
        name: The server's name from its metadata (``"triton"``, ``"kserve"``, ``"mlserver"``).
        version: Its version.
        extensions: The extensions it advertises.
        protocol: ``"http"`` or ``"grpc"`` (what this session speaks to it).
        error: Why the metadata could not be read (then nothing is known and every call is tried).
    """

    def __init__(
        self,
        name: str = "unknown server",
        version: str = "",
        extensions: tuple[str, ...] = (),
        *,
        protocol: str = "http",
        error: NbinferError | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.extensions = extensions
        self.protocol = protocol
        self.error = error
        self._probed: dict[str, bool] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        probed = f", probed={self._probed}" if self._probed else ""
        return f"<Capabilities {self.server} extensions={list(self.extensions)}{probed}>"

    @property
    def server(self) -> str:
        """``server 'kserve' 0.21.0``: how messages name the server."""
        version = f" {self.version}" if self.version else ""
        return f"server {self.name!r}{version}"

    def advertises(self, extension: str) -> bool:
        """Whether the metadata lists ``extension``.

        ``model_repository(unload_dependents)`` and KServe's ``model_repository_extension`` count
        as ``model_repository``.
        """
        return any(
            e == extension or e.startswith(extension + "(") or e == extension + "_extension"
            for e in self.extensions
        )

    def offers(self, feature: str) -> bool | None:
        """``True`` / ``False`` once advertised or probed; ``None``: unknown, worth one try."""
        with self._lock:
            if feature in self._probed:
                return self._probed[feature]
        return True if self.advertises(feature) else None

    def record(self, feature: str, offered: bool) -> None:
        """Remember what a probe found (asked once per session)."""
        with self._lock:
            self._probed[feature] = offered

    @property
    def probed(self) -> dict[str, bool]:
        """What probes found so far, by feature."""
        with self._lock:
            return dict(self._probed)

    # -- what the notebook layer shows -------------------------------------------------------

    @property
    def repository(self) -> bool:
        """The model repository extension (index, load, unload): advertised or found."""
        return bool(self.offers("model_repository"))

    @property
    def statistics(self) -> bool:
        """The statistics extension: advertised or found."""
        return bool(self.offers("statistics"))

    @property
    def configuration(self) -> bool:
        """The model configuration extension."""
        return self.advertises("model_configuration")

    @property
    def binary_tensor_data(self) -> bool | None:
        """Binary tensors over HTTP: advertised or probed; ``None`` until the first request."""
        return self.offers("binary_tensor_data")

    # -- errors ------------------------------------------------------------------------------

    def unsupported(self, extension: str, what: str, hint: str) -> UnsupportedError:
        """The error for a missing ``extension``: server, version, what cannot be done, hint."""
        listed = ", ".join(self.extensions) if self.extensions else "no extensions"
        if self.error is not None:
            listed = f"its metadata could not be read: {self.error}"
        return UnsupportedError(
            f"{self.server} does not offer the {extension} extension ({self.protocol}; it lists "
            f"{listed}), so {what} is not available. {hint}",
            server=self.name,
            version=self.version,
            extension=extension,
        )

    def access_error(self, exc: ServerError, api: str) -> UnauthenticatedError:
        """A refused call to a restricted ``api``, rephrased to say which header to pass."""
        found = _HEADER.search(exc.message)
        if found is not None:
            header = found.group(1)
            hint = f"Session(url, headers={{{header!r}: '<value>'}})"
            if header.startswith(TRITON_GRPC_PREFIX):
                plain = header[len(TRITON_GRPC_PREFIX) :]
                hint += (
                    f" (over gRPC Triton expects the key {plain!r} of --grpc-restricted-protocol "
                    f"with its {TRITON_GRPC_PREFIX!r} prefix; over HTTP it is {plain!r})"
                )
            message = (
                f"{self.server} restricts its {api} API to callers sending the header "
                f"{header!r} ({exc.message}). Pass it to the session: {hint}"
            )
        else:
            header = ""
            message = (
                f"{self.server} refused this session's credentials for its {api} API "
                f"({exc.message}). Pass them to the session: Session(url, token='<bearer token>') "
                "or Session(url, headers={'<header>': '<value>'})"
            )
        return UnauthenticatedError(
            message,
            status=exc.status,
            request_id=exc.request_id,
            server=self.name,
            version=self.version,
            api=api,
            header=header,
        )


def read_capabilities(client: Client) -> Capabilities:
    """Read ``client``'s server metadata into a :class:`Capabilities` (``error`` set on failure)."""
    try:
        meta = client.get_server_metadata()
    except NbinferError as exc:
        return Capabilities(protocol=client.protocol, error=exc)
    return Capabilities(meta.name, meta.version, tuple(meta.extensions), protocol=client.protocol)
