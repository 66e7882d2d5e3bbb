"""Rich HTML reprs against the embedded server: they parse, name what they show, escape markup."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import nbinfer
from nbinfer.render import cards, html, tensors

EVIL = "<script>alert(1)"
EVIL_LABELS = ["<img src=x onerror=alert(2)>", "safe & sound"]
IRIS = {"input": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}


class Page(HTMLParser):
    """Collects start tags (with attributes) and the text of an HTML fragment."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def names(self) -> set[str]:
        return {t for t, _ in self.tags}

    def joined(self) -> str:
        return " ".join(self.text)


def html_of(obj: Any) -> Page:
    bundle = obj._repr_mimebundle_()
    assert bundle["text/plain"]
    page = Page(bundle["text/html"])
    assert "script" not in page.names(), "markup from the server reached the page"
    assert all("onerror" not in attrs for _, attrs in page.tags)
    return page


@pytest.fixture(scope="module")
def session() -> Iterator[nbinfer.Session]:
    with nbinfer.Session(device="cpu") as s:

        def evil(x: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
            return np.stack([x, 1 - x], axis=-1)

        s.serve(
            evil,
            name=EVIL,
            inputs=[("x", "FP32", [-1])],
            outputs=[("y", "FP32", [-1, 2])],
            labels=EVIL_LABELS,
        )

        def picture(x: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
            ramp = np.linspace(0, 1, 32 * 32 * 3, dtype=np.float32).reshape(1, 32, 32, 3)
            return ramp * x[:, None, None, None]

        s.serve(
            picture,
            name="picture",
            inputs=[("x", "FP32", [-1])],
            outputs=[("image", "FP32", [-1, 32, 32, 3])],
        )
        yield s


def test_session_html_shows_server_extensions_and_models_with_state(
    session: nbinfer.Session,
) -> None:
    page = html_of(session)
    text = page.joined()
    assert session.url in text and "nbinfer" in text and "local server" in text
    for name in ("iris", "digits", "add_sub", EVIL):
        assert name in text
    assert "READY" in text and "classification" in text and "model_repository" in text
    assert "details" in page.names()  # collapsible sections


def test_closed_session_html_says_closed() -> None:
    with nbinfer.Session(keep_previous=True, device="cpu", demo=False) as s:
        pass
    assert "closed" in html_of(s).joined()


def test_model_handle_html_has_inputs_outputs_batching_and_labels(
    session: nbinfer.Session,
) -> None:
    text = html_of(session.model("iris")).joined()
    for expected in ("iris", "input", "probabilities", "FP32", "[-1, 4]", "max batch", "READY"):
        assert expected in text
    assert "setosa" in text and "3 labels" in text


def test_model_metadata_html_lists_tensors_platform_versions(session: nbinfer.Session) -> None:
    meta = session.model("digits").metadata
    text = html_of(meta).joined()
    for expected in (
        "digits",
        "nbinfer_python",
        "input",
        "[-1, 8, 8]",
        "probabilities",
        "[-1, 10]",
    ):
        assert expected in text


def test_server_metadata_html_lists_extensions(session: nbinfer.Session) -> None:
    text = html_of(session.client.get_server_metadata()).joined()
    assert "statistics" in text and "binary_tensor_data" in text


def test_result_html_shows_small_tensor_in_full(session: nbinfer.Session) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    result = session.infer("add_sub", {"INPUT0": a, "INPUT1": a})
    text = html_of(result).joined()
    assert "OUTPUT0" in text and "OUTPUT1" in text and "FP32" in text and "[1, 16]" in text
    assert "30." in text  # the last element of 2 * a, so no "..." summary
    assert "..." not in text


def test_result_html_summarises_large_tensor_with_stats(session: nbinfer.Session) -> None:
    digits = np.random.default_rng(0).random((40, 8, 8), dtype=np.float32)
    text = html_of(session.infer("digits", {"input": digits})).joined()
    assert "[40, 10]" in text and "..." in text and "mean" in text


def test_classification_output_renders_top_k_bars_with_escaped_labels(
    session: nbinfer.Session,
) -> None:
    result = session.client.infer(
        EVIL, {"x": [0.25]}, outputs=[nbinfer.RequestedOutput("y", class_count=2)]
    )
    bundle = result._repr_mimebundle_()
    page = html_of(result)
    assert EVIL_LABELS[0] in page.joined() and "safe & sound" in page.joined()
    assert "&lt;img src=x onerror=alert(2)&gt;" in bundle["text/html"]
    fills = [a.get("style", "") for t, a in page.tags if "nbi-fill" in (a.get("class") or "")]
    assert "width:75.00%" in fills and "width:25.00%" in fills


def test_classification_result_and_rows_render(session: nbinfer.Session) -> None:
    result = session.client.infer(
        "iris", IRIS, outputs=[nbinfer.RequestedOutput("probabilities", class_count=3)]
    )
    rows = result.as_classification("probabilities")
    text = Page(tensors.render_classification(rows)).joined()
    assert "setosa" in text and "virginica" in text and "row 1" in text
    assert rows[0][0].label in html_of(rows[0][0]).joined()


def test_image_like_output_shows_png_thumbnails(session: nbinfer.Session) -> None:
    page = html_of(session.infer("picture", {"x": [1.0, 0.5]}))
    sources = [a["src"] or "" for t, a in page.tags if t == "img"]
    assert len(sources) == 2
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        image = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        assert image.format == "PNG" and image.size == (32, 32)


def test_encoded_image_bytes_output_shows_as_image() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 10, 10)).save(buffer, format="PNG")
    data = np.empty(1, dtype=object)
    data[0] = buffer.getvalue()
    response = nbinfer.InferResponse(
        "enc", [nbinfer.InferOutput("png", "BYTES", [1], data)], model_version="1"
    )
    page = Page(tensors.render_result(nbinfer.InferResult(response)))
    assert [a["src"][:22] for t, a in page.tags if t == "img"] == ["data:image/png;base64,"]


def test_stats_stay_a_dataframe_and_draw_a_latency_breakdown(session: nbinfer.Session) -> None:
    session.infer("iris", IRIS)
    stats = session.model("iris").stats()
    assert isinstance(stats, pd.DataFrame)
    assert {"queue_ms", "compute_input_ms", "compute_infer_ms", "compute_output_ms"} <= set(
        stats.columns
    )
    assert stats.loc[0, "compute_infer_ms"] > 0
    assert type(stats[stats["success"] > 0]) is pd.DataFrame  # derived frames: plain pandas
    text = html_of(stats).joined()
    for expected in ("iris", "queue", "compute input", "infer", "output", "ms"):
        assert expected in text
    every = html_of(session.stats()).joined()
    assert EVIL in every and "digits" in every


def test_error_html_says_what_failed_the_message_and_what_to_try(
    session: nbinfer.Session,
) -> None:
    with pytest.raises(nbinfer.ModelNotFoundError) as info:
        session.model("irs")
    bundle = info.value._repr_mimebundle_()
    assert "What to try" in bundle["text/plain"] and "session.models" in bundle["text/plain"]
    page = html_of(info.value)
    text = page.joined()
    assert "ModelNotFoundError" in text and "404" in text and "irs" in text
    assert "What to try" in text and "code" in page.names()


def test_error_with_markup_in_its_message_is_escaped(session: nbinfer.Session) -> None:
    with pytest.raises(nbinfer.InvalidInputError) as info:
        session.infer(EVIL, {"nope": [1.0]})
    assert EVIL in html_of(info.value).joined()


def test_text_fallback_is_inside_the_html_for_untrusted_notebooks(
    session: nbinfer.Session,
) -> None:
    meta = session.model("iris").metadata
    page = Page(cards.render_metadata(meta))
    fallback = [a for t, a in page.tags if t == "pre" and a.get("class") == "nbi-fallback"]
    assert fallback and repr(meta) in page.joined()


def test_helpers_escape_everything_but_html() -> None:
    cell = html.Html("<b>kept</b>")
    markup = html.table(["<th>"], [["<td>", cell]])
    assert "&lt;th&gt;" in markup and "&lt;td&gt;" in markup and "<b>kept</b>" in markup
    assert html.escape('"<x>"') == "&quot;&lt;x&gt;&quot;"
    assert "--jp-layout-color0" in html.css() and "--jp-content-font-color0" in html.css()
