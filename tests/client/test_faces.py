"""The two client faces expose one API: same methods, and the same answers and errors."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, get_type_hints

import numpy as np
import pytest

from nbinfer.client import AsyncClient, Client, InferResult
from nbinfer.protocol.types import InferRequest

_ONES = {"INPUT0": np.ones((1, 16), np.float32), "INPUT1": np.ones((1, 16), np.float32)}
_ONES_ONLY_1 = {"INPUT1": np.ones((1, 3), np.float32)}

#: Calls whose semantics truly differ between the faces (each documented on its face).
SYNC_ONLY = {"async_infer", "start_stream", "stop_stream", "close"}
ASYNC_ONLY = {"aclose"}
#: Same name on both faces, different shape: the sync face also takes tritonclient's
#: one-request-on-an-open-stream form (see Client.stream_infer).
SAME_NAME_OWN_SHAPE = {"stream_infer"}


def _public(face: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(face, callable)
        if not name.startswith("_")
    }


def test_both_faces_expose_the_same_public_methods() -> None:
    sync, aio = set(_public(Client)), set(_public(AsyncClient))
    assert sync - aio == SYNC_ONLY
    assert aio - sync == ASYNC_ONLY


#: Calls made on both faces against one real server: (method, args, kwargs). Each pair must
#: give the same result, or raise the same error class with the same message.
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("is_server_live", (), {}),
    ("is_server_ready", (), {}),
    ("is_model_ready", ("add_sub",), {}),
    ("is_model_ready", ("no_such_model",), {}),
    ("get_server_metadata", (), {}),
    ("get_model_metadata", ("add_sub",), {}),
    ("get_model_metadata", ("add_sub",), {"model_version": "99"}),
    ("get_model_metadata", ("no_such_model",), {}),
    ("get_model_config", ("add_sub",), {}),
    ("get_model_repository_index", (), {"ready_only": True}),
    ("get_log_settings", (), {}),
    ("get_trace_settings", (), {}),
    ("get_system_shared_memory_status", (), {}),
    ("get_system_shared_memory_status", ("no_such_region",), {}),
    ("list_models", (), {}),
    ("predict", ("add_sub", [[1.0] * 16]), {}),
    ("build_request", ("add_sub", {"INPUT0": np.ones((1, 16), np.float32)}), {}),
    ("infer", ("add_sub", {"INPUT0": np.ones((2, 16), np.float32)} | _ONES), {}),
    ("infer", ("add_sub", _ONES), {"outputs": "OUTPUT1", "request_id": "r-1"}),
    ("infer", ("add_sub", {"INPUT0": np.ones((1, 3), np.float32)} | _ONES_ONLY_1), {}),
    ("infer", ("add_sub", _ONES), {"timeout": "soon"}),
    ("infer", ("add_sub", _ONES), {"timeout": -1}),
    ("get_model_metadata", ("add_sub",), {"timeout": "soon"}),
    ("infer", ("add_sub", _ONES), {"outputs": ["NO_SUCH_OUTPUT"]}),
    ("infer", ("no_such_model", _ONES), {}),
]


def _plain(value: Any) -> Any:
    """A call's answer in a form two answers compare by (results and requests by content)."""
    if isinstance(value, InferResult):
        return value.output_names, {k: v.tolist() for k, v in value.as_dict().items()}
    if isinstance(value, InferRequest):
        return value.model_name, [(i.name, i.datatype, i.shape) for i in value.inputs]
    return value


def _raised(exc: Exception) -> tuple[str, type[Exception], str]:
    return "raised", type(exc), str(exc).replace("AsyncClient", "Client")


def _sync_face(url: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with Client(url) as client:
        try:
            return "ok", _plain(getattr(client, name)(*args, **kwargs))
        except Exception as exc:  # the error is the behaviour under test
            return _raised(exc)


def _async_face(url: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with AsyncClient(url) as client:
            try:
                return "ok", _plain(await getattr(client, name)(*args, **kwargs))
            except Exception as exc:  # the error is the behaviour under test
                return _raised(exc)

    return asyncio.run(run())


@pytest.mark.parametrize(("name", "args", "kwargs"), CALLS, ids=[c[0] for c in CALLS])
def test_both_faces_answer_each_call_alike(
    url: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    blocking = _sync_face(url, name, args, kwargs)
    assert blocking == _async_face(url, name, args, kwargs)


def test_constructors_take_the_same_options() -> None:
    assert inspect.signature(Client) == inspect.signature(AsyncClient)


def test_declared_methods_show_the_result_type_not_the_op() -> None:
    sig = inspect.signature(Client.infer)
    assert list(sig.parameters)[:3] == ["self", "model_name", "inputs"]
    assert sig.return_annotation == "InferResult"
    assert Client.infer.__qualname__ == "Client.infer"
    assert AsyncClient.infer.__qualname__ == "AsyncClient.infer"
    hints = get_type_hints(Client.is_model_ready)
    assert hints["return"] is bool and hints["model_name"] is str


def test_stream_infer_is_one_contract_on_both_faces() -> None:
    # the requests form is the asyncio face's signature; the sync face accepts it too
    aio = inspect.signature(AsyncClient.stream_infer)
    assert list(aio.parameters) == ["self", "requests", "headers", "timeout"]
    doc = inspect.getdoc(Client.stream_infer) or ""
    assert "stream_infer(requests" in doc and "AsyncClient.stream_infer" in doc
    assert "Client.stream_infer" in (inspect.getdoc(AsyncClient.stream_infer) or "")
