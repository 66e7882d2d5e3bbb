"""A real browser: JupyterLab on 127.0.0.1 opens the model browser, driven by headless Chromium.

JupyterLab runs from this interpreter with a token, a temporary root (holding
``model_browser.ipynb``), temporary settings (no news pop-up) and a fresh workspace URL, so nothing
from earlier sessions is restored. Playwright (sync API) drives Debian's ``chromium``: run all
cells, the demo models render, selecting ``iris`` shows its inputs, "Run" shows a result; then the
same in JupyterLab's dark theme. Screenshots go to the test's tmp dir, and to ``docs/img/`` when
``NBINFER_SAVE_SCREENSHOTS=1``.

Skips (with the reason) only when no Chromium, Playwright or JupyterLab is available.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
DOCS_IMG = HERE.parents[1] / "docs" / "img"
NOTEBOOK = "model_browser.ipynb"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.timeout(180)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install -y chromium; .ci/run does it)")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _settings(root: Path) -> Path:
    """JupyterLab user settings: no news / update notifications."""
    settings = root / "settings"
    folder = settings / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True)
    (folder / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return settings


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install jupyterlab)")
    pytest.importorskip("ipywidgets")
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    shutil.copy(HERE / NOTEBOOK, root / NOTEBOOK)
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(_settings(base)),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTER_CONFIG_DIR=str(base / "config"),
    )
    log = (base / "lab.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.open_browser=False",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "JupyterLab did not start:\n" + (base / "lab.log").read_text()[-3000:]
                    ) from None
                time.sleep(0.3)
        yield {"url": url, "token": token, "log": base / "lab.log"}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    executable = _chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
    )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _save(shot: Path, name: str) -> None:
    if os.environ.get("NBINFER_SAVE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_IMG / name)


def _menu(page: Any, menu: str, *items: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    for item in items:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def test_model_browser_in_jupyterlab(lab: dict[str, Any], chromium: Any, tmp_path: Path) -> None:
    workspace = f"nbinfer-{secrets.token_hex(4)}"
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(
            f"{lab['url']}/lab/workspaces/{workspace}/tree/{NOTEBOOK}?reset&token={lab['token']}"
        )
        # The kernel named by the notebook's kernelspec starts by itself: wait until it is idle.
        page.locator(".jp-Notebook").wait_for(timeout=60_000)
        page.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=60_000)
        _menu(page, "Run", "Run All Cells")

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
        page.screenshot(path=str(page_shot), full_page=True)
        shot = tmp_path / "browser.png"
        ui.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        _save(shot, "browser.png")
        print(f"screenshots: {page_shot} {shot}")

        _menu(page, "Settings", "Theme", "JupyterLab Dark")
        page.locator("body[data-jp-theme-light='false']").wait_for(state="attached", timeout=30_000)
        time.sleep(0.5)
        dark = tmp_path / "browser-dark.png"
        ui.screenshot(path=str(dark))
        _save(dark, "browser-dark.png")
        assert errors == [], errors
    except Exception:
        page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        raise
    finally:
        page.close()
