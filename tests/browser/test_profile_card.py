"""A real browser: the profile card in JupyterLab, light and dark, 700 px wide (conftest.py).

``profile_card.ipynb`` profiles ``iris`` briefly and shows ``session.stats()``. The chart is
inline SVG: its text must stand out from the card's background in both themes (a matplotlib PNG
was a white block in dark mode), it must fit the narrow output, and ``<code>`` names in the
statistics table keep their chip on JupyterLab's striped rows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.labkit import dark_theme, keep_shot, lab_page, open_notebook, run_all, shoot

NOTEBOOK = "profile_card.ipynb"

pytestmark = pytest.mark.timeout(180)

#: The first painted background behind an element (transparent layers skipped); START is
#: where to begin (the element, or e.g. its row).
_PAINTED = """(el) => {
  for (let e = START; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (c && c !== 'transparent' && !/rgba\\(.*, 0\\)$/.test(c)) return c;
  }
  return 'rgb(255, 255, 255)';
}"""
BACKGROUND_JS = _PAINTED.replace("START", "el")
ROW_BACKGROUND_JS = _PAINTED.replace("START", "el.closest('tr')")


def _rgb(css: str) -> tuple[float, float, float]:
    r, g, b = (float(v) for v in re.findall(r"[\d.]+", css)[:3])
    return r, g, b


def _luminance(css: str) -> float:
    """WCAG relative luminance of ``rgb(...)``."""

    def channel(v: float) -> float:
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in _rgb(css))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _check_chart(card: Any, dark: bool) -> None:
    """The chart's text and lines read against the card, and the SVG fits the output."""
    background = card.evaluate(BACKGROUND_JS)
    assert (_luminance(background) < 0.2) == dark, background
    texts = card.locator("svg.nbi-chart text.nbi-chart-title, svg.nbi-chart text.nbi-tick")
    assert texts.count() >= 10
    for text in texts.all():
        fill = text.evaluate("(t) => getComputedStyle(t).fill")
        assert _contrast(fill, background) >= 4.5, (fill, background)
    line = card.locator("svg.nbi-chart polyline.nbi-line").first
    stroke = line.evaluate("(l) => getComputedStyle(l).stroke")
    assert _contrast(stroke, background) >= 2.0, (stroke, background)
    width = card.evaluate("(c) => c.getBoundingClientRect().width")
    for svg in card.locator("svg.nbi-chart").all():
        box = svg.bounding_box()
        assert box is not None and 250 <= box["width"] <= width, (box, width)


def _check_code_chips(stats: Any) -> None:
    """Every ``<code>`` model name, striped row or not, keeps a chip that differs from its row."""
    codes = stats.locator("table.nbi-table tr td code").all()
    assert len(codes) >= 4
    for code in codes:
        style = code.evaluate(
            "(c) => { const s = getComputedStyle(c);"
            " return [s.backgroundColor, s.borderTopWidth, s.borderTopStyle]; }"
        )
        row = code.evaluate(ROW_BACKGROUND_JS)
        assert style[1] == "1px" and style[2] == "solid", style
        assert style[0] != row, (style, row)


def test_profile_card_follows_the_theme_at_700px(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    with lab_page(chromium, tmp_path, 700, 1000) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        run_all(page)
        card = page.locator(".nbi").filter(has=page.locator("svg.nbi-chart")).first
        card.wait_for(timeout=90_000)
        stats = page.locator(".nbi").filter(has_text="model versions").first
        stats.wait_for(timeout=60_000)
        text = card.inner_text()
        assert "throughput" in text and "latency" in text
        assert "last 3 measurement windows agreed within 10%" in text
        assert "c=1" in text and "c=4" in text
        _check_chart(card, dark=False)  # the file browser open: the output is ~310 px wide
        _check_code_chips(stats)
        narrow = card.evaluate("(c) => c.getBoundingClientRect().width")
        # the file browser closed, as when reading: the card takes the notebook's width
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
        page.wait_for_function(
            "([c, w]) => c.getBoundingClientRect().width > w + 150",
            arg=[card.element_handle(), narrow],
            timeout=30_000,
        )
        _check_chart(card, dark=False)
        card.scroll_into_view_if_needed()
        shot = shoot(card, tmp_path, "profile.png")
        assert shot.stat().st_size > 10_000

        dark_theme(page)
        _check_chart(card, dark=True)
        _check_code_chips(stats)
        card.scroll_into_view_if_needed()
        dark = shoot(card, tmp_path, "profile-dark.png")
        keep_shot(stats, tmp_path / "stats-dark.png")
        print(f"screenshots: {shot} {dark}")
        assert errors == [], errors
