"""An HTML fragment read back for the renderer tests: its tags, attributes and text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: Markup a hostile server could send in a name, label or message.
EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'


class Page(HTMLParser):
    """Collects start tags (with attributes) and the text of an HTML fragment."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def joined(self) -> str:
        """The text, style sheets left out."""
        return " ".join(self.text)

    def names(self) -> set[str]:
        return {tag for tag, _ in self.tags}


def safe(markup: str) -> Page:
    """``markup`` parsed, asserting no hostile markup became tags or attributes."""
    page = Page(markup)
    assert "script" not in page.names(), "a <script> reached the page"
    assert all("onerror" not in attrs for _, attrs in page.tags), "an onerror reached the page"
    return page


def themed(markup: str) -> None:
    """The markup carries the stylesheet whose colours follow JupyterLab's theme variables."""
    style = re.search(r"<style>(.*?)</style>", markup, re.S)
    assert style is not None, "no stylesheet inlined"
    sheet = style.group(1)
    for variable in ("--jp-content-font-color0", "--jp-layout-color0", "--jp-border-color2"):
        assert f"var({variable}," in sheet, f"{variable} (with a fallback) missing"
