"""Session declarations as I/O-free ops, and the sync / async faces that perform them.

A Session call is declared once as a generator (an *op*): it reads its arguments and, when it
needs something from the server (a model's metadata or config, the server's metadata), it
yields a :class:`Lookup` naming the client call and gets the answer (or the error, thrown in)
back. The sync face performs each lookup with the session's sync client; the asyncio face
awaits it on the session's async client for the running loop, so no ``await session.a...()``
ever blocks its event loop. ``_blocking`` / ``_awaiting`` derive both public methods from one
declaration, dressed by :func:`nbinfer.client.api.face_method` (the client's one face helper).

The lookups every declaration shares (metadata, config, class labels, capabilities) live on
:class:`Lookups`, each an op too; a sync caller outside a face runs one with :func:`perform`.

May import the session core, ``client``, ``capabilities``, ``errors`` and ``protocol``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import ModuleType
from typing import Any, Concatenate, ParamSpec, TypeVar

from nbinfer.capabilities import Capabilities
from nbinfer.client.api import face_method
from nbinfer.errors import ModelNotFoundError, NbinferError, ServerError, UnsupportedError
from nbinfer.interop.outputs import config_labels
from nbinfer.protocol.types import ModelMetadata
from nbinfer.session.core import SessionCore

__all__ = ["Lookup", "Lookups", "SessionOp", "aperform", "imported", "perform"]

logger = logging.getLogger("nbinfer")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Lookup:
    """A read an op needs from the server: a method both clients have, and its arguments."""

    method: str
    args: tuple[Any, ...] = ()


#: A declaration's body: yields lookups, receives their answers, returns its value.
SessionOp = Generator[Lookup, Any, T]


def perform(client: Any, op: SessionOp[T]) -> T:
    """Run ``op`` on a sync client: each lookup is a blocking call of ``client``."""
    answer: Any = None
    error: Exception | None = None
    while True:
        try:
            step = op.send(answer) if error is None else op.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            answer, error = getattr(client, step.method)(*step.args), None
        except Exception as exc:
            answer, error = None, exc


async def aperform(aclient: Any, op: SessionOp[T]) -> T:
    """Run ``op`` on an async client: each lookup is awaited (the loop keeps running)."""
    answer: Any = None
    error: Exception | None = None
    while True:
        try:
            step = op.send(answer) if error is None else op.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            answer, error = await getattr(aclient, step.method)(*step.args), None
        except Exception as exc:
            answer, error = None, exc


async def imported(name: str) -> ModuleType:
    """``import name`` on a worker thread the first time: a heavy import would stall the loop."""
    module = sys.modules.get(name)
    if module is None:
        loop = asyncio.get_running_loop()
        module = await loop.run_in_executor(None, importlib.import_module, name)
    return module


class Lookups(SessionCore):
    """What the session's declarations read from the server, each read once, as ops."""

    def _metadata_op(self, model: str, version: str) -> SessionOp[ModelMetadata]:
        """The model's metadata, read once (the caches are emptied by load / unload / serve)."""
        key = (model, version)
        meta = self.client._metadata.get(key) or self._metadata_held.get(key)
        if meta is None:
            meta = yield Lookup("get_model_metadata", key)
            self._metadata_held[key] = meta
        return meta

    def _optional_metadata_op(self, model: str, version: str) -> SessionOp[ModelMetadata | None]:
        """Like :meth:`_metadata_op`; None when the server has none to give (not: unknown)."""
        try:
            return (yield from self._metadata_op(model, version))
        except ModelNotFoundError:
            raise
        except (ServerError, UnsupportedError) as exc:
            logger.debug("no metadata for %s (sending the data as given): %s", model, exc)
            return None

    def _config_op(self, model: str, version: str) -> SessionOp[dict[str, Any]]:
        """The model's config, or ``{}`` where the server has none to give."""
        try:
            config: dict[str, Any] = yield Lookup("get_model_config", (model, version))
        except NbinferError:
            return {}
        return config

    def _labels_op(self, model: str, version: str) -> SessionOp[dict[str, list[str]]]:
        """Class labels per output from the model's config (read once; also max_batch_size)."""
        key = (model, version)
        if key not in self._labels_cache:
            config = yield from self._config_op(model, version)
            self._labels_cache[key] = config_labels(config)
            try:
                self._max_batch[key] = int(config.get("max_batch_size") or 0)
            except (TypeError, ValueError):
                self._max_batch[key] = 0
        return self._labels_cache[key]

    def _labels(self, model: str, version: str) -> dict[str, list[str]]:
        """:meth:`_labels_op` on the sync client (a blocking read the first time)."""
        return perform(self.client, self._labels_op(model, version))

    def _capabilities_op(self) -> SessionOp[Capabilities]:
        """:attr:`capabilities` as an op: the record held, else the server metadata read."""
        caps = self._capabilities
        if caps is not None:
            return caps
        try:
            meta = yield Lookup("get_server_metadata")
        except NbinferError as exc:
            self._caps_seen = Capabilities(protocol=self.protocol, error=exc)
            return self._caps_seen
        caps = Capabilities(meta.name, meta.version, tuple(meta.extensions), protocol=self.protocol)
        with self._caps_lock:
            if self._capabilities is None:
                self._capabilities = self._caps_seen = caps
            return self._capabilities


_S = TypeVar("_S", bound=Lookups)
_P = ParamSpec("_P")
_C = TypeVar("_C")
_R = TypeVar("_R")


def _blocking(
    name: str,
    declared: Callable[Concatenate[_S, _P], SessionOp[_C]],
    run: Callable[[_S, _C], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """The sync face of a declaration: perform its op on the sync client, then ``run`` it."""

    def method(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return run(self, perform(self.client, declared(self, *args, **kwargs)))

    return _dressed(method, name, declared, run, declared.__doc__)


def _awaiting(
    name: str,
    declared: Callable[Concatenate[_S, _P], SessionOp[_C]],
    run: Callable[[_S, _C], Awaitable[_R]],
    doc: str,
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]]:
    """The asyncio face: the op's lookups are awaited on the session's async client."""

    async def method(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        call = await aperform(self._aclient(), declared(self, *args, **kwargs))
        return await run(self, call)

    return _dressed(method, name, declared, run, doc)


_F = TypeVar("_F", bound=Callable[..., Any])


def _dressed(
    method: _F, name: str, declared: Callable[..., Any], run: Callable[..., Any], doc: str | None
) -> _F:
    """Dress a face as the public method it is: the declaration's parameters, the runner's result.

    :func:`~nbinfer.client.api.face_method` does the dressing; the result type is the
    runner's (the op's value is an internal call record). docs/_ext/client_faces.py does the
    same for griffe.
    """
    face_method(method, declared, "FrameFront", "nbinfer.session.frames")
    returns = inspect.signature(run).return_annotation
    this, *params = inspect.signature(method).parameters.values()
    method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [this.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD), *params],
        return_annotation=returns,
    )
    method.__name__ = name
    method.__qualname__ = f"FrameFront.{name}"
    method.__doc__ = doc
    method.__annotations__["return"] = returns
    return method
