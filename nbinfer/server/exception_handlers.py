"""Custom exception handlers: map an exception a model raises to an HTTP status and message.

Layer: the server (imports ``nbinfer.errors`` only); never the frontends, the app, the client.

The equivalent of the exception handlers KServe users register on its FastAPI app, for both
protocols at once. The DataPlane asks :meth:`ExceptionHandlers.map` when a model's hook raised;
the error it returns travels like any other: REST answers its status, gRPC the code that status
has in :mod:`nbinfer.errors`' tables (``error_for_status`` then ``grpc_code_of``: 400 / 422
INVALID_ARGUMENT, 401 UNAUTHENTICATED, 404 NOT_FOUND, 413 RESOURCE_EXHAUSTED, 503 UNAVAILABLE,
5xx INTERNAL; other 4xx have no gRPC equivalent there and go as INTERNAL).

The server is another process, so handlers travel by reference: ``"module:qualname"`` strings,
or objects importable under their qualified name (classes and functions of a module, not of a
notebook cell or ``__main__``, not lambdas). A handler is ``handler(exc) -> (status, message)``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nbinfer.errors import InvalidInputError, ServerError, error_for_status

__all__ = ["ExceptionHandler", "ExceptionHandlers", "reference", "resolve"]

logger = logging.getLogger("nbinfer")

#: ``handler(exc) -> (status, message)``: the HTTP status and the message the client gets.
ExceptionHandler = Callable[[BaseException], tuple[int, str]]


def resolve(ref: str) -> Any:
    """The object a ``"module:qualname"`` reference names.

    Raises:
        InvalidInputError: the reference is malformed, or its module or name does not import.
    """
    module_name, sep, qualname = ref.partition(":")
    if not sep or not module_name or not qualname:
        raise InvalidInputError(f"{ref!r} is not a 'module:qualname' reference")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(f"cannot import {ref!r}: {type(exc).__name__}: {exc}") from exc
    return obj


def reference(obj: Any) -> str:
    """The ``"module:qualname"`` reference of ``obj`` (a string is checked and kept).

    Raises:
        InvalidInputError: ``obj`` cannot be found again by that name in another process
            (defined in ``__main__`` / a notebook cell, a lambda or a nested function).
    """
    if isinstance(obj, str):
        resolve(obj)
        return obj
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    ref = f"{module}:{qualname}"
    if not module or not qualname or module == "__main__" or "<" in qualname:
        raise InvalidInputError(
            f"{obj!r} cannot be sent to the server process by reference ({ref}): define it "
            "in an importable module, or pass a 'module:qualname' string"
        )
    if resolve(ref) is not obj:
        raise InvalidInputError(f"{ref} does not import as {obj!r}")
    return ref


class ExceptionHandlers:
    """Exception type -> handler, matched along the raised exception's MRO and causes.

    Args:
        handlers: ``{ExceptionType: handler}``; keys and values may also be
            ``"module:qualname"`` references.

    Raises:
        InvalidInputError: a key is not an exception class, a handler is not callable, or a
            reference does not import.

    Example::

        ExceptionHandlers({"mypkg.errors:Busy": "mypkg.handlers:busy"})
    """

    def __init__(self, handlers: Mapping[Any, Any]) -> None:
        self._table: dict[type[BaseException], ExceptionHandler] = {}
        for key, value in handlers.items():
            kind = resolve(key) if isinstance(key, str) else key
            handler = resolve(value) if isinstance(value, str) else value
            if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                raise InvalidInputError(f"exception handler key {key!r} is not an exception class")
            if not callable(handler):
                raise InvalidInputError(f"exception handler {value!r} is not callable")
            self._table[kind] = handler

    @classmethod
    def from_options(cls, specs: Iterable[str]) -> ExceptionHandlers:
        """Handlers from ``"module:Exc=module:handler"`` command-line values."""
        pairs = {}
        for spec in specs:
            kind, sep, handler = spec.partition("=")
            if not sep:
                raise InvalidInputError(
                    f"--exception-handler {spec!r}: expected 'module:Exception=module:handler'"
                )
            pairs[kind.strip()] = handler.strip()
        return cls(pairs)

    @staticmethod
    def options(handlers: Mapping[Any, Any]) -> list[str]:
        """The ``"module:Exc=module:handler"`` values that carry ``handlers`` to the server."""
        return [f"{reference(k)}={reference(v)}" for k, v in handlers.items()]

    def __bool__(self) -> bool:
        return bool(self._table)

    def _find(self, exc: BaseException) -> tuple[BaseException, ExceptionHandler] | None:
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            for cls in type(current).__mro__:
                handler = self._table.get(cls)
                if handler is not None:
                    return current, handler
            current = current.__cause__
        return None

    def map(self, exc: BaseException, *, model: str, request_id: str) -> ServerError | None:
        """The error to answer for ``exc`` a model raised (None: no handler, the default).

        A handler that raises or answers something other than ``(4xx / 5xx status, str)`` is
        logged and the default answer (500, the model's traceback) stands.
        """
        found = self._find(exc)
        if found is None:
            return None
        matched, handler = found
        try:
            status, message = handler(matched)
            if not (isinstance(status, int) and 400 <= status <= 599):
                raise TypeError(f"status {status!r} is not an int from 400 to 599")
        except Exception:
            logger.exception("exception handler %r failed on %r", handler, matched)
            return None
        logger.debug("model %r raised %r: answered %d by %r", model, matched, status, handler)
        return error_for_status(status, str(message), request_id=request_id or None, model=model)
