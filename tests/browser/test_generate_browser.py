"""A real browser: text generation streams into ONE output of a JupyterLab cell (issue 27).

``session.generate("story", ...)`` paces its words (150 ms each); the test watches the cell's
output as it grows and counts its new states: at least three while the text is still streaming
(the cursor shows), a screenshot of the first three (of every state when pictures are kept),
then the final text with its figures, in light and dark.
A chat's conversation draws as bubbles, in both themes.
"""

from __future__ import annotations

import itertools
import time
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
    shoot,
)

NOTEBOOK = "generate_stream.ipynb"

pytestmark = pytest.mark.timeout(240)


def test_tokens_arrive_over_time_in_one_cell_output(
    lab: dict[str, Any], chromium: Any, tmp_path: Path
) -> None:
    with lab_page(chromium, tmp_path, 1000, 700) as (page, errors):
        open_notebook(page, lab, NOTEBOOK)
        run_all(page)
        cell = page.locator(".jp-Notebook .jp-CodeCell").nth(1)
        text = cell.locator(".nbi-gen .g-text")
        text.wait_for(timeout=90_000)
        seen: list[str] = []
        shots = 0
        while True:  # every new state of the one output, until the stream has ended
            now = text.inner_text()
            streaming = cell.locator(".nbi-gen .g-cursor").count() == 1
            if not streaming:
                break
            if now.strip() and now not in seen:
                seen.append(now)
                shots += 1
                name = f"generate-stream-{shots}.png"
                if shots <= 3:  # the pictures docs/img keeps
                    shoot(cell, tmp_path, name)
                else:
                    keep_shot(cell, tmp_path / name)
                assert cell.locator(".jp-OutputArea-output").count() == 1
            time.sleep(0.3)
        assert shots >= 3, seen
        # each state extends the one before: the text only grows
        assert all(b.startswith(a.rstrip()) for a, b in itertools.pairwise(seen)), seen
        cell.locator(".nbi-gen .g-stats").wait_for(timeout=30_000)
        final = text.inner_text()
        assert final.startswith("Alice") and len(final) > len(seen[-1])
        stats = cell.locator(".nbi-gen .g-stats").inner_text()
        assert "tokens 48" in stats and "TTFT" in stats and "tokens/s" in stats
        assert cell.locator(".jp-OutputArea-output").count() == 1  # still one output
        shoot(cell, tmp_path, "generate-stream-final.png")

        chat = page.locator(".jp-Notebook .jp-CodeCell").nth(2)
        chat.locator(".nbi-gen .g-chat").wait_for(timeout=60_000)
        assert chat.locator(".g-bubble").count() == 4
        assert "Where did the White Rabbit go?" in chat.locator(".g-chat").inner_text()
        shoot(chat.locator(".jp-OutputArea"), tmp_path, "generate-chat.png")

        dark_theme(page)
        for where, name in ((cell, "generate-stream-dark.png"), (chat, "generate-chat-dark.png")):
            shoot(where.locator(".jp-OutputArea"), tmp_path, name)
        light_theme(page)
        assert errors == [], errors
