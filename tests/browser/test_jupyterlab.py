"""A real browser: JupyterLab opens the model browser (fixtures in conftest.py).

Run all cells, the demo models render, selecting ``iris`` shows its inputs, "Run" shows a result;
then the same in JupyterLab's dark theme.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, keep_shot, lab_page, open_notebook, run_all, shoot

NOTEBOOK = "model_browser.ipynb"

pytestmark = pytest.mark.timeout(180)


def test_model_browser_in_jupyterlab(lab: dict[str, Any], chromium: Any, tmp_path: Path) -> None:
    with lab_page(chromium, tmp_path, 1280, 900) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        run_all(page)

        ui = page.locator(".nbinfer-browser")
        ui.wait_for(timeout=60_000)
        models = ui.locator(".nbb-side select")
        for name in ("add_sub", "echo", "iris", "digits"):
            models.locator("option", has_text=re.compile(rf"\s{name}$")).wait_for(
                state="attached", timeout=30_000
            )
        assert "model_repository" in ui.locator(".nbb-top").inner_text()

        models.select_option(value="\u25cf iris")  # ipywidgets shows spaces as nbsp
        header = ui.locator(".nbb-h")
        header.filter(has_text="iris").wait_for(timeout=30_000)
        form = ui.locator(".nbb-main")
        form.get_by_text("FP32 [-1, 4]").first.wait_for(timeout=30_000)
        boxes = form.locator(".widget-text input[type=number]")
        # The signature line can paint before the input boxes: wait for the fourth, then count.
        boxes.nth(3).wait_for(timeout=30_000)
        assert boxes.count() == 4
        for box, value in zip(boxes.all(), ["5.1", "3.5", "1.4", "0.2"], strict=True):
            box.fill(value)
            box.press("Tab")
        form.locator("button", has_text="Run").click()
        result = form.get_by_text(re.compile("answered in"))
        result.wait_for(timeout=30_000)
        assert "setosa" in form.inner_text()
        ui.locator(".lm-TabBar-tab", has_text="Statistics").click()
        form.get_by_text("Latency per request").wait_for(timeout=30_000)  # the run was counted
        ui.locator(".lm-TabBar-tab", has_text="Try it").click()
        result.wait_for(timeout=30_000)
        time.sleep(0.3)  # let the bars' layout settle before the picture

        page_shot = tmp_path / "jupyterlab.png"
        keep_shot(page, page_shot, full_page=True)
        shot = shoot(ui, tmp_path, "browser.png")
        assert shot.stat().st_size > 10_000
        print(f"screenshots: {page_shot} {shot}")

        dark_theme(page)
        shoot(ui, tmp_path, "browser-dark.png")
        assert errors == [], errors
