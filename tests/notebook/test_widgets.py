"""The model browser (``nbinfer.browse(session)``): its widgets and callbacks, without a browser.

Against the embedded server (every extension), and against real servers on 127.0.0.1 that offer
less: one that advertises neither the repository nor the statistics extension, and one whose
repository index and statistics answer 401 (as Triton's restricted APIs do).
"""

from __future__ import annotations

import datetime
import io
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import nbinfer
from nbinfer import Session
from nbinfer.errors import UnauthenticatedError
from nbinfer.notebook.widgets import ModelBrowser
from nbinfer.server.dataplane import DataPlane
from nbinfer.server.demo import demo_models
from nbinfer.server.repository import ModelRepository
from tests.inprocess import serving


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


@pytest.fixture
def browser(session: Session) -> Iterator[ModelBrowser]:
    b = nbinfer.browse(session)
    b.wait()
    yield b
    b.close()


def _pick(browser: ModelBrowser, name: str) -> None:
    browser.select(name)
    browser.wait()
    assert browser.error.value == ""


def _shown(widget: Any) -> bool:
    return widget.layout.display != "none"


def _png(width: int, height: int, color: tuple[int, int, int]) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def _upload(editor: Any, content: bytes, name: str = "cat.png") -> None:
    editor.upload.value = (
        {
            "name": name,
            "type": "image/png",
            "size": len(content),
            "content": memoryview(content),
            "last_modified": datetime.datetime.now(datetime.timezone.utc),
        },
    )


# -- the embedded server: everything offered ----------------------------------------------------


def test_browse_lists_demo_models_with_state_and_offers_every_feature(
    browser: ModelBrowser,
) -> None:
    assert {"add_sub", "echo", "iris", "digits"} <= set(browser.models)
    labels = dict((v, k) for k, v in browser.model_list.options)
    assert labels["iris"] == "\u25cf iris"  # a filled dot: READY
    assert browser.capabilities.repository and browser.capabilities.statistics
    assert browser.tabs.titles == ("Try it", "Metadata", "Config", "Statistics")
    assert _shown(browser.load_button) and _shown(browser.unload_button)
    assert not _shown(browser.open_box)
    assert "nbinfer" in browser.title.value and "model_repository" in browser.title.value
    assert not browser.busy
    bundle = browser._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_selecting_iris_shows_metadata_config_stats_and_a_number_form(
    browser: ModelBrowser,
) -> None:
    _pick(browser, "iris")
    assert browser.model_list.value == "iris"
    assert _shown(browser.detail)
    assert "iris" in browser.header.value and "READY" in browser.header.value
    assert "probabilities" in browser.metadata_view.value
    assert "input" in browser.metadata_view.value
    assert "max_batch_size" in browser.config_view.value
    assert "Statistics" in browser.stats_view.value
    (editor,) = browser._editors
    assert editor.spec.name == "input" and len(editor.boxes) == 4  # one box per feature
    for box, value in zip(editor.boxes, [5.1, 3.5, 1.4, 0.2], strict=True):
        box.value = value
    browser.run()
    browser.wait()
    result = browser.result.value
    assert "answered in" in result and "probabilities" in result
    assert "setosa" in result  # labelled top classes
    # the statistics tab is read again after Run: it shows the server's counts as they are now
    (row,) = browser.session.stats("iris").to_dict("records")
    assert row["success"] >= 1
    counts = (
        f'<td class="nbi-num">{row["success"]}</td><td class="nbi-num">{row["execution_count"]}'
    )
    assert counts in browser.stats_view.value
    expected = browser.session.infer("iris", {"input": np.array([[5.1, 3.5, 1.4, 0.2]], "f4")})
    assert expected["probabilities"].argmax() == 0


def test_try_it_sends_text_to_a_bytes_input(browser: ModelBrowser) -> None:
    _pick(browser, "echo")
    (editor,) = browser._editors
    editor.widget.value = "first line\nsecond <b>line</b>"
    arrays = browser.inputs()
    assert arrays["INPUT0"].shape == (1, 2)
    browser.run()
    browser.wait()
    assert "second &lt;b&gt;line&lt;/b&gt;" in browser.result.value  # escaped, not markup
    assert "<b>line</b>" not in browser.result.value


def test_try_it_array_input_scalar_fills_and_bad_text_shows_in_the_widget(
    browser: ModelBrowser,
) -> None:
    _pick(browser, "add_sub")
    first, second = browser._editors
    first.widget.value = "2"
    second.widget.value = str(list(range(16)))
    arrays = browser.inputs()
    assert arrays["INPUT0"].shape == (1, 16) and arrays["INPUT0"].dtype == np.float32
    assert arrays["INPUT1"].shape == (1, 16)  # a flat list gets the batch dimension
    browser.run()
    browser.wait()
    assert "OUTPUT0" in browser.result.value and "InvalidInputError" not in browser.result.value

    second.widget.value = "[1, 2, 3]"  # 3 values cannot fill [-1, 16]
    browser.run()
    browser.wait()
    assert "Running add_sub failed" in browser.result.value
    assert "InvalidInputError" in browser.result.value
    assert "do not fit" in browser.result.value

    second.widget.value = "not numbers"
    browser.run()
    browser.wait()
    assert "cannot read" in browser.result.value
    assert not browser.busy and not browser.run_button.disabled


def test_unload_then_try_it_shows_the_server_error_then_load_restores(
    browser: ModelBrowser,
) -> None:
    _pick(browser, "iris")
    browser.unload()
    browser.wait()
    assert browser.error.value == ""
    labels = dict((v, k) for k, v in browser.model_list.options)
    assert labels["iris"].startswith("\u25cb iris") and "unavailable" in labels["iris"]
    assert "UNAVAILABLE" in browser.header.value
    assert browser.load_button.description == "Load" and browser.unload_button.disabled
    browser.run()  # the form is gone with the metadata: the click names the problem
    browser.wait()
    # both say it: the metadata tab could not be read, and Run (no form to read) failed too
    assert "Reading the metadata failed" in browser.metadata_view.value
    assert "Running iris failed" in browser.result.value
    try:
        browser.load()
        browser.wait()
        assert browser.error.value == ""
        assert "READY" in browser.header.value
        assert browser.load_button.description == "Reload"
        assert len(browser._editors) == 1
    finally:
        browser.session.load("iris")


def test_errors_in_callbacks_are_shown_not_swallowed(session: Session) -> None:
    browser = nbinfer.browse(session)
    browser.wait()
    browser.select("no_such_model")
    browser.wait()
    assert "ModelNotFoundError" in browser.metadata_view.value
    browser.open("")  # nothing to open: no call, no error
    browser._current = "no_such_model"
    browser.load()
    browser.wait()
    assert "Loading no_such_model failed" in browser.error.value
    assert "ModelNotFoundError" in browser.error.value
    browser.close()


def test_image_inputs_get_an_upload_decoded_and_resized(session: Session) -> None:
    def mean_rgb(image: np.ndarray) -> np.ndarray:  # [N, 32, 32, 3] uint8 -> [N, 3]
        return image.reshape(image.shape[0], -1, 3).mean(axis=1).astype(np.float32)

    def size_chw(image: np.ndarray) -> np.ndarray:  # [N, 3, 24, 40] fp32 -> shape and max
        return np.array([[*image.shape[1:], image.max()]], dtype=np.float32)

    session.serve(
        mean_rgb,
        name="image_mean",
        inputs=[("image", "UINT8", [-1, 32, 32, 3])],
        outputs=[("mean", "FP32", [-1, 3])],
    )
    session.serve(
        size_chw,
        name="image_chw",
        inputs=[("image", "FP32", [-1, 3, 24, 40])],
        outputs=[("info", "FP32", [-1, 4])],
    )
    session.serve(
        mean_rgb,
        name="image_rgba",
        inputs=[("image", "UINT8", [-1, -1, -1, 4])],
        outputs=[("mean", "FP32", [-1, 3])],
    )
    browser = nbinfer.browse(session)
    browser.wait()
    try:
        _pick(browser, "image_mean")
        (editor,) = browser._editors
        assert type(editor).__name__ == "_ImageEditor"
        browser.run()  # no upload yet: a clear message, in the widget
        browser.wait()
        assert "upload an image first" in browser.result.value
        _upload(editor, _png(64, 48, (200, 100, 50)))
        assert "data:image/png;base64," in editor.preview.value
        assert editor.value().shape == (1, 32, 32, 3)
        browser.run()
        browser.wait()
        assert "200" in browser.result.value and "100" in browser.result.value

        _pick(browser, "image_chw")
        (editor,) = browser._editors
        _upload(editor, _png(10, 10, (255, 0, 0)))
        array = editor.value()
        assert array.shape == (1, 3, 24, 40) and array.dtype == np.float32
        assert array.max() == pytest.approx(1.0)
        _upload(editor, b"not an image")
        browser.run()
        browser.wait()
        assert "cannot decode" in browser.result.value

        _pick(browser, "image_rgba")  # variable H x W: the upload keeps its own size
        (editor,) = browser._editors
        assert "its own size" in editor.preview.value
        _upload(editor, _png(7, 5, (1, 2, 3)))
        array = editor.value()
        assert array.shape == (1, 5, 7, 4) and array[0, 0, 0].tolist() == [1, 2, 3, 255]
    finally:
        browser.close()


def _stroke_png(points: list[tuple[int, int]], size: int = 160) -> bytes:
    """A drawing as the sketch pad sends it: white ink on black, PNG."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), (0, 0, 0))
    ImageDraw.Draw(image).line(points, fill=(255, 255, 255), width=22, joint="curve")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _data_url(png: bytes) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _top(session: Session, model: str, image: bytes) -> str:
    frame = session.classify(model, image, top_k=1)
    return str(frame["label"].iloc[0])


def _shown_top(html: str) -> str:
    """The first (best) label of the classification grid in the browser's result."""
    import re

    found = re.search(r'class="nbi-label"[^>]*>([^<]*)<', html)
    assert found is not None, html[-400:]
    return found.group(1)


def test_image_classifier_form_uploads_and_sketches_through_classify(session: Session) -> None:
    pytest.importorskip("anywidget", reason="the sketch pad is an anywidget widget")
    from nbinfer.interop.images import image_sample

    browser = ModelBrowser(session, background=False)
    try:
        _pick(browser, "digits")
        (editor,) = browser._editors
        assert type(editor).__name__ == "PictureEditor"  # not a 64-number text box
        assert editor.pad is not None and editor.plan.height == editor.plan.width == 8
        assert browser.sketch_pad is editor.pad
        assert editor.upload.accept == "image/*"
        browser.run()
        assert "draw on the sketch pad or upload an image first" in browser.result.value

        seven = _stroke_png([(40, 30), (120, 30), (70, 135)])
        _upload(editor, seven, name="seven.png")
        assert editor.latest == "upload" and "seven.png" in editor.source.value
        meta = session.client.get_model_metadata("digits")
        config = session.client.get_model_config("digits")
        expected = image_sample(meta, config, seven)
        np.testing.assert_array_equal(browser.inputs()["input"], expected[np.newaxis])
        browser.run()
        assert "digits</b> answered in" in browser.result.value
        assert "Classification" in browser.result.value and "top-5" in browser.result.value
        assert _shown_top(browser.result.value) == _top(session, "digits", seven)

        one = _stroke_png([(86, 20), (80, 80), (78, 140)])
        editor.pad.png = _data_url(one)  # what the pad's JS sends at the end of a stroke
        assert editor.latest == "pad" and "the drawing on the pad" in editor.source.value
        assert editor.image() == one
        browser.run()
        assert _top(session, "digits", one) == "1"
        assert _shown_top(browser.result.value) == "1"

        editor.pad.clear()  # the upload is what Run sends again
        assert editor.latest == "upload" and editor.image() == seven

        editor.pad.png = "data:text/plain;base64,aGk="
        browser.run()
        assert "expected a PNG data URL" in browser.result.value
    finally:
        browser.close()


def test_encoded_image_classifier_gets_the_upload_without_a_pad(session: Session) -> None:
    browser = ModelBrowser(session, background=False)
    try:
        _pick(browser, "digits_encoded")
        (editor,) = browser._editors
        assert type(editor).__name__ == "PictureEditor" and editor.pad is None
        assert "sent as the encoded file" in editor.source.value
        browser.run()
        assert "upload an image first" in browser.result.value
        one = _stroke_png([(86, 20), (80, 80), (78, 140)])
        _upload(editor, one)
        browser.run()
        assert "digits_encoded</b> answered in" in browser.result.value
        assert _shown_top(browser.result.value) == _top(session, "digits_encoded", one)
        _upload(editor, b"not an image")
        browser.run()
        assert "failed" in browser.result.value
    finally:
        browser.close()


def test_picture_form_without_anywidget_keeps_the_upload(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nbinfer.notebook.sketch", None)  # import fails
    browser = ModelBrowser(session, background=False)
    try:
        _pick(browser, "digits")
        (editor,) = browser._editors
        assert type(editor).__name__ == "PictureEditor" and editor.pad is None
        assert "Upload an image, then Run." in editor.source.value
    finally:
        browser.close()


def test_unlabelled_image_models_and_iris_keep_their_forms(session: Session) -> None:
    browser = ModelBrowser(session, background=False)
    try:
        _pick(browser, "iris")
        assert [type(e).__name__ for e in browser._editors] == ["_NumbersEditor"]
        assert browser.sketch_pad is None
        _pick(browser, "echo")  # a BYTES input with one output, no labels: not an image form
        assert [type(e).__name__ for e in browser._editors] == ["_TextEditor"]
    finally:
        browser.close()


def test_browser_layout_never_cuts_refresh_and_lets_the_panes_wrap(browser: ModelBrowser) -> None:
    layout = browser.refresh_button.layout
    assert layout.min_width == "max-content" and layout.flex == "0 0 auto"
    from nbinfer.render.html import css

    sheet = css("browser.css")
    assert "container-type: inline-size" in sheet and "flex-wrap: wrap" in sheet


# -- servers that offer less ----------------------------------------------------------------------


class _RestrictedPlane(DataPlane):
    """Advertises the repository and statistics extensions but refuses them (Triton's restricted
    APIs answer 401 without the configured header)."""

    def repository_index(self, *, ready_only: bool = False) -> Any:
        raise UnauthenticatedError("This API is restricted, expecting header 'admin-key'")

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        raise UnauthenticatedError("This API is restricted, expecting header 'admin-key'")


def _serve(plane: DataPlane) -> Iterator[str]:
    """Serve ``plane`` over HTTP on 127.0.0.1 from a thread; yields its URL."""
    with serving(plane) as (http, _):
        yield http


@pytest.fixture(scope="module")
def bare_url() -> Iterator[str]:
    repo = ModelRepository(models=demo_models())
    yield from _serve(DataPlane(repo, extensions=["binary_tensor_data", "model_configuration"]))


@pytest.fixture(scope="module")
def restricted_url() -> Iterator[str]:
    yield from _serve(_RestrictedPlane(ModelRepository(models=demo_models())))


def test_server_without_repository_or_statistics_hides_them(bare_url: str) -> None:
    with Session(bare_url) as session:
        browser = nbinfer.browse(session, models=["iris"])
        browser.wait()
        assert browser.models == ["iris"]
        assert not browser.capabilities.repository and not browser.capabilities.statistics
        assert not _shown(browser.load_button) and not _shown(browser.unload_button)
        assert "Statistics" not in browser.tabs.titles
        assert _shown(browser.open_box)
        assert "no model repository" in browser.list_note.value
        _pick(browser, "iris")
        assert "READY" in browser.header.value
        for box in browser._editors[0].boxes:
            box.value = 6.0
        browser.run()
        browser.wait()
        assert "probabilities" in browser.result.value

        browser.open_name.value = "add_sub"
        browser.open_button.click()
        browser.wait()
        assert browser.models == ["iris", "add_sub"]
        assert browser.model_list.value == "add_sub"
        browser.open("nope")
        browser.wait()
        assert "Opening nope failed" in browser.error.value
        assert browser.models == ["iris", "add_sub"]
        browser.close()


def test_restricted_repository_and_statistics_are_explained_not_raised(
    restricted_url: str,
) -> None:
    with Session(restricted_url) as session:
        browser = nbinfer.browse(session, models=["echo"])
        browser.wait()
        assert browser.error.value == ""
        assert browser.capabilities.repository  # advertised ...
        assert not _shown(browser.load_button)  # ... but refused: no buttons
        # The listing restricted: the models met, and the note says which header opens it.
        assert "restricts its model repository index API" in browser.list_note.value
        assert "admin-key" in browser.list_note.value
        _pick(browser, "echo")
        assert "not available" in browser.stats_view.value
        assert "admin-key" in browser.stats_view.value
        browser.run()
        browser.wait()
        assert "hello nbinfer" in browser.result.value
        browser.close()


def test_synchronous_mode_completes_callbacks_before_returning(session: Session) -> None:
    browser = ModelBrowser(session, background=False)
    assert "iris" in browser.models
    browser.select("add_sub")
    assert type(browser._editors[0]).__name__ == "_ArrayEditor"  # [-1, 16]: a list of 16
    assert browser.inputs()["INPUT0"].shape == (1, 16)
    browser.run()
    assert "OUTPUT1" in browser.result.value
    browser.close()


def test_slow_work_runs_in_the_background_with_a_busy_state(session: Session) -> None:
    def slow(x: np.ndarray) -> np.ndarray:
        time.sleep(0.5)
        return x

    session.serve(
        slow, name="slow", inputs=[("x", "FP32", [-1, 2])], outputs=[("y", "FP32", [-1, 2])]
    )
    browser = nbinfer.browse(session)
    try:
        _pick(browser, "slow")
        started = time.perf_counter()
        browser.run()
        returned = time.perf_counter() - started
        assert returned < 0.3  # the kernel is not held while the model runs
        assert browser.busy and browser.run_button.disabled and browser.load_button.disabled
        assert "Running slow" in browser.status.value and "nbb-spin" in browser.status.value
        browser.wait()
        assert not browser.busy and not browser.run_button.disabled
        assert browser.status.value == "" and "answered in" in browser.result.value
    finally:
        browser.close()


def test_buttons_on_a_server_whose_model_control_refuses_show_the_refusal() -> None:
    from nbinfer.server.repository import ModelControl

    repo = ModelRepository(models=demo_models(), control=ModelControl(mode="none"))
    for url in _serve(DataPlane(repo)):
        with Session(url) as session:
            browser = nbinfer.browse(session)
            browser.wait()
            _pick(browser, "iris")
            browser.unload()
            browser.wait()
            assert "Unloading iris failed" in browser.error.value
            assert "PermissionDeniedError" in browser.error.value
            assert "--model-control-mode none" in browser.error.value
            assert "READY" in browser.header.value  # still serving
            browser.close()


class _GatedPlane(DataPlane):
    """Holds its repository index until the test opens the gate (a listing on its way)."""

    def __init__(self, repo: ModelRepository) -> None:
        super().__init__(repo)
        self.gate = threading.Event()
        self.gate.set()
        self.asked = threading.Event()

    def repository_index(self, *, ready_only: bool = False) -> Any:
        self.asked.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return super().repository_index(ready_only=ready_only)


@pytest.fixture
def gated() -> Iterator[tuple[_GatedPlane, str]]:
    plane = _GatedPlane(ModelRepository(models=demo_models()))
    try:
        for url in _serve(plane):
            yield plane, url
    finally:
        plane.gate.set()


def test_display_never_waits_for_the_listing_it_fills_in_when_it_arrives(
    gated: tuple[_GatedPlane, str],
) -> None:
    plane, url = gated
    plane.gate.clear()
    with Session(url) as session:
        browser = nbinfer.browse(session)
        try:
            assert plane.asked.wait(30)  # the listing is asked for and held at the server
            bundle = browser._repr_mimebundle_()  # returns while the server holds the answer
            assert browser.busy and browser.models == []
            assert "Listing models" in bundle["text/html"]  # the static copy says what it waits for
            plane.gate.set()
            browser.wait()
            assert {"iris", "add_sub"} <= set(browser.models)  # the live widget filled in
            assert "Listing models" not in browser._repr_mimebundle_()["text/html"]
        finally:
            plane.gate.set()
            browser.wait()  # the listing done before the session closes its client
            browser.close()


def test_display_draws_the_sessions_held_listing_at_once(gated: tuple[_GatedPlane, str]) -> None:
    plane, url = gated
    with Session(url) as session:
        assert "iris" in set(session.models["name"])  # the session holds this listing now
        plane.gate.clear()
        plane.asked.clear()
        browser = nbinfer.browse(session)
        try:
            assert plane.asked.wait(30)  # the browser's own refresh is held at the server
            assert browser.busy and "iris" in browser.models  # drawn from the session's listing
            html = browser._repr_mimebundle_()["text/html"]
            assert "iris</li>" in html and "Listing models" not in html
        finally:
            plane.gate.set()
            browser.wait()  # the listing done before the session closes its client
            browser.close()


def test_closing_the_session_during_the_listing_is_quiet(gated: tuple[_GatedPlane, str]) -> None:
    plane, url = gated
    plane.gate.clear()
    session = Session(url)
    browser = nbinfer.browse(session)
    try:
        assert plane.asked.wait(30)  # the listing is in flight, held at the server
        session.close()  # once raised pycurl.error: "cannot invoke close() - perform() is running"
        plane.gate.set()
        browser.wait()  # the cancelled listing ends without an error in the widget
        assert browser.error.value == "" and not browser.busy
        assert "The session is closed" in browser.list_note.value  # not "the server refused"
        assert browser.models == []  # its result dropped, nothing drawn after the close
        with pytest.raises(nbinfer.TransportError, match="closed"):
            session.client.is_server_live()  # the engine is closed for later calls
    finally:
        plane.gate.set()
        browser.close()
        session.close()
