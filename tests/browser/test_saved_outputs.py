"""A real browser: outputs that survive saving (fixtures in conftest.py).

JupyterLab runs a copy of ``saved_outputs.ipynb`` (a chunked ``session.infer``, whose progress
bar leaves a summary line, and the model browser), saves it, shuts its kernel down and reopens it
in a fresh tab and workspace: the summary is there and no dead widget ("Loading widget...",
"Error displaying widget", "model not found") -- for the whole notebook with ipywidgets' "Save
Widget State Automatically" on, for the bar's cell with JupyterLab's defaults (where JupyterLab
shows the browser's "model not found", docs/notebook.md). Then ``jupyter nbconvert --to html`` of
the saved file shows the summary, never a bar stuck at ``0%|``, and (no widget state) the
browser's static copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, lab_page, menu, open_notebook, run_all, save_shot

HERE = Path(__file__).resolve().parent
NOTEBOOK = "saved_outputs.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SUMMARY = re.compile(r"iris: 300,000 rows in [\d.]+ s \([\d.]+ [kMG]? ?rows/s\)")
DEAD = ("Loading widget", "Error displaying widget", "model not found")
SAVE_STATE = "Save Widget State Automatically"

pytestmark = pytest.mark.timeout(240)


def _save_widget_state(page: Any, on: bool) -> None:
    """Set ipywidgets' "Save Widget State Automatically" (Settings menu) to ``on``."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    item = page.locator(".lm-Menu-item", has_text=SAVE_STATE)
    item.wait_for(timeout=10_000)
    checked = "lm-mod-toggled" in (item.get_attribute("class") or "")
    if checked == on:
        page.keyboard.press("Escape")
        return
    item.click()
    time.sleep(0.5)  # the setting is written by the server: let it land


def _outputs(page: Any, cell: int | None = None) -> str:
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    scope = cells if cell is None else cells.nth(cell)
    return str(scope.locator(".jp-OutputArea").all_inner_texts())


@pytest.mark.parametrize("save_state", [False, True], ids=["lab-default", "save-widget-state"])
def test_a_saved_notebook_reopens_with_the_summary_and_no_dead_widget(
    lab: dict[str, Any], chromium: Any, tmp_path: Path, save_state: bool
) -> None:
    """With JupyterLab's defaults the bar's summary survives, and nbconvert shows the browser's
    static copy; with "Save Widget State Automatically" the browser reopens drawn from its state
    (JupyterLab never falls back to a widget output's ``text/html``: docs/notebook.md)."""
    name = f"saved_outputs_{'state' if save_state else 'default'}.ipynb"
    shutil.copy(HERE / NOTEBOOK, lab["root"] / name)  # a fresh copy for each setting
    with lab_page(chromium, tmp_path, 1280, 1000) as (page, errors):
        open_notebook(page, lab, name)
        _save_widget_state(page, save_state)
        run_all(page)
        summary = page.locator(".jp-OutputArea-output", has_text=SUMMARY)
        summary.wait_for(timeout=90_000)
        ui = page.locator(".nbinfer-browser")
        ui.wait_for(timeout=60_000)
        ui.locator(".nbb-side select option", has_text=re.compile(r"\siris$")).wait_for(
            state="attached", timeout=30_000
        )
        assert page.locator(".jp-Notebook .widget-hprogress").count() == 0

        page.locator(".jp-Notebook").click()
        page.keyboard.press("Control+s")
        page.locator(".jp-mod-current.jp-mod-dirty").wait_for(state="detached", timeout=30_000)
        saved = json.loads((lab["root"] / name).read_text())
        outputs = [out for cell in saved["cells"] for out in cell.get("outputs", [])]
        bar, browser = outputs[0], outputs[-1]
        assert WIDGET_VIEW not in bar["data"], bar
        assert SUMMARY.search("".join(bar["data"]["text/plain"])), bar
        assert "Model browser" in "".join(browser["data"]["text/html"]), browser["data"].keys()
        assert ("widgets" in saved["metadata"]) == save_state
        menu(page, "Kernel", "Shut Down Kernel")
        page.locator(".jp-Toolbar-kernelName", has_text="No Kernel").wait_for(timeout=30_000)
    # a new tab below: nothing of this one's widgets or kernel is reused

    with lab_page(chromium, tmp_path, 1280, 1000, errors) as (page, _):
        try:
            open_notebook(page, lab, name)  # a fresh workspace and a fresh kernel
            summary = page.locator(".jp-OutputArea-output", has_text=SUMMARY)
            summary.wait_for(timeout=30_000)
            if save_state:
                ui = page.locator(".nbinfer-browser")
                ui.wait_for(timeout=30_000)  # drawn from the widget state saved in the notebook
            else:
                dead_browser = page.get_by_text("Error displaying widget")  # the browser's
                dead_browser.wait_for(timeout=30_000)
            time.sleep(1.0)  # the widget manager restores after the kernel is idle: let it finish
            text = _outputs(page) if save_state else _outputs(page, cell=1)  # the bar's cell
            assert SUMMARY.search(text), text
            for dead in DEAD:
                assert dead not in text, text
            if save_state:
                assert "iris" in ui.inner_text()
                shot = tmp_path / "saved-reopened.png"
                page.locator(".jp-Notebook").screenshot(path=str(shot))
                save_shot(shot, "saved-reopened.png")
                dark_theme(page)
                dark = tmp_path / "saved-reopened-dark.png"
                page.locator(".jp-Notebook").screenshot(path=str(dark))
                save_shot(dark, "saved-reopened-dark.png")
                print(f"screenshots: {shot} {dark}")
            assert errors == [], errors
        finally:
            _save_widget_state(page, False)  # the lab is shared by the session's tests

    html = tmp_path / "saved_outputs.html"
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output"]
    subprocess.run(
        [*command, str(html), str(lab["root"] / name)],
        check=True,
        capture_output=True,
        env=os.environ,
        timeout=120,
    )
    page_text = html.read_text()
    assert SUMMARY.search(page_text), "no summary line in the nbconvert HTML"
    assert "0%|" not in page_text and "widget-hprogress" not in page_text
    if not save_state:  # no widget state: nbconvert draws the browser's static copy
        assert "a static copy" in page_text and "digits_encoded" in page_text
