"""The classification grid and a progress bar's summary, drawn from plain frames and values."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from nbinfer.render.gallery import MAX_IMAGES, classification_html, thumbnail_uri
from nbinfer.render.progress import summary_bundle
from tests.render.pages import EVIL, safe, themed


class _Frame(pd.DataFrame):  # type: ignore[misc]
    """A plain frame plus the attributes the grid reads (duck-typed, no nbinfer class)."""

    _metadata = ["images", "inputs", "input_note", "show_input"]  # noqa: RUF012


def _frame(keys: list[object], k: int = 2) -> _Frame:
    rows = [
        {"image": key, "rank": r + 1, "label": f"{EVIL} {r}", "score": 0.6 - 0.2 * r, "class": r}
        for key in keys
        for r in range(k)
    ]
    return _Frame(rows)


def test_the_grid_has_one_card_per_image_with_escaped_labels_and_keys(tmp_path: Path) -> None:
    picture = tmp_path / "cat <1>.png"
    Image.new("RGB", (40, 30), (200, 10, 10)).save(picture)
    frame = _frame([str(picture), 7])
    frame.images = {str(picture): str(picture), 7: np.zeros((8, 8), np.uint8)}
    markup = classification_html(frame)
    page = safe(markup)
    themed(markup)
    assert markup.count('<figure class="nbi-gcell">') == 2
    assert markup.count('<img src="data:image/png;base64,') == 2  # a file and an array
    text = page.joined()
    assert "cat <1>.png" in text and "#7" in text and f"{EVIL} 0" in text
    assert "top-2" in text and "2 images" in text


def test_a_missing_file_keeps_its_bars_without_a_picture(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone.png")
    frame = _frame([gone])
    frame.images = {gone: gone}
    markup = classification_html(frame)
    assert "no preview" in markup and 'class="nbi-bars"' in markup


def test_only_the_first_images_are_drawn_and_the_rest_are_counted() -> None:
    markup = classification_html(_frame(list(range(MAX_IMAGES + 2)), k=1))
    assert markup.count('<figure class="nbi-gcell">') == MAX_IMAGES
    assert f"{MAX_IMAGES} of {MAX_IMAGES + 2} images shown" in markup


def test_the_input_the_model_saw_is_offered_or_shown_beside() -> None:
    frame = _frame([0])
    frame.inputs = {0: np.eye(8, dtype=np.uint8) * 255}
    frame.input_note = f"8x8, {EVIL}"
    offered = classification_html(frame)
    assert "input the model saw" in offered and "&lt;script&gt;" in offered
    frame.show_input = True
    beside = classification_html(frame)
    assert 'class="nbi-gpair"' in beside and "how it was made" in beside


def test_thumbnails_of_bytes_and_small_inputs() -> None:
    buffer = io.BytesIO()
    Image.new("L", (300, 200), 128).save(buffer, format="PNG")
    uri = thumbnail_uri(buffer.getvalue(), size=96)
    shown = Image.open(io.BytesIO(__import__("base64").b64decode(uri.split(",", 1)[1])))
    assert shown.size == (96, 64)  # shrunk to fit, aspect kept


def test_a_finished_bar_leaves_a_themed_escaped_line() -> None:
    done = summary_bundle(f"10/10 {EVIL}", ok=True)
    assert done["text/plain"] == f"10/10 {EVIL}"
    safe(done["text/html"])
    assert (
        "\u2713" in done["text/html"] and "var(--jp-success-color1, #388e3c)" in done["text/html"]
    )
    failed = summary_bundle("3/10", ok=False)["text/html"]
    assert "\u2717" in failed and "var(--jp-error-color1, #d32f2f)" in failed
