"""The transport-neutral core both client faces stand on.

URL and configuration resolution, the protocol binding, the metadata cache, retries, and the
ops that build and send requests.

An *op* is a generator of transport calls (see :mod:`nbinfer.transports`): written once here and
driven by the sync face (:mod:`nbinfer.client.sync`) or the asyncio face
(:mod:`nbinfer.client.aio`). This module does no I/O and imports no engine: errors, config,
protocol and transports only (never the session, the server, pandas or IPython).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, TypeVar, cast

import numpy as np

from nbinfer.client.results import InferResult, InferSequence
from nbinfer.client.shm import SharedMemoryMode, SharedMemoryPool, is_loopback
from nbinfer.config import (
    Auth,
    BearerAuth,
    ClientConfig,
    Retries,
    Timeouts,
    TLSConfig,
    as_auth,
    local_server_token,
)
from nbinfer.errors import (
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    RemoteUnsupportedError,
    ServerError,
)
from nbinfer.protocol.dtypes import DATATYPES, datatype_of, numpy_dtype
from nbinfer.protocol.tensors import Destination, as_array
from nbinfer.protocol.types import (
    InferInput,
    InferRequest,
    ModelMetadata,
    ParamValue,
    RequestedOutput,
)
from nbinfer.transports import CallOptions, GrpcCall, Headers, HttpCall, HttpReply, Op
from nbinfer.transports.base import DefaultTransport, Transport

if TYPE_CHECKING:
    import httpx

    from nbinfer.protocol.grpc_binding import GrpcBinding
    from nbinfer.protocol.http_binding import HttpBinding

logger = logging.getLogger("nbinfer")

T = TypeVar("T")

#: The keywords of UnsupportedError, set anew when a call names itself and the server.
_UNSUPPORTED_KEYS = ("server", "version", "extension", "call")

#: What ``infer`` accepts as inputs.
Inputs = Mapping[str, Any] | Sequence[InferInput] | InferRequest
#: What ``infer`` accepts as ``outputs=``.
Outputs = Sequence[str | RequestedOutput] | str | None
#: ``callback(result, error)`` of ``async_infer`` / ``start_stream``.
Callback = Callable[[InferResult | None, NbinferError | None], None]


def check_timeout(timeout: object) -> float:
    """A per-call ``timeout`` as seconds: a positive finite number.

    Raises:
        InvalidInputError: Anything else (``None`` means "the client's default" and is never
            passed here).
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InvalidInputError(
            f"timeout must be a number of seconds (or None for the client's default), "
            f"got {timeout!r:.60}"
        )
    if not (0 < timeout < math.inf):
        raise InvalidInputError(
            f"timeout must be a positive, finite number of seconds, got {timeout}"
        )
    return float(timeout)


def _parse_url(url: str, protocol: str | None) -> tuple[str, str]:
    """Return ``(protocol, url)`` where protocol is ``"http"`` or ``"grpc"``."""
    if protocol is not None and protocol not in ("http", "grpc"):
        raise InvalidInputError(f"protocol must be 'http' or 'grpc', not {protocol!r}")
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    scheme = scheme.lower()
    if scheme not in ("", "http", "https", "grpc", "grpcs"):
        raise InvalidInputError(
            f"unsupported URL scheme {scheme!r} in {url!r}; use http(s):// or grpc(s)://"
        )
    if not rest:
        raise InvalidInputError(f"no host in URL {url!r}")
    proto = protocol or ("grpc" if scheme.startswith("grpc") else "http")
    secure = scheme in ("https", "grpcs")
    if proto == "http":
        return proto, ("https://" if secure else "http://") + rest.rstrip("/")
    return proto, ("grpcs://" if secure else "grpc://") + rest.rstrip("/")


def _tls_url(url: str) -> str:
    """``url`` with a TLS scheme: ``http://`` -> ``https://``, ``grpc://`` -> ``grpcs://``."""
    for plain, secure in (("http://", "https://"), ("grpc://", "grpcs://")):
        if url.startswith(plain):
            return secure + url[len(plain) :]
    return url


def _resolve_config(
    config: ClientConfig | None,
    *,
    timeout: float | Timeouts | None,
    retries: int | Retries | None,
    ssl: TLSConfig | bool | None,
    auth: Auth | tuple[str, str] | str | None,
    headers: Mapping[str, str] | None,
    binary: bool | None,
    compression: str | None,
    http2: bool | None,
) -> ClientConfig:
    cfg = config if config is not None else ClientConfig.from_env()
    changes: dict[str, Any] = {}
    if isinstance(timeout, Timeouts):
        changes["timeouts"] = timeout
    elif timeout is not None:
        changes["timeouts"] = dataclasses.replace(cfg.timeouts, total=float(timeout))
    if isinstance(retries, Retries):
        changes["retries"] = retries
    elif retries is not None:
        changes["retries"] = dataclasses.replace(cfg.retries, attempts=int(retries) + 1)
    if ssl is not None and not isinstance(ssl, bool | TLSConfig):
        raise InvalidInputError(
            f"ssl must be True, False, None or a TLSConfig, not {type(ssl).__name__} {ssl!r}"
        )
    if isinstance(ssl, TLSConfig):
        changes["tls"] = ssl
    elif ssl is True and cfg.tls is None:
        changes["tls"] = TLSConfig()
    if auth is not None:
        changes["auth"] = as_auth(auth)
    if headers is not None:
        changes["headers"] = {**cfg.headers, **headers}
    if binary is not None:
        changes["binary"] = binary
    if compression is not None:
        changes["compression"] = compression
    if http2 is not None:
        changes["http2"] = http2
    return dataclasses.replace(cfg, **changes) if changes else cfg


def _has_own_credentials(config: ClientConfig, httpx_client: Any) -> bool:
    """Whether the caller set ``Authorization``: through ``auth``, a header or httpx's own auth."""
    if config.auth is not None and "authorization" in config.auth.headers():
        return True
    if any(name.lower() == "authorization" for name in config.headers):
        return True
    if httpx_client is None:
        return False
    return getattr(httpx_client, "auth", None) is not None or "authorization" in getattr(
        httpx_client, "headers", {}
    )


def _requested_outputs(outputs: Outputs) -> list[RequestedOutput]:
    if outputs is None:
        return []
    if isinstance(outputs, str):
        outputs = [outputs]
    result: list[RequestedOutput] = []
    for out in outputs:
        if isinstance(out, RequestedOutput):
            result.append(out)
        elif isinstance(out, str):
            result.append(RequestedOutput(out))
        else:
            raise InvalidInputError(
                f"outputs must be names or RequestedOutput objects, not {type(out).__name__}"
            )
    return result


#: What NumPy makes unless told otherwise (``np.array([5.1, 3.5])``, ``np.array([1, 2])``):
#: arrays of these dtypes are sent as the model declares its input, value-safely.
_NUMPY_DEFAULTS: tuple[np.dtype[Any], ...] = (np.dtype(np.float64), np.dtype(np.int64))


def _needs_metadata(value: Any) -> bool:
    """True when the value is sent as the model declares it (lists, scalars, default arrays).

    A float64 / int64 array goes to an FP32 input as FP32 when no value changes
    (:func:`~nbinfer.protocol.tensors.conform`) and is refused here, before sending, otherwise.
    Arrays of any other dtype were typed on purpose: they go as they are (no metadata read).
    """
    if isinstance(value, InferInput):
        return False
    if isinstance(value, np.ndarray):
        return value.dtype in _NUMPY_DEFAULTS
    return not isinstance(value, (str, bytes, bytearray))


def _declared_dtypes(meta: ModelMetadata) -> dict[str, np.dtype[Any]]:
    """``{input: numpy dtype}`` of the inputs whose declared datatype is a numeric one."""
    return {
        s.name: numpy_dtype(s.datatype)
        for s in meta.inputs
        if s.datatype in DATATYPES and s.datatype != "BYTES"
    }


class _Core:
    """Everything both clients share: configuration, the binding, the metadata cache, ops.

    The constructor's arguments are documented once, on :class:`~nbinfer.client.Client`
    (``max_workers`` is the sync face's only: an AsyncClient runs concurrent calls as tasks).
    """

    #: The face's default HTTP engine: what ``http_engine=`` takes besides ``"httpx"``.
    _default_http_engine = ""
    #: The face a list of URLs builds (set by :mod:`nbinfer.client.replicas`, which builds on
    #: the faces and so cannot be imported by them).
    _replica_face: ClassVar[type[_Core] | None] = None

    def __new__(cls, url: str | Sequence[str] = "", *args: Any, **kwargs: Any) -> Self:
        face = cls._replica_face
        if not isinstance(url, str) and face is not None and not issubclass(cls, face):
            return cast(Self, object.__new__(face))  # Client([urls]): several replicas
        return object.__new__(cls)

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        protocol: str | None = None,
        config: ClientConfig | None = None,
        timeout: float | Timeouts | None = None,
        retries: int | Retries | None = None,
        ssl: TLSConfig | bool | None = None,
        auth: Auth | tuple[str, str] | str | None = None,
        headers: Mapping[str, str] | None = None,
        binary: bool | None = None,
        compression: str | None = None,
        http2: bool | None = None,
        max_workers: int = 8,
        transport: Transport | None = None,
        http_engine: str | None = None,
        httpx_client: httpx.Client | httpx.AsyncClient | None = None,
        shared_memory: SharedMemoryMode = "auto",
    ) -> None:
        if not isinstance(url, str):
            raise InvalidInputError(f"url must be a string, not {type(url).__name__}")
        self.protocol, self.url = _parse_url(url, protocol)
        self.config = _resolve_config(
            config,
            timeout=timeout,
            retries=retries,
            ssl=ssl,
            auth=auth,
            headers=headers,
            binary=binary,
            compression=compression,
            http2=http2,
        )
        if ssl is True or isinstance(ssl, TLSConfig):
            # ssl= asks for TLS: a plaintext scheme is upgraded, never kept (the TLS settings
            # would be dropped silently and the call would go out in clear text)
            self.url = _tls_url(self.url)
            if isinstance(ssl, TLSConfig) and httpx_client is not None:
                raise InvalidInputError(
                    "ssl=TLSConfig(...) cannot apply to your httpx_client: its own verify= / "
                    "cert= decide TLS; set them on the httpx client (the URL is https either "
                    "way), or drop httpx_client to let nbinfer make one from the TLSConfig"
                )
        if self.url.startswith(("https://", "grpcs://")) and self.config.tls is None:
            self.config = dataclasses.replace(self.config, tls=TLSConfig())
        if not _has_own_credentials(self.config, httpx_client):
            # no Authorization of the caller's own (auth=, an Authorization header,
            # NBINFER_TOKEN, an httpx client's auth): a local server this process started at
            # this exact address hands over its token
            token = local_server_token(self.url)
            if token is not None and self.config.auth is None:
                self.config = dataclasses.replace(self.config, auth=BearerAuth(token))
            elif token is not None:  # other credentials (an API-key header) travel alongside
                bearer = {**self.config.headers, "authorization": f"Bearer {token}"}
                self.config = dataclasses.replace(self.config, headers=bearer)
        self._binding: HttpBinding | GrpcBinding
        if self.protocol == "http":
            from nbinfer.protocol.http_binding import HttpBinding

            self._binding = HttpBinding(binary=self.config.binary)
        else:
            from nbinfer.protocol.grpc_binding import GrpcBinding

            self._binding = GrpcBinding()
        self._metadata: dict[tuple[str, str], ModelMetadata] = {}
        #: ``{input: dtype}`` declared by each model in ``_metadata`` (the fast path's check).
        self._dtypes: dict[tuple[str, str], dict[str, np.dtype[Any]]] = {}
        #: Models whose server gives no metadata: their data is sent as given.
        self._no_metadata: set[tuple[str, str]] = set()
        self._closed = False
        self._max_workers = max_workers
        if transport is not None and not isinstance(transport, Transport):
            raise InvalidInputError(
                "transport must build engines (engine() / async_engine(), see "
                f"nbinfer.transports.base.Transport), not {type(transport).__name__}"
            )
        if http_engine is not None or httpx_client is not None:
            from nbinfer.transports.httpx_engine import transport_for

            chosen = transport_for(
                http_engine,
                httpx_client,
                wire=self._wire,
                default=self._default_http_engine,
                transport=transport,
            )
            if chosen is not None:
                transport = chosen
            elif transport is None and http_engine == "pycurl":  # libcurl for every call
                transport = DefaultTransport(sockets=False)
        if shared_memory not in ("auto", True, False):
            raise InvalidInputError(
                f"shared_memory must be 'auto', True or False, not {shared_memory!r}"
            )
        #: The zero-copy local path (None: off; "auto" needs a loopback URL and no stand-in
        #: transport, since the regions must reach the server's /dev/shm)
        self._shm: SharedMemoryPool | None = None
        if shared_memory is True or (
            shared_memory == "auto" and transport is None and is_loopback(self.url)
        ):
            self._shm = SharedMemoryPool(shared_memory, url=self.url)
        self._open(transport if transport is not None else DefaultTransport())

    def _open(self, transport: Transport) -> None:
        """Take this face's engine from ``transport`` (the faces override it)."""
        raise NotImplementedError

    @property
    def _wire(self) -> Literal["http", "grpc"]:
        return "http" if self.protocol == "http" else "grpc"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, protocol={self.protocol!r})"

    # -- options and retries -------------------------------------------------------------

    @staticmethod
    def _opts(
        headers: Mapping[str, str] | None, timeout: float | None, request_id: str = ""
    ) -> CallOptions:
        if timeout is not None:
            timeout = check_timeout(timeout)
        return CallOptions(dict(headers) if headers else {}, timeout, request_id or None)

    @staticmethod
    def _retry_reply(call: HttpCall | GrpcCall, reply: Any) -> bool:
        if not (isinstance(call, HttpCall) and isinstance(reply, HttpReply)):
            return False
        return call.check and reply.status == 503

    def _log_retry(self, call: HttpCall | GrpcCall, attempt: int, why: object) -> float:
        delay = self.config.retries.delay(attempt)
        what = call.path if isinstance(call, HttpCall) else call.rpc
        logger.debug("retrying %s in %.3fs (attempt %d): %s", what, delay, attempt + 1, why)
        return delay

    # -- ops -----------------------------------------------------------------------------

    def _extension_op(self, call: str, op: Op[T]) -> Op[T]:
        """Run ``op``; a missing route / RPC becomes an error naming ``call`` and this server.

        The server's own answer (501, UNIMPLEMENTED, a route-level 404) is the ``__cause__``;
        other errors (an unknown model, bad input) pass unchanged.
        """
        try:
            return (yield from op)
        except RemoteUnsupportedError as exc:
            kept = {k: v for k, v in exc.context.items() if k not in _UNSUPPORTED_KEYS}
            raise RemoteUnsupportedError(
                f"{call}: the server at {self.url} ({self.protocol}) does not offer it "
                f"({exc.message})",
                status=exc.status,
                request_id=exc.request_id,
                server=self.url,
                **{**kept, "call": call},
            ) from exc

    def _model_metadata_op(self, name: str, version: str, opts: CallOptions) -> Op[ModelMetadata]:
        meta = yield from self._binding.model_metadata(name, version, opts)
        self._metadata[(name, version)] = meta
        self._dtypes[(name, version)] = _declared_dtypes(meta)
        self._no_metadata.discard((name, version))
        return meta

    def _cached_metadata(
        self, name: str, version: str, opts: CallOptions
    ) -> Op[ModelMetadata | None]:
        meta = self._metadata.get((name, version))
        if meta is not None or (name, version) in self._no_metadata:
            return meta
        try:
            meta = yield from self._model_metadata_op(
                name, version, CallOptions(dict(opts.headers), opts.timeout)
            )
        except ModelNotFoundError:
            raise
        except ServerError as exc:
            logger.debug("no metadata for %s; inferring datatypes from the data: %s", name, exc)
            self._no_metadata.add((name, version))
            return None
        return meta

    def _forget(self, name: str) -> None:
        for key in [k for k in self._metadata if k[0] == name]:
            self._metadata.pop(key, None)
            self._dtypes.pop(key, None)
        self._no_metadata -= {k for k in self._no_metadata if k[0] == name}

    def _request_from_inputs(
        self,
        model_name: str,
        inputs: Mapping[str, Any] | Sequence[InferInput],
        outputs: Outputs,
        model_version: str,
        request_id: str,
        opts: CallOptions,
    ) -> Op[InferRequest]:
        items: Iterable[tuple[str, Any]]
        if isinstance(inputs, Mapping):
            items = inputs.items()
        elif isinstance(inputs, (list, tuple)):
            if not all(isinstance(i, InferInput) for i in inputs):
                raise InvalidInputError(
                    "inputs must be a {name: data} mapping, a list of InferInput or an InferRequest"
                )
            items = [(i.name, i) for i in inputs]
        else:
            raise InvalidInputError(
                "inputs must be a {name: data} mapping, a list of InferInput or an "
                f"InferRequest, not {type(inputs).__name__}"
            )
        specs: dict[str, str] = {}
        items = list(items)
        needs = [_needs_metadata(v) for _, v in items]
        if any(needs):
            meta = yield from self._cached_metadata(model_name, model_version, opts)
            if meta is not None:
                specs = {s.name: s.datatype for s in meta.inputs}
        built: list[InferInput] = []
        for (name, value), need in zip(items, needs, strict=True):
            declared = specs.get(name) if need else None
            if isinstance(value, InferInput):
                built.append(value)
            elif (
                type(value) is np.ndarray
                and value.dtype.kind in "biuf"
                and value.dtype.isnative
                and (declared not in DATATYPES or declared == datatype_of(value.dtype))
            ):
                # the common case: a native numeric array that has the declared datatype
                built.append(InferInput(name, datatype_of(value.dtype), list(value.shape), value))
            else:  # as the model declares it, when no value changes (else refused, named)
                where = Destination(model_name, name)
                arr, datatype = as_array(value, declared if declared in DATATYPES else None, where)
                built.append(InferInput(name, datatype, list(arr.shape), arr))
        return InferRequest(
            built,
            _requested_outputs(outputs),
            id=request_id,
            model_name=model_name,
            model_version=model_version,
        )

    def _build_request_op(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        outputs: Outputs = None,
        model_version: str = "",
        request_id: str = "",
        parameters: Mapping[str, ParamValue] | None = None,
        priority: int | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool | None = None,
        sequence_end: bool = False,
        sequence: InferSequence | None = None,
        opts: CallOptions | None = None,
    ) -> Op[InferRequest]:
        if not model_name and not isinstance(inputs, InferRequest):
            raise InvalidInputError("a model name is required")
        opts = opts or CallOptions()
        if isinstance(inputs, InferRequest):
            request = dataclasses.replace(
                inputs,
                model_name=model_name or inputs.model_name,
                model_version=model_version or inputs.model_version,
                outputs=_requested_outputs(outputs) or list(inputs.outputs),
                id=request_id or inputs.id,
                parameters=dict(inputs.parameters),
            )
        else:
            request = yield from self._request_from_inputs(
                model_name, inputs, outputs, model_version, request_id, opts
            )
        params = request.parameters
        if parameters:
            params.update(parameters)
        if priority is not None:
            params["priority"] = int(priority)
        if sequence is not None:
            if sequence.ended:
                raise InvalidInputError(f"{sequence!r} has ended; start a new nbinfer.Sequence")
            sequence_id = sequence.id
            if sequence_start is None:
                sequence_start = not sequence.started
        if sequence_id is not None:
            params["sequence_id"] = sequence_id
            params["sequence_start"] = bool(sequence_start)
            params["sequence_end"] = bool(sequence_end)
        return request

    def _fast_call(
        self,
        model_name: str,
        inputs: Inputs,
        outputs: Outputs,
        model_version: str,
        request_id: str,
        timeout: float | None,
        binary: bool | None,
        retry: bool | None,
    ) -> HttpCall | GrpcCall | None:
        """The infer call for the common case (plain numeric arrays), without building an op.

        None when the request needs the general path (:meth:`_infer_op`).
        """
        if type(inputs) is not dict or (self._shm is not None and self._shm.wants(inputs)):
            return None
        if outputs is None:
            names: tuple[str, ...] = ()
        elif type(outputs) is str:
            names = (outputs,)
        elif type(outputs) in (list, tuple) and all(type(o) is str for o in outputs):
            names = tuple(cast("Sequence[str]", outputs))
        else:
            return None
        if not model_name or type(model_name) is not str or type(model_version) is not str:
            return None
        key: list[Any] = [model_name, model_version, names]
        arrays: list[Any] = []
        declared = self._dtypes.get((model_name, model_version))
        for name, value in inputs.items():
            if type(value) is not np.ndarray or type(name) is not str:
                return None
            dtype = value.dtype
            if dtype.kind not in "biuf" or not dtype.isnative:
                return None
            # float64 / int64 (_NUMPY_DEFAULTS), by two attribute reads: a dtype compare costs more
            if (
                dtype.itemsize == 8
                and dtype.kind in "fi"
                and (
                    declared.get(name, dtype) != dtype
                    if declared is not None
                    else (model_name, model_version) not in self._no_metadata
                )
            ):
                return None  # read the metadata once; converted (or refused) on the general path
            if not value.flags.c_contiguous:
                value = np.ascontiguousarray(value)
            key.append((name, dtype, value.shape))
            arrays.append(value)
        do_retry = self.config.retries.infer if retry is None else retry
        return self._binding.fast_infer_call(
            tuple(key), arrays, request_id, timeout, do_retry, binary
        )

    def _fast_result(self, model_name: str, reply: Any) -> InferResult:
        """The result of a :meth:`_fast_call`'s reply (outputs read when first asked for)."""
        view, headers = self._binding.fast_infer_reply(model_name, reply)
        return InferResult(view, headers)

    def _infer_op(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        headers: Mapping[str, str] | None,
        timeout: float | None,
        binary: bool | None,
        retry: bool | None,
        sequence: InferSequence | None,
        sequence_end: bool,
        **kwargs: Any,
    ) -> Op[InferResult]:
        opts = self._opts(headers, timeout, kwargs.get("request_id", ""))
        request = yield from self._build_request_op(
            model_name, inputs, sequence=sequence, sequence_end=sequence_end, opts=opts, **kwargs
        )
        do_retry = self.config.retries.infer if retry is None else retry

        def send(req: InferRequest) -> Op[tuple[Any, Headers]]:
            return self._binding.infer(req, opts, binary=binary, retry=do_retry)

        if self._shm is not None and self._shm.wants(request):
            result = yield from self._shm.infer(self._binding, request, opts, send)
        else:
            response, reply_headers = yield from send(request)
            result = InferResult(response, reply_headers)
        if sequence is not None:
            sequence.started = True
            sequence.ended = sequence.ended or sequence_end
        return result

    def _close_shm_op(self) -> Op[None]:
        """Unregister the shared-memory pool's regions (nothing when it never made one)."""
        if self._shm is None:
            return None
        yield from self._shm.close(self._binding, CallOptions())
        return None

    def _load_op(
        self,
        name: str,
        config: str | Mapping[str, Any] | None,
        files: Mapping[str, bytes] | None,
        opts: CallOptions,
    ) -> Op[None]:
        text = config if config is None or isinstance(config, str) else json.dumps(config)
        self._forget(name)
        yield from self._binding.load_model(name, text, files, opts)
        self._forget(name)
        return None

    def _unload_op(self, name: str, unload_dependents: bool, opts: CallOptions) -> Op[None]:
        self._forget(name)
        yield from self._binding.unload_model(name, unload_dependents, opts)
        return None

    def _require_grpc(self, what: str) -> GrpcBinding:
        if self.protocol != "grpc":
            raise NbinferError(
                f"{what} needs the gRPC protocol (ModelStreamInfer); this client speaks "
                f"{self.protocol} to {self.url}: use a grpc:// URL"
            )
        return cast("GrpcBinding", self._binding)
