"""The launcher's private control channel: how a notebook ships a model to its local server.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

``LocalServer(control=True)`` creates a socket pair, keeps one end and hands the other to the
child (``--control-fd N``). Frames are a 4-byte big-endian length and a payload. Requests from
the parent are ``b"M"`` + a cloudpickled :class:`~nbinfer.server.model.Model`, or ``b"R"`` +
JSON ``{"op": "load" | "unload", "name", "config", "files": {path: base64}}`` (the operator's
repository calls: the model control mode and replace rule of network callers do not apply);
replies are JSON (``{"ok": true, "name": ...}`` or ``{"error": "...", "status": N}``).

This is the only place the server unpickles anything, and what it unpickles comes from the
process that spawned it over an inherited, unnamed socket — never from the network. When the
parent's end closes, the channel ends quietly (the parent-death watchdog handles the rest).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import socket
import struct
import sys
import sysconfig
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nbinfer.errors import (
    InvalidInputError,
    ModelLoadError,
    NbinferError,
    ServerError,
    ServerUnavailableError,
    error_for_status,
    status_of,
)

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane

__all__ = ["read_frame", "repository_call", "send_model", "serve_control", "write_frame"]

logger = logging.getLogger("nbinfer")

_HEADER = struct.Struct(">I")
_MODEL = b"M"
_REPOSITORY = b"R"


def write_frame(sock: socket.socket, payload: bytes) -> None:
    """Send one length-prefixed frame on a blocking socket."""
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ServerUnavailableError("the local server closed its control channel")
        chunks += chunk
    return bytes(chunks)


def read_frame(sock: socket.socket) -> bytes:
    """Read one length-prefixed frame from a blocking socket."""
    (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size))
    return _recv_exactly(sock, size)


def _exchange(sock: socket.socket, payload: bytes, *, timeout: float, what: str) -> Any:
    """Send one request frame and read the JSON reply.

    Raises:
        ServerUnavailableError: The server did not answer in time or is gone.
    """
    sock.settimeout(timeout)
    try:
        write_frame(sock, payload)
        return json.loads(read_frame(sock))
    except (TimeoutError, OSError) as exc:
        raise ServerUnavailableError(f"the local server did not confirm {what}: {exc}") from exc


def send_model(sock: socket.socket, model: Any, *, timeout: float) -> str:
    """Ship ``model`` to the server over the control socket; return its name once READY.

    Raises:
        InvalidInputError: The model cannot be pickled or unpickled, or its declarations are
            invalid.
        ModelLoadError: The server could not load it (the message carries the model's error).
        ServerUnavailableError: The server did not answer in time or is gone.
    """
    import cloudpickle

    from nbinfer.server import pickling

    registered = cloudpickle.list_registry_pickle_by_value()
    by_value = [m for m in _user_modules(model) if m.__name__ not in registered]
    try:
        for module in by_value:
            cloudpickle.register_pickle_by_value(module)
        payload = pickling.dumps(model)  # each code object carries its file, line, cell source
    except Exception as exc:
        raise InvalidInputError(
            f"cannot ship model {getattr(model, 'name', model)!r} to the local server: {exc}",
            hint="What the model holds must pickle (cloudpickle): open files, connections and "
            "locks in its `load()`, not in the notebook.",
        ) from exc
    finally:
        for module in by_value:
            cloudpickle.unregister_pickle_by_value(module)
    what = f"model {getattr(model, 'name', '?')!r}"
    reply = _exchange(sock, _MODEL + payload, timeout=timeout, what=what)
    if "error" in reply:
        cls = ModelLoadError if reply.get("load_failed") else InvalidInputError
        raise cls(str(reply["error"]), model=getattr(model, "name", None))
    return str(reply["name"])


def repository_call(
    sock: socket.socket,
    op: str,
    name: str,
    *,
    config: str | None = None,
    files: Mapping[str, bytes] | None = None,
    timeout: float,
) -> None:
    """Load or unload ``name`` as the operator, over the control socket.

    Raises:
        ServerError: what the server answered (the class of the same error over HTTP:
            ``ModelNotFoundError``, ``ModelLoadError``, ...).
        ServerUnavailableError: The server did not answer in time or is gone.
    """
    request = {
        "op": op,
        "name": name,
        "config": config,
        "files": {k: base64.b64encode(bytes(v)).decode() for k, v in (files or {}).items()},
    }
    payload = _REPOSITORY + json.dumps(request).encode()
    reply = _exchange(sock, payload, timeout=timeout, what=f"the {op} of model {name!r}")
    if "error" in reply:
        raise error_for_status(int(reply.get("status", 500)), str(reply["error"]), model=name)


async def _repository(payload: bytes, dataplane: DataPlane) -> dict[str, Any]:
    try:
        request = json.loads(payload)
        name = str(request["name"])
        files = {str(k): base64.b64decode(v) for k, v in (request.get("files") or {}).items()}
        if request.get("op") == "unload":
            await dataplane.unload_model(name)
        elif request.get("op") == "load":
            await dataplane.load_model(name, config=request.get("config"), files=files or None)
        else:
            return {"error": f"unknown repository operation {request.get('op')!r}", "status": 400}
    except NbinferError as exc:
        return {"error": exc.message, "status": status_of(exc)}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "status": 500}
    return {"ok": True, "name": name}


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(os.path.realpath(r) + os.sep for r in roots)


def _user_modules(model: Any) -> list[ModuleType]:
    """Modules of the model's class / function that live outside installed packages.

    Notebook code (``__main__``) is pickled by value anyway; a model defined in a user's own
    ``.py`` file next to the notebook would otherwise be pickled by reference and fail to import
    in the server process, so such modules are pickled by value too.
    """
    roots = _installed_roots()
    candidates = [type(model), getattr(model, "fn", None), getattr(model, "module", None)]
    found: list[ModuleType] = []
    for obj in candidates:
        if obj is None:
            continue
        name = getattr(obj, "__module__", None) or ""
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if module is None or path is None or name == "__main__" or name.startswith("nbinfer."):
            continue
        if not os.path.realpath(path).startswith(roots) and module not in found:
            found.append(module)
    return found


async def _handle(payload: bytes, dataplane: DataPlane) -> dict[str, Any]:
    if payload.startswith(_REPOSITORY):
        return await _repository(payload[len(_REPOSITORY) :], dataplane)
    if not payload.startswith(_MODEL):
        return {"error": "unknown control message"}
    import cloudpickle

    try:
        model = cloudpickle.loads(payload[len(_MODEL) :])
    except Exception as exc:
        return {"error": f"the server could not unpickle the model: {type(exc).__name__}: {exc}"}
    try:
        await dataplane.add_model(model)
    except ServerError as exc:
        return {"error": exc.message}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    name = str(getattr(model, "name", ""))
    for row in dataplane.repository_index():
        if row.name == name and row.state != "READY":
            return {"error": f"failed to load {name!r}: {row.reason}", "load_failed": True}
    logger.info("model %r added over the control channel", name)
    return {"ok": True, "name": name}


async def serve_control(fd: int, dataplane: DataPlane) -> None:
    """Answer control requests on the inherited socket ``fd`` until the parent closes it."""
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        while True:
            try:
                header = await reader.readexactly(_HEADER.size)
                (size,) = _HEADER.unpack(header)
                payload = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            reply = await _handle(payload, dataplane)
            body = json.dumps(reply).encode()
            writer.write(_HEADER.pack(len(body)) + body)
            await writer.drain()
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
