"""A real browser: an nbinfer error in JupyterLab shows your line, then the card (issue 31 item 2).

``error_card.ipynb`` makes a newcomer's mistake (a typo in the model name, no ``%load_ext``).
The error output holds the user's line and no library frame; under it the error card says what
to try, and its "Library frames" section is collapsed until clicked. Light and dark screenshots.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, lab_page, open_notebook, run_all, shoot

NOTEBOOK = "error_card.ipynb"

pytestmark = pytest.mark.timeout(180)


def test_error_shows_your_line_then_the_card_with_library_frames_folded(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    with lab_page(chromium, tmp_path, 1100, 900) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        run_all(page)

        cell = page.locator(".jp-CodeCell").nth(1)
        red_box = cell.locator(".jp-OutputArea-output[data-mime-type*='stderr']")
        red_box.wait_for(timeout=90_000)
        card = cell.locator(".nbi.nbi-error")
        card.wait_for(timeout=30_000)
        box_text = red_box.inner_text()
        assert 'session.infer("iris_v2", flower)' in box_text  # the user's line
        assert "Cell In[2], line 2" in box_text
        assert "ModelNotFoundError: Request for unknown model: 'iris_v2'" in box_text
        assert "/nbinfer/" not in box_text and "library frames" in box_text
        assert red_box.bounding_box()["y"] < card.bounding_box()["y"]  # line first, then card

        assert card.locator(".nbi-title").inner_text() == "ModelNotFoundError"
        hints = card.locator("ul.nbi-hints")
        assert hints.is_visible() and "session.models" in hints.inner_text()
        assert hints.locator("li").first.inner_text() == "Did you mean 'iris'?"
        library = card.locator(".nbi-library details")
        frames = library.locator("pre").first
        assert library.count() == 1 and not frames.is_visible()  # collapsed
        assert "Library frames" in library.locator("summary").inner_text()
        time.sleep(0.3)  # let the fonts settle before the picture
        shot = shoot(cell.locator(".jp-Cell-outputWrapper"), tmp_path, "error-card.png")
        assert shot.stat().st_size > 5_000

        library.locator("summary").click()  # one click opens the library frames
        frames.wait_for(state="visible", timeout=10_000)
        assert "nbinfer/session/boundary.py" in frames.inner_text()  # every public call

        dark_theme(page)
        shoot(cell.locator(".jp-Cell-outputWrapper"), tmp_path, "error-card-dark.png")
        assert errors == [], errors
