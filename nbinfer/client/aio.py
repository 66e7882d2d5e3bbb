"""The asyncio face: :class:`AsyncClient`.

The same calls as :class:`~nbinfer.client.Client`, awaited on the running loop (aiohttp,
grpc.aio; connections made lazily in that loop).

Every unary call is the one declaration in :mod:`nbinfer.client.api`, turned into a coroutine
method by :func:`_awaiting`; this module adds only the asyncio driver (retries with
``asyncio.sleep``), the async-iterator stream and ``aclose`` / the async context manager.
Imports the core, errors and transports; never IPython, the session or the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
)
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from nbinfer.client import api
from nbinfer.client.callbacks import stream_metadata
from nbinfer.client.core import Inputs, _Core
from nbinfer.client.generate import GeneratePlan, async_events, collect_one, http_generate_op
from nbinfer.client.results import InferResult
from nbinfer.errors import ConnectError, InferenceError, NbinferError, ServerUnavailableError
from nbinfer.protocol.types import InferRequest
from nbinfer.transports import GrpcCall, HttpCall, Op, Pause
from nbinfer.transports.base import AsyncEngine, AsyncGrpcEngine, AsyncHttpEngine, Transport

__all__ = ["AsyncClient"]

P = ParamSpec("P")
T = TypeVar("T")


def _awaiting(
    declared: Callable[Concatenate[_Core, P], Op[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The coroutine method of one :mod:`~nbinfer.client.api` declaration."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(declared(self, *args, **kwargs))

    return api.face_method(method, declared, "AsyncClient", __name__)


def _inferring(
    declared: Callable[Concatenate[_Core, P], Op[InferResult]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, InferResult]]:
    """The coroutine ``infer`` (same signature, doc).

    A call with no options on plain arrays awaits the engine alone, as the sync face's does;
    the rest runs the op.
    """

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> InferResult:
        if len(args) == 2 and not kwargs:
            model_name, inputs = cast("tuple[str, Inputs]", args)
            call = self._fast_call(model_name, inputs, None, "", "", None, None, None)
            if call is not None:
                return self._fast_result(model_name, await self._execute(call))
        return await self._run(declared(self, *args, **kwargs))

    return api.face_method(method, declared, "AsyncClient", __name__)


def _generating(
    declared: Callable[Concatenate[_Core, P], Op[GeneratePlan]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, dict[str, Any]]]:
    """The coroutine ``generate``: one POST over HTTP, the collected stream over gRPC."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        plan = await self._run(declared(self, *args, **kwargs))
        if plan.message is None:
            return await self._run(http_generate_op(plan))
        return collect_one([obj async for obj in async_events(self._engine, plan)], plan.model)

    return api.face_method(method, declared, "AsyncClient", __name__, "dict[str, Any]")


def _streaming(
    declared: Callable[Concatenate[_Core, P], Op[GeneratePlan]],
) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[dict[str, Any]]]:
    """The asyncio ``generate_stream``: an async iterator read as the responses arrive."""

    async def method(
        self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[dict[str, Any]]:
        plan = await self._run(declared(self, *args, **kwargs))
        events = async_events(self._engine, plan)
        try:
            async for obj in events:
                yield obj
        finally:
            await events.aclose()

    return api.face_method(
        method, declared, "AsyncClient", __name__, "AsyncIterator[dict[str, Any]]"
    )


class AsyncClient(_Core):
    """Asyncio v2 client over HTTP (aiohttp) or gRPC (grpc.aio); same API as :class:`Client`.

    Connections are created lazily inside the running loop. Arguments as for :class:`Client`
    (``max_workers`` is the sync face's only: concurrent calls here are tasks on the loop).

    Example::

        async with nbinfer.AsyncClient("http://127.0.0.1:8000") as client:
            result = await client.infer("add_sub", inputs)
    """

    _engine: AsyncEngine
    _default_http_engine = "aiohttp"

    def _open(self, transport: Transport) -> None:
        self._engine = transport.async_engine(self._wire, self.url, self.config)

    # -- driver --------------------------------------------------------------------------

    async def _perform(self, call: HttpCall | GrpcCall) -> Any:
        if isinstance(call, GrpcCall):
            grpc_engine: AsyncGrpcEngine = self._engine  # type: ignore[assignment]
            return await grpc_engine.call(call)
        http_engine: AsyncHttpEngine = self._engine  # type: ignore[assignment]
        return await http_engine.request(
            call.method, call.path, call.body, call.headers, timeout=call.timeout
        )

    async def _execute(self, call: HttpCall | GrpcCall) -> Any:
        attempts = self.config.retries.attempts if call.idempotent else 1
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
                if isinstance(call, Pause):
                    await asyncio.sleep(call.seconds)
                    call = op.send(None)
                    continue
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
        try:
            await self._run(self._close_shm_op())
        finally:
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

    # -- the declared calls ----------------------------------------------------------------

    is_server_live = _awaiting(api.is_server_live)
    is_server_ready = _awaiting(api.is_server_ready)
    is_model_ready = _awaiting(api.is_model_ready)
    get_server_metadata = _awaiting(api.get_server_metadata)
    get_model_metadata = _awaiting(api.get_model_metadata)
    get_model_config = _awaiting(api.get_model_config)
    build_request = _awaiting(api.build_request)
    infer = _inferring(api.infer)
    get_model_repository_index = _awaiting(api.get_model_repository_index)
    load_model = _awaiting(api.load_model)
    unload_model = _awaiting(api.unload_model)
    get_inference_statistics = _awaiting(api.get_inference_statistics)
    get_trace_settings = _awaiting(api.get_trace_settings)
    update_trace_settings = _awaiting(api.update_trace_settings)
    get_log_settings = _awaiting(api.get_log_settings)
    update_log_settings = _awaiting(api.update_log_settings)
    get_system_shared_memory_status = _awaiting(api.get_system_shared_memory_status)
    register_system_shared_memory = _awaiting(api.register_system_shared_memory)
    unregister_system_shared_memory = _awaiting(api.unregister_system_shared_memory)
    get_cuda_shared_memory_status = _awaiting(api.get_cuda_shared_memory_status)
    register_cuda_shared_memory = _awaiting(api.register_cuda_shared_memory)
    unregister_cuda_shared_memory = _awaiting(api.unregister_cuda_shared_memory)
    list_models = _awaiting(api.list_models)
    predict = _awaiting(api.predict)
    explain = _awaiting(api.explain)
    generate = _generating(api.generate)
    generate_stream = _streaming(api.generate_stream)

    # -- streaming (gRPC) ----------------------------------------------------------------

    async def stream_infer(
        self,
        requests: AsyncIterable[InferRequest] | Iterable[InferRequest],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[InferResult]:
        """Stream requests over gRPC ``ModelStreamInfer``; yields results as they arrive.

        The same contract as :meth:`Client.stream_infer` with an iterable of requests: build
        them with :meth:`build_request` (set ``request_id`` to match replies); ``headers`` are
        sent once as the stream's metadata and ``timeout`` bounds the whole stream (default:
        ``Timeouts.stream``). The sync face's callback form (``start_stream``) has no asyncio
        twin: iterate instead.

        Example::

            reqs = [await client.build_request("add_sub", x, request_id=str(i)) for ...]
            async for result in client.stream_infer(reqs):
                print(result.id, result["OUTPUT0"])

        Raises:
            InferenceError: A reply carried an error message (ends the iteration).
            RequestTimeoutError: The stream's deadline passed.
        """
        async for item in self._stream_replies(requests, headers=headers, timeout=timeout):
            if isinstance(item, InferenceError):
                raise item
            yield item

    async def _stream_replies(
        self,
        requests: AsyncIterable[InferRequest] | Iterable[InferRequest],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[InferResult | InferenceError]:
        """:meth:`stream_infer`'s replies; one carrying an error is that error; the stream goes on.

        The form tritonclient's asyncio stream needs: ``(result, error)`` per reply.
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

        engine = cast(AsyncGrpcEngine, self._engine)
        call = engine.stream(messages(), timeout=timeout, metadata=stream_metadata(headers))
        try:
            async for reply in aiter_replies(call):
                try:
                    result = InferResult(binding.stream_reply(reply))
                except InferenceError as exc:
                    yield exc
                    continue
                yield result
        finally:
            call.cancel()
