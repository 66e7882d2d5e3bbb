"""A real browser: outputs that survive saving (fixtures in conftest.py).

JupyterLab runs a copy of ``saved_outputs.ipynb`` once (a chunked ``session.infer``, whose
progress bar leaves a summary line, and the model browser) and saves it twice: with JupyterLab's
defaults, then with ipywidgets' "Save Widget State Automatically" on; each saved file is kept as
its own notebook. The kernel is shut down, and each test reopens its file in a fresh tab and
workspace: the summary is there and no dead widget ("Loading widget...", "Error displaying
widget", "model not found") -- for the whole notebook with the widget state, for the bar's cell
with the defaults (where JupyterLab shows the browser's "model not found", docs/notebook.md).
Then ``jupyter nbconvert --to html`` of the saved files (one run for both) shows the summary,
never a bar stuck at ``0%|``, and (no widget state) the browser's static copy.
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

from tests.browser.labkit import dark_theme, lab_page, menu, open_notebook, run_all, shoot
from tests.waiting import wait_until

HERE = Path(__file__).resolve().parent
NOTEBOOK = "saved_outputs.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SUMMARY = re.compile(r"iris: 300,000 rows in [\d.]+ s \([\d.]+ [kMG]? ?rows/s\)")
DEAD = ("Loading widget", "Error displaying widget", "model not found")
SAVE_STATE = "Save Widget State Automatically"

pytestmark = pytest.mark.timeout(240)


def _save_state_checked(page: Any) -> tuple[Any, bool]:
    """Open the Settings menu; its "Save Widget State Automatically" item and whether it is on
    (the menu draws the widget manager's own flag, the one a save reads)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    item = page.locator(".lm-Menu-item", has_text=SAVE_STATE)
    item.wait_for(timeout=10_000)
    return item, "lm-mod-toggled" in (item.get_attribute("class") or "")


def _save_widget_state(page: Any, on: bool) -> None:
    """Set ipywidgets' "Save Widget State Automatically" (Settings menu) to ``on``."""
    item, checked = _save_state_checked(page)
    if checked == on:
        page.keyboard.press("Escape")
        return
    with page.expect_response(
        lambda r: "/lab/api/settings/" in r.url and r.request.method == "PUT"
    ):
        item.click()  # the setting is written by the server: wait until it has landed

    # The widget manager learns it after the server stored it (JupyterLab reloads the setting,
    # then signals the change): a save before then writes the old choice (a failure under load).
    def applied() -> bool:
        _item, now = _save_state_checked(page)
        page.keyboard.press("Escape")
        return now == on

    wait_until(applied, 15, f"{SAVE_STATE!r} turned {'on' if on else 'off'} in the page")


def _outputs(page: Any, cell: int | None = None) -> str:
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    scope = cells if cell is None else cells.nth(cell)
    return str(scope.locator(".jp-OutputArea").all_inner_texts())


def _save(page: Any, lab: dict[str, Any], name: str, keep: str) -> None:
    """Save the open notebook ``name`` (File -> Save Notebook) and copy the saved file to
    ``keep``. The menu, not a click then Ctrl+S: the click lands wherever the notebook's middle
    is, and inside a widget view (the model browser) ipywidgets suppresses JupyterLab's
    shortcuts, so the key press saved nothing (a CI failure)."""
    with page.expect_response(
        lambda r: (
            r.url.split("?")[0].endswith(f"/api/contents/{name}") and r.request.method == "PUT"
        )
    ) as saved:
        menu(page, "File", "Save Notebook")
    assert saved.value.ok, saved.value.status
    shutil.copy(lab["root"] / name, lab["root"] / keep)


@pytest.fixture(scope="module")
def saved(lab: dict[str, Any], chromium: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The notebook run once and saved as both files, its kernel shut down; what the tests read:
    the files' names, the progress bars left on the page, the page's JavaScript errors, and each
    file's nbconvert HTML."""
    tmp = tmp_path_factory.mktemp("saved_outputs")
    name = "saved_outputs_run.ipynb"
    shutil.copy(HERE / NOTEBOOK, lab["root"] / name)  # a fresh copy: the source stays unrun
    files = {False: "saved_outputs_default.ipynb", True: "saved_outputs_state.ipynb"}
    errors: list[str] = []
    with lab_page(chromium, tmp, 1280, 1000, errors) as (page, _):
        open_notebook(page, lab, name)
        try:
            _save_widget_state(page, False)
            run_all(page)
            summary = page.locator(".jp-OutputArea-output", has_text=SUMMARY)
            summary.wait_for(timeout=90_000)
            ui = page.locator(".nbinfer-browser")
            ui.wait_for(timeout=60_000)
            ui.locator(".nbb-side select option", has_text=re.compile(r"\siris$")).wait_for(
                state="attached", timeout=30_000
            )
            bars = page.locator(".jp-Notebook .widget-hprogress").count()
            _save(page, lab, name, files[False])
            _save_widget_state(page, True)
            _save(page, lab, name, files[True])
        finally:
            _save_widget_state(page, False)  # the lab is shared by the session's tests
        menu(page, "Kernel", "Shut Down Kernel")
        page.locator(".jp-Toolbar-kernelName", has_text="No Kernel").wait_for(timeout=30_000)
    # the tests open new tabs: nothing of this one's widgets or kernel is reused

    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir"]
    subprocess.run(
        [*command, str(tmp), *(str(lab["root"] / file) for file in files.values())],
        check=True,
        capture_output=True,
        env=os.environ,
        timeout=120,
    )
    html = {state: (tmp / file).with_suffix(".html").read_text() for state, file in files.items()}
    return {"files": files, "bars": bars, "errors": errors, "html": html}


@pytest.mark.parametrize("save_state", [False, True], ids=["lab-default", "save-widget-state"])
def test_a_saved_notebook_reopens_with_the_summary_and_no_dead_widget(
    saved: dict[str, Any], lab: dict[str, Any], chromium: Any, tmp_path: Path, save_state: bool
) -> None:
    """With JupyterLab's defaults the bar's summary survives, and nbconvert shows the browser's
    static copy; with "Save Widget State Automatically" the browser reopens drawn from its state
    (JupyterLab never falls back to a widget output's ``text/html``: docs/notebook.md)."""
    assert saved["bars"] == 0  # the bar was replaced by its summary when the run ended
    name = saved["files"][save_state]
    notebook = json.loads((lab["root"] / name).read_text())
    outputs = [out for cell in notebook["cells"] for out in cell.get("outputs", [])]
    bar, browser = outputs[0], outputs[-1]
    assert WIDGET_VIEW not in bar["data"], bar
    assert SUMMARY.search("".join(bar["data"]["text/plain"])), bar
    assert "Model browser" in "".join(browser["data"]["text/html"]), browser["data"].keys()
    assert ("widgets" in notebook["metadata"]) == save_state

    errors = list(saved["errors"])  # the run's page, then this one's
    with lab_page(chromium, tmp_path, 1280, 1000, errors) as (page, _):
        console: list[str] = []  # what the widget manager says when it cannot restore
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        open_notebook(page, lab, name)  # a fresh workspace and a fresh kernel
        summary = page.locator(".jp-OutputArea-output", has_text=SUMMARY)
        summary.wait_for(timeout=30_000)
        if save_state:
            ui = page.locator(".nbinfer-browser")
            try:
                ui.wait_for(timeout=30_000)  # drawn from the widget state saved in the notebook
            except Exception as exc:
                log = lab["log"].read_text(errors="replace").splitlines()[-15:]
                raise AssertionError(
                    f"the browser did not reopen from its saved state: outputs {_outputs(page)}, "
                    f"console {console[-20:]}, the lab's log {log}"
                ) from exc
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
            shot = shoot(page.locator(".jp-Notebook"), tmp_path, "saved-reopened.png")
            dark_theme(page)
            dark = shoot(page.locator(".jp-Notebook"), tmp_path, "saved-reopened-dark.png")
            print(f"screenshots: {shot} {dark}")
        assert errors == [], errors

    page_text = saved["html"][save_state]
    assert SUMMARY.search(page_text), "no summary line in the nbconvert HTML"
    assert "0%|" not in page_text and "widget-hprogress" not in page_text
    if not save_state:  # no widget state: nbconvert draws the browser's static copy
        assert "a static copy" in page_text and "digits_encoded" in page_text
