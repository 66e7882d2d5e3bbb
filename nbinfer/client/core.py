"""v2 / Open Inference Protocol clients: :class:`Client` (sync) and :class:`AsyncClient` (asyncio).

Both faces share one core: every API call is written once as an *op* (a generator yielding
transport calls, see :mod:`nbinfer.transports`) and driven either by a blocking engine (pycurl,
grpcio) or an asyncio one (aiohttp, grpc.aio). The URL picks the protocol: ``http://`` /
``https://`` (or a bare ``host:port``) speak REST, ``grpc://`` / ``grpcs://`` speak gRPC.

Example::

    import numpy as np
    import nbinfer

    with nbinfer.Client("http://127.0.0.1:8000") as client:
        result = client.infer("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                          "INPUT1": np.ones((1, 16), np.float32)})
        print(result.as_numpy("OUTPUT0"))

The sync client is thread-safe and works inside a running event loop (a Jupyter cell): it does
no asyncio at all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import queue
import random
import threading
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from collections.abc import Sequence as SequenceABC
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import numpy as np

from nbinfer.config import Auth, ClientConfig, Retries, Timeouts, TLSConfig, as_auth
from nbinfer.errors import (
    ConnectError,
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    ServerError,
    ServerUnavailableError,
    TransportError,
)
from nbinfer.protocol.dtypes import datatype_of
from nbinfer.protocol.tensors import as_array
from nbinfer.protocol.types import (
    ClassificationResult,
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    Parameters,
    ParamValue,
    RepositoryModel,
    RequestedOutput,
    ServerMetadata,
)
from nbinfer.transports import CallOptions, GrpcCall, HttpCall, HttpReply, Op

if TYPE_CHECKING:
    from nbinfer.transports.grpc import GrpcBinding
    from nbinfer.transports.http import HttpBinding

__all__ = ["AsyncClient", "Client", "InferResult", "Sequence"]

logger = logging.getLogger("nbinfer")

T = TypeVar("T")

#: What ``infer`` accepts as inputs.
Inputs = Mapping[str, Any] | SequenceABC[InferInput] | InferRequest
#: What ``infer`` accepts as ``outputs=``.
Outputs = SequenceABC[str | RequestedOutput] | str | None
#: ``callback(result, error)`` of ``async_infer`` / ``start_stream``.
Callback = Callable[["InferResult | None", "NbinferError | None"], None]

_UINT63 = 2**63 - 1


# ---------------------------------------------------------------------------------------------
# Results and sequences


class _ResponseView(Protocol):
    """What an :class:`InferResult` reads: a reply whose outputs may be decoded on access."""

    names: list[str]

    @property
    def model_name(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def parameters(self) -> Parameters: ...
    def array(self, index: int) -> np.ndarray[Any, Any] | None: ...
    def output(self, index: int) -> InferOutput: ...
    def response(self) -> InferResponse: ...


class _Decoded:
    """A :class:`_ResponseView` over an already decoded :class:`InferResponse`."""

    __slots__ = ("_response", "names")

    def __init__(self, response: InferResponse) -> None:
        self._response = response
        self.names = [out.name for out in response.outputs]

    @property
    def model_name(self) -> str:
        return self._response.model_name

    @property
    def model_version(self) -> str:
        return self._response.model_version

    @property
    def id(self) -> str:
        return self._response.id

    @property
    def parameters(self) -> Parameters:
        return self._response.parameters

    def array(self, index: int) -> np.ndarray[Any, Any] | None:
        out = self._response.outputs[index]
        data = out.data
        if data is None:
            return None
        shape = tuple(out.shape)
        if data.shape != shape and data.size == int(np.prod(shape, dtype=np.int64)):
            data = data.reshape(shape)
        return data

    def output(self, index: int) -> InferOutput:
        return self._response.outputs[index]

    def response(self) -> InferResponse:
        return self._response


class InferResult:
    """The answer to one inference call.

    Outputs are decoded when first asked for (zero-copy views on the received bytes).

    Attributes:
        headers: The HTTP response headers (empty for gRPC).

    Example::

        result = client.infer("add_sub", inputs)
        result.as_numpy("OUTPUT0")      # or result["OUTPUT0"]
        result.output_names            # ["OUTPUT0", "OUTPUT1"]
    """

    __slots__ = ("_index", "_view", "headers")

    def __init__(
        self, response: InferResponse | _ResponseView, headers: Mapping[str, str] | None = None
    ) -> None:
        view = _Decoded(response) if isinstance(response, InferResponse) else response
        self._view: _ResponseView = view
        self.headers: dict[str, str] = headers if type(headers) is dict else dict(headers or {})
        self._index = {name: i for i, name in enumerate(view.names)}

    @property
    def response(self) -> InferResponse:
        """The decoded :class:`~nbinfer.InferResponse` (decodes every output)."""
        return self._view.response()

    @property
    def model_name(self) -> str:
        """The model that answered."""
        return self._view.model_name

    @property
    def model_version(self) -> str:
        """The model version that answered."""
        return self._view.model_version

    @property
    def id(self) -> str:
        """The request id echoed by the server."""
        return self._view.id

    @property
    def parameters(self) -> Parameters:
        """Response parameters."""
        return self._view.parameters

    @property
    def outputs(self) -> list[InferOutput]:
        """The output tensors, in the server's order."""
        return self._view.response().outputs

    @property
    def output_names(self) -> list[str]:
        """The output names."""
        return list(self._index)

    def _position(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            known = ", ".join(self._index) or "none"
            raise InvalidInputError(
                f"model {self.model_name!r} returned no output {name!r}; outputs: {known}",
                model=self.model_name,
                tensor=name,
            ) from None

    def get_output(self, name: str) -> InferOutput:
        """The output tensor ``name`` with its datatype, shape and parameters.

        Raises:
            InvalidInputError: No output of that name (the message lists the known ones).
        """
        return self._view.output(self._position(name))

    def as_numpy(self, name: str) -> np.ndarray[Any, Any]:
        """The output ``name`` as a numpy array (BYTES: an object array of ``bytes``).

        Fixed-width outputs are zero-copy, read-only views on the received bytes; use
        ``.copy()`` to modify one.

        Raises:
            InvalidInputError: No output of that name, or it was written to shared memory.
        """
        index = self._index.get(name)
        if index is None:
            index = self._position(name)
        data = self._view.array(index)
        if data is None:
            out = self._view.output(index)
            region = out.parameters.get("shared_memory_region", "?")
            raise InvalidInputError(
                f"output {name!r} was written to shared-memory region {region!r}; read it there",
                tensor=name,
            )
        return data

    def as_classification(self, name: str) -> list[list[ClassificationResult]]:
        """Decode an output requested with ``class_count`` into rows of ClassificationResult."""
        from nbinfer.protocol.classification import decode_classification

        rows: list[list[ClassificationResult]] = decode_classification(self.as_numpy(name))
        return rows

    def as_dict(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every output as ``{name: array}``."""
        return {name: self.as_numpy(name) for name in self._index}

    def to_dataframe(
        self,
        *,
        labels: Mapping[str, SequenceABC[str]] | None = None,
        index: Any = None,
        expand: bool = True,
        classified: SequenceABC[str] = (),
    ) -> Any:
        """The outputs as a pandas DataFrame, one row per batch element.

        ``[n, k]`` outputs become ``k`` columns ``<output>[<label or index>]`` (one column of
        arrays with ``expand=False``); outputs named in ``classified`` (asked for with
        ``class_count``) become ``label`` / ``score`` columns. Also available as
        ``as_dataframe`` (KServe's name). See :mod:`nbinfer.interop.pandas`.
        """
        from nbinfer.interop.pandas import outputs_to_dataframe

        return outputs_to_dataframe(
            self.outputs, labels=labels, index=index, expand=expand, classified=classified
        )

    as_dataframe = to_dataframe

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        return self.as_numpy(name)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __repr__(self) -> str:
        outs = ", ".join(
            f"{o.name}: {o.datatype}{list(o.shape)}"
            for o in (self._view.output(i) for i in self._index.values())
        )
        return f"InferResult(model={self.model_name!r}, id={self.id!r}, outputs=[{outs}])"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.notebook.display import mimebundle  # the one lazy edge into notebook/

        return mimebundle(self)


class Sequence:
    """A stateful-model sequence: carries the correlation id (and start flag) across calls.

    Example::

        seq = nbinfer.Sequence()            # a random id; or Sequence(42) / Sequence("abc")
        client.infer("acc", x1, sequence=seq)                     # sends sequence_start
        client.infer("acc", x2, sequence=seq, sequence_end=True)  # sends sequence_end
    """

    __slots__ = ("ended", "id", "started")

    def __init__(self, id: int | str | None = None) -> None:
        self.id: int | str = random.randint(1, _UINT63) if id is None else id
        self.started = False
        self.ended = False

    def __repr__(self) -> str:
        return f"Sequence(id={self.id!r}, started={self.started}, ended={self.ended})"


# ---------------------------------------------------------------------------------------------
# The shared core (no I/O)


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


def _needs_metadata(value: Any) -> bool:
    """True when the value's datatype is ambiguous without the model's metadata."""
    if isinstance(value, InferInput):
        return False
    if isinstance(value, np.ndarray):
        return False
    return not isinstance(value, (str, bytes, bytearray))


class _Core:
    """Everything both clients share: configuration, the binding, the metadata cache, ops."""

    def __init__(
        self,
        url: str,
        *,
        protocol: str | None,
        config: ClientConfig | None,
        timeout: float | Timeouts | None,
        retries: int | Retries | None,
        ssl: TLSConfig | bool | None,
        auth: Auth | tuple[str, str] | str | None,
        headers: Mapping[str, str] | None,
        binary: bool | None,
        compression: str | None,
        http2: bool | None,
    ) -> None:
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
        if ssl is True:
            self.url = self.url.replace("http://", "https://").replace("grpc://", "grpcs://")
        if self.url.startswith(("https://", "grpcs://")) and self.config.tls is None:
            self.config = dataclasses.replace(self.config, tls=TLSConfig())
        self._binding: HttpBinding | GrpcBinding
        if self.protocol == "http":
            from nbinfer.transports.http import HttpBinding

            self._binding = HttpBinding(binary=self.config.binary)
        else:
            from nbinfer.transports.grpc import GrpcBinding

            self._binding = GrpcBinding()
        self._metadata: dict[tuple[str, str], ModelMetadata] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, protocol={self.protocol!r})"

    # -- options and retries -------------------------------------------------------------

    @staticmethod
    def _opts(
        headers: Mapping[str, str] | None, timeout: float | None, request_id: str = ""
    ) -> CallOptions:
        return CallOptions(dict(headers) if headers else {}, timeout, request_id or None)

    def _attempts(self, call: HttpCall | GrpcCall) -> int:
        return self.config.retries.attempts if call.idempotent else 1

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

    def _model_metadata_op(self, name: str, version: str, opts: CallOptions) -> Op[ModelMetadata]:
        meta = yield from self._binding.model_metadata(name, version, opts)
        self._metadata[(name, version)] = meta
        return meta

    def _cached_metadata(
        self, name: str, version: str, opts: CallOptions
    ) -> Op[ModelMetadata | None]:
        meta = self._metadata.get((name, version))
        if meta is not None:
            return meta
        try:
            meta = yield from self._model_metadata_op(
                name, version, CallOptions(dict(opts.headers), opts.timeout)
            )
        except ModelNotFoundError:
            raise
        except ServerError as exc:
            logger.debug("no metadata for %s; inferring datatypes from the data: %s", name, exc)
            return None
        return meta

    def _forget(self, name: str) -> None:
        for key in [k for k in self._metadata if k[0] == name]:
            self._metadata.pop(key, None)

    def _request_from_inputs(
        self,
        model_name: str,
        inputs: Mapping[str, Any] | SequenceABC[InferInput],
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
            if isinstance(value, InferInput):
                built.append(value)
            elif type(value) is np.ndarray and value.dtype.kind in "biuf" and value.dtype.isnative:
                # the common case: a native numeric array says its own datatype
                built.append(InferInput(name, datatype_of(value.dtype), list(value.shape), value))
            else:
                arr, datatype = as_array(value, specs.get(name) if need else None)
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
        sequence: Sequence | None = None,
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
                raise InvalidInputError(f"{sequence!r} has ended; start a new Sequence")
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
        inputs: dict[str, Any],
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
        if outputs is None:
            names: tuple[str, ...] = ()
        elif type(outputs) is str:
            names = (outputs,)
        elif type(outputs) in (list, tuple) and all(type(o) is str for o in outputs):
            names = tuple(cast("SequenceABC[str]", outputs))
        else:
            return None
        if not model_name or type(model_name) is not str or type(model_version) is not str:
            return None
        key: list[Any] = [model_name, model_version, names]
        arrays: list[Any] = []
        for name, value in inputs.items():
            if type(value) is not np.ndarray or type(name) is not str:
                return None
            dtype = value.dtype
            if dtype.kind not in "biuf" or not dtype.isnative:
                return None
            if not value.flags.c_contiguous:
                value = np.ascontiguousarray(value)
            key.append((name, dtype, value.shape))
            arrays.append(value)
        do_retry = self.config.retries.infer if retry is None else retry
        return self._binding.fast_infer_call(
            tuple(key), arrays, request_id, timeout, do_retry, binary
        )

    def _infer_op(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        headers: Mapping[str, str] | None,
        timeout: float | None,
        binary: bool | None,
        retry: bool | None,
        sequence: Sequence | None,
        sequence_end: bool,
        **kwargs: Any,
    ) -> Op[InferResult]:
        opts = self._opts(headers, timeout, kwargs.get("request_id", ""))
        request = yield from self._build_request_op(
            model_name, inputs, sequence=sequence, sequence_end=sequence_end, opts=opts, **kwargs
        )
        do_retry = self.config.retries.infer if retry is None else retry
        response, reply_headers = yield from self._binding.infer(
            request, opts, binary=binary, retry=do_retry
        )
        if sequence is not None:
            sequence.started = True
            sequence.ended = sequence.ended or sequence_end
        return InferResult(response, reply_headers)

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


# ---------------------------------------------------------------------------------------------
# The sync face


class Client(_Core):
    """Blocking v2 client over HTTP (pycurl) or gRPC (grpcio); thread-safe.

    Args:
        url: ``http(s)://host:port``, ``grpc(s)://host:port`` or a bare ``host:port`` (HTTP).
        protocol: ``"http"`` or ``"grpc"``, overriding the URL scheme.
        config: A :class:`~nbinfer.config.ClientConfig` (default: from ``NBINFER_*`` env).
        timeout: Seconds per call (or a :class:`~nbinfer.config.Timeouts`).
        retries: Number of retries (or a :class:`~nbinfer.config.Retries`).
        ssl: ``True`` for TLS with defaults, or a :class:`~nbinfer.config.TLSConfig`.
        auth: An :class:`~nbinfer.config.Auth`, a ``(user, password)`` pair or a bearer token.
        headers: Headers (HTTP) / metadata (gRPC) sent with every call.
        binary: HTTP: force binary tensor data on/off (default: use it when the server can).
        compression: ``"gzip"`` to compress requests.
        http2: HTTP: negotiate HTTP/2.
        max_workers: Threads behind :meth:`async_infer`.

    Example::

        with nbinfer.Client("grpc://127.0.0.1:8001") as client:
            client.is_server_ready()
    """

    def __init__(
        self,
        url: str,
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
    ) -> None:
        super().__init__(
            url,
            protocol=protocol,
            config=config,
            timeout=timeout,
            retries=retries,
            ssl=ssl,
            auth=auth,
            headers=headers,
            binary=binary,
            compression=compression,
            http2=http2,
        )
        self._engine: Any
        if self.protocol == "http":
            from nbinfer.transports.http import CurlEngine

            self._engine = CurlEngine(self.url, self.config)
        else:
            from nbinfer.transports.grpc import GrpcEngine

            self._engine = GrpcEngine(self.url, self.config)
        self._max_workers = max_workers
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._stream: _SyncStream | None = None

    # -- driver --------------------------------------------------------------------------

    def _perform(self, call: HttpCall | GrpcCall) -> Any:
        if isinstance(call, HttpCall):
            return self._engine.request(
                call.method, call.path, call.body, call.headers, timeout=call.timeout
            )
        return self._engine.call(call)

    def _execute(self, call: HttpCall | GrpcCall) -> Any:
        attempts = self._attempts(call)
        attempt = 1
        while True:
            try:
                reply = self._perform(call)
            except (ConnectError, ServerUnavailableError) as exc:
                if attempt >= attempts:
                    raise
                time.sleep(self._log_retry(call, attempt, exc))
            else:
                if attempt >= attempts or not self._retry_reply(call, reply):
                    return reply
                time.sleep(self._log_retry(call, attempt, "HTTP 503"))
            attempt += 1

    def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                try:
                    reply = self._execute(call)
                except NbinferError as exc:
                    call = op.throw(exc)
                else:
                    call = op.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    # -- lifecycle -----------------------------------------------------------------------

    def _abort_in_flight(self) -> None:
        """Abort the HTTP transfers in flight on ``async_infer`` threads (after an interrupt).

        gRPC calls on those threads run to their end.
        """
        abort = getattr(self._engine, "abort_in_flight", None)
        if abort is not None:
            abort()

    def close(self) -> None:
        """Stop any stream, the ``async_infer`` threads and the connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._stream is not None:
            self.stop_stream(cancel_requests=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        self._engine.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- health and metadata -------------------------------------------------------------

    def is_server_live(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> bool:
        """Whether the server is live."""
        return self._run(self._binding.server_live(self._opts(headers, timeout)))

    def is_server_ready(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> bool:
        """Whether the server is ready."""
        return self._run(self._binding.server_ready(self._opts(headers, timeout)))

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether the model (version) is ready.

        Raises:
            ModelNotFoundError: The server does not know the model.
        """
        opts = self._opts(headers, timeout)
        return self._run(self._binding.model_ready(model_name, model_version, opts))

    def get_server_metadata(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> ServerMetadata:
        """Server name, version and extensions."""
        return self._run(self._binding.server_metadata(self._opts(headers, timeout)))

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> ModelMetadata:
        """The model's versions, platform and input / output specs (refreshes the cache)."""
        opts = self._opts(headers, timeout)
        return self._run(self._model_metadata_op(model_name, model_version, opts))

    def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The model configuration as (Triton-shaped) JSON."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.model_config(model_name, model_version, opts))

    # -- inference -----------------------------------------------------------------------

    def build_request(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> InferRequest:
        """Build the :class:`~nbinfer.InferRequest` that :meth:`infer` would send."""
        opts = self._opts(headers, timeout)
        return self._run(self._build_request_op(model_name, inputs, opts=opts, **kwargs))

    def infer(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        outputs: Outputs = None,
        model_version: str = "",
        request_id: str = "",
        parameters: Mapping[str, ParamValue] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        priority: int | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool | None = None,
        sequence_end: bool = False,
        sequence: Sequence | None = None,
        binary: bool | None = None,
        retry: bool | None = None,
    ) -> InferResult:
        """Run inference on ``model_name``.

        Args:
            model_name: The model.
            inputs: ``{name: data}`` (numpy arrays, lists, scalars, str/bytes), a list of
                :class:`~nbinfer.InferInput`, or an :class:`~nbinfer.InferRequest`. When the
                datatype of plain Python data is ambiguous it comes from the model metadata.
            outputs: Output names or :class:`~nbinfer.RequestedOutput` (``class_count`` for
                the classification extension); default: all outputs.
            model_version: A specific version ("" = the server's policy).
            request_id: Echoed back in ``result.id``.
            parameters: Extra request parameters.
            headers: Extra headers / metadata for this call.
            timeout: Seconds allowed for this call (default: the client's total timeout).
            priority: Scheduling priority (schedule_policy extension).
            sequence_id: Correlation id of a stateful sequence (int or str).
            sequence_start: Marks the first request of the sequence.
            sequence_end: Marks the last request of the sequence.
            sequence: A :class:`Sequence` carrying the id and start flag across calls.
            binary: HTTP only: force binary tensor data on or off for this call.
            retry: Retry on connection errors / 503 (default: ``config.retries.infer``).

        Returns:
            The :class:`InferResult`.

        Raises:
            InvalidInputError: Bad inputs (locally, or ``RemoteInvalidInputError`` from the
                server).
            ModelNotFoundError: Unknown model or version.
            ServerError: Any other server error (most specific subclass).
            TransportError: ``ConnectError`` / ``TimeoutError`` / other transport failures.
        """
        if (
            type(inputs) is dict
            and headers is None
            and parameters is None
            and priority is None
            and sequence is None
            and sequence_id is None
            and sequence_start is None
            and not sequence_end
        ):
            call = self._fast_call(
                model_name, inputs, outputs, model_version, request_id, timeout, binary, retry
            )
            if call is not None:
                view, reply_headers = self._binding.fast_infer_reply(
                    model_name, self._execute(call)
                )
                return InferResult(view, reply_headers)
        op = self._infer_op(
            model_name,
            inputs,
            headers=headers,
            timeout=timeout,
            binary=binary,
            retry=retry,
            sequence=sequence,
            sequence_end=sequence_end,
            outputs=outputs,
            model_version=model_version,
            request_id=request_id,
            parameters=parameters,
            priority=priority,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
        )
        return self._run(op)

    def async_infer(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        callback: Callback | None = None,
        **kwargs: Any,
    ) -> concurrent.futures.Future[InferResult]:
        """Run :meth:`infer` on a worker thread; returns a ``concurrent.futures.Future``.

        Args:
            model_name: The model.
            inputs: As for :meth:`infer`.
            callback: Called as ``callback(result, None)`` or ``callback(None, error)`` when the
                call completes (on the worker thread).
            **kwargs: Any keyword argument of :meth:`infer`.
        """
        if self._closed:
            raise TransportError("the client is closed")
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._max_workers, thread_name_prefix="nbinfer-infer"
                )
        future = self._executor.submit(self.infer, model_name, inputs, **kwargs)
        if callback is not None:
            future.add_done_callback(lambda f: _complete(f, callback))
        return future

    # -- streaming (gRPC) ----------------------------------------------------------------

    def start_stream(
        self,
        callback: Callback,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Open a gRPC ``ModelStreamInfer`` stream; replies go to ``callback(result, error)``.

        Raises:
            NbinferError: Not a gRPC client, or a stream is already open.
        """
        self._require_grpc("start_stream")
        with self._lock:
            if self._stream is not None:
                raise NbinferError("a stream is already open; call stop_stream() first")
            self._stream = _SyncStream(self, callback, headers, timeout)

    def stream_infer(
        self,
        model_name: str,
        inputs: Inputs,
        **kwargs: Any,
    ) -> None:
        """Send one request on the open stream (same arguments as :meth:`infer`).

        The reply arrives through the ``start_stream`` callback; match it with ``request_id``.
        """
        stream = self._stream
        if stream is None:
            raise NbinferError("no open stream; call start_stream(callback) first")
        sequence: Sequence | None = kwargs.pop("sequence", None)
        sequence_end = bool(kwargs.pop("sequence_end", False))
        for key in ("headers", "timeout", "binary", "retry"):
            kwargs.pop(key, None)
        request = self._run(
            self._build_request_op(
                model_name, inputs, sequence=sequence, sequence_end=sequence_end, **kwargs
            )
        )
        if sequence is not None:
            sequence.started = True
            sequence.ended = sequence.ended or sequence_end
        stream.send(self._require_grpc("stream_infer").stream_request(request))

    def stop_stream(self, *, cancel_requests: bool = False) -> None:
        """Close the stream, waiting for outstanding replies unless ``cancel_requests``."""
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.stop(cancel=cancel_requests)

    # -- model repository ----------------------------------------------------------------

    def get_model_repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[RepositoryModel]:
        """The models of the repository with their state."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.repository_index(ready_only, opts))

    def load_model(
        self,
        model_name: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Load (or reload) a model, optionally overriding its config and files.

        Args:
            model_name: The model.
            config: A model config (JSON text or a dict) overriding the repository's.
            files: ``{"<version>/<file>": content}`` overriding the model's files.
            headers: Extra headers / metadata.
            timeout: Seconds allowed.
        """
        opts = self._opts(headers, timeout)
        self._run(self._load_op(model_name, config, files, opts))

    def unload_model(
        self,
        model_name: str,
        *,
        unload_dependents: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unload a model."""
        opts = self._opts(headers, timeout)
        self._run(self._unload_op(model_name, unload_dependents, opts))

    def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Statistics (Triton JSON ``{"model_stats": [...]}``); all models when no name."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.statistics(model_name, model_version, opts))

    # -- trace and log settings ----------------------------------------------------------

    def get_trace_settings(
        self,
        model_name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Trace settings (global, or of one model)."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.trace_settings(model_name, None, opts))

    def update_trace_settings(
        self,
        model_name: str = "",
        settings: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Update trace settings (a ``None`` value resets one); returns the new settings."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.trace_settings(model_name, dict(settings or {}), opts))

    def get_log_settings(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Log settings."""
        return self._run(self._binding.log_settings(None, self._opts(headers, timeout)))

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Update log settings; returns the new settings."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.log_settings(dict(settings), opts))

    # -- shared memory -------------------------------------------------------------------

    def get_system_shared_memory_status(
        self,
        region_name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Registered system shared-memory regions (all, or one)."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.shm_status("system", region_name, opts))

    def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register a system shared-memory region."""
        body = {"key": key, "offset": offset, "byte_size": byte_size}
        self._run(self._binding.shm_register("system", name, body, self._opts(headers, timeout)))

    def unregister_system_shared_memory(
        self,
        name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister one system shared-memory region (all when no name)."""
        self._run(self._binding.shm_unregister("system", name, self._opts(headers, timeout)))

    def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Registered CUDA shared-memory regions (all, or one)."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.shm_status("cuda", region_name, opts))

    def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register a CUDA shared-memory region (``raw_handle``: a cudaIpcMemHandle_t)."""
        body = {"raw_handle": raw_handle, "device_id": device_id, "byte_size": byte_size}
        self._run(self._binding.shm_register("cuda", name, body, self._opts(headers, timeout)))

    def unregister_cuda_shared_memory(
        self,
        name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister one CUDA shared-memory region (all when no name)."""
        self._run(self._binding.shm_unregister("cuda", name, self._opts(headers, timeout)))

    # -- KServe v1 -------------------------------------------------------------------------

    def list_models(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> list[str]:
        """KServe's model list (``GET v2/models``, else ``v1/models``): names only, REST only.

        Raises:
            ModelNotFoundError: The server has neither route.
            UnsupportedError: A gRPC client (the list is REST only).
        """
        return self._run(self._binding.model_list(self._opts(headers, timeout)))

    def predict(
        self,
        model_name: str,
        instances: Any,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """KServe v1 ``:predict``: send ``{"instances": ...}``, return the ``predictions``."""
        opts = self._opts(headers, timeout)
        return self._run(self._binding.v1_call(model_name, "predict", instances, opts))

    def explain(
        self,
        model_name: str,
        instances: Any,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """KServe v1 ``:explain``: the explainer's whole JSON answer (e.g. ``explanations``).

        Raises:
            ModelNotFoundError: unknown model, or it has no explainer.
        """
        opts = self._opts(headers, timeout)
        return self._run(self._binding.v1_call(model_name, "explain", instances, opts))


def _complete(future: concurrent.futures.Future[InferResult], callback: Callback) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    try:
        if exc is None:
            callback(future.result(), None)
        elif isinstance(exc, NbinferError):
            callback(None, exc)
        else:
            callback(None, TransportError(f"inference failed: {exc!r}"))
    except Exception:
        logger.exception("async_infer callback raised")


_STOP = object()


class _SyncStream:
    """One open ModelStreamInfer stream of a sync client: a request queue and a reader thread."""

    def __init__(
        self,
        client: Client,
        callback: Callback,
        headers: Mapping[str, str] | None,
        timeout: float | None,
    ) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._callback = callback
        self._binding = client._require_grpc("start_stream")
        self._cancelled = False
        metadata = tuple((k.lower(), v) for k, v in (headers or {}).items())
        self._call = client._engine.stream(self._requests(), timeout=timeout, metadata=metadata)
        self._target = client.url
        self._thread = threading.Thread(target=self._read, name="nbinfer-stream", daemon=True)
        self._thread.start()

    def _requests(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            yield item

    def send(self, message: Any) -> None:
        self._queue.put(message)

    def _deliver(self, result: InferResult | None, error: NbinferError | None) -> None:
        try:
            self._callback(result, error)
        except Exception:
            logger.exception("stream callback raised")

    def _read(self) -> None:
        import grpc

        from nbinfer.transports.grpc import map_rpc_error

        try:
            for reply in self._call:
                try:
                    result = InferResult(self._binding.stream_reply(reply))
                except NbinferError as exc:
                    self._deliver(None, exc)
                else:
                    self._deliver(result, None)
        except grpc.RpcError as exc:
            if not self._cancelled:
                self._deliver(None, map_rpc_error(exc, self._target))

    def stop(self, *, cancel: bool) -> None:
        self._queue.put(_STOP)
        if cancel:
            self._cancelled = True
            self._call.cancel()
        self._thread.join()


# ---------------------------------------------------------------------------------------------
# The asyncio face


class AsyncClient(_Core):
    """Asyncio v2 client over HTTP (aiohttp) or gRPC (grpc.aio); same API as :class:`Client`.

    Connections are created lazily inside the running loop. Arguments as for :class:`Client`.

    Example::

        async with nbinfer.AsyncClient("http://127.0.0.1:8000") as client:
            result = await client.infer("add_sub", inputs)
    """

    def __init__(
        self,
        url: str,
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
    ) -> None:
        super().__init__(
            url,
            protocol=protocol,
            config=config,
            timeout=timeout,
            retries=retries,
            ssl=ssl,
            auth=auth,
            headers=headers,
            binary=binary,
            compression=compression,
            http2=http2,
        )
        self._engine: Any
        if self.protocol == "http":
            from nbinfer.transports.http import AiohttpEngine

            self._engine = AiohttpEngine(self.url, self.config)
        else:
            from nbinfer.transports.grpc import AsyncGrpcEngine

            self._engine = AsyncGrpcEngine(self.url, self.config)

    # -- driver --------------------------------------------------------------------------

    async def _perform(self, call: HttpCall | GrpcCall) -> Any:
        if isinstance(call, HttpCall):
            return await self._engine.request(
                call.method, call.path, call.body, call.headers, timeout=call.timeout
            )
        return await self._engine.call(call)

    async def _execute(self, call: HttpCall | GrpcCall) -> Any:
        attempts = self._attempts(call)
        attempt = 1
        while True:
            try:
                reply = await self._perform(call)
            except (ConnectError, ServerUnavailableError) as exc:
                if attempt >= attempts:
                    raise
                await asyncio.sleep(self._log_retry(call, attempt, exc))
            else:
                if attempt >= attempts or not self._retry_reply(call, reply):
                    return reply
                await asyncio.sleep(self._log_retry(call, attempt, "HTTP 503"))
            attempt += 1

    async def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                try:
                    reply = await self._execute(call)
                except NbinferError as exc:
                    call = op.throw(exc)
                else:
                    call = op.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    # -- lifecycle -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._engine.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- health and metadata -------------------------------------------------------------

    async def is_server_live(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> bool:
        """Whether the server is live."""
        return await self._run(self._binding.server_live(self._opts(headers, timeout)))

    async def is_server_ready(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> bool:
        """Whether the server is ready."""
        return await self._run(self._binding.server_ready(self._opts(headers, timeout)))

    async def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether the model (version) is ready (unknown model: ModelNotFoundError)."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.model_ready(model_name, model_version, opts))

    async def get_server_metadata(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> ServerMetadata:
        """Server name, version and extensions."""
        return await self._run(self._binding.server_metadata(self._opts(headers, timeout)))

    async def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> ModelMetadata:
        """The model's versions, platform and input / output specs (refreshes the cache)."""
        opts = self._opts(headers, timeout)
        return await self._run(self._model_metadata_op(model_name, model_version, opts))

    async def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The model configuration as (Triton-shaped) JSON."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.model_config(model_name, model_version, opts))

    # -- inference -----------------------------------------------------------------------

    async def build_request(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> InferRequest:
        """Build the :class:`~nbinfer.InferRequest` that :meth:`infer` would send."""
        opts = self._opts(headers, timeout)
        return await self._run(self._build_request_op(model_name, inputs, opts=opts, **kwargs))

    async def infer(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        outputs: Outputs = None,
        model_version: str = "",
        request_id: str = "",
        parameters: Mapping[str, ParamValue] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        priority: int | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool | None = None,
        sequence_end: bool = False,
        sequence: Sequence | None = None,
        binary: bool | None = None,
        retry: bool | None = None,
    ) -> InferResult:
        """Run inference on ``model_name``; arguments as for :meth:`Client.infer`."""
        if (
            type(inputs) is dict
            and headers is None
            and parameters is None
            and priority is None
            and sequence is None
            and sequence_id is None
            and sequence_start is None
            and not sequence_end
        ):
            call = self._fast_call(
                model_name, inputs, outputs, model_version, request_id, timeout, binary, retry
            )
            if call is not None:
                view, reply_headers = self._binding.fast_infer_reply(
                    model_name, await self._execute(call)
                )
                return InferResult(view, reply_headers)
        op = self._infer_op(
            model_name,
            inputs,
            headers=headers,
            timeout=timeout,
            binary=binary,
            retry=retry,
            sequence=sequence,
            sequence_end=sequence_end,
            outputs=outputs,
            model_version=model_version,
            request_id=request_id,
            parameters=parameters,
            priority=priority,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
        )
        return await self._run(op)

    async def stream_infer(
        self,
        requests: AsyncIterable[InferRequest] | Iterable[InferRequest],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[InferResult]:
        """Stream requests over gRPC ``ModelStreamInfer``; yields results as they arrive.

        Build requests with :meth:`build_request` (set ``request_id`` to match replies).

        Example::

            reqs = [await client.build_request("add_sub", x, request_id=str(i)) for ...]
            async for result in client.stream_infer(reqs):
                print(result.id, result["OUTPUT0"])

        Raises:
            InferenceError: A reply carried an error message (ends the iteration).
        """
        binding = self._require_grpc("stream_infer")
        from nbinfer.transports.grpc import aiter_replies

        async def messages() -> AsyncIterator[Any]:
            if isinstance(requests, AsyncIterable):
                async for req in requests:
                    yield binding.stream_request(req)
            else:
                for req in requests:
                    yield binding.stream_request(req)

        metadata = tuple((k.lower(), v) for k, v in (headers or {}).items())
        call = self._engine.stream(messages(), timeout=timeout, metadata=metadata)
        try:
            async for reply in aiter_replies(call):
                yield InferResult(binding.stream_reply(reply))
        finally:
            call.cancel()

    # -- model repository ----------------------------------------------------------------

    async def get_model_repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[RepositoryModel]:
        """The models of the repository with their state."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.repository_index(ready_only, opts))

    async def load_model(
        self,
        model_name: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Load (or reload) a model, optionally overriding its config and files."""
        opts = self._opts(headers, timeout)
        await self._run(self._load_op(model_name, config, files, opts))

    async def unload_model(
        self,
        model_name: str,
        *,
        unload_dependents: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unload a model."""
        opts = self._opts(headers, timeout)
        await self._run(self._unload_op(model_name, unload_dependents, opts))

    async def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Statistics (Triton JSON ``{"model_stats": [...]}``); all models when no name."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.statistics(model_name, model_version, opts))

    # -- trace and log settings ----------------------------------------------------------

    async def get_trace_settings(
        self,
        model_name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Trace settings (global, or of one model)."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.trace_settings(model_name, None, opts))

    async def update_trace_settings(
        self,
        model_name: str = "",
        settings: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Update trace settings (a ``None`` value resets one); returns the new settings."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.trace_settings(model_name, dict(settings or {}), opts))

    async def get_log_settings(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Log settings."""
        return await self._run(self._binding.log_settings(None, self._opts(headers, timeout)))

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Update log settings; returns the new settings."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.log_settings(dict(settings), opts))

    # -- shared memory -------------------------------------------------------------------

    async def get_system_shared_memory_status(
        self,
        region_name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Registered system shared-memory regions (all, or one)."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.shm_status("system", region_name, opts))

    async def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register a system shared-memory region."""
        body = {"key": key, "offset": offset, "byte_size": byte_size}
        opts = self._opts(headers, timeout)
        await self._run(self._binding.shm_register("system", name, body, opts))

    async def unregister_system_shared_memory(
        self,
        name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister one system shared-memory region (all when no name)."""
        opts = self._opts(headers, timeout)
        await self._run(self._binding.shm_unregister("system", name, opts))

    async def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Registered CUDA shared-memory regions (all, or one)."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.shm_status("cuda", region_name, opts))

    async def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register a CUDA shared-memory region (``raw_handle``: a cudaIpcMemHandle_t)."""
        body = {"raw_handle": raw_handle, "device_id": device_id, "byte_size": byte_size}
        opts = self._opts(headers, timeout)
        await self._run(self._binding.shm_register("cuda", name, body, opts))

    async def unregister_cuda_shared_memory(
        self,
        name: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister one CUDA shared-memory region (all when no name)."""
        opts = self._opts(headers, timeout)
        await self._run(self._binding.shm_unregister("cuda", name, opts))

    # -- KServe v1 -------------------------------------------------------------------------

    async def list_models(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> list[str]:
        """KServe's model list (``GET v2/models``, else ``v1/models``): names only, REST only."""
        return await self._run(self._binding.model_list(self._opts(headers, timeout)))

    async def predict(
        self,
        model_name: str,
        instances: Any,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """KServe v1 ``:predict``: send ``{"instances": ...}``, return the ``predictions``."""
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.v1_call(model_name, "predict", instances, opts))

    async def explain(
        self,
        model_name: str,
        instances: Any,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """KServe v1 ``:explain``: the explainer's whole JSON answer (e.g. ``explanations``).

        Raises:
            ModelNotFoundError: unknown model, or it has no explainer.
        """
        opts = self._opts(headers, timeout)
        return await self._run(self._binding.v1_call(model_name, "explain", instances, opts))
