"""A real browser: the model browser's image form and its layout in narrow output areas.

JupyterLab (fixtures in conftest.py) opens ``browser_image.ipynb``; for ``digits`` the try-it form
is an image upload and a sketch pad: a PNG file given to the upload's file input and a stroke
drawn with the mouse both come back classified (the drawing also in the dark theme). Then the
browser's layout with JupyterLab's file browser open, at output areas about 700, 600 and 480 px
wide: no control is cut ("Re..." for Refresh), the main pane keeps a usable width, and at 480 px
the model list goes above it.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import (
    dark_theme,
    keep_shot,
    lab_page,
    light_theme,
    open_notebook,
    run_all,
    settle,
    shoot,
)

NOTEBOOK = "browser_image.ipynb"
#: The main pane (model header, tabs, try-it form) keeps at least this width.
MAIN_MIN = 300

pytestmark = pytest.mark.timeout(240)


def _seven(path: Path) -> Path:
    """A hand-drawn-looking 7, white ink on black, as a PNG file."""
    from PIL import Image, ImageDraw

    image = Image.new("L", (120, 120), 0)
    pen = ImageDraw.Draw(image)
    pen.line([(28, 24), (92, 24), (52, 104)], fill=255, width=14, joint="curve")
    out = io.BytesIO()
    image.save(out, format="PNG")
    path.write_bytes(out.getvalue())
    return path


def _top_label(ui: Any) -> str:
    """The first (highest) label of the classification shown in the result."""
    return str(ui.locator(".nbb-main .nbi-gallery .nbi-label").first.inner_text()).strip()


def _classified(ui: Any, page: Any, before: str = "") -> str:
    """Click Run and wait for a classification of a new image; return its thumbnail's URI."""
    main = ui.locator(".nbb-main")
    main.locator("button", has_text="Run").click()
    page.wait_for_function(
        """(before) => {
          const img = document.querySelector('.nbinfer-browser .nbb-main .nbi-gallery img');
          return img !== null && img.getAttribute('src') !== before;
        }""",
        arg=before,
        timeout=30_000,
    )
    main.get_by_text(re.compile("digits answered in")).wait_for(timeout=30_000)
    return str(main.locator(".nbi-gallery img").first.get_attribute("src"))


def _output_width(page: Any) -> float:
    box = page.locator(".nbinfer-browser").bounding_box()
    return float(box["width"])


def _fit_output(page: Any, width: int) -> None:
    """Resize the viewport until the browser widget is about ``width`` px wide."""
    for _ in range(3):
        size = page.viewport_size
        now = _output_width(page)
        if abs(now - width) <= 4:
            return
        page.set_viewport_size({"width": int(size["width"] + width - now), "height": 900})
        page.wait_for_function(  # JupyterLab's panels re-lay out on resize
            """(before) => Math.abs(
              document.querySelector('.nbinfer-browser').getBoundingClientRect().width - before
            ) > 1""",
            arg=now,
            timeout=30_000,
        )
        settle(page)
    assert abs(_output_width(page) - width) <= 8, _output_width(page)


def _layout_report(page: Any) -> dict[str, Any]:
    """Widths, and every button or label whose text does not fit its box."""
    return dict(
        page.evaluate(
            """() => {
        const ui = document.querySelector('.nbinfer-browser');
        const cut = [];
        for (const el of ui.querySelectorAll('button, .widget-label, .lm-TabBar-tabLabel')) {
          if (el.offsetParent === null) continue;  // hidden
          if (el.scrollWidth > el.clientWidth + 1) cut.push(el.textContent.trim());
        }
        const refresh = [...ui.querySelectorAll('button')].find(
          (b) => b.textContent.includes('Refresh'));
        const main = ui.querySelector('.nbb-main').getBoundingClientRect();
        const side = ui.querySelector('.nbb-side').getBoundingClientRect();
        return {
          ui: ui.getBoundingClientRect().width, main: main.width, side: side.width,
          refresh: [refresh.scrollWidth, refresh.clientWidth], cut,
          overflow: ui.scrollWidth - ui.clientWidth,
          stacked: side.bottom <= main.top + 1,  // the model list above the main pane
        };
      }"""
        )
    )


def test_image_form_upload_sketch_and_narrow_layout(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    pytest.importorskip("anywidget", reason="the sketch pad needs anywidget (a dependency)")
    with lab_page(chromium, tmp_path, 1280, 900) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        light_theme(page)
        run_all(page)
        ui = page.locator(".nbinfer-browser")
        ui.wait_for(timeout=60_000)
        models = ui.locator(".nbb-side select")
        models.locator("option", has_text=re.compile(r"\sdigits$")).wait_for(
            state="attached", timeout=30_000
        )
        models.select_option(value="\u25cf digits")
        ui.locator(".nbb-h").filter(has_text="digits").wait_for(timeout=30_000)
        form = ui.locator(".nbb-picture")
        form.wait_for(timeout=30_000)
        canvas = form.locator("canvas.nbs-canvas")
        canvas.wait_for(timeout=30_000)
        assert ui.locator(".nbb-main textarea").count() == 0  # no 64-number text box

        # An uploaded file: the FileUpload's <input type=file> (kept out of the DOM by
        # ipywidgets, so through the file chooser its button opens).
        with page.expect_file_chooser() as chooser:
            form.locator("button", has_text="Upload image").click()
        chooser.value.set_files(str(_seven(tmp_path / "seven.png")))
        form.get_by_text("seven.png").wait_for(timeout=30_000)
        uploaded = _classified(ui, page)
        assert len(ui.locator(".nbb-main .nbi-gallery .nbi-label").all()) == 5
        assert re.fullmatch(r"\d", _top_label(ui))

        # A stroke shaped like a 1 on the sketch pad: the drawing replaces the upload.
        box = canvas.bounding_box()
        x = box["x"] + box["width"] * 0.5
        page.mouse.move(x + 6, box["y"] + box["height"] * 0.15)
        page.mouse.down()
        page.mouse.move(x, box["y"] + box["height"] * 0.5, steps=8)
        page.mouse.move(x - 2, box["y"] + box["height"] * 0.85, steps=8)
        page.mouse.up()
        form.get_by_text("the drawing on the pad").wait_for(timeout=30_000)
        drawn = _classified(ui, page, uploaded)
        assert drawn != uploaded
        assert _top_label(ui) == "1"
        page.set_viewport_size({"width": 1280, "height": 1400})  # the whole result in the shot
        settle(page)  # the bars' layout settles before the picture
        shoot(ui, tmp_path, "browser-upload.png")
        dark_theme(page)
        shoot(ui, tmp_path, "browser-upload-dark.png")
        light_theme(page)

        # Narrow output areas with the file browser open.
        if not page.locator("#filebrowser").is_visible():
            page.keyboard.press("Control+Shift+F")
            page.locator("#filebrowser").wait_for(timeout=30_000)
        reports: dict[Any, dict[str, Any]] = {}
        for width in (700, 600):
            _fit_output(page, width)
            ui.scroll_into_view_if_needed()
            settle(page)
            reports[width] = report = _layout_report(page)
            keep_shot(ui, tmp_path / f"browser-{width}.png")
        # iris at 600 px: its number boxes and a result with tables keep the pane usable.
        models.select_option(value="\u25cf iris")
        ui.locator(".nbb-h").filter(has_text="iris").wait_for(timeout=30_000)
        ui.locator(".nbb-main .widget-text input[type=number]").nth(3).wait_for(timeout=30_000)
        ui.locator(".nbb-main button", has_text="Run").click()
        ui.get_by_text(re.compile("iris answered in")).wait_for(timeout=30_000)
        settle(page)
        reports["600 iris"] = _layout_report(page)
        keep_shot(ui, tmp_path / "browser-600-iris.png")
        _fit_output(page, 480)  # narrower still: the list goes above the main pane
        settle(page)
        reports["480 iris"] = _layout_report(page)
        keep_shot(ui, tmp_path / "browser-480-iris.png")
        assert reports["480 iris"]["stacked"], reports["480 iris"]
        assert not any(reports[w]["stacked"] for w in (700, 600, "600 iris")), reports
        for width, report in reports.items():
            refresh_text, refresh_box = report["refresh"]
            assert refresh_text <= refresh_box, (width, report)  # "Refresh", not "Re..."
            assert report["cut"] == [], (width, report)
            assert report["main"] >= MAIN_MIN, (width, report)
            assert report["overflow"] <= 0, (width, report)

        assert errors == [], errors
        print(f"screenshots in {tmp_path}")
