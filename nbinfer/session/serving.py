"""Serving from a Session: notebook-defined models, and load / unload in the repository.

Owns ``serve()`` (a function, a ``torch.nn.Module`` or an :class:`nbinfer.Model` built into a
model in this process and shipped to the local server over the launcher's private channel) and
the repository calls ``load()`` / ``unload()``.

May import the session core, ``errors`` and, from the server, only ``server.model`` (lazily,
when something is served) and ``server.backends.torch`` (lazily, only for a torch module: the
one named exception in the layering test). Never the rest of the server.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbinfer.errors import (
    InvalidInputError,
    NbinferError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from nbinfer.session.boundary import public
from nbinfer.session.core import SessionCore
from nbinfer.session.handle import ModelHandle

__all__ = ["SERVE_SPEC_HINTS", "Serving"]

#: What to try when ``serve()`` cannot build a model from what it was given.
SERVE_SPEC_HINTS = (
    "Fix the spec given to `session.serve()`: `inputs=` / `outputs=` as lists of "
    '`(name, datatype, shape)` tuples (e.g. `[("x", "FP32", [-1, 4])]`) or `TensorSpec`s; '
    "or type hints on the function (`npt.NDArray[np.float32]`); or `example=`, the inputs "
    "of one call.",
    "Datatypes are v2 names (`FP32`, `INT64`, `BYTES`, ...); `help(session.serve)` has the rest.",
)


class Serving(SessionCore):
    """The serving half of :class:`~nbinfer.Session` (see there)."""

    @public
    def load(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> ModelHandle:
        """Load (or reload) ``model`` from the server's repository; returns its handle.

        Raises:
            UnauthenticatedError: The repository API is restricted; the message names the
                header to pass (``Session(url, headers=...)``).
        """
        server = self._operator()
        if server is not None:
            text = config if config is None or isinstance(config, str) else json.dumps(config)
            self._repository(
                model, lambda: server.repository("load", model, config=text, files=files)
            )
        else:
            self._repository(
                model, lambda: self.client.load_model(model, config=config, files=files)
            )
        handle = self._handle(model)
        handle._read()  # what its card shows (an error too)
        return handle

    @public
    def unload(self, model: str) -> None:
        """Unload ``model`` (raises like :meth:`load`)."""
        server = self._operator()
        if server is not None:
            self._repository(model, lambda: server.repository("unload", model))
        else:
            self._repository(model, lambda: self.client.unload_model(model))

    def _operator(self) -> Any:
        """The session's own server when it may act as its operator (its control channel).

        Load / unload then go over the private channel: the server's model control mode
        binds network callers, never the session that started it.
        """
        server = self._server
        return server if server is not None and server.control and server.running else None

    def _repository(self, model: str, call: Callable[[], None]) -> None:
        """A repository call, with the access header named when the API is restricted."""
        try:
            call()
        except PermissionDeniedError as exc:
            if "--model-control-mode" in exc.message or "--allow-model-replace" in exc.message:
                raise  # the server's model control said no: its message says why
            raise self.capabilities.access_error(exc, "model repository") from exc
        except UnauthenticatedError as exc:
            raise self.capabilities.access_error(exc, "model repository") from exc
        finally:
            self.client._forget(model)  # the metadata cache: the model may have changed
        self._forget_labels(model)
        self._relist()

    def _relist(self) -> None:
        """After the models changed: read the listing again if the session holds one."""
        if self._listing is not None:
            with contextlib.suppress(NbinferError):  # held for the card
                _ = self.models

    @public
    def serve(
        self,
        model: Any,
        *,
        name: str | None = None,
        inputs: Sequence[Any] | None = None,
        outputs: Sequence[Any] | None = None,
        **options: Any,
    ) -> ModelHandle:
        """Add a notebook-defined model to the running local server.

        ``model`` may be an :class:`nbinfer.Model`, a plain function (NumPy in, NumPy out;
        specs from ``inputs`` / ``outputs``, its type hints, or ``example=``: the inputs of
        one call, ``{parameter: array}`` or one array, whose datatypes and shapes become the
        specs) or a ``torch.nn.Module`` (``inputs`` / ``outputs`` required). The server is
        another process: the model is shipped over the launcher's private channel with
        cloudpickle — never through the network API. :meth:`restart` serves it again.

        Raises:
            InvalidInputError: This session has no local server, or the model cannot be built.
        """
        if self._server is None:
            raise InvalidInputError(
                "session.serve() needs the embedded local server (Session() or Session.local()); "
                f"this session talks to {self.url}",
                hint=(
                    "Serve it from a local session: `nbinfer.Session()`.",
                    "Or put it in that server's model repository: `nbinfer export` writes one.",
                ),
            )
        try:
            built = _as_model(model, name=name, inputs=inputs, outputs=outputs, **options)
            self._server.add_model(built)  # the server checks the specs again
        except InvalidInputError as exc:  # the spec is what to fix, not a served model's metadata
            if not exc.hint_given:  # a hint of its own (e.g. what to pickle) is the better one
                exc.hints = SERVE_SPEC_HINTS
            raise
        except (TypeError, ValueError) as exc:  # e.g. inputs= that is not a sequence
            raise InvalidInputError(f"session.serve(): {exc}", hint=SERVE_SPEC_HINTS) from exc
        self._served[built.name] = built
        self._forget_labels(built.name)
        self._relist()
        handle = self._handle(built.name)
        handle._read()  # also refreshes the client's metadata cache
        return handle


def _as_model(
    model: Any,
    *,
    name: str | None,
    inputs: Sequence[Any] | None,
    outputs: Sequence[Any] | None,
    **options: Any,
) -> Any:
    """Turn a function, torch module or Model into an nbinfer Model (in this process).

    Raises:
        InvalidInputError: Not something that can serve, or options the model does not take
            (a builder's own ``TypeError`` / ``ValueError`` becomes this, as its cause).
    """
    from nbinfer.server.model import FunctionModel, Model

    if isinstance(model, Model):
        if name is not None:
            model.name = name
        return model
    module_type = _torch_module_type()
    if module_type is not None and isinstance(model, module_type):
        from nbinfer.server.backends.torch import TorchModel

        if inputs is None or outputs is None:
            raise InvalidInputError("serving a torch module needs inputs= and outputs= specs")
        return _build(
            TorchModel,
            model,
            name=name or type(model).__name__.lower(),
            inputs=list(inputs),
            outputs=list(outputs),
            **options,
        )
    if callable(model):
        fn: Callable[..., Any] = model
        kwargs: dict[str, Any] = dict(options)
        if inputs is not None:
            kwargs["inputs"] = list(inputs)
        if outputs is not None:
            kwargs["outputs"] = list(outputs)
        return _build(
            FunctionModel, fn, name=name or str(getattr(fn, "__name__", "model")), **kwargs
        )
    raise InvalidInputError(
        f"cannot serve {type(model).__name__}: pass an nbinfer.Model, a function or a "
        "torch.nn.Module"
    )


def _build(kind: Callable[..., Any], model: Any, *, name: str, **options: Any) -> Any:
    """``kind(model, name=..., **options)`` with a bad option reported in the error tree."""
    try:
        return kind(model, name=name, **options)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"cannot serve {name!r} as {getattr(kind, '__name__', kind)}: {exc}", model=name
        ) from exc


def _torch_module_type() -> type | None:
    torch = sys.modules.get("torch")  # only if the user already imported torch
    module: type | None = None if torch is None else torch.nn.Module
    return module
