"""A real browser: re-running the README's session cell in JupyterLab leaves one server.

``rerun.ipynb``'s first cell is the README's (``session = nbinfer.Session()`` then ``session``,
displayed: the kernel's ``Out`` history keeps every run's session). The test runs it five times,
each time followed by the notebook's second cell, which prints how many nbinfer server processes
the kernel has (its children, read from ``/proc``); then the first run's session, taken back
from ``Out[1]``, says it was replaced.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import lab_page, open_notebook, shoot

NOTEBOOK = "rerun.ipynb"

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]


def _run(page: Any, index: int, count: int) -> Any:
    """Run cell ``index`` in place (Ctrl+Enter) and wait for execution count ``count``."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(index)
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Control+Enter")
    cell.locator(".jp-InputPrompt", has_text=f"[{count}]:").wait_for(timeout=90_000)
    return cell


def test_rerunning_the_readme_cell_five_times_leaves_one_server(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    with lab_page(chromium, tmp_path, 1280, 900) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        counts = []
        for run in range(5):
            session_cell = _run(page, 0, 2 * run + 1)
            card = session_cell.locator(".jp-OutputArea-output")
            assert "Session" in card.inner_text()  # displayed: Out[n] holds this session
            counter = _run(page, 1, 2 * run + 2)
            text = counter.locator(".jp-OutputArea-output").inner_text()
            match = re.search(r"nbinfer servers: (\d+)", text)
            assert match is not None, text
            counts.append(int(match.group(1)))
        assert counts == [1, 1, 1, 1, 1]

        first = _run(page, 2, 11).locator(".jp-OutputArea-output").inner_text()
        assert "replaced by a newer Session" in first
        said = _run(page, 3, 12).locator(".jp-OutputArea-output").inner_text()
        assert "was replaced by a newer local nbinfer.Session()" in said
        assert "keep_previous=True" in said

        shoot(page.locator(".jp-Notebook"), tmp_path, "rerun.png")
        assert errors == [], errors
