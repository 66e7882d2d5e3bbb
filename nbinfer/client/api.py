"""Every public client call, declared once: signature, docstring and argument handling.

Each function here takes the core as its first (positional-only) argument and returns an *op*
(a generator of transport calls). The faces do not restate them: :mod:`nbinfer.client.sync`
turns each into a blocking method and :mod:`nbinfer.client.aio` into a coroutine method with
small typed adapters, so a new argument or a docstring fix is made here and both faces (and
``help()``, IDEs and mypy) see it. Calls whose semantics differ between faces (``async_infer``,
streams, ``close``) live in the faces but take their argument handling from here.

Imports the core, protocol types and transports only; no I/O, no engine.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from nbinfer.client.core import Inputs, Outputs, _Core, check_timeout
from nbinfer.client.generate import GeneratePlan, plan_generate
from nbinfer.client.results import InferResult, InferSequence
from nbinfer.client.shm import unregister_when_free
from nbinfer.errors import InvalidInputError
from nbinfer.protocol.types import (
    InferRequest,
    ModelMetadata,
    ParamValue,
    RepositoryModel,
    ServerMetadata,
)
from nbinfer.transports import Op

__all__: list[str] = []  # the faces publish these; nothing is public from here

F = TypeVar("F", bound=Callable[..., Any])


def face_method(
    method: F, declared: Callable[..., Any], face: str, module: str, returns: str | None = None
) -> F:
    """Dress a face's adapter as the declaration it runs: name, docstring and signature.

    ``help()``, IDEs and ``inspect.signature`` then show the declared parameters (``self`` in
    place of the core) and the op's result type (``Op[bool]`` -> ``bool``); mypy gets the same
    from the adapters' ParamSpec typing.
    """
    signature = inspect.signature(declared)
    core, *params = signature.parameters.values()
    if returns is None:  # the op's result (``returns``: what the face makes of the op's plan)
        returns = str(signature.return_annotation)
        if returns.startswith("Op[") and returns.endswith("]"):
            returns = returns[3:-1]
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[core.replace(name="self", annotation=inspect.Parameter.empty), *params],
        return_annotation=returns,
    )
    method.__name__ = declared.__name__
    method.__qualname__ = f"{face}.{declared.__name__}"
    method.__module__ = module
    method.__doc__ = declared.__doc__
    hints = {k: v for k, v in declared.__annotations__.items() if k != core.name}
    method.__annotations__ = {**hints, "return": returns}
    method.__wrapped__ = declared  # type: ignore[attr-defined]  # get_type_hints' namespace
    return method


# -- health and metadata -----------------------------------------------------------------------


def is_server_live(
    core: _Core, /, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
) -> Op[bool]:
    """Whether the server is live."""
    return core._binding.server_live(core._opts(headers, timeout))


def is_server_ready(
    core: _Core, /, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
) -> Op[bool]:
    """Whether the server is ready."""
    return core._binding.server_ready(core._opts(headers, timeout))


def is_model_ready(
    core: _Core,
    /,
    model_name: str,
    model_version: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[bool]:
    """Whether the model (version) is ready.

    Raises:
        ModelNotFoundError: The server does not know the model.
    """
    opts = core._opts(headers, timeout)
    return core._binding.model_ready(model_name, model_version, opts)


def get_server_metadata(
    core: _Core, /, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
) -> Op[ServerMetadata]:
    """Server name, version and extensions."""
    return core._binding.server_metadata(core._opts(headers, timeout))


def get_model_metadata(
    core: _Core,
    /,
    model_name: str,
    model_version: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[ModelMetadata]:
    """The model's versions, platform and input / output specs (refreshes the cache)."""
    return core._model_metadata_op(model_name, model_version, core._opts(headers, timeout))


def get_model_config(
    core: _Core,
    /,
    model_name: str,
    model_version: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[dict[str, Any]]:
    """The model configuration as (Triton-shaped) JSON."""
    opts = core._opts(headers, timeout)
    return core._extension_op(
        "get_model_config", core._binding.model_config(model_name, model_version, opts)
    )


# -- inference ---------------------------------------------------------------------------------


def build_request(
    core: _Core,
    /,
    model_name: str,
    inputs: Inputs,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    **kwargs: Any,
) -> Op[InferRequest]:
    """Build the :class:`~nbinfer.InferRequest` that ``infer`` would send.

    ``kwargs``: the request options of ``infer`` (``outputs``, ``model_version``,
    ``request_id``, ``parameters``, ``priority``, the sequence options). ``headers`` and
    ``timeout`` only apply to the metadata lookup plain Python inputs may need.
    """
    return core._build_request_op(model_name, inputs, opts=core._opts(headers, timeout), **kwargs)


def infer(  # noqa: D417 - ``core`` is the face's ``self``
    core: _Core,
    /,
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
    sequence: InferSequence | None = None,
    binary: bool | None = None,
    retry: bool | None = None,
) -> Op[InferResult]:
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
        sequence: A :class:`~nbinfer.Sequence` carrying the id and start flag across calls.
        binary: HTTP only: force binary tensor data on or off for this call.
        retry: Retry on connection errors / 503 (default: ``config.retries.infer``).

    Returns:
        The :class:`InferResult`.

    Raises:
        InvalidInputError: Bad inputs (locally, or ``RemoteInvalidInputError`` from the
            server).
        ModelNotFoundError: Unknown model or version.
        ServerError: Any other server error (most specific subclass).
        TransportError: ``ConnectError`` / ``RequestTimeoutError`` / other transport failures.
    """
    if (
        headers is None
        and parameters is None
        and priority is None
        and sequence is None
        and sequence_id is None
        and sequence_start is None
        and not sequence_end
    ):
        if timeout is not None:
            timeout = check_timeout(timeout)
        call = core._fast_call(
            model_name, inputs, outputs, model_version, request_id, timeout, binary, retry
        )
        if call is not None:
            return core._fast_result(model_name, (yield call))
    return (
        yield from core._infer_op(
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
    )


#: ``infer`` options a request sent on an open stream honours (the request's own fields).
STREAM_REQUEST_OPTIONS = frozenset(
    {
        "outputs",
        "model_version",
        "request_id",
        "parameters",
        "priority",
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "sequence",
    }
)

#: ``infer`` options that belong to the whole stream, not to one of its requests.
_STREAM_WIDE = {
    "headers": "gRPC metadata is sent once per stream: pass headers to start_stream()",
    "timeout": "a stream has one deadline: pass timeout to start_stream()",
    "binary": "binary is an HTTP option; streams are gRPC",
    "retry": "a request sent on a stream is never retried",
}


def stream_request(
    core: _Core, model_name: str, inputs: Inputs, options: Mapping[str, Any]
) -> Op[InferRequest]:
    """The request ``stream_infer(model_name, inputs, **options)`` sends on an open stream.

    Takes ``infer``'s options: the request's own are honoured; the stream-wide ones
    (``headers``, ``timeout``, ``binary``, ``retry``) are refused loudly unless left unset,
    since one request on an open stream cannot carry them.

    Raises:
        InvalidInputError: A stream-wide or unknown option was given.
    """
    given = {k for k in _STREAM_WIDE if options.get(k) is not None}
    if options.get("retry") is False:
        given.discard("retry")  # asks for what a stream does anyway
    refused = [f"{k}: {why}" for k, why in _STREAM_WIDE.items() if k in given]
    unknown = sorted(set(options) - STREAM_REQUEST_OPTIONS - set(_STREAM_WIDE))
    if unknown:
        refused.append(f"unknown option(s) {', '.join(unknown)}")
    if refused:
        raise InvalidInputError("stream_infer(model_name, inputs): " + "; ".join(refused))
    kwargs = {k: v for k, v in options.items() if k in STREAM_REQUEST_OPTIONS}
    sequence: InferSequence | None = kwargs.pop("sequence", None)
    sequence_end = bool(kwargs.pop("sequence_end", False))
    request = yield from core._build_request_op(
        model_name, inputs, sequence=sequence, sequence_end=sequence_end, **kwargs
    )
    if sequence is not None:
        sequence.started = True
        sequence.ended = sequence.ended or sequence_end
    return request


# -- generate extension ------------------------------------------------------------------------


def generate(  # noqa: D417 - ``core`` is the face's ``self``
    core: _Core,
    model: str,
    inputs: Mapping[str, Any] | None = None,
    /,
    *,
    version: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    headers: Mapping[str, str] | None = None,
    **fields: Any,
) -> Op[GeneratePlan]:
    """Run Triton's generate extension on ``model``: one request object in, one out.

    The request object is ``inputs`` and ``fields`` at its top level (a field named like one
    of the model's inputs is that input, any other is a request parameter) plus
    ``parameters``. Over HTTP it is ``POST v2/models/M[/versions/V]/generate``; over gRPC the
    fields are mapped onto the model's inputs from its metadata and sent on
    ``ModelStreamInfer``, so decoupled models answer the same way.

    Args:
        model: The model.
        inputs: Top-level fields by name (e.g. ``{"text_input": "hi"}``).
        version: A specific version (default: the server's policy).
        parameters: The request's ``parameters`` object.
        timeout: Seconds allowed (default: the client's total timeout).
        headers: Extra headers / gRPC metadata.
        **fields: More top-level fields, e.g. ``text_input="hi", max_tokens=5``.

    Returns:
        The response object: ``model_name``, ``model_version`` and each output by name as
        a JSON value (a scalar for one element, else a flat list; BYTES as ``str``).

    Example::

        client.generate("gpt", text_input="Once upon a time", max_tokens=16)["text_output"]

    Raises:
        InvalidInputError: A field does not fit its input; the model gave other than 1
            response (use ``generate_stream``).
        ModelNotFoundError: Unknown model or version.
        InferenceError: The model raised (the error event's message).
        ServerError: Any other server error (most specific subclass).
        TransportError: The connection failed or timed out.
    """
    return plan_generate(
        core, model, inputs, version, parameters, timeout, headers, fields, stream=False
    )


def generate_stream(  # noqa: D417 - ``core`` is the face's ``self``
    core: _Core,
    model: str,
    inputs: Mapping[str, Any] | None = None,
    /,
    *,
    version: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    headers: Mapping[str, str] | None = None,
    **fields: Any,
) -> Op[GeneratePlan]:
    """Stream Triton's generate extension: one response object per response, as they arrive.

    Takes the arguments of ``generate``. Over HTTP it reads ``.../generate_stream``'s
    Server-Sent Events as they arrive (never the whole body first); over gRPC the decoupled
    ``ModelStreamInfer`` stream. Closing the iterator early (``break``, ``close()`` /
    ``aclose()``, the notebook's stop button) closes the stream, and the server cancels the
    generation.

    Args:
        model: The model.
        inputs: Top-level fields by name.
        version: A specific version.
        parameters: The request's ``parameters`` object.
        timeout: Seconds the whole stream may take (default: ``Timeouts.stream``).
        headers: Extra headers / gRPC metadata.
        **fields: More top-level fields.

    Returns:
        An iterator (an async iterator on ``AsyncClient``) of response objects.

    Example::

        for chunk in client.generate_stream("gpt", text_input="Hello", max_tokens=16):
            print(chunk["text_output"], end="")

    Raises:
        InferenceError: An error event (the model failed mid-stream); every error raised
            while streaming carries ``chunks_received``, the responses before it.
        ServerError / InvalidInputError / TransportError: as ``generate``.
    """
    return plan_generate(
        core, model, inputs, version, parameters, timeout, headers, fields, stream=True
    )


# -- model repository ----------------------------------------------------------------------------


def get_model_repository_index(
    core: _Core,
    /,
    *,
    ready_only: bool = False,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[list[RepositoryModel]]:
    """The models of the repository with their state."""
    return core._extension_op(
        "get_model_repository_index",
        core._binding.repository_index(ready_only, core._opts(headers, timeout)),
    )


def load_model(  # noqa: D417 - ``core`` is the face's ``self``
    core: _Core,
    /,
    model_name: str,
    *,
    config: str | Mapping[str, Any] | None = None,
    files: Mapping[str, bytes] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[None]:
    """Load (or reload) a model, optionally overriding its config and files.

    Args:
        model_name: The model.
        config: A model config (JSON text or a dict) overriding the repository's.
        files: ``{"<version>/<file>": content}`` overriding the model's files.
        headers: Extra headers / metadata.
        timeout: Seconds allowed.
    """
    return core._extension_op(
        "load_model", core._load_op(model_name, config, files, core._opts(headers, timeout))
    )


def unload_model(
    core: _Core,
    /,
    model_name: str,
    *,
    unload_dependents: bool = False,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[None]:
    """Unload a model."""
    return core._extension_op(
        "unload_model", core._unload_op(model_name, unload_dependents, core._opts(headers, timeout))
    )


def get_inference_statistics(
    core: _Core,
    /,
    model_name: str = "",
    model_version: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[dict[str, Any]]:
    """Statistics (Triton JSON ``{"model_stats": [...]}``); all models when no name."""
    opts = core._opts(headers, timeout)
    return core._extension_op(
        "get_inference_statistics", core._binding.statistics(model_name, model_version, opts)
    )


# -- trace and log settings ----------------------------------------------------------------------


def get_trace_settings(
    core: _Core,
    /,
    model_name: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[dict[str, Any]]:
    """Trace settings (global, or of one model)."""
    return core._extension_op(
        "get_trace_settings",
        core._binding.trace_settings(model_name, None, core._opts(headers, timeout)),
    )


def update_trace_settings(
    core: _Core,
    /,
    model_name: str = "",
    settings: Mapping[str, Any] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[dict[str, Any]]:
    """Update trace settings (a ``None`` value resets one); returns the new settings."""
    opts = core._opts(headers, timeout)
    return core._extension_op(
        "update_trace_settings",
        core._binding.trace_settings(model_name, dict(settings or {}), opts),
    )


def get_log_settings(
    core: _Core, /, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
) -> Op[dict[str, Any]]:
    """Log settings."""
    return core._extension_op(
        "get_log_settings", core._binding.log_settings(None, core._opts(headers, timeout))
    )


def update_log_settings(
    core: _Core,
    /,
    settings: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[dict[str, Any]]:
    """Update log settings; returns the new settings."""
    return core._extension_op(
        "update_log_settings",
        core._binding.log_settings(dict(settings), core._opts(headers, timeout)),
    )


# -- shared memory -------------------------------------------------------------------------------


def get_system_shared_memory_status(
    core: _Core,
    /,
    region_name: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[list[dict[str, Any]]]:
    """Registered system shared-memory regions (all, or one)."""
    return core._extension_op(
        "get_system_shared_memory_status",
        core._binding.shm_status("system", region_name, core._opts(headers, timeout)),
    )


def register_system_shared_memory(
    core: _Core,
    /,
    name: str,
    key: str,
    byte_size: int,
    offset: int = 0,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[None]:
    """Register a system shared-memory region."""
    body = {"key": key, "offset": offset, "byte_size": byte_size}
    return core._extension_op(
        "register_system_shared_memory",
        core._binding.shm_register("system", name, body, core._opts(headers, timeout)),
    )


def unregister_system_shared_memory(
    core: _Core,
    /,
    name: str = "",
    *,
    wait: float = 0.0,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[None]:
    """Unregister one system shared-memory region (all when no name).

    ``wait``: seconds to keep asking while the server refuses because a request still holds
    the region (Triton does for a moment after answering); the default asks once.
    """
    opts = core._opts(headers, timeout)
    unregister = functools.partial(core._binding.shm_unregister, "system", name, opts)
    return core._extension_op(
        "unregister_system_shared_memory", unregister_when_free(unregister, wait)
    )


def get_cuda_shared_memory_status(
    core: _Core,
    /,
    region_name: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[list[dict[str, Any]]]:
    """Registered CUDA shared-memory regions (all, or one)."""
    return core._extension_op(
        "get_cuda_shared_memory_status",
        core._binding.shm_status("cuda", region_name, core._opts(headers, timeout)),
    )


def register_cuda_shared_memory(
    core: _Core,
    /,
    name: str,
    raw_handle: bytes,
    device_id: int,
    byte_size: int,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[None]:
    """Register a CUDA shared-memory region (``raw_handle``: a cudaIpcMemHandle_t)."""
    body = {"raw_handle": raw_handle, "device_id": device_id, "byte_size": byte_size}
    return core._extension_op(
        "register_cuda_shared_memory",
        core._binding.shm_register("cuda", name, body, core._opts(headers, timeout)),
    )


def unregister_cuda_shared_memory(
    core: _Core,
    /,
    name: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[None]:
    """Unregister one CUDA shared-memory region (all when no name)."""
    return core._extension_op(
        "unregister_cuda_shared_memory",
        core._binding.shm_unregister("cuda", name, core._opts(headers, timeout)),
    )


# -- KServe v1 -----------------------------------------------------------------------------------


def list_models(
    core: _Core, /, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
) -> Op[list[str]]:
    """KServe's model list (``GET v2/models``, else ``v1/models``): names only, REST only.

    Raises:
        ModelNotFoundError: The server has neither route.
        UnsupportedError: A gRPC client (the list is REST only).
    """
    return core._extension_op("list_models", core._binding.model_list(core._opts(headers, timeout)))


def predict(
    core: _Core,
    /,
    model_name: str,
    instances: Any,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[Any]:
    """KServe v1 ``:predict``: send ``{"instances": ...}``, return the ``predictions``."""
    opts = core._opts(headers, timeout)
    return core._extension_op(
        "predict", core._binding.v1_call(model_name, "predict", instances, opts)
    )


def explain(
    core: _Core,
    /,
    model_name: str,
    instances: Any,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Op[dict[str, Any]]:
    """KServe v1 ``:explain``: the explainer's whole JSON answer (e.g. ``explanations``).

    Raises:
        ModelNotFoundError: unknown model, or it has no explainer.
    """
    opts = core._opts(headers, timeout)
    return core._extension_op(
        "explain", core._binding.v1_call(model_name, "explain", instances, opts)
    )
