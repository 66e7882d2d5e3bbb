"""The v2 REST binding: API calls mapped onto routes, request bodies and reply decoding (no I/O).

Each API call is an :data:`~nbinfer.protocol.calls.Op`: a generator that yields
:class:`~nbinfer.protocol.calls.HttpCall` objects for an engine (:mod:`nbinfer.transports`) to
perform and receives the :class:`~nbinfer.protocol.calls.HttpReply`. Wire encoding and decoding
(bodies, the lazy response reader) are :mod:`nbinfer.protocol.rest`'s; error statuses map onto
:mod:`nbinfer.errors` through :func:`~nbinfer.errors.error_for_status`.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson

from nbinfer.errors import (
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    ServerError,
    TransportError,
    error_for_status,
)
from nbinfer.protocol import rest, rest_metadata, v1
from nbinfer.protocol.calls import CallOptions, HttpCall, HttpReply, Op
from nbinfer.protocol.dtypes import datatype_of
from nbinfer.protocol.types import (
    InferInput,
    InferRequest,
    ModelMetadata,
    RepositoryModel,
    RequestedOutput,
)
from nbinfer.protocol.types import ServerMetadata as ServerMetadataT

__all__ = ["HttpBinding", "check_reply"]

logger = logging.getLogger("nbinfer")

_JSON = "application/json"
_OCTET = "application/octet-stream"
_HEADER_LENGTH = "inference-header-content-length"

_TEMPLATES = 256


def _model_path(name: str, version: str = "") -> str:
    if not name:
        raise InvalidInputError("a model name is required")
    path = "v2/models/" + quote(name, safe="")
    if version:
        path += "/versions/" + quote(str(version), safe="")
    return path


def _json_body(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def _error_message(reply: HttpReply) -> str:
    try:
        return rest.decode_error(reply.body)
    except Exception:
        text = reply.body[:2000].decode("utf-8", "replace").strip()
        return text or f"HTTP {reply.status}"


def check_reply(reply: HttpReply, request_id: str | None = None, **context: Any) -> HttpReply:
    """Raise the :mod:`nbinfer.errors` class for an error status (carrying the server message)."""
    if reply.status < 300:
        return reply
    raise error_for_status(reply.status, _error_message(reply), request_id=request_id, **context)


def _loads(reply: HttpReply) -> Any:
    if not reply.body:
        return {}
    try:
        return orjson.loads(reply.body)
    except orjson.JSONDecodeError as exc:
        raise TransportError(
            f"the server answered with invalid JSON (HTTP {reply.status}): {reply.body[:200]!r}"
        ) from exc


def _infer_reply(
    reply: HttpReply, request_id: str | None, model: str
) -> tuple[rest.ResponseReader, dict[str, str]]:
    """Check an ``infer`` reply and read it lazily; returns the reader and the reply headers."""
    check_reply(reply, request_id, model=model)
    raw_length = reply.headers.get(_HEADER_LENGTH)
    try:
        header_length = None if raw_length is None else int(raw_length)
    except ValueError as exc:
        raise InvalidInputError(
            f"the server sent an invalid {rest.HEADER_LENGTH} header: {raw_length!r:.40}"
        ) from exc
    return rest.ResponseReader(reply.body, header_length), reply.headers


class HttpBinding:
    """The v2 REST routes and bodies, as ops (generators of :class:`HttpCall`).

    Args:
        binary: Force binary tensor data on (``True``) or off (``False``); ``None`` uses it when
            the server lists the ``binary_tensor_data`` extension.
    """

    protocol = "http"

    def __init__(self, *, binary: bool | None = None) -> None:
        self.binary = binary
        self._extensions: list[str] | None = None
        self._templates: dict[Any, tuple[str, bytes, dict[str, str]]] = {}

    def fast_infer_call(
        self,
        key: tuple[Any, ...],
        arrays: list[Any],
        request_id: str,
        timeout: float | None,
        retry: bool,
        binary: bool | None = None,
    ) -> HttpCall | None:
        """The binary ``infer`` call for plain arrays, its JSON header cached per signature.

        Args:
            key: ``(model_name, model_version, output_names, *(name, dtype, shape))``; the
                arrays are native-endian numeric and C-contiguous, in the key's order.
            arrays: The input data.
            request_id: The request id ("" for none).
            timeout: Seconds allowed (None: the client's default).
            retry: Whether the call may be retried.
            binary: As for :meth:`infer`.

        Returns:
            The call, or None when the request needs the general path (JSON tensors, a request
            id, or the server's extensions are not known yet).
        """
        choice = binary if binary is not None else self.binary
        if choice is None:
            if self._extensions is None:
                return None
            choice = "binary_tensor_data" in self._extensions
        if not choice or request_id:
            return None
        template = self._templates.get(key)
        if template is None:
            try:
                request = InferRequest(
                    [
                        InferInput(name, datatype_of(dtype), list(shape), np.empty(shape, dtype))
                        for name, dtype, shape in key[3:]
                    ],
                    [RequestedOutput(name) for name in key[2]],
                    model_name=key[0],
                    model_version=key[1],
                )
                parts, header_length = rest.encode_request_parts(
                    request, binary=True, binary_outputs=True
                )
                path = _model_path(key[0], key[1]) + "/infer"
            except NbinferError:
                return None
            headers = {_HEADER_LENGTH: str(header_length), "content-type": _OCTET}
            template = (path, bytes(parts[0]), headers)
            if len(self._templates) >= _TEMPLATES:
                self._templates.clear()
            self._templates[key] = template
        path, head, headers = template
        body = b"".join([head, *arrays])
        return HttpCall("POST", path, body, headers, timeout, retry)

    @staticmethod
    def fast_infer_reply(
        model_name: str, reply: HttpReply
    ) -> tuple[rest.ResponseReader, dict[str, str]]:
        """Check and decode (lazily) the reply to a :meth:`fast_infer_call`."""
        return _infer_reply(reply, None, model_name)

    def _call(
        self, method: str, path: str, opts: CallOptions, body: Any = None, **kw: Any
    ) -> HttpCall:
        headers = dict(opts.headers)
        raw: bytes | None = None
        if body is not None:
            raw = body if isinstance(body, bytes) else _json_body(body)
            headers.setdefault("content-type", _JSON)
        return HttpCall(method, path, raw, headers, opts.timeout, request_id=opts.request_id, **kw)

    def _get_json(self, path: str, opts: CallOptions, **context: Any) -> Op[Any]:
        reply = yield self._call("GET", path, opts)
        return _loads(check_reply(reply, opts.request_id, **context))

    def _post_json(
        self, path: str, body: Any, opts: CallOptions, *, idempotent: bool = True, **context: Any
    ) -> Op[Any]:
        reply = yield self._call(
            "POST", path, opts, body if body is not None else {}, idempotent=idempotent
        )
        return _loads(check_reply(reply, opts.request_id, **context))

    def _health(self, path: str, opts: CallOptions) -> Op[bool]:
        reply = yield self._call("GET", path, opts, check=False)
        unknown = reply.status == 404 or (
            reply.status == 400 and rest.MODEL_NOT_FOUND_HEADER in reply.headers
        )  # nbinfer's server answers Triton's 400, marked as not found
        if unknown and path.startswith("v2/models/"):
            raise error_for_status(404, _error_message(reply), request_id=opts.request_id)
        return bool(reply.status == 200)

    # -- health and metadata -------------------------------------------------------------

    def server_live(self, opts: CallOptions) -> Op[bool]:
        """``GET v2/health/live``."""
        return self._health("v2/health/live", opts)

    def server_ready(self, opts: CallOptions) -> Op[bool]:
        """``GET v2/health/ready``."""
        return self._health("v2/health/ready", opts)

    def model_ready(self, name: str, version: str, opts: CallOptions) -> Op[bool]:
        """``GET v2/models/{m}[/versions/{v}]/ready`` (unknown model -> ModelNotFoundError)."""
        return self._health(_model_path(name, version) + "/ready", opts)

    def server_metadata(self, opts: CallOptions) -> Op[ServerMetadataT]:
        """``GET v2``."""
        data = yield from self._get_json("v2", opts)
        meta = rest_metadata.server_metadata_from_json(data)
        self._extensions = list(meta.extensions)
        return meta

    def model_metadata(self, name: str, version: str, opts: CallOptions) -> Op[ModelMetadata]:
        """``GET v2/models/{m}[/versions/{v}]``."""
        data = yield from self._get_json(_model_path(name, version), opts, model=name)
        return rest_metadata.model_metadata_from_json(data)

    def model_config(self, name: str, version: str, opts: CallOptions) -> Op[dict[str, Any]]:
        """``GET v2/models/{m}[/versions/{v}]/config``."""
        data = yield from self._get_json(_model_path(name, version) + "/config", opts, model=name)
        return dict(data)

    # -- inference -----------------------------------------------------------------------

    def _use_binary(self, binary: bool | None, opts: CallOptions) -> Op[bool]:
        choice = binary if binary is not None else self.binary
        if choice is not None:
            return choice
        if self._extensions is None:
            try:
                yield from self.server_metadata(CallOptions(dict(opts.headers), opts.timeout))
            except ServerError as exc:
                logger.debug("server metadata unavailable, assuming binary tensors: %s", exc)
                self._extensions = ["binary_tensor_data"]
        return "binary_tensor_data" in (self._extensions or ())

    def infer(
        self,
        request: InferRequest,
        opts: CallOptions,
        *,
        binary: bool | None = None,
        retry: bool = False,
    ) -> Op[tuple[rest.ResponseReader, dict[str, str]]]:
        """``POST v2/models/{m}[/versions/{v}]/infer``; returns the response and reply headers."""
        use_binary = yield from self._use_binary(binary, opts)
        body, header_length = rest.encode_request(
            request, binary=use_binary, binary_outputs=use_binary
        )
        headers = dict(opts.headers)
        if header_length is not None:
            headers["inference-header-content-length"] = str(header_length)
            headers["content-type"] = _OCTET
        else:
            headers["content-type"] = _JSON
        call = HttpCall(
            "POST",
            _model_path(request.model_name, request.model_version) + "/infer",
            body,
            headers,
            opts.timeout,
            idempotent=retry,
            request_id=request.id or None,
        )
        reply = yield call
        return _infer_reply(reply, request.id or None, request.model_name)

    # -- model repository ----------------------------------------------------------------

    def repository_index(self, ready_only: bool, opts: CallOptions) -> Op[list[RepositoryModel]]:
        """``POST v2/repository/index``."""
        data = yield from self._post_json("v2/repository/index", {"ready": ready_only}, opts)
        return rest_metadata.repository_index_from_json(data)

    def load_model(
        self,
        name: str,
        config: str | None,
        files: Mapping[str, bytes] | None,
        opts: CallOptions,
    ) -> Op[None]:
        """``POST v2/repository/models/{m}/load`` with an optional config and file overrides."""
        params: dict[str, Any] = {}
        if config is not None:
            params["config"] = config
        for path, content in (files or {}).items():
            key = path if path.startswith("file:") else "file:" + path
            params[key] = base64.b64encode(content).decode("ascii")
        body = {"parameters": params} if params else {}
        path = "v2/repository/models/" + quote(name, safe="") + "/load"
        yield from self._post_json(path, body, opts, idempotent=False, model=name)
        return None

    def unload_model(self, name: str, unload_dependents: bool, opts: CallOptions) -> Op[None]:
        """``POST v2/repository/models/{m}/unload``."""
        body = {"parameters": {"unload_dependents": unload_dependents}}
        path = "v2/repository/models/" + quote(name, safe="") + "/unload"
        yield from self._post_json(path, body, opts, idempotent=False, model=name)
        return None

    def statistics(self, name: str, version: str, opts: CallOptions) -> Op[dict[str, Any]]:
        """``GET v2/models[/{m}[/versions/{v}]]/stats``."""
        path = (_model_path(name, version) if name else "v2/models") + "/stats"
        data = yield from self._get_json(path, opts, model=name)
        return dict(data)

    # -- trace / log settings ------------------------------------------------------------

    def trace_settings(
        self, name: str, settings: Mapping[str, Any] | None, opts: CallOptions
    ) -> Op[dict[str, Any]]:
        """``GET|POST v2[/models/{m}]/trace/setting``."""
        path = (_model_path(name) if name else "v2") + "/trace/setting"
        if settings is None:
            data = yield from self._get_json(path, opts)
        else:
            data = yield from self._post_json(path, dict(settings), opts, idempotent=False)
        return dict(data)

    def log_settings(
        self, settings: Mapping[str, Any] | None, opts: CallOptions
    ) -> Op[dict[str, Any]]:
        """``GET|POST v2/logging``."""
        if settings is None:
            data = yield from self._get_json("v2/logging", opts)
        else:
            data = yield from self._post_json("v2/logging", dict(settings), opts, idempotent=False)
        return dict(data)

    # -- shared memory -------------------------------------------------------------------

    def shm_status(self, kind: str, name: str, opts: CallOptions) -> Op[list[dict[str, Any]]]:
        """``GET v2/{system,cuda}sharedmemory[/region/{r}]/status``."""
        path = f"v2/{kind}sharedmemory" + (f"/region/{quote(name, safe='')}" if name else "")
        data = yield from self._get_json(path + "/status", opts)
        if isinstance(data, dict):
            data = [data] if data else []
        return [dict(row) for row in data]

    def shm_register(
        self, kind: str, name: str, body: Mapping[str, Any], opts: CallOptions
    ) -> Op[None]:
        """``POST v2/{system,cuda}sharedmemory/region/{r}/register``."""
        path = f"v2/{kind}sharedmemory/region/{quote(name, safe='')}/register"
        if "raw_handle" in body and isinstance(body["raw_handle"], (bytes, bytearray)):
            body = {**body, "raw_handle": {"b64": base64.b64encode(body["raw_handle"]).decode()}}
        yield from self._post_json(path, dict(body), opts, idempotent=False)
        return None

    def shm_unregister(self, kind: str, name: str, opts: CallOptions) -> Op[None]:
        """``POST v2/{system,cuda}sharedmemory[/region/{r}]/unregister``."""
        path = f"v2/{kind}sharedmemory" + (f"/region/{quote(name, safe='')}" if name else "")
        yield from self._post_json(path + "/unregister", {}, opts, idempotent=False)
        return None

    # -- KServe v1 -------------------------------------------------------------------------

    def model_list(self, opts: CallOptions) -> Op[list[str]]:
        """KServe's model list: ``GET v2/models``, else ``GET v1/models`` (names only).

        Raises:
            ModelNotFoundError: Neither route exists (not a KServe server).
        """
        reply = yield self._call("GET", "v2/models", opts)
        if reply.status == 404:
            reply = yield self._call("GET", "v1/models", opts)
        data = _loads(check_reply(reply, opts.request_id))
        listed = data.get("models", []) if isinstance(data, dict) else []
        return [str(m.get("name", "")) if isinstance(m, dict) else str(m) for m in listed]

    def v1_call(self, name: str, verb: str, instances: Any, opts: CallOptions) -> Op[Any]:
        """``POST v1/models/{m}:predict`` / ``:explain``; returns the ``predictions``."""
        if not name:
            raise InvalidInputError("a model name is required")
        path = "v1/models/" + quote(name, safe="") + ":" + verb
        call = self._call("POST", path, opts, v1.encode_v1_request(instances), idempotent=False)
        reply = yield call
        if reply.status == 404:
            raise ModelNotFoundError(_error_message(reply), status=404, model=name)
        check_reply(reply, opts.request_id, model=name)
        if verb == "explain":
            return v1.decode_v1_explanation(reply.body)
        return v1.decode_v1_response(reply.body)
