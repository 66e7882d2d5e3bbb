"""The two client faces expose one API: same methods, same parameters, same docs."""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

import pytest

from nbinfer.client import AsyncClient, Client

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


@pytest.mark.parametrize(
    "name",
    sorted(set(_public(Client)) & set(_public(AsyncClient)) - SAME_NAME_OWN_SHAPE),
)
def test_shared_method_has_one_signature_and_docstring(name: str) -> None:
    sync, aio = getattr(Client, name), getattr(AsyncClient, name)
    assert inspect.signature(sync) == inspect.signature(aio)
    assert inspect.getdoc(sync) == inspect.getdoc(aio)
    assert inspect.getdoc(sync), f"{name} has no docstring"
    assert inspect.iscoroutinefunction(aio) and not inspect.iscoroutinefunction(sync)


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
