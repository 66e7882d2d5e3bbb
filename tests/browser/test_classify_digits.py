"""A real browser: the classify grid shows the 8x8 the digits model received (issue 31 item 6).

``show_input=True`` draws each image's model input beside it, its pixels visible (96 px, each
input pixel a 12 px block); without it, every card's "input the model saw" opens to show it.
Light and dark theme (fixtures in conftest.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, lab_page, open_notebook, run_all, shoot

NOTEBOOK = "classify_digits.ipynb"

pytestmark = pytest.mark.timeout(180)


def _loaded_sizes(images: Any) -> list[list[int]]:
    return images.evaluate_all(
        "els => els.map(e => [e.complete ? e.naturalWidth : -1, e.naturalHeight])"
    )


def test_classify_grid_shows_the_input_the_model_saw(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    with lab_page(chromium, tmp_path, 1100, 900) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        run_all(page)
        grids = page.locator(".nbi-gallery")
        grids.nth(1).wait_for(timeout=90_000)
        shown = grids.nth(0)
        pairs = shown.locator(".nbi-gpair")
        assert pairs.count() == 6
        inputs = shown.locator(".nbi-ginput img")
        assert _loaded_sizes(inputs) == [[96, 96]] * 6  # 8x8 scaled up nearest-neighbour
        box = inputs.first.bounding_box()
        assert box is not None and box["width"] >= 60  # drawn big enough to see the pixels
        tops = shown.locator("figure .nbi-bars > .nbi-label:first-child").all_inner_texts()
        assert tops == [str(d) for d in range(6)]  # typed black on white, read right

        # Without show_input: the card's details hold the input, closed until asked.
        card = grids.nth(1).locator("figure").first
        seen = card.locator("details.nbi-gseen img")
        assert not seen.is_visible()
        card.locator("details.nbi-gseen summary", has_text="input the model saw").click()
        seen.wait_for(state="visible", timeout=10_000)
        assert _loaded_sizes(seen) == [[96, 96]]
        assert "8x8 gray, fit ink, scaling unit" in card.inner_text()
        time.sleep(0.3)

        shoot(shown, tmp_path, "classify-show-input.png")
        dark_theme(page)
        shoot(shown, tmp_path, "classify-show-input-dark.png")
        assert errors == [], errors
