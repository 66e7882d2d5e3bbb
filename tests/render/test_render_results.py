"""The InferResult card and tensor previews, drawn from duck-typed results (no server)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from nbinfer.render.tensors import (
    FULL_PREVIEW,
    classification_bundle,
    preview,
    render_classification,
    render_result,
    result_bundle,
)
from tests.render.pages import EVIL, safe, themed


def _out(name: str, data: Any, datatype: str = "FP32", **parameters: Any) -> Any:
    shape = list(np.shape(data)) if data is not None else [1]
    return SimpleNamespace(
        name=name, datatype=datatype, shape=shape, data=data, parameters=parameters
    )


def _result(*outputs: Any, labels: Any = None, notes: tuple[str, ...] = ()) -> Any:
    return SimpleNamespace(
        model_name=EVIL,
        model_version="3",
        id="req-1",
        outputs=list(outputs),
        labels=labels or {},
        notes=notes,
    )


def _classes(array: np.ndarray) -> list[list[Any]]:
    """A stand-in for the protocol's decoder: ``b"score:index:label"`` rows."""
    rows = []
    for row in np.atleast_2d(array):
        items = [bytes(v).decode().split(":", 2) for v in row]
        rows.append(
            [SimpleNamespace(score=float(s), index=int(i), label=lab) for s, i, lab in items]
        )
    return rows


def test_result_card_shows_each_output_and_escapes_names_values_and_notes() -> None:
    text = np.array([EVIL.encode(), b"ok"], dtype=object)
    markup = render_result(
        _result(
            _out(EVIL, np.arange(6, dtype=np.float32).reshape(2, 3)),
            _out("t", text, "BYTES"),
            notes=(f"NaN in {EVIL}",),
        )
    )
    page = safe(markup)
    themed(markup)
    shown = page.joined()
    assert shown.count(EVIL) >= 4  # title, output name, a BYTES value, the note: all as text
    assert "version 3" in shown and "req-1" in shown
    assert "[[0., 1., 2.]," in shown  # the values, in full
    assert "min" in shown and "5" in shown  # summary facts of a numeric output


def test_big_tensors_are_summarised_small_ones_shown_in_full() -> None:
    assert "..." not in preview(np.arange(FULL_PREVIEW))
    assert "..." in preview(np.arange(FULL_PREVIEW + 1))
    assert preview(np.array([b"\xff\xfe"], dtype=object)) == "[b'\\xff\\xfe']"


def test_classification_outputs_draw_as_top_k_bars_with_the_decoder_given() -> None:
    rows = np.array([[b"0.9:1:<dog>", b"0.1:0:cat"]], dtype=object)
    with_bars = render_result(_result(_out("top", rows, "BYTES")), classify=_classes)
    assert 'class="nbi-topk"' in with_bars and "&lt;dog&gt;" in with_bars
    assert 'style="width:90.00%"' in with_bars  # probabilities on a 0..1 scale
    assert "<details><summary>values" in with_bars  # the raw strings collapsed
    plain = render_result(_result(_out("top", rows, "BYTES")))  # no decoder: values only
    assert 'class="nbi-topk"' not in plain

    def broken(array: np.ndarray) -> list[list[Any]]:
        raise ValueError("not classes")

    assert 'class="nbi-topk"' not in render_result(
        _result(_out("top", rows, "BYTES")), classify=broken
    )


def test_scores_over_the_models_labels_draw_as_the_top_three() -> None:
    scores = np.array([[0.1, 0.7, 0.2, 0.0]], dtype=np.float32)
    markup = render_result(
        _result(_out("probabilities", scores), labels={"probabilities": ["a", EVIL, "c", "d"]})
    )
    page = safe(markup)
    labels = [
        attrs.get("title") for tag, attrs in page.tags if tag == "span" and attrs.get("title")
    ]
    assert labels == [EVIL, "c", "a"]  # best first, three of four


def test_image_like_outputs_become_thumbnails() -> None:
    images = np.zeros((2, 16, 16, 3), dtype=np.uint8)
    markup = render_result(_result(_out("image", images, "UINT8")))
    assert markup.count('<img src="data:image/png;base64,') == 2
    png = np.array([b"\x89PNG\r\n\x1a\n" + b"\x00" * 8], dtype=object)
    assert 'src="data:image/png;base64,' in render_result(_result(_out("png", png, "BYTES")))


def test_an_output_left_in_shared_memory_says_where() -> None:
    out = _out("y", None, shared_memory_region=EVIL)
    text = safe(render_result(_result(out))).joined()
    assert "written to shared-memory region" in text and EVIL in text


def test_classification_rows_and_a_single_class() -> None:
    rows = [[SimpleNamespace(score=s, index=i, label=None) for i, s in enumerate([5.0, 2.5])]] * 9
    markup = render_classification(rows)
    assert markup.count('class="nbi-topk"') == 8 and "1 more rows" in markup
    assert "#0" in markup and 'style="width:50.00%"' in markup  # logits scale to the largest
    one = SimpleNamespace(score=0.5, index=2, label=EVIL)
    bundle = classification_bundle(one)
    assert bundle["text/plain"] == repr(one)
    safe(bundle["text/html"])
    assert result_bundle(_result())["text/plain"].startswith("namespace(")
