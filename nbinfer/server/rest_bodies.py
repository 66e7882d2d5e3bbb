"""The REST frontend's request bodies: read from ASGI, then parsed.

Reading caps the size while streaming, holds the bytes against the in-flight budget and
inflates compressed bodies (a bomb never past the limit); parsing covers the JSON bodies of the
routes other than inference (shared-memory register, repository load, settings updates).

Imports offload and errors; never the dataplane or another frontend.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar, cast

import orjson

from nbinfer.errors import InvalidInputError, PayloadTooLargeError
from nbinfer.server.offload import OFFLOAD_BYTES, Reservation, inflate, off_loop

__all__ = [
    "Disconnected",
    "json_body",
    "load_body",
    "parse_off_loop",
    "read_body",
    "settings_body",
    "shm_body",
]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

# A compressed body from this size on is inflated on a worker thread (it may inflate 1000x).
_INFLATE_OFFLOAD = 4096
# A body of declared length from this size on is read into one growing buffer (no join copy).
_PREALLOCATE = 1 << 20


class Disconnected(Exception):
    """The client went away while we were reading its body."""


def json_body(body: bytes) -> Any:
    """The JSON of a body ({} when empty).

    Raises:
        InvalidInputError: malformed JSON.
    """
    if not body:
        return {}
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        exc.doc = ""  # the whole body as a str: not kept alive with the error
        raise InvalidInputError(f"malformed JSON in request body: {exc}") from exc


_T = TypeVar("_T")


async def parse_off_loop(parse: Callable[[bytes], _T], body: bytes) -> _T:
    """``parse(body)``, on a worker thread when the body is large (``OFFLOAD_BYTES`` or more)."""
    if len(body) < OFFLOAD_BYTES:
        return parse(body)
    return await off_loop(parse, body)


async def read_body(
    receive: Receive,
    headers: dict[bytes, bytes],
    reservation: Reservation,
    limit: int,
    flag: str = "--max-request-bytes",
) -> bytes:
    """The request body, held against the in-flight budget (inflated when compressed).

    A declared ``Content-Length`` is reserved before a byte is read (a busy server refuses
    at once); a chunked body is reserved as it arrives. Bodies smaller than
    :data:`~nbinfer.server.offload.OFFLOAD_BYTES` are never refused (the connection cap
    bounds them), so large uploads cannot lock small requests out. A body (or its inflated
    form) larger than ``limit`` is refused with 413 naming ``flag``, the option that sets it;
    a declared one before a byte is read.
    """
    declared = headers.get(b"content-length")
    if declared is not None:
        try:
            n = int(declared)
        except ValueError as exc:
            raise InvalidInputError("invalid Content-Length header") from exc
        if n > limit:
            raise PayloadTooLargeError(
                f"request body of {n} bytes exceeds the server limit of {limit} bytes ({flag})"
            )
        if n >= OFFLOAD_BYTES:
            reservation.take(n)
    if declared is not None and n >= _PREALLOCATE:
        body = await _read_into(receive, n)
    else:
        body = await _read_chunks(receive, declared is None, reservation, limit, flag)
    total = len(body)
    if declared is not None and total != n:
        raise InvalidInputError(f"truncated request body: Content-Length is {n} bytes, got {total}")
    encoding = headers.get(b"content-encoding")
    if encoding:
        packed, packed_held = body, reservation.held
        if len(packed) < _INFLATE_OFFLOAD:
            body = inflate(packed, encoding, limit, reservation, flag)
        else:  # a bomb inflates step by step on a thread, never past the limit
            body = await off_loop(inflate, packed, encoding, limit, reservation, flag)
        if body is not packed:
            reservation.give(packed_held)  # the compressed bytes are dropped
    return body


async def _read_chunks(
    receive: Receive, count: bool, reservation: Reservation, limit: int, flag: str
) -> bytes:
    """The body as it comes (``count``: no length was declared, reserve it as it arrives)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk: bytes = message.get("body", b"")
        if chunk:
            total += len(chunk)
            if total > limit:
                raise PayloadTooLargeError(
                    f"request body exceeds the server limit of {limit} bytes ({flag})"
                )
            if count and total >= OFFLOAD_BYTES:
                reservation.take(total - reservation.held)
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _read_into(receive: Receive, n: int) -> bytes:
    """A large body of declared length ``n``, grown in one buffer (never a second copy).

    The buffer grows as bytes arrive (an announced body that never comes costs nothing).
    It is returned as a read-only view (every consumer takes a buffer), so tensors decoded
    from it stay read-only views, as from ``bytes``.
    """
    buf = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk: bytes = message.get("body", b"")
        if chunk:
            if len(buf) + len(chunk) > n:
                raise InvalidInputError(f"request body longer than its Content-Length of {n} bytes")
            buf += chunk
        if not message.get("more_body", False):
            break
    return cast(bytes, memoryview(buf).toreadonly())  # used as a buffer: len, slices, ...


def settings_body(update: Any, what: str) -> dict[str, Any]:
    """A logging / trace settings update (empty: read the current settings)."""
    if not isinstance(update, dict):
        raise InvalidInputError(f"{what} settings must be a JSON object")
    return update


def shm_body(req: Any) -> dict[str, Any]:
    """A shared-memory register body; a CUDA ``raw_handle: {b64}`` becomes bytes."""
    if not isinstance(req, dict):
        raise InvalidInputError("shared memory register body must be a JSON object")
    handle = req.get("raw_handle")
    if isinstance(handle, dict):
        try:
            req = {**req, "raw_handle": base64.b64decode(str(handle.get("b64", "")))}
        except (binascii.Error, ValueError) as exc:
            raise InvalidInputError(f"raw_handle.b64 is not base64: {exc}") from exc
    return dict(req)


def load_body(body: bytes) -> tuple[str | None, dict[str, bytes] | None]:
    """The config override and uploaded files of a repository load body."""
    return _load_parameters(json_body(body))


def _load_parameters(req: Any) -> tuple[str | None, dict[str, bytes] | None]:
    """Parse ``{parameters: {config: "<json>", "file:<path>": "<base64>"}}`` of a load request."""
    if not isinstance(req, dict):
        raise InvalidInputError("repository load body must be a JSON object")
    params = req.get("parameters") or {}
    if not isinstance(params, dict):
        raise InvalidInputError("repository load 'parameters' must be a JSON object")
    config = params.get("config")
    if config is not None and not isinstance(config, str):
        config = orjson.dumps(config).decode()
    files: dict[str, bytes] = {}
    for key, value in params.items():
        if not key.startswith("file:"):
            continue
        if not isinstance(value, str):
            raise InvalidInputError(f"repository load parameter {key!r} must be a base64 string")
        try:
            files[key[5:]] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInputError(
                f"repository load parameter {key!r} is not base64: {exc}"
            ) from exc
    return config, (files or None)
