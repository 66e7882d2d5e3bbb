"""tritonclient's ``InferenceServerClient``, sync and asyncio, over :class:`nbinfer.Client`.

Layer: compat, as :mod:`nbinfer.compat._triton` (the tensors, results and errors the clients
use live there); the HTTP and gRPC faces differ in a few answers' shapes and argument names.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar, cast

from nbinfer.client import AsyncClient, Client
from nbinfer.client import InferResult as _Result
from nbinfer.compat._triton import (
    InferenceServerClientPlugin,
    InferInput,
    InferRequestedOutput,
    InferResult,
    Request,
    _mapped,
    _sequence,
    raise_error,
)
from nbinfer.errors import NbinferError, ServerError
from nbinfer.protocol.types import InferInput as _Input

__all__ = ["AsyncTritonClient", "TritonClient"]


T = TypeVar("T")


class _Face:
    """The plumbing both faces share: translating tritonclient's arguments, mapping errors.

    Public methods are written once (on :class:`TritonClient`) as ``return self._call(fn, ...,
    _then=...)`` (always ``return``, also where the sync answer is ``None``: the asyncio face
    awaits what it gets): the sync face calls ``fn`` and returns, the asyncio face
    (:class:`AsyncTritonClient`) returns a coroutine awaiting it. Either way errors become
    :class:`InferenceServerException` and ``_then`` shapes the answer.
    """

    _protocol = "http"
    client: Any
    _plugin: InferenceServerClientPlugin | None = None

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        _then: Callable[[Any], Any] | None = None,
        _ready: bool = False,
        _plug: bool = True,
        **kwargs: Any,
    ) -> Any:
        raise NotImplementedError

    # -- plugins -------------------------------------------------------------------------

    def register_plugin(self, plugin: InferenceServerClientPlugin) -> None:
        """Have ``plugin`` see (and change) the headers of every call.

        Raises:
            InferenceServerException: A plugin is registered already.
        """
        if self._plugin is not None:
            raise_error(
                "A plugin is already registered. Please unregister the previous plugin first "
                "before registering a new plugin."
            )
        self._plugin = plugin

    def plugin(self) -> InferenceServerClientPlugin | None:
        """The registered plugin (``None`` if there is none)."""
        return self._plugin

    def unregister_plugin(self) -> None:
        """Drop the registered plugin.

        Raises:
            InferenceServerException: No plugin is registered.
        """
        if self._plugin is None:
            raise_error("No plugin has been registered.")
        self._plugin = None

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str] | None:
        """A call's headers once the plugin (if any) has seen them."""
        if self._plugin is None:
            return dict(headers) if headers else None
        request = Request(headers)
        self._plugin(request)
        return request.headers or None

    def _plugged(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._plugin is not None and "headers" in kwargs:
            kwargs["headers"] = self._headers(kwargs["headers"])
        return kwargs

    def _settle(self, exc: NbinferError, ready: bool) -> Any:
        """``False`` for a server's answer to a readiness question, else the mapped error."""
        if ready and isinstance(exc, ServerError):
            return False
        raise _mapped(exc, self._protocol) from exc

    def _request(self, args: Mapping[str, Any]) -> tuple[list[_Input], dict[str, Any]]:
        """The nbinfer inputs and infer keyword arguments for a tritonclient-shaped call.

        ``infer``, ``async_infer`` and ``async_stream_infer`` keep tritonclient's signatures
        (ported code passes them by keyword, in tritonclient's order); each hands its
        ``locals()`` here, so their translation to nbinfer's arguments is written once.
        """
        inputs: Sequence[InferInput] = args["inputs"]
        try:
            items = [i._to_nbinfer() for i in inputs]
        except NbinferError as exc:
            raise _mapped(exc, self._protocol) from exc
        headers = args.get("headers")
        parameters = dict(args["parameters"] or {})
        outputs = args["outputs"] or ()
        kwargs: dict[str, Any] = {
            "outputs": [o._to_nbinfer() for o in outputs] or None,
            "model_version": args["model_version"],
            "request_id": args["request_id"],
            "headers": dict(headers) if headers else None,
            "priority": args["priority"] or None,
            **_sequence(args["sequence_id"], args["sequence_start"], args["sequence_end"]),
        }
        if self._protocol == "http" and inputs and not any(i._binary for i in inputs):
            kwargs["binary"] = False
            if not outputs:  # tritonclient asks for binary outputs all the same
                parameters.setdefault("binary_data_output", True)
        kwargs["parameters"] = parameters or None
        return items, kwargs

    def _submit(self, fn: Callable[..., Any], args: Mapping[str, Any], **extra: Any) -> Any:
        """Call an nbinfer infer method with the arguments of a tritonclient-shaped one."""
        items, kwargs = self._request(args)
        return self._call(fn, args["model_name"], items, **extra, **kwargs)

    def _wrapper(self, args: Mapping[str, Any]) -> Callable[[_Result], InferResult]:
        """What turns the nbinfer result of a call with ``args`` into tritonclient's."""
        json = frozenset(
            o.name() for o in args["outputs"] or () if self._protocol == "http" and not o._binary
        )
        protocol = self._protocol
        return lambda result: InferResult(result, protocol, json)

    def _wrap(self, result: _Result) -> InferResult:
        return InferResult(result, self._protocol)

    def _render(self, method: str, value: Any, as_json: bool) -> Any:
        """``method``'s answer as this face returns it (HTTP: JSON; gRPC: a message)."""
        return value

    def _answer(
        self, method: str, *args: Any, headers: Mapping[str, str] | None, as_json: bool
    ) -> Any:
        """The nbinfer client's ``method`` answer, rendered as this face returns it."""
        return self._call(
            getattr(self.client, method),
            *args,
            headers=headers,
            _then=lambda value: self._render(method, value, as_json),
        )


class TritonClient(_Face):
    """What the HTTP and gRPC ``InferenceServerClient`` share, over one nbinfer Client."""

    _protocol = "http"

    def __init__(self, client: Client) -> None:
        #: The nbinfer client doing the work.
        self.client = client

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        _then: Callable[[Any], Any] | None = None,
        _ready: bool = False,
        _plug: bool = True,
        **kwargs: Any,
    ) -> Any:
        try:
            value = fn(*args, **(self._plugged(kwargs) if _plug else kwargs))
        except NbinferError as exc:
            return self._settle(exc, _ready)
        return value if _then is None else _then(value)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections (idempotent)."""
        self.client.close()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- health --------------------------------------------------------------------------

    def is_server_live(self, headers: Mapping[str, str] | None = None, **_: Any) -> bool:
        """Whether the server is live."""
        return self._call(self.client.is_server_live, headers=headers, _then=bool)  # type: ignore[no-any-return]

    def is_server_ready(self, headers: Mapping[str, str] | None = None, **_: Any) -> bool:
        """Whether the server is ready."""
        return self._call(self.client.is_server_ready, headers=headers, _then=bool)  # type: ignore[no-any-return]

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> bool:
        """Whether the model is ready (``False`` for an unknown model, as tritonclient).

        Raises:
            InferenceServerException: The server could not be reached.
        """
        return self._call(  # type: ignore[no-any-return]
            self.client.is_model_ready,
            model_name,
            model_version,
            headers=headers,
            _then=bool,
            _ready=True,
        )

    # -- repository and shared memory ------------------------------------------------------

    def load_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        **_: Any,
    ) -> None:
        """Load (or reload) a model."""
        return self._call(  # type: ignore[no-any-return]
            self.client.load_model, model_name, config=config, files=files, headers=headers
        )

    def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        unload_dependents: bool = False,
        **_: Any,
    ) -> None:
        """Unload a model."""
        return self._call(  # type: ignore[no-any-return]
            self.client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=headers,
        )

    def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        """Register a system shared-memory region."""
        return self._call(  # type: ignore[no-any-return]
            self.client.register_system_shared_memory, name, key, byte_size, offset, headers=headers
        )

    def unregister_system_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, **_: Any
    ) -> None:
        """Unregister one region (all when no name)."""
        return self._call(  # type: ignore[no-any-return]
            self.client.unregister_system_shared_memory, name, headers=headers
        )

    def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        headers: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        """Register a CUDA shared-memory region."""
        return self._call(  # type: ignore[no-any-return]
            self.client.register_cuda_shared_memory,
            name,
            raw_handle,
            device_id,
            byte_size,
            headers=headers,
        )

    def unregister_cuda_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, **_: Any
    ) -> None:
        """Unregister one CUDA region (all when no name)."""
        return self._call(  # type: ignore[no-any-return]
            self.client.unregister_cuda_shared_memory, name, headers=headers
        )

    # -- inference -----------------------------------------------------------------------

    def infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        headers: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        client_timeout: float | None = None,
        **_: Any,
    ) -> InferResult:
        """Run inference (tritonclient's arguments; ``query_params`` and compression are ignored).

        Raises:
            InferenceServerException: The call failed (the nbinfer error is its ``__cause__``).
        """
        args = locals()
        return self._submit(  # type: ignore[no-any-return]
            self.client.infer, args, timeout=client_timeout, _then=self._wrapper(args)
        )

    # -- metadata, configuration, statistics, settings -------------------------------------

    def get_server_metadata(
        self, headers: Mapping[str, str] | None = None, as_json: bool = False, **_: Any
    ) -> Any:
        """Server name, version and extensions."""
        return self._answer("get_server_metadata", headers=headers, as_json=as_json)

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """The model's metadata."""
        return self._answer(
            "get_model_metadata", model_name, model_version, headers=headers, as_json=as_json
        )

    def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """The model configuration."""
        return self._answer(
            "get_model_config", model_name, model_version, headers=headers, as_json=as_json
        )

    def get_model_repository_index(
        self, headers: Mapping[str, str] | None = None, as_json: bool = False, **_: Any
    ) -> Any:
        """The repository's models with their state."""
        return self._answer("get_model_repository_index", headers=headers, as_json=as_json)

    def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Statistics of one model (all models when no name)."""
        return self._answer(
            "get_inference_statistics", model_name, model_version, headers=headers, as_json=as_json
        )

    def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Registered system shared-memory regions."""
        return self._answer(
            "get_system_shared_memory_status", region_name, headers=headers, as_json=as_json
        )

    def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Registered CUDA shared-memory regions."""
        return self._answer(
            "get_cuda_shared_memory_status", region_name, headers=headers, as_json=as_json
        )

    def get_trace_settings(
        self,
        model_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Trace settings (global, or of one model)."""
        return self._call(self.client.get_trace_settings, model_name, headers=headers)

    def update_trace_settings(
        self,
        model_name: str = "",
        settings: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Update trace settings; returns the new ones."""
        return self._call(self.client.update_trace_settings, model_name, settings, headers=headers)

    def get_log_settings(
        self, headers: Mapping[str, str] | None = None, as_json: bool = False, **_: Any
    ) -> Any:
        """Log settings."""
        return self._call(self.client.get_log_settings, headers=headers)

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        **_: Any,
    ) -> Any:
        """Update log settings; returns the new ones."""
        return self._call(self.client.update_log_settings, settings, headers=headers)


def _awaited(
    method: Callable[..., T],
) -> Callable[..., Coroutine[Any, Any, T]]:
    """The coroutine method of one :class:`TritonClient` method (same arguments and answer)."""

    async def call(self: AsyncTritonClient, /, *args: Any, **kwargs: Any) -> T:
        return await cast(Awaitable[T], method(self, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


class AsyncTritonClient(_Face):
    """What the asyncio faces (``http.aio`` / ``grpc.aio``) share, over one nbinfer AsyncClient.

    The same methods as :class:`TritonClient`, as coroutines: each runs the sync face's
    translation with the nbinfer call awaited on the running loop.
    """

    _protocol = "http"

    def __init__(self, client: AsyncClient) -> None:
        #: The nbinfer client doing the work.
        self.client = client

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        _then: Callable[[Any], Any] | None = None,
        _ready: bool = False,
        _plug: bool = True,
        **kwargs: Any,
    ) -> Any:
        async def run() -> Any:
            try:
                value = await fn(*args, **(self._plugged(kwargs) if _plug else kwargs))
            except NbinferError as exc:
                return self._settle(exc, _ready)
            return value if _then is None else _then(value)

        return run()

    async def close(self) -> None:
        """Close the connections (idempotent)."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    is_server_live = _awaited(TritonClient.is_server_live)
    is_server_ready = _awaited(TritonClient.is_server_ready)
    is_model_ready = _awaited(TritonClient.is_model_ready)
    load_model = _awaited(TritonClient.load_model)
    unload_model = _awaited(TritonClient.unload_model)
    register_system_shared_memory = _awaited(TritonClient.register_system_shared_memory)
    unregister_system_shared_memory = _awaited(TritonClient.unregister_system_shared_memory)
    register_cuda_shared_memory = _awaited(TritonClient.register_cuda_shared_memory)
    unregister_cuda_shared_memory = _awaited(TritonClient.unregister_cuda_shared_memory)
    infer = _awaited(TritonClient.infer)
    get_server_metadata = _awaited(TritonClient.get_server_metadata)
    get_model_metadata = _awaited(TritonClient.get_model_metadata)
    get_model_config = _awaited(TritonClient.get_model_config)
    get_model_repository_index = _awaited(TritonClient.get_model_repository_index)
    get_inference_statistics = _awaited(TritonClient.get_inference_statistics)
    get_system_shared_memory_status = _awaited(TritonClient.get_system_shared_memory_status)
    get_cuda_shared_memory_status = _awaited(TritonClient.get_cuda_shared_memory_status)
    get_trace_settings = _awaited(TritonClient.get_trace_settings)
    update_trace_settings = _awaited(TritonClient.update_trace_settings)
    get_log_settings = _awaited(TritonClient.get_log_settings)
    update_log_settings = _awaited(TritonClient.update_log_settings)
