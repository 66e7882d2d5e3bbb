"""The HTTP/REST frontend: a raw ASGI app over the DataPlane (served by uvicorn + httptools).

No framework: one ``match`` on the path segments binds each route straight to its handler
method, bodies are read as bytes (size-capped while streaming: :mod:`~nbinfer.server.rest_bodies`,
which also parses the JSON bodies of the other routes), the v2 codec comes from
:mod:`nbinfer.protocol.rest`, and ONE error -> status table (:func:`nbinfer.errors.status_of`)
gives the body ``{"error": "<message>"}``. Nothing received is ever unpickled.

Every request is first screened against web pages (:mod:`nbinfer.server.webguard`: the Host
allowlist and the refusal of cross-site requests, 403), then authenticated, then routed.

Imports the dataplane (types only), rest_bodies, kserve_v1, auth, webguard, observability,
protocol and errors; never the gRPC frontend or the app.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from nbinfer.errors import (
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    ServerError,
    status_of,
)
from nbinfer.protocol import rest as codec
from nbinfer.protocol import rest_metadata as metadata_json
from nbinfer.protocol.types import InferRequest
from nbinfer.server import generate
from nbinfer.server.auth import PUBLIC_HTTP_PATHS, authorized
from nbinfer.server.kserve_v1 import KServeV1, parse_body
from nbinfer.server.observability import (
    METRICS_CONTENT_TYPE,
    LogSettings,
    metrics_text,
    trace_settings,
)
from nbinfer.server.offload import OFFLOAD_BYTES, off_loop
from nbinfer.server.rest_bodies import (
    Disconnected,
    Message,
    Receive,
    json_body,
    load_body,
    parse_off_loop,
    read_body,
    settings_body,
    shm_body,
)
from nbinfer.server.webguard import WebGuard

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane

__all__ = ["RestApp"]

logger = logging.getLogger("nbinfer")

Scope = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

_JSON = b"application/json"
_OCTET = b"application/octet-stream"
_IHCL = b"inference-header-content-length"
#: The refusal of a JSON body past ``--max-json-bytes`` says how to send a large tensor.
_JSON_HINT = (
    "--max-json-bytes: a JSON body is parsed whole; send large tensors as binary data, the "
    "binary tensor extension nbinfer's and tritonclient's clients use by default"
)
#: The ASGI scope of the request this task serves (uvicorn runs each request in its own task):
#: shared-memory calls read the connection's addresses from it (see :meth:`App._caller`).
_SCOPE: ContextVar[Scope] = ContextVar("nbinfer_http_scope")
_EMPTY: list[tuple[bytes, bytes]] = []
# Below this size a response is never compressed (it would not pay off).
_MIN_COMPRESS = 1024
# From this size on, a binary response is sent as its parts instead of being joined.
_SEND_PARTS = 1 << 20
# A request body from this size on is decoded on a worker thread even when its JSON part is small
# (BYTES tensors in the binary part are decoded element by element).
_LARGE_BODY = 16 << 20


class _MethodNotAllowed(Exception):
    def __init__(self, allowed: tuple[str, ...]) -> None:
        super().__init__(", ".join(allowed))
        self.allowed = allowed


# (status, content type, body: bytes or a list of buffers, extra headers)
_Reply = tuple[int, bytes, Any, list[tuple[bytes, bytes]]]
_GET = ("GET",)
_POST = ("POST",)
_GET_POST = ("GET", "POST")
_LIVE = orjson.dumps({"live": True})
_NOT_LIVE = orjson.dumps({"live": False})
_READY = orjson.dumps({"ready": True})
_NOT_FOUND_HEADER = codec.MODEL_NOT_FOUND_HEADER.encode()
_NOT_READY = orjson.dumps({"ready": False})


_Headers = dict[bytes, bytes]
_Handler = Callable[["RestApp", str, str, bytes, _Headers], Awaitable[_Reply]]
# A route resolves to (handler, allowed methods, model or region, version or shm kind).
_Route = tuple[_Handler, tuple[str, ...], str, str]


class _HeaderView(Mapping[str, str]):
    """The request's headers as ``str`` (lower-case names), decoded only when a hook reads them."""

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[bytes, bytes]) -> None:
        self._raw = raw

    def __getitem__(self, key: str) -> str:
        return self._raw[key.lower().encode("latin-1")].decode("latin-1")

    def __iter__(self) -> Iterator[str]:
        return (k.decode("latin-1") for k in self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def _with_headers(reply: _Reply, response_headers: dict[str, str]) -> _Reply:
    """Add the headers a model set (``context.response_headers``) to a reply."""
    if not response_headers:
        return reply
    extra = [*reply[3]]
    extra += [
        (k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in response_headers.items()
    ]
    return reply[0], reply[1], reply[2], extra


def _early(status: int, message: str, extra: list[tuple[bytes, bytes]]) -> _Reply:
    """An answer given before routing: ``{"error": message}`` with its final headers."""
    body = _error_body(message)
    headers = [(b"content-type", _JSON), *extra, (b"content-length", str(len(body)).encode())]
    return status, _JSON, body, headers


def _json_response(obj: Any, status: int = 200) -> _Reply:
    return status, _JSON, orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY), _EMPTY


def _error_body(message: str) -> bytes:
    return orjson.dumps({"error": message})


def _compress(body: bytes, encoding: bytes) -> bytes:
    if encoding == b"gzip":
        c = zlib.compressobj(1, zlib.DEFLATED, 31)
    else:
        c = zlib.compressobj(1, zlib.DEFLATED, 15)
    return c.compress(body) + c.flush()


def _encoded(body: bytes, accept: bytes, out_headers: list[tuple[bytes, bytes]]) -> bytes:
    """``body`` compressed as the client asked (adding its content-encoding header), or as is.

    Only an explicit single choice (as tritonclient sends when asked to compress): generic
    "gzip, deflate" defaults of HTTP libraries would only cost CPU on loopback.
    """
    enc = accept.strip().lower()
    if enc not in (b"gzip", b"deflate"):
        return body
    out_headers.append((b"content-encoding", enc))
    return _compress(body, enc)


def _binary_outputs(req: InferRequest) -> bool | set[str]:
    """Which response outputs go in the binary section (per-output setting wins)."""
    flag_value = req.parameters.get("binary_data_output", False)
    default = flag_value is True or (isinstance(flag_value, str) and flag_value.lower() == "true")
    if not req.outputs:
        return default
    names: set[str] = set()
    for out in req.outputs:
        flag = out.binary_data
        if flag is None:
            flag = default
        if flag:
            names.add(out.name)
    return names


class RestApp:
    """ASGI application serving the v2 (and KServe v1) REST protocol over a DataPlane.

    Args:
        dataplane: The transport-neutral server core.
        max_request_bytes: Larger request bodies are rejected with 413.
        max_json_bytes: Larger JSON bodies (no binary tensor data: parsed whole, holding the
            GIL every other request waits for) are rejected with 413; 0: ``max_request_bytes``.
            A repository load may be larger by what ``max_upload_bytes`` of base64 takes.
        max_upload_bytes: The uploaded bytes one load may carry (see above; 0: no allowance).
        auth_token: When set, every request but liveness needs ``Authorization: Bearer <token>``
            (401 otherwise).
        guard: The Host / Origin screen of every request (default: loopback Hosts, no
            cross-site origin; see :mod:`nbinfer.server.webguard`).
    """

    def __init__(
        self,
        dataplane: DataPlane,
        *,
        max_request_bytes: int,
        max_json_bytes: int = 0,
        max_upload_bytes: int = 0,
        auth_token: str | None = None,
        guard: WebGuard | None = None,
    ) -> None:
        self.dp = dataplane
        self.guard = guard if guard is not None else WebGuard()
        self.v1 = KServeV1(dataplane)
        # The body limits, each with the option it names in a 413: any body; a JSON one (parsed
        # whole); a load's JSON (its files as base64 on top, 4 bytes per 3). A JSON cap at or
        # above the body limit is the body limit.
        self._any_body = (max_request_bytes, "--max-request-bytes")
        json_bytes = max_json_bytes or max_request_bytes
        load_bytes = json_bytes + -(-max_upload_bytes // 3) * 4
        self._json_body = self._capped(json_bytes, _JSON_HINT)
        self._load_body = self._capped(load_bytes, "--max-json-bytes + 4/3 of --max-upload-bytes")
        self.auth_token = auth_token or None
        self._docs_cache: tuple[bytes, bytes] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection scope."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await _lifespan(receive, send)
            return
        method: str = scope["method"]
        _SCOPE.set(scope)
        status: int
        ctype: bytes
        body: Any
        extra: list[tuple[bytes, bytes]]
        accept = b""
        headers: dict[bytes, bytes] = dict(scope["headers"])
        early, cors = self._screen(method, scope["path"], headers)
        if early is not None:  # refused (403 / 401) or a CORS preflight: nothing is read
            await send({"type": "http.response.start", "status": early[0], "headers": early[3]})
            await send({"type": "http.response.body", "body": early[2]})
            return
        try:
            route = _route(scope["path"])
            if route is None:
                raise ModelNotFoundError(f"no route for {method} {scope['path']}")
            handler, allowed, model, version = route
            if method not in allowed:
                raise _MethodNotAllowed(allowed)
            accept = headers.get(b"accept-encoding", b"")
            if method == "POST":
                status, ctype, body, extra = await self._post(
                    handler, model, version, receive, headers
                )
            else:
                status, ctype, body, extra = await handler(self, model, version, b"", headers)
        except (Disconnected, asyncio.CancelledError):
            # the client went away (its request task is cancelled by the connection)
            return
        except _MethodNotAllowed as exc:
            status, ctype, extra = 405, _JSON, [(b"allow", ", ".join(exc.allowed).encode())]
            body = _error_body(f"method {method} not allowed for {scope['path']}")
        except NbinferError as exc:
            # a ServerError carries its status (a custom exception handler's, see handlers.py)
            status = exc.status if isinstance(exc, ServerError) else status_of(exc)
            ctype, extra = _JSON, _EMPTY
            body = _error_body(exc.message)
        except Exception as exc:
            logger.exception("unhandled error serving %s %s", method, scope["path"])
            status, ctype, extra = 500, _JSON, _EMPTY
            body = _error_body(f"internal server error: {type(exc).__name__}: {exc}")
        out_headers = [(b"content-type", ctype), *extra, *cors]
        if isinstance(body, generate.EventStream):  # generate_stream: sent as it is produced
            await body.send_to(send, status, out_headers)
            return
        if isinstance(body, list):
            # A large binary response: send the parts as they are (no join copy).
            if not accept or accept.strip().lower() not in (b"gzip", b"deflate"):
                await self._send_parts(send, status, out_headers, body)
                return
            body = b"".join(body)
        if accept and len(body) >= _MIN_COMPRESS:
            body = _encoded(body, accept, out_headers)
        out_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": out_headers})
        await send({"type": "http.response.body", "body": body})

    def _screen(
        self, method: str, path: str, headers: dict[bytes, bytes]
    ) -> tuple[_Reply | None, list[tuple[bytes, bytes]]]:
        """Web-page screen, CORS preflight and token, before routing.

        Returns:
            ``(early, cors)``: ``early`` is the complete answer when the request goes no further
            (403 from a web page, a preflight, 401; its headers final), else None; ``cors`` the
            CORS headers every answer to this request carries (empty unless the Origin is on
            ``--allowed-origins``).
        """
        guard = self.guard
        refusal = guard.refusal(headers)
        if refusal is not None:
            return _early(403, refusal, _EMPTY), _EMPTY
        cors = _EMPTY
        origin = headers.get(b"origin") if guard.cors else None
        if origin is not None:
            cors = guard.cors_headers(origin)
            if cors and method == "OPTIONS" and b"access-control-request-method" in headers:
                return self._preflight(path, origin, headers), cors
        token = self.auth_token
        if (
            token is not None
            and path not in PUBLIC_HTTP_PATHS
            and not authorized(headers.get(b"authorization"), token)
        ):
            message = "unauthorized: send the header 'Authorization: Bearer <token>'"
            challenge = (b"www-authenticate", b'Bearer realm="nbinfer"')
            return _early(401, message, [challenge, *cors]), cors
        return None, cors

    def _preflight(self, path: str, origin: bytes, headers: dict[bytes, bytes]) -> _Reply:
        """A CORS preflight from an allowed origin: 200, empty, with the route's methods."""
        route = _route(path)
        if route is None:
            return _early(404, f"no route for {path}", self.guard.cors_headers(origin))
        out = self.guard.preflight_headers(
            origin, route[1], headers.get(b"access-control-request-headers")
        )
        out.append((b"content-length", b"0"))
        return 200, b"", b"", out

    async def _post(
        self, handler: _Handler, model: str, version: str, receive: Receive, headers: _Headers
    ) -> _Reply:
        """Read a POST body, held against the in-flight budget until its handler is done."""
        reservation = self.dp.inflight.reservation()
        limit, flag = self._body_limit(handler, headers)
        try:
            payload = await read_body(receive, headers, reservation, limit, flag)
            return await handler(self, model, version, payload, headers)
        finally:
            reservation.release()

    def _body_limit(self, handler: _Handler, headers: _Headers) -> tuple[int, str]:
        """The largest body this request may send, and the option that sets it.

        A body with binary tensor data (``Inference-Header-Content-Length``) is read as views;
        any other is parsed whole as JSON, holding the GIL: ``--max-json-bytes`` bounds that
        (a repository load, by what its uploads may take on top).
        """
        if _IHCL in headers:
            return self._any_body
        return self._load_body if handler is RestApp._load else self._json_body

    def _capped(self, limit: int, flag: str) -> tuple[int, str]:
        return (limit, flag) if limit < self._any_body[0] else self._any_body

    @staticmethod
    async def _send_parts(
        send: Send, status: int, headers: list[tuple[bytes, bytes]], parts: list[Any]
    ) -> None:
        views = [p if isinstance(p, bytes) else memoryview(p).cast("B") for p in parts]
        total = sum(len(v) for v in views)
        headers.append((b"content-length", str(total).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        last = len(views) - 1
        for i, v in enumerate(views):
            await send({"type": "http.response.body", "body": v, "more_body": i < last})

    # -- handlers: one per route, bound by :func:`_route` ------------------------------------
    async def _live(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Server liveness (``{"live": true}``; open without a token)."""
        # JSON bodies as KServe sends them (tritonclient reads only the status)
        return (200, _JSON, _LIVE, _EMPTY) if self.dp.live() else (503, _JSON, _NOT_LIVE, _EMPTY)

    async def _ready(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Server readiness."""
        up = self.dp.ready()
        return (200, _JSON, _READY, _EMPTY) if up else (503, _JSON, _NOT_READY, _EMPTY)

    async def _model_ready(
        self, model: str, version: str, body: bytes, headers: _Headers
    ) -> _Reply:
        """Whether a model (version) is ready to serve; an unknown one is 400, as on Triton."""
        try:
            up = self.dp.model_ready(model, version)
        except ModelNotFoundError as exc:
            return 400, _JSON, _error_body(exc.message), [(_NOT_FOUND_HEADER, b"1")]
        return _json_response({"name": model, "ready": up}, 200 if up else 503)

    async def _server_metadata(
        self, model: str, version: str, body: bytes, headers: _Headers
    ) -> _Reply:
        """Server metadata: name, version, extensions."""
        return _json_response(metadata_json.server_metadata_to_json(self.dp.server_metadata()))

    async def _model_metadata(
        self, model: str, version: str, body: bytes, headers: _Headers
    ) -> _Reply:
        """Model metadata: inputs, outputs, versions, platform."""
        meta = self.dp.model_metadata(model, version)
        return _json_response(metadata_json.model_metadata_to_json(meta))

    async def _config(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Model configuration (Triton's model_config as JSON)."""
        return _json_response(self.dp.model_config(model, version))

    async def _stats(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Inference statistics (Triton's statistics extension)."""
        return _json_response(self.dp.statistics(model, version))

    async def _repository_index(
        self, model: str, version: str, body: bytes, headers: _Headers
    ) -> _Reply:
        """List the models of the repository and their state."""
        req = await parse_off_loop(json_body, body)
        ready_only = bool(req.get("ready", False)) if isinstance(req, dict) else False
        index = self.dp.repository_index(ready_only=ready_only)
        return _json_response(metadata_json.repository_index_to_json(index))

    async def _load(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Load or reload a model (optional config and file overrides)."""
        self.dp.repository.check_remote_mode(model, "load")  # before decoding any upload
        config, files = await parse_off_loop(load_body, body)  # JSON + base64 of uploads
        await self.dp.load_model(model, config=config, files=files, remote=True)
        return 200, _JSON, b"", _EMPTY

    async def _unload(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Unload a model."""
        await parse_off_loop(json_body, body)
        await self.dp.unload_model(model, remote=True)
        return 200, _JSON, b"", _EMPTY

    # shared memory: ``region`` comes in the model slot, the kind (system / cuda) in the version's
    async def _shm_status(self, region: str, kind: str, body: bytes, headers: _Headers) -> _Reply:
        """Status of registered shared-memory regions."""
        return _json_response(self.dp.shm_status(kind, region, owner=self._caller()))

    async def _shm_register(self, region: str, kind: str, body: bytes, headers: _Headers) -> _Reply:
        """Register a shared-memory region."""
        fields = shm_body(await parse_off_loop(json_body, body))

        def register() -> None:  # opens the key and finds the owner: off the event loop
            self.dp.shm_register(kind, region, fields, owner=self._caller())

        await asyncio.to_thread(register)
        return 200, _JSON, b"", _EMPTY

    async def _shm_unregister(
        self, region: str, kind: str, body: bytes, headers: _Headers
    ) -> _Reply:
        """Unregister one or every shared-memory region."""
        self.dp.shm_unregister(kind, region, owner=self._caller())
        return 200, _JSON, b"", _EMPTY

    async def _metrics(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Prometheus metrics with Triton's names."""
        text = metrics_text(self.dp.statistics()["model_stats"])
        return 200, METRICS_CONTENT_TYPE, text, _EMPTY

    async def _logging(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Read or update the log settings (Triton's logging extension)."""
        update = settings_body(await parse_off_loop(json_body, body), "logging")
        if update:
            self.dp.repository.control.check_settings_update("log")
        return _json_response(LogSettings.update(update) if update else LogSettings.get())

    async def _trace(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Read or update the trace settings (nbinfer does not trace)."""
        update = settings_body(await parse_off_loop(json_body, body), "trace")
        if model:
            self.dp.model_metadata(model)  # an unknown model is a 404, as on Triton
        if update:
            self.dp.repository.control.check_settings_update("trace")
        return _json_response(trace_settings(model, update))

    # KServe v1
    async def _v1_live(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """KServe v1 liveness (``{"status": "alive"}``)."""
        return _json_response({"status": "alive" if self.dp.live() else "dead"})

    async def _v1_models(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """KServe v1: the ready model names."""
        models = sorted({m.name for m in self.dp.repository_index(ready_only=True)})
        return _json_response({"models": models})

    async def _v1_model(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """KServe v1 model status."""
        return _json_response(await self.v1.model(model))

    async def _v1_predict(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """KServe v1 predict: instances in, predictions out."""
        out_headers: dict[str, str] = {}
        answer = await self.v1.predict(
            model,
            await parse_off_loop(parse_body, body),
            headers=_HeaderView(headers),
            response_headers=out_headers,
        )
        return _with_headers(_json_response(answer), out_headers)

    async def _v1_explain(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """KServe v1 explain."""
        out_headers: dict[str, str] = {}
        answer = await self.v1.explain(
            model,
            await parse_off_loop(parse_body, body),
            headers=_HeaderView(headers),
            response_headers=out_headers,
        )
        return _with_headers(_json_response(answer), out_headers)

    async def _openapi(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """This API as an OpenAPI 3 document."""
        return 200, _JSON, self._docs_bodies()[0], _EMPTY

    async def _docs(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """This API as a web page (self-contained HTML, no script)."""
        return 200, b"text/html; charset=utf-8", self._docs_bodies()[1], _EMPTY

    def _docs_bodies(self) -> tuple[bytes, bytes]:
        """The OpenAPI JSON and the docs page, built on first use (the table never changes)."""
        if self._docs_cache is None:
            from nbinfer.server.openapi import build_document, docs_page

            document = build_document(ROUTES, version=self.dp.server_metadata().version)
            self._docs_cache = orjson.dumps(document), docs_page(document).encode()
        return self._docs_cache

    def _caller(self) -> str:
        """The owner identity of this request's connection (asked only for shared memory).

        Looked up once per request (kept in its scope), whatever the number of regions named.
        """
        scope = _SCOPE.get()
        identity: str | None = scope.get("nbinfer.owner")
        if identity is None:
            identity = self.dp.peers.of_addresses(scope.get("client"), scope.get("server"))
            scope["nbinfer.owner"] = identity
        return identity

    async def _infer(self, model: str, version: str, body: bytes, headers: _Headers) -> _Reply:
        """Run an inference (JSON, binary tensor data or a raw single-input body)."""
        raw_len = headers.get(_IHCL)
        header_length: int | None = None
        if raw_len is not None:
            try:
                header_length = int(raw_len)
            except ValueError as exc:
                raise InvalidInputError(
                    f"invalid Inference-Header-Content-Length {raw_len.decode('latin-1')!r}"
                ) from exc
            if header_length < 0 or header_length > len(body):
                raise InvalidInputError(
                    f"Inference-Header-Content-Length {header_length} is outside the body "
                    f"of {len(body)} bytes (truncated body?)"
                )
        binary: bool | set[str]
        heavy = len(body) >= _LARGE_BODY or (
            header_length != 0 and (header_length or len(body)) >= OFFLOAD_BYTES
        )
        if header_length == 0:
            request = (
                await off_loop(self._raw_request, model, version, body)
                if heavy
                else self._raw_request(model, version, body)
            )
            binary = True
        else:
            request = (
                await off_loop(codec.decode_request, body, header_length)
                if heavy
                else codec.decode_request(body, header_length)
            )
            binary = _binary_outputs(request)
        request.model_name = model
        request.model_version = version
        out_headers: dict[str, str] = {}
        response = await self.dp.infer(
            request, headers=_HeaderView(headers), response_headers=out_headers, caller=self._caller
        )
        parts, out_len = codec.encode_response_parts(response, binary_outputs=binary)
        out: Any
        if len(parts) == 1:
            out = parts[0]
        elif sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts) >= _SEND_PARTS:
            out = parts
        else:
            out = b"".join(parts)
        if out_len is None:
            reply: _Reply = 200, _JSON, out, _EMPTY
        else:
            reply = 200, _OCTET, out, [(_IHCL, str(out_len).encode())]
        return _with_headers(reply, out_headers) if out_headers else reply

    def _raw_request(self, model: str, version: str, body: bytes) -> InferRequest:
        """A body that is the one input of a single-input model (header length 0)."""
        spec = self.dp.model_spec(model, version)
        if len(spec.inputs) != 1:
            raise InvalidInputError(
                f"a raw binary body (Inference-Header-Content-Length: 0) needs a model with "
                f"exactly one input; model {model!r} has {len(spec.inputs)}: "
                f"{[i.name for i in spec.inputs]}"
            )
        inp = spec.inputs[0]
        return codec.decode_request(
            body, 0, raw_input_spec=(inp.name, inp.datatype, list(inp.shape))
        )


@dataclass(frozen=True, slots=True)
class Route:
    """One REST route: its path template, methods and handler (the one table of the surface).

    ``{model}`` / ``{version}`` / ``{region}`` are path arguments; ``{model}:predict`` a
    model name followed by a verb. The router and the OpenAPI document both read :data:`ROUTES`,
    so a route cannot be served without being documented, or documented without being served.
    """

    template: str
    methods: tuple[str, ...]
    handler: _Handler
    #: The handler's second argument when the path has no ``{version}`` (the shm kind).
    kind: str = ""
    #: The ``{model}`` argument may not contain ``:`` (KServe v1 separates verbs with it).
    no_colon: bool = False


def _routes() -> tuple[Route, ...]:
    app = RestApp
    table = [
        Route("/v2/models/{model}/infer", _POST, app._infer),
        Route("/v2/models/{model}/versions/{version}/infer", _POST, app._infer),
        Route("/v2/models/{model}/generate", _POST, generate.generate),
        Route("/v2/models/{model}/versions/{version}/generate", _POST, generate.generate),
        Route("/v2/models/{model}/generate_stream", _POST, generate.generate_stream),
        Route(
            "/v2/models/{model}/versions/{version}/generate_stream", _POST, generate.generate_stream
        ),
        Route("/v2/health/live", _GET, app._live),
        Route("/v2/health/ready", _GET, app._ready),
        Route("/v2", _GET, app._server_metadata),
        Route("/v2/models/stats", _GET, app._stats),
        Route("/v2/models/{model}", _GET, app._model_metadata),
        Route("/v2/models/{model}/versions/{version}", _GET, app._model_metadata),
        Route("/v2/models/{model}/ready", _GET, app._model_ready),
        Route("/v2/models/{model}/versions/{version}/ready", _GET, app._model_ready),
        Route("/v2/models/{model}/config", _GET, app._config),
        Route("/v2/models/{model}/versions/{version}/config", _GET, app._config),
        Route("/v2/models/{model}/stats", _GET, app._stats),
        Route("/v2/models/{model}/versions/{version}/stats", _GET, app._stats),
        Route("/v2/repository/index", _POST, app._repository_index),
        Route("/v2/repository/models/{model}/load", _POST, app._load),
        Route("/v2/repository/models/{model}/unload", _POST, app._unload),
    ]
    for kind in ("system", "cuda"):
        base = f"/v2/{kind}sharedmemory"
        table += [
            Route(f"{base}/status", _GET, app._shm_status, kind),
            Route(f"{base}/region/{{region}}/status", _GET, app._shm_status, kind),
            Route(f"{base}/region/{{region}}/register", _POST, app._shm_register, kind),
            Route(f"{base}/unregister", _POST, app._shm_unregister, kind),
            Route(f"{base}/region/{{region}}/unregister", _POST, app._shm_unregister, kind),
        ]
    table += [
        Route("/", _GET, app._v1_live),
        Route("/v1/models", _GET, app._v1_models),
        Route("/v1/models/{model}:predict", _POST, app._v1_predict),
        Route("/v1/models/{model}:explain", _POST, app._v1_explain),
        Route("/v1/models/{model}", _GET, app._v1_model, no_colon=True),
        Route("/metrics", _GET, app._metrics),
        Route("/v2/logging", _GET_POST, app._logging),
        Route("/v2/trace/setting", _GET_POST, app._trace),
        Route("/v2/models/{model}/trace/setting", _GET_POST, app._trace),
        Route("/v2/openapi.json", _GET, app._openapi),
        Route("/docs", _GET, app._docs),
    ]
    return tuple(table)


#: Every route the REST adapter serves, in matching order.
ROUTES = _routes()

# A compiled route: (literal segments by index, index of the first argument, its verb suffix,
# index of {version}, route); grouped by segment count.
_Compiled = tuple[tuple[tuple[int, str], ...], int, str, int, Route]


def _compile(routes: tuple[Route, ...]) -> dict[int, list[_Compiled]]:
    by_length: dict[int, list[_Compiled]] = {}
    for route in routes:
        parts = route.template.split("/")
        literals: list[tuple[int, str]] = []
        first, suffix, version = 0, "", 0
        for i, part in enumerate(parts):
            if not part.startswith("{"):
                literals.append((i, part))
            elif part.startswith("{version}"):
                version = i
            else:
                first, suffix = i, part.partition("}")[2]
        by_length.setdefault(len(parts), []).append(
            (tuple(literals), first, suffix, version, route)
        )
    return by_length


_BY_LENGTH = _compile(ROUTES)
_CACHE: dict[str, _Route] = {}
_CACHE_SIZE = 1024


def _route(path: str) -> _Route | None:
    """The handler serving ``path``, its methods and its path arguments (None: no route)."""
    hit = _CACHE.get(path)
    if hit is not None:
        return hit
    parts = path.split("/")
    if parts[-1] == "" and len(parts) > 2:
        parts.pop()
    for literals, first, suffix, version, route in _BY_LENGTH.get(len(parts), ()):
        for i, literal in literals:
            if parts[i] != literal:
                break
        else:
            model = parts[first] if first else ""
            if suffix:
                if not model.endswith(suffix):
                    continue
                model = model[: -len(suffix)]
            elif route.no_colon and ":" in model:
                continue
            found = (route.handler, route.methods, model, parts[version] if version else route.kind)
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.clear()
            _CACHE[path] = found
            return found
    return None


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
