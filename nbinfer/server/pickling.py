"""Pickling a notebook's model for its local server, with the origin of every code object.

Layer: the server (imports nothing of nbinfer; cloudpickle at import, so it is itself imported
lazily by :mod:`nbinfer.server.control`); never the client, transports, session or notebook.

cloudpickle decides what a pickled code object remembers of where it came from, and that has
changed under us: 3.1.3 writes every ``co_filename`` as ``"<dynamic-code>"``, so a served
function's traceback lost the user's file. We no longer rely on it: :class:`OriginPickler` wraps
each code object's reduction with its file name and first line, and for code whose file is not
on disk (a notebook cell, ``python -c``) the source lines ``linecache`` holds for it, once per
file. :func:`restore_origin` runs on load: it puts the file name and first line back and
registers the cell's lines in the server's ``linecache``, so the server's own traceback shows
the user's file, line and source. Only the control channel uses this (its peer is the process
that spawned the server), never anything from the network.
"""

from __future__ import annotations

import io
import linecache
import os
import types
from collections.abc import Callable
from typing import Any

import cloudpickle

__all__ = ["OriginPickler", "dumps", "restore_origin"]


def restore_origin(
    make: Callable[..., types.CodeType],
    args: tuple[Any, ...],
    filename: str,
    firstlineno: int,
    lines: list[str] | None,
) -> types.CodeType:
    """Rebuild a code object with cloudpickle's reduction, then put its origin back."""
    code = make(*args)
    if lines is not None and filename not in linecache.cache:
        # mtime None: linecache.checkcache never drops it (there is no file to compare with)
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    if code.co_filename == filename and code.co_firstlineno == firstlineno:
        return code
    return code.replace(co_filename=filename, co_firstlineno=firstlineno)


def _cell_lines(filename: str) -> list[str] | None:
    """The source lines of code that has no file on disk, as ``linecache`` holds them."""
    if os.path.exists(filename):
        return None  # the server reads it itself (same host, same files)
    entry = linecache.cache.get(filename)
    if entry is None or len(entry) != 4:
        return None
    return list(entry[2])


class OriginPickler(cloudpickle.Pickler):  # type: ignore[misc]
    """A cloudpickle pickler that carries each code object's file, first line and cell source."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self._files_sent: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        """Wrap a code object's reduction in :func:`restore_origin`; defer to cloudpickle."""
        if isinstance(obj, types.CodeType):
            reduce = self.dispatch_table.get(types.CodeType)
            if reduce is not None:
                make, args = reduce(obj)[:2]
                filename = obj.co_filename
                lines = None
                if filename not in self._files_sent:
                    self._files_sent.add(filename)
                    lines = _cell_lines(filename)
                return restore_origin, (make, args, filename, obj.co_firstlineno, lines)
        return super().reducer_override(obj)


def dumps(obj: Any) -> bytes:
    """``obj`` pickled by :class:`OriginPickler` (load it with ``cloudpickle.loads``)."""
    buffer = io.BytesIO()
    OriginPickler(buffer).dump(obj)
    return buffer.getvalue()
