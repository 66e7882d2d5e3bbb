"""The model browser's "try it" streams a generative model's reply into its result widget."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nbinfer import Session
from nbinfer.notebook.widgets import ModelBrowser


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu", keep_previous=True) as s:
        yield s


def test_try_it_streams_a_generative_model_into_the_result(session: Session) -> None:
    browser = ModelBrowser(session)
    try:
        browser.select("story")
        browser.wait()
        # the prompt alone: the model's defaults apply to its optional inputs
        assert [ed.spec.name for ed in browser._editors] == ["text_input"]
        browser._editors[0].widget.value = "Alice"
        states: list[str] = []
        browser.result.observe(lambda change: states.append(change["new"]), names="value")
        browser.run()
        browser.wait()
        drawn = [s for s in states if "g-text" in s]
        assert len(drawn) >= 3  # drawn while it streamed, not once at the end
        assert 'class="g-cursor"' in drawn[0] and 'class="g-cursor"' not in drawn[-1]
        assert "tokens 32" in drawn[-1] and "Alice" in drawn[-1]
    finally:
        browser.close()


def test_try_it_of_an_ordinary_model_is_unchanged(session: Session) -> None:
    browser = ModelBrowser(session)
    try:
        browser.select("add_sub")
        browser.wait()
        assert browser._prompt is None
        assert [ed.spec.name for ed in browser._editors] == ["INPUT0", "INPUT1"]
    finally:
        browser.close()
