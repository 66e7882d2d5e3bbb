"""Fixtures for the real-browser tests: one JupyterLab and one headless Chromium per worker.

JupyterLab runs from this interpreter with a token, a temporary root holding every ``*.ipynb`` of
this folder, temporary settings (no news pop-up); tests open a notebook in a fresh workspace URL
(:func:`open_notebook`), so nothing from earlier sessions is restored. The kernels a test started
are shut down when it ends (in the background: the next test does not wait for them), so none
piles up for the lab's exit to wait on. Playwright (sync API) drives Debian's ``chromium``, one
for the whole run of browser tests on a worker (:class:`Chromium`), on one profile:
JupyterLab's scripts come from its disk cache, already compiled, after the first page.
Screenshots go to the test's tmp dir, and to ``docs/img/`` when ``NBINFER_SAVE_SCREENSHOTS=1``
(:func:`save_shot`).

Skips (with the reason) only when no Chromium, Playwright or JupyterLab is available.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port

HERE = Path(__file__).resolve().parent
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


def _settings(root: Path) -> Path:
    """JupyterLab user settings: no news / update notifications."""
    settings = root / "settings"
    folder = settings / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True)
    (folder / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return settings


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install jupyterlab)")
    pytest.importorskip("ipywidgets")
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    for notebook in HERE.glob("*.ipynb"):
        shutil.copy(notebook, root / notebook.name)
    port, token = free_port(), secrets.token_hex(16)
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
    shutdowns: list[threading.Thread] = []
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
        yield {
            "url": url,
            "token": token,
            "log": base / "lab.log",
            "root": root,
            "shutdowns": shutdowns,  # threads shutting kernels down (_kernels_end_with_their_test)
        }
    finally:
        for thread in shutdowns:
            thread.join(30)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _api(lab: dict[str, Any], method: str, path: str, timeout: float = 60) -> Any:
    """Call the lab's REST API; the decoded JSON answer (None when it has no body)."""
    headers = {"Authorization": f"token {lab['token']}"}
    request = urllib.request.Request(f"{lab['url']}/api/{path}", method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        body = answer.read()
    return json.loads(body) if body else None


def _shut_down(lab: dict[str, Any], sessions: list[str], kernels: list[str]) -> None:
    """Delete ``sessions`` then ``kernels`` (each waits for its kernel to exit); errors ignored:
    a kernel the test shut down itself is already gone."""
    for path in [f"sessions/{s}" for s in sessions] + [f"kernels/{k}" for k in kernels]:
        with contextlib.suppress(OSError):
            _api(lab, "DELETE", path)


#: JupyterLab's theme setting (user settings: it outlives a page, and every browser test of a
#: worker shares the lab).
THEMES = "settings/@jupyterlab/apputils-extension:themes"


@pytest.fixture(autouse=True)
def _kernels_end_with_their_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the lab, shut down every kernel it left running, in a thread, and
    put the theme back to JupyterLab's default (light), so the next test starts as a new user's
    lab does whichever test switched it to dark before."""
    yield
    if "lab" not in request.fixturenames:
        return
    lab = request.getfixturevalue("lab")
    headers = {"Authorization": f"token {lab['token']}", "Content-Type": "application/json"}
    body = json.dumps({"raw": json.dumps({"theme": "JupyterLab Light"})}).encode()
    reset = urllib.request.Request(
        f"{lab['url']}/lab/api/{THEMES}", data=body, method="PUT", headers=headers
    )
    with urllib.request.urlopen(reset, timeout=60):
        pass
    listed = _api(lab, "GET", "sessions")
    sessions = [s["id"] for s in listed]
    owned = {s["kernel"]["id"] for s in listed if s.get("kernel")}  # ends with its session
    kernels = [k["id"] for k in _api(lab, "GET", "kernels") if k["id"] not in owned]
    if sessions or kernels:
        thread = threading.Thread(target=_shut_down, args=(lab, sessions, kernels), daemon=True)
        thread.start()
        lab["shutdowns"].append(thread)


class Chromium:
    """One headless Chromium (a persistent Playwright context) for a run of browser tests.

    Launched at the first :meth:`new_page`, closed by :func:`pytest_runtest_teardown` when the
    run leaves this folder: Playwright's sync API keeps an asyncio loop running in the main
    thread while it is open, which must end before any other folder's tests run. The browser
    modules run one after another on one worker (tests/conftest.py groups them), so a worker
    launches it once instead of once per module (about 3.5 s of CPU each: the browser, its GPU
    and network processes, Playwright's driver).
    """

    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._playwright: Any = None
        self._context: Any = None

    def new_page(self) -> Any:
        """A new page in the browser, launching it first if it is not running."""
        if self._context is None:
            executable = _chromium()
            sync_api = pytest.importorskip(
                "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
            )
            self._playwright = sync_api.sync_playwright().start()
            try:
                self._context = self._playwright.chromium.launch_persistent_context(
                    str(self._profile),
                    executable_path=executable,
                    args=CHROMIUM_ARGS,
                    headless=True,
                )
            except BaseException:
                self.close()
                raise
        return self._context.new_page()

    def close(self) -> None:
        """Close the browser and stop Playwright's loop (nothing if it is not running)."""
        context, playwright = self._context, self._playwright
        self._context = self._playwright = None
        try:
            if context is not None:
                context.close()
        finally:
            if playwright is not None:
                playwright.stop()


_BROWSER: list[Chromium] = []  # the session's Chromium, once a test asked for it


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """The session's :class:`Chromium` (its profile keeps JupyterLab's compiled scripts)."""
    _chromium()  # skip at once, naming what is missing
    browser = Chromium(tmp_path_factory.mktemp("chromium"))
    _BROWSER.append(browser)
    try:
        yield browser
    finally:
        _BROWSER.remove(browser)
        browser.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Close the browser once the next test is not a browser test (after this one's fixtures)."""
    yield
    if nextitem is None or HERE not in Path(nextitem.path).parents:
        for browser in _BROWSER:
            browser.close()
