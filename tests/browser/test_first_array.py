"""A real browser: a newcomer's first NumPy array in JupyterLab (fixtures in conftest.py).

``session.infer("iris", np.array([5.1, 3.5, 1.4, 0.2]))`` is a float64 vector: the page shows
its result card (setosa's probability first, no error); a row with NaN says so in its card.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, lab_page, open_notebook, run_all, shoot

NOTEBOOK = "first_array.ipynb"

pytestmark = pytest.mark.timeout(180)


def test_float64_array_shows_its_result_in_jupyterlab(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    with lab_page(chromium, tmp_path, 1000, 900) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        run_all(page)
        outputs = page.locator(".jp-Cell-outputArea")
        cards = page.locator(".jp-OutputArea-output .nbi")
        cards.nth(1).wait_for(timeout=90_000)  # both inference cells answered
        first = cards.nth(0)
        text = first.inner_text()
        assert "InferResult" in text and "iris" in text and "probabilities" in text
        assert "Error" not in text and "FP64" not in text
        # [0.9975869, 0.002413, 5.2e-13]: setosa first, by name, in the top classes
        assert re.search(r"setosa\s+0\.997", text), text
        assert text.index("setosa") < text.index("versicolor")
        note = cards.nth(1)
        assert "1 of 2 rows had NaN inputs ('input')" in note.inner_text()
        assert (
            page.locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
            ).count()
            == 0
        )
        assert "Traceback" not in outputs.all_inner_texts().__str__()
        shoot(page.locator(".jp-Notebook"), tmp_path, "first-array.png")
        dark_theme(page)
        shoot(page.locator(".jp-Notebook"), tmp_path, "first-array-dark.png")
        assert errors == [], errors
