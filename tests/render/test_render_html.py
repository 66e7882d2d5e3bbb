"""The building blocks (nbinfer.render.html) on plain values: escaping, cards, bars, the sheet."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from nbinfer.render.html import (
    Html,
    badge,
    bars,
    card,
    code_spans,
    css,
    escape,
    facts,
    legend,
    png_data_uri,
    section,
    table,
    thumbnails,
)
from tests.render.pages import EVIL, safe, themed


def test_escape_quotes_text_and_attributes_and_passes_safe_markup() -> None:
    assert escape('"<b>&') == "&quot;&lt;b&gt;&amp;"
    assert escape(3.5) == "3.5"
    kept = Html("<b>kept</b>")
    assert escape(kept) is kept
    assert isinstance(escape("x"), Html)


def test_table_escapes_every_cell_but_safe_ones_and_right_aligns_numbers() -> None:
    markup = table(["<th>", "n"], [[EVIL, 1], [Html("<code>ok</code>"), 22]], numeric=(1,))
    page = safe(markup)
    assert "<code>ok</code>" in markup  # Html passes
    assert EVIL in page.joined()  # the hostile text is shown as text
    assert markup.count('<td class="nbi-num">') == 2
    assert "<th>&lt;th&gt;</th>" in markup


def test_section_is_collapsible_and_counts() -> None:
    shut = section(EVIL, Html("<p>body</p>"), count=3, open=False)
    assert shut.startswith("<details><summary>") and "(3)" in shut
    assert "<details open>" in section("t", "b")
    safe(shut)


def test_card_has_a_text_twin_the_sheet_and_a_hidden_html_part() -> None:
    markup = card("Kind", EVIL, Html("<p>body</p>"), text=f"plain {EVIL}", sub=EVIL, error=True)
    page = safe(markup)
    themed(markup)
    assert 'class="nbi nbi-error"' in markup
    assert '<pre class="nbi-fallback">plain &lt;script&gt;' in markup  # for sanitized pages
    assert 'style="display:none"' in markup  # shown by the sheet, hidden where it is stripped
    assert page.joined().count(EVIL) == 3  # title, sub and fallback: as text


def test_facts_leave_out_empty_values() -> None:
    markup = facts({"a": 1, "empty": "", "none": None, "list": [], EVIL: "<v>"})
    assert "empty" not in markup and "none" not in markup and "list" not in markup
    assert "<b>a</b>1" in markup and "&lt;v&gt;" in markup
    safe(markup)


def test_bars_scale_to_the_longest_row_and_clamp_what_cannot_be_drawn() -> None:
    markup = bars([("a", [1.0]), ("b", [2.0]), (EVIL, [float("nan")]), ("neg", [-1.0])])
    widths = [w for w in markup.split('style="width:')[1:]]
    assert [w.split('"')[0] for w in widths] == ["50.00%", "100.00%", "0%", "0%"]
    safe(markup)
    stacked = bars([("r", [1.0, 3.0])], scale=8.0, value=lambda segs: f"{sum(segs)} ms")
    assert 'nbi-s1" style="width:12.50%"' in stacked and 'nbi-s2" style="width:37.50%"' in stacked
    assert "4.0 ms" in stacked
    assert legend(["queue", EVIL]).count("<i class=") == 2


def test_badge_chips_and_code_spans() -> None:
    assert badge("READY", "ok") == '<span class="nbi-badge nbi-ok">READY</span>'
    assert code_spans("run `x < 1` now") == "run <code>x &lt; 1</code> now"


def test_thumbnails_are_png_data_uris_with_escaped_captions() -> None:
    frame = np.linspace(0, 1, 16 * 16, dtype=np.float32).reshape(16, 16)
    uri = png_data_uri(frame, size=16)
    assert uri.startswith("data:image/png;base64,")
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))
    assert pixels.shape == (16, 16) and (pixels.min(), pixels.max()) == (0, 255)  # 0..1 scaled
    small = png_data_uri(frame, size=8)
    assert Image.open(io.BytesIO(base64.b64decode(small.split(",", 1)[1]))).size == (8, 8)
    markup = thumbnails([uri], [EVIL])
    safe(markup)
    assert "<figcaption>&lt;script&gt;" in markup


def test_the_stylesheets_follow_the_theme_with_fallbacks() -> None:
    sheet = css()
    assert "--nbi-fg: var(--jp-content-font-color0, inherit)" in sheet
    assert "--nbi-bg: var(--jp-layout-color0, transparent)" in sheet
    assert ".nbinfer-browser" in css("browser.css")
    assert css() is sheet  # read once
