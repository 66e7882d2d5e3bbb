"""Cards of metadata, a model handle, a session and statistics, drawn from tiny duck-typed objects.

No server, no nbinfer class: the renderers read attributes by name (xarray's formatting_html
style), so plain namespaces stand in for ModelMetadata, ModelHandle and Session.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nbinfer.render.cards import (
    STATS_NOTE,
    connect_snippet,
    metadata_bundle,
    render_metadata,
    render_model,
    render_server_metadata,
    render_session,
    render_stats,
    stats_bundle,
)
from tests.render.pages import EVIL, safe, themed


def _spec(name: str, datatype: str = "FP32", shape: tuple[int, ...] = (-1, 4)) -> Any:
    return SimpleNamespace(name=name, datatype=datatype, shape=list(shape))


def _meta(name: str = "iris") -> Any:
    return SimpleNamespace(
        name=name,
        platform="onnxruntime_onnx",
        versions=["1", "2"],
        parameters={"owner": EVIL},
        inputs=[_spec("input")],
        outputs=[_spec(EVIL, "FP32", (-1, 3))],
    )


class _Listing:
    """The few things render_session reads of a listing frame."""

    def __init__(self, rows: list[tuple[str, str, str]], note: str = "") -> None:
        self.columns = ["name", "version", "state"]
        self._rows = rows
        self.attrs = {"note": note} if note else {}

    def itertuples(self, index: bool = False) -> list[tuple[str, str, str]]:
        return self._rows


def _session(server: Any = None, token: str | None = None) -> Any:
    """A session's public face: the renderer reads nothing private of it."""
    return SimpleNamespace(url="http://127.0.0.1:8000", protocol="http", server=server, token=token)


def _card(closed: bool = False, caps: Any = None, listing: Any = None) -> str:
    """The session card from held state (what ``Session._repr_mimebundle_`` hands over)."""
    held = {"closed": closed, "replaced_by": None, "capabilities": caps, "listing": listing}
    return render_session(_session(), held)


def _caps(error: BaseException | None = None) -> Any:
    extensions = [EVIL, "statistics"]
    return SimpleNamespace(name="nbinfer", version="0.1", extensions=extensions, error=error)


def test_metadata_card_names_every_tensor_and_escapes_the_server() -> None:
    markup = render_metadata(_meta())
    page = safe(markup)
    themed(markup)
    text = page.joined()
    assert "input" in text and EVIL in text  # the hostile output name, as text
    assert "onnxruntime_onnx" in text and "1, 2" in text
    assert "Inputs" in text and "Outputs" in text
    bundle = metadata_bundle(_meta())
    assert bundle["text/plain"].startswith("namespace(") and "<style>" in bundle["text/html"]


def test_server_metadata_card_lists_extensions_as_chips() -> None:
    meta = SimpleNamespace(name="triton", version="2.50", extensions=["statistics", EVIL])
    markup = render_server_metadata(meta)
    assert markup.count('class="nbi-chip"') == 2
    assert EVIL in safe(markup).joined()


def test_model_card_draws_what_the_handle_holds() -> None:
    iris = SimpleNamespace(name="iris", version="")
    assert "handle.refresh()" in safe(render_model(iris, {})).joined()

    failed = render_model(iris, {"error": RuntimeError(EVIL)})
    assert f"RuntimeError: {EVIL}" in safe(failed).joined()

    config = {"max_batch_size": 8, "dynamic_batching": {"preferred_batch_size": [4]}}
    held = {
        "metadata": _meta(),
        "config": config,
        "labels": {EVIL: ["setosa", "<versicolor>"]},
        "ready": True,
    }
    markup = render_model(SimpleNamespace(name="iris", version="2"), held)
    text = safe(markup).joined()
    assert "READY" in text and "version 2" in text
    assert "max batch" in text and "preferred [4]" in text
    assert "2 labels" in text and "<versicolor>" in text
    assert '"max_batch_size": 8' in text  # the config, collapsed


def test_session_card_from_held_state_closed_unread_failed_and_listed() -> None:
    assert "closed" in safe(_card(closed=True)).joined()
    unread = safe(_card()).joined()
    assert "Nothing read from the server yet" in unread and "session.refresh()" in unread
    failed = _card(caps=_caps(error=ConnectionError(EVIL)))
    assert f"ConnectionError: {EVIL}" in safe(failed).joined()

    not_listed = safe(_card(caps=_caps())).joined()
    assert "Not listed yet" in not_listed

    listing = _Listing([(EVIL, "1", "READY"), ("iris", "1", "UNAVAILABLE")], note="partial <x>")
    markup = _card(caps=_caps(), listing=listing)
    text = safe(markup).joined()
    assert EVIL in text and "iris" in text and "partial <x>" in text
    assert 'class="nbi-badge nbi-ok">READY' in markup
    assert 'class="nbi-badge nbi-err">UNAVAILABLE' in markup
    listing_failed = _card(caps=_caps(), listing=PermissionError("no index"))
    assert "PermissionError: no index" in safe(listing_failed).joined()


def test_connect_snippet_never_writes_the_token_out() -> None:
    server = SimpleNamespace(
        running=True, http_url="http://127.0.0.1:8000", grpc_address="127.0.0.1:8001"
    )
    secret = "s3cr3t-token"
    snippet = connect_snippet(_session(server=server, token=secret))
    assert secret not in snippet and "session.token" in snippet
    assert '"127.0.0.1:8000"' in snippet and '"127.0.0.1:8001"' in snippet
    assert "no token" in connect_snippet(_session(server=server))
    assert connect_snippet(_session()) == ""  # a remote session: nothing local to reach


class _Stats:
    """A statistics frame as render_stats reads it."""

    columns = ("name", "version", "success", "queue_ms")

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def to_dict(self, orient: str) -> list[dict[str, Any]]:
        assert orient == "records"
        return self.records

    def __repr__(self) -> str:
        return "<stats>"


def test_statistics_card_shows_counts_breakdown_and_what_they_mean() -> None:
    used = {
        "name": EVIL,
        "version": "1",
        "success": 3,
        "execution_count": 2,
        "inference_count": 5,
        "fail": 0,
        "success_ms": 1.5,
        "queue_ms": 0.5,
        "compute_input_ms": 0.1,
        "compute_infer_ms": 0.8,
        "compute_output_ms": 0.1,
    }
    idle = {"name": "idle", "version": "1", "success": 0, "success_ms": 0.0, "cancel": 2}
    markup = render_stats(_Stats([used, idle]))
    text = safe(markup).joined()
    themed(markup)
    assert EVIL in text and "1.500" in text and "—" in text  # an unused model: no mean
    assert "cancelled" in text  # only when some request was given up
    assert "Latency per request" in text and "queue" in text
    assert STATS_NOTE.split(";")[0] in text.replace("`", "")


def test_a_frame_without_the_statistics_columns_is_text_only() -> None:
    plain = SimpleNamespace(to_dict=lambda orient: [], columns=("a",))
    assert set(stats_bundle(plain)) == {"text/plain"}
