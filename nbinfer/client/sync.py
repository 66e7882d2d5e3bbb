"""The blocking face: :class:`Client`.

Thread-safe, and usable inside a running event loop (a Jupyter cell): it does no asyncio.

Every unary call is the one declaration in :mod:`nbinfer.client.api`, turned into a method by
:func:`_blocking`; this module adds only what is truly the sync face's: the driver (retries with
``time.sleep``), ``async_infer`` on a thread pool, the tritonclient-style callback stream, and
``close`` / the context manager. Imports the core, errors and transports; IPython is never
imported (only used when the user's process already has it, see :mod:`nbinfer.client.callbacks`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast, overload

from nbinfer.client import api
from nbinfer.client.callbacks import SyncStream, infer_then_call_back, read_stream, stream_metadata
from nbinfer.client.core import Callback, Inputs, _Core
from nbinfer.client.generate import GeneratePlan, collect_one, http_generate_op, sync_events
from nbinfer.client.results import InferResult
from nbinfer.errors import (
    ConnectError,
    NbinferError,
    ServerUnavailableError,
    TransportError,
)
from nbinfer.protocol.types import InferRequest
from nbinfer.transports import GrpcCall, HttpCall, Op, Pause
from nbinfer.transports.base import SyncEngine, SyncGrpcEngine, SyncHttpEngine, Transport

__all__ = ["Client"]

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(
    declared: Callable[Concatenate[_Core, P], Op[T]],
) -> Callable[Concatenate[Client, P], T]:
    """The blocking method of one :mod:`~nbinfer.client.api` declaration (same signature, doc)."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(declared(self, *args, **kwargs))

    return api.face_method(method, declared, "Client", __name__)


def _inferring(
    declared: Callable[Concatenate[_Core, P], Op[InferResult]],
) -> Callable[Concatenate[Client, P], InferResult]:
    """The blocking ``infer`` (same signature, doc).

    A call with no options on plain arrays goes straight to the engine: the op it would run
    is that one call (the hot path, measured in ``benchmarks/client.py``). The rest runs the op.
    """

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> InferResult:
        if len(args) == 2 and not kwargs:
            model_name, inputs = cast("tuple[str, Inputs]", args)
            call = self._fast_call(model_name, inputs, None, "", "", None, None, None)
            if call is not None:
                return self._fast_result(model_name, self._execute(call))
        return self._run(declared(self, *args, **kwargs))

    return api.face_method(method, declared, "Client", __name__)


def _generating(
    declared: Callable[Concatenate[_Core, P], Op[GeneratePlan]],
) -> Callable[Concatenate[Client, P], dict[str, Any]]:
    """The blocking ``generate``: one POST over HTTP, the collected stream over gRPC."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        plan = self._run(declared(self, *args, **kwargs))
        if plan.message is None:
            return self._run(http_generate_op(plan))
        return collect_one(list(sync_events(self._engine, plan)), plan.model)

    return api.face_method(method, declared, "Client", __name__, "dict[str, Any]")


def _streaming(
    declared: Callable[Concatenate[_Core, P], Op[GeneratePlan]],
) -> Callable[Concatenate[Client, P], Iterator[dict[str, Any]]]:
    """The blocking ``generate_stream``: an iterator read as the responses arrive."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[dict[str, Any]]:
        return sync_events(self._engine, self._run(declared(self, *args, **kwargs)))

    return api.face_method(method, declared, "Client", __name__, "Iterator[dict[str, Any]]")


class Client(_Core):
    """Blocking v2 client over HTTP (sockets or pycurl) or gRPC (grpcio); thread-safe.

    Args:
        url: ``http(s)://host:port``, ``grpc(s)://host:port`` or a bare ``host:port`` (HTTP);
            a list of URLs builds a :class:`~nbinfer.ReplicaClient` (several servers serving
            the same models: least outstanding requests, failover, per-replica counts).
        protocol: ``"http"`` or ``"grpc"``, overriding the URL scheme.
        config: A :class:`~nbinfer.config.ClientConfig` (default: from ``NBINFER_*`` env).
        timeout: Seconds per call (or a :class:`~nbinfer.config.Timeouts`).
        retries: Number of retries (or a :class:`~nbinfer.config.Retries`).
        ssl: ``True`` for TLS with defaults, or a :class:`~nbinfer.config.TLSConfig`. Either
            means TLS: an ``http://`` / ``grpc://`` URL becomes ``https://`` / ``grpcs://``
            (a TLS setting is never dropped for a plaintext connection). A TLSConfig with
            ``httpx_client`` is refused (your httpx client's ``verify`` decides there).
        auth: An :class:`~nbinfer.config.Auth`, a ``(user, password)`` pair or a bearer token.
            When nothing sets ``Authorization`` (no bearer / basic ``auth``, no such header,
            no ``NBINFER_TOKEN``, no auth on ``httpx_client``), a client for the exact address
            of a running :class:`~nbinfer.LocalServer` this process started sends that
            server's token (other credentials, such as an API-key header, travel alongside).
        headers: Headers (HTTP) / metadata (gRPC) sent with every call.
        binary: HTTP: force binary tensor data on/off (default: use it when the server can).
        compression: ``"gzip"`` to compress requests.
        http2: HTTP: negotiate HTTP/2.
        max_workers: Threads behind :meth:`async_infer`.
        transport: Where the calls go (default: the real engines); e.g. a
            :class:`nbinfer.testing.MockTransport` to run offline.
        http_engine: HTTP: ``"httpx"`` instead of the default engines (measured slower, it is
            there for httpx users); ``"pycurl"`` to send every call through libcurl. By default
            cleartext HTTP/1.1 goes over plain sockets and TLS, HTTP/2, compression or a proxy
            through libcurl (``"aiohttp"`` for AsyncClient).
        httpx_client: HTTP: your own ``httpx.Client`` (``httpx.AsyncClient`` for AsyncClient),
            used as given (transport, auth, proxies, hooks) and not closed by nbinfer; implies
            ``http_engine="httpx"``.
        shared_memory: ``"auto"`` (default) sends tensors of 1 MiB and more, both ways,
            through POSIX shared memory when the URL is a loopback address and the server
            offers ``system_shared_memory``; ``True`` for every tensor (raises when the server
            cannot); ``False`` never. See "Shared memory" in the client docs for the lifetime
            of the arrays it returns.

    Example::

        with nbinfer.Client("grpc://127.0.0.1:8001") as client:
            client.is_server_ready()
    """

    _engine: SyncEngine
    _default_http_engine = "pycurl"

    def _open(self, transport: Transport) -> None:
        self._engine = transport.engine(self._wire, self.url, self.config)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._stream: SyncStream | None = None

    # -- driver --------------------------------------------------------------------------

    def _perform(self, call: HttpCall | GrpcCall) -> Any:
        if isinstance(call, GrpcCall):
            grpc_engine: SyncGrpcEngine = self._engine  # type: ignore[assignment]
            return grpc_engine.call(call)
        http_engine: SyncHttpEngine = self._engine  # type: ignore[assignment]
        return http_engine.request(
            call.method, call.path, call.body, call.headers, timeout=call.timeout
        )

    def _execute(self, call: HttpCall | GrpcCall) -> Any:
        attempts = self.config.retries.attempts if call.idempotent else 1
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
                if isinstance(call, Pause):
                    time.sleep(call.seconds)
                    call = op.send(None)
                    continue
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
        """Abort the calls in flight on ``async_infer`` threads (after an interrupt).

        HTTP transfers and gRPC calls alike; the server sees the cancellation.
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
        try:
            self._run(self._close_shm_op())
        finally:
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

    # -- the declared calls ----------------------------------------------------------------

    is_server_live = _blocking(api.is_server_live)
    is_server_ready = _blocking(api.is_server_ready)
    is_model_ready = _blocking(api.is_model_ready)
    get_server_metadata = _blocking(api.get_server_metadata)
    get_model_metadata = _blocking(api.get_model_metadata)
    get_model_config = _blocking(api.get_model_config)
    build_request = _blocking(api.build_request)
    infer = _inferring(api.infer)
    get_model_repository_index = _blocking(api.get_model_repository_index)
    load_model = _blocking(api.load_model)
    unload_model = _blocking(api.unload_model)
    get_inference_statistics = _blocking(api.get_inference_statistics)
    get_trace_settings = _blocking(api.get_trace_settings)
    update_trace_settings = _blocking(api.update_trace_settings)
    get_log_settings = _blocking(api.get_log_settings)
    update_log_settings = _blocking(api.update_log_settings)
    get_system_shared_memory_status = _blocking(api.get_system_shared_memory_status)
    register_system_shared_memory = _blocking(api.register_system_shared_memory)
    unregister_system_shared_memory = _blocking(api.unregister_system_shared_memory)
    get_cuda_shared_memory_status = _blocking(api.get_cuda_shared_memory_status)
    register_cuda_shared_memory = _blocking(api.register_cuda_shared_memory)
    unregister_cuda_shared_memory = _blocking(api.unregister_cuda_shared_memory)
    list_models = _blocking(api.list_models)
    predict = _blocking(api.predict)
    explain = _blocking(api.explain)
    generate = _generating(api.generate)
    generate_stream = _streaming(api.generate_stream)

    # -- the sync face's own calls ---------------------------------------------------------

    def async_infer(
        self,
        model_name: str,
        inputs: Inputs,
        *,
        callback: Callback | None = None,
        **kwargs: Any,
    ) -> concurrent.futures.Future[InferResult]:
        """Run :meth:`infer` on a worker thread; returns a ``concurrent.futures.Future``.

        The future completes after the callback has run, and carries what went wrong: the
        inference error, or the exception the callback raised (also shown in IPython, and
        logged, so a failing callback is never silent).

        Args:
            model_name: The model.
            inputs: As for :meth:`infer`.
            callback: Called as ``callback(result, None)`` or ``callback(None, error)`` when the
                call completes (on the worker thread).
            **kwargs: Any keyword argument of :meth:`infer`.

        Raises:
            TransportError: The client is closed.
        """
        if self._closed:
            raise TransportError("the client is closed")
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._max_workers, thread_name_prefix="nbinfer-infer"
                )
        infer = functools.partial(self.infer, model_name, inputs, **kwargs)
        return self._executor.submit(infer_then_call_back, infer, callback)

    # -- streaming (gRPC) ----------------------------------------------------------------

    def start_stream(
        self,
        callback: Callback,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Open a gRPC ``ModelStreamInfer`` stream; replies go to ``callback(result, error)``.

        Args:
            callback: Called on a reader thread for every reply (``error`` set when a reply
                carries an error, the stream fails, or the callback itself raised on the
                previous call for this reply).
            headers: gRPC metadata sent once, for the whole stream.
            timeout: Seconds the whole stream may stay open (default: ``Timeouts.stream``);
                when it passes, the callback gets a ``RequestTimeoutError``.

        Raises:
            NbinferError: Not a gRPC client, or a stream is already open.
        """
        binding = self._require_grpc("start_stream")
        with self._lock:
            if self._stream is not None:
                raise NbinferError("a stream is already open; call stop_stream() first")
            engine = cast(SyncGrpcEngine, self._engine)
            self._stream = SyncStream(engine, binding, callback, headers, timeout, self.url)

    @overload
    def stream_infer(
        self,
        requests: Iterable[InferRequest],
        /,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Iterator[InferResult]: ...

    @overload
    def stream_infer(self, model_name: str, inputs: Inputs, /, **options: Any) -> None: ...

    def stream_infer(
        self,
        model_name: str | Iterable[InferRequest],
        inputs: Inputs | None = None,
        /,
        **options: Any,
    ) -> Iterator[InferResult] | None:
        """Stream requests over gRPC ``ModelStreamInfer`` (one contract on both faces).

        ``stream_infer(requests, headers=..., timeout=...)`` opens a stream for an iterable of
        :class:`~nbinfer.InferRequest` (from :meth:`build_request`; set ``request_id`` to match
        replies) and yields the results as they arrive, exactly as
        :meth:`AsyncClient.stream_infer` does.

        ``stream_infer(model_name, inputs, **options)`` is tritonclient's form: it sends one
        request on the stream opened by :meth:`start_stream`, whose callback gets the reply.
        ``options`` are :meth:`infer`'s request options (``outputs``, ``request_id``,
        ``parameters``, ``priority``, the sequence options), all honoured; the stream-wide
        ones (``headers``, ``timeout``) belong to :meth:`start_stream` and, like ``binary`` and
        ``retry``, are refused with an ``InvalidInputError`` rather than dropped.

        Example::

            reqs = [client.build_request("add_sub", x, request_id=str(i)) for i, x in ...]
            for result in client.stream_infer(reqs):
                print(result.id, result["OUTPUT0"])

        Raises:
            InvalidInputError: A stream-wide or unknown option given to the one-request form.
            NbinferError: Not a gRPC client, or (one-request form) no stream is open.
            InferenceError: A reply carried an error message (ends the iteration).
        """
        if not isinstance(model_name, str):
            return self._stream_requests(model_name, **options)
        stream = self._stream
        if stream is None:
            raise NbinferError("no open stream; call start_stream(callback) first")
        request = self._run(api.stream_request(self, model_name, cast(Inputs, inputs), options))
        stream.send(self._require_grpc("stream_infer").stream_request(request))
        return None

    def _stream_requests(
        self,
        requests: Iterable[InferRequest],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Iterator[InferResult]:
        binding = self._require_grpc("stream_infer")
        engine = cast(SyncGrpcEngine, self._engine)
        messages = (binding.stream_request(r) for r in requests)
        call = engine.stream(messages, timeout=timeout, metadata=stream_metadata(headers))
        return read_stream(call, binding, self.url)

    def stop_stream(self, *, cancel_requests: bool = False) -> None:
        """Close the stream, waiting for outstanding replies unless ``cancel_requests``."""
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.stop(cancel=cancel_requests)
