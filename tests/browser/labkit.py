"""Helpers for the real-browser tests: open a notebook, run it, switch theme, keep screenshots."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def save_shot(shot: Path, name: str) -> None:
    """Keep ``shot`` as ``docs/img/NAME`` when NBINFER_SAVE_SCREENSHOTS=1."""
    if os.environ.get("NBINFER_SAVE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_IMG / name)


def shoot(target: Any, tmp_path: Path, name: str) -> Path:
    """Screenshot ``target`` (a page or locator) to ``tmp_path / name``, kept as docs/img/NAME
    when NBINFER_SAVE_SCREENSHOTS=1 (:func:`save_shot`); returns the picture's path."""
    shot = tmp_path / name
    target.screenshot(path=str(shot))
    save_shot(shot, name)
    return shot


def keep_shot(target: Any, shot: Path, **options: Any) -> None:
    """Screenshot ``target`` (a page or locator) to ``shot``, a picture only for a person to look
    at (neither asserted on nor kept in docs/img/): taken only when NBINFER_SAVE_SCREENSHOTS=1."""
    if os.environ.get("NBINFER_SAVE_SCREENSHOTS") == "1":
        target.screenshot(path=str(shot), **options)


def menu(page: Any, menu: str, *items: str) -> None:
    """Click JupyterLab's menu bar entry ``menu`` then each of ``items``."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    for item in items:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def open_notebook(page: Any, lab: dict[str, Any], notebook: str) -> None:
    """Open ``notebook`` in a fresh workspace and wait until its kernel is idle."""
    workspace = f"nbinfer-{secrets.token_hex(4)}"
    page.goto(f"{lab['url']}/lab/workspaces/{workspace}/tree/{notebook}?reset&token={lab['token']}")
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    page.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=60_000)
    light_theme(page)  # the theme is a user setting: an earlier test may have left it dark


def run_all(page: Any) -> None:
    """Run -> Run All Cells."""
    menu(page, "Run", "Run All Cells")


def dark_theme(page: Any) -> None:
    """Switch JupyterLab to its dark theme and wait until it applies."""
    menu(page, "Settings", "Theme", "JupyterLab Dark")
    _theme_painted(page, light=False)


def light_theme(page: Any) -> None:
    """Back to JupyterLab's light theme when the page is dark (the theme outlives a page)."""
    page.locator("body[data-jp-theme-light]").wait_for(state="attached", timeout=30_000)
    if page.locator("body[data-jp-theme-light='false']").count():
        menu(page, "Settings", "Theme", "JupyterLab Light")
        _theme_painted(page, light=True)


def _theme_painted(page: Any, light: bool) -> None:
    """Wait until the theme is applied (JupyterLab marks the body once the theme's stylesheet has
    loaded), the splash screen JupyterLab shows while it loads has faded out and been removed,
    and two more frames have been drawn (widgets that follow the theme react to the body's
    attributes before the next frame)."""
    flag = "true" if light else "false"
    page.locator(f"body[data-jp-theme-light='{flag}']").wait_for(state="attached", timeout=30_000)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)
    settle(page)


def settle(page: Any, frames: int = 2) -> None:
    """Wait until the page has drawn ``frames`` more frames: what a resize, a scroll or a theme
    set off (JupyterLab's panels lay out in an animation frame) is laid out and painted."""
    page.evaluate(
        """(n) => new Promise((done) => {
          const step = (left) => (left ? requestAnimationFrame(() => step(left - 1)) : done());
          step(n);
        })""",
        frames,
    )


@contextlib.contextmanager
def lab_page(
    chromium: Any, tmp_path: Path, width: int, height: int, errors: list[str] | None = None
) -> Iterator[tuple[Any, list[str]]]:
    """A new page of ``width`` x ``height`` in ``chromium`` (a browser context) and the JavaScript
    errors it raises (into ``errors``).

    On a failure inside, a full-page ``failure.png`` goes to ``tmp_path``; the page is closed after.
    """
    page = chromium.new_page()
    page.set_viewport_size({"width": width, "height": height})
    seen = [] if errors is None else errors
    page.on("pageerror", lambda exc: seen.append(str(exc)))
    try:
        yield page, seen
    except Exception:
        page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        raise
    finally:
        page.close()
