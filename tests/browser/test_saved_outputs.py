"""A real browser: outputs that survive saving (fixtures in conftest.py).

JupyterLab runs ``saved_outputs.ipynb`` (a chunked ``session.infer``, whose progress bar leaves a
summary line, and the model browser), saves it, shuts its kernel down and reopens it in a fresh
workspace: the summary is there and no dead widget ("Loading widget...", "Error displaying
widget", "model not found"). Then ``jupyter nbconvert --to html`` of the saved file shows the
summary, never a bar stuck at ``0%|``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, menu, open_notebook, run_all, save_shot

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


def _outputs(page: Any) -> str:
    return str(page.locator(".jp-Notebook .jp-OutputArea").all_inner_texts())


def test_a_saved_notebook_reopens_with_the_summary_and_no_dead_widget(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        open_notebook(page, lab, NOTEBOOK)
        _save_widget_state(page, True)
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
        saved = json.loads((lab["root"] / NOTEBOOK).read_text())
        outputs = [out for cell in saved["cells"] for out in cell.get("outputs", [])]
        bar, browser = outputs[0], outputs[-1]
        assert WIDGET_VIEW not in bar["data"], bar
        assert SUMMARY.search("".join(bar["data"]["text/plain"])), bar
        assert "Model browser" in "".join(browser["data"]["text/html"]), browser["data"].keys()
        menu(page, "Kernel", "Shut Down Kernel")
        page.locator(".jp-Toolbar-kernelName", has_text="No Kernel").wait_for(timeout=30_000)
    except Exception:
        page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        raise
    finally:
        page.close()  # a new tab below: nothing of this one's widgets or kernel is reused

    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        open_notebook(page, lab, NOTEBOOK)  # a fresh workspace and a fresh kernel
        summary = page.locator(".jp-OutputArea-output", has_text=SUMMARY)
        summary.wait_for(timeout=30_000)
        ui = page.locator(".nbinfer-browser")
        ui.wait_for(timeout=30_000)  # drawn from the widget state saved in the notebook
        time.sleep(1.0)  # the widget manager restores after the kernel is idle: let it finish
        text = _outputs(page)
        assert SUMMARY.search(text), text
        for dead in DEAD:
            assert dead not in text, text
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
    except Exception:
        page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        raise
    finally:
        try:
            _save_widget_state(page, False)  # the lab is shared by the session's tests
        finally:
            page.close()

    html = tmp_path / "saved_outputs.html"
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output"]
    subprocess.run(
        [*command, str(html), str(lab["root"] / NOTEBOOK)],
        check=True,
        capture_output=True,
        env=os.environ,
        timeout=120,
    )
    page_text = html.read_text()
    assert SUMMARY.search(page_text), "no summary line in the nbconvert HTML"
    assert "0%|" not in page_text and "widget-hprogress" not in page_text
