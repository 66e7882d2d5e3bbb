"""ModelHandle: one model of a session (metadata, config, labels, statistics, infer).

A view over its :class:`~nbinfer.Session`: it holds no connection of its own, so it works
across ``session.restart()``. What its card shows (metadata, config, readiness, labels) is
held from the last read (``session.model()`` reads it, :meth:`ModelHandle.refresh` again): a
repr never calls the server. Must not import the rest of the session package at run time
(the session imports it), nor the server; its renderer (``nbinfer.render.cards``) only inside
its repr hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbinfer.errors import NbinferError

if TYPE_CHECKING:
    import pandas as pd

    from nbinfer.protocol.types import ModelMetadata
    from nbinfer.session import Session

__all__ = ["ModelHandle"]


class ModelHandle:
    """One model of a session: metadata, config, statistics and ``infer``.

    Obtained with ``session.model("name")``.
    """

    def __init__(self, session: Session, name: str, version: str = "") -> None:
        self._session = session
        self.name = name
        self.version = version
        #: What the card shows, from the last reads: ``metadata``, ``config``, ``ready``,
        #: ``labels``, or the ``error`` a read raised.
        self._held: dict[str, Any] = {}

    def refresh(self) -> ModelHandle:
        """Read the model's metadata, config and readiness again; returns the handle.

        Its card (the notebook display) shows what the last read found, an error included
        (held for the card, not raised): a repr never calls the server.
        """
        self._read()
        return self

    def _read(self) -> None:
        """Fill what the card shows; an error is held, not raised."""
        held: dict[str, Any] = {}
        session = self._session
        try:
            held["metadata"] = session.client.get_model_metadata(self.name, self.version)
            try:
                held["config"] = session.client.get_model_config(self.name, self.version)
            except NbinferError:
                held["config"] = {}  # servers without the model_configuration extension
            held["ready"] = session.client.is_model_ready(self.name, self.version)
            held["labels"] = session._labels(self.name, self.version)
        except NbinferError as exc:
            held["error"] = exc
        self._held = held

    @property
    def metadata(self) -> ModelMetadata:
        """The model's metadata (inputs, outputs, versions, platform): read from the server."""
        meta = self._session.client.get_model_metadata(self.name, self.version)
        self._held["metadata"] = meta
        return meta

    @property
    def config(self) -> dict[str, Any]:
        """The model's configuration (Triton-shaped JSON): read from the server."""
        config = self._session.client.get_model_config(self.name, self.version)
        self._held["config"] = config
        return config

    @property
    def ready(self) -> bool:
        """Whether the server reports the model ready: read from the server."""
        ready = self._session.client.is_model_ready(self.name, self.version)
        self._held["ready"] = ready
        return ready

    @property
    def labels(self) -> dict[str, list[str]]:
        """Class labels per output, where the server publishes them."""
        return self._session._labels(self.name, self.version)

    def stats(self) -> pd.DataFrame:
        """This model's inference statistics as a DataFrame."""
        return self._session.stats(self.name)

    def infer(self, data: Any, **kwargs: Any) -> Any:
        """Run inference; see :meth:`Session.infer`."""
        kwargs.setdefault("model_version", self.version)
        return self._session.infer(self.name, data, **kwargs)

    async def ainfer(self, data: Any, **kwargs: Any) -> Any:
        """Run inference from a coroutine; see :meth:`Session.ainfer`."""
        kwargs.setdefault("model_version", self.version)
        return await self._session.ainfer(self.name, data, **kwargs)

    def __repr__(self) -> str:
        version = f" version={self.version!r}" if self.version else ""
        return f"<ModelHandle {self.name!r}{version} at {self._session.url}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.cards import model_bundle  # drawn from what it holds: no I/O

        return model_bundle(self, self._held)
