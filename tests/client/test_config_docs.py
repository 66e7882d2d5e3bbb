"""docs/client.md names only configuration fields that exist, and names all of them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from nbinfer import config

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
CLASSES = {
    name: getattr(config, name)
    for name in (
        "ClientConfig",
        "Timeouts",
        "Retries",
        "TLSConfig",
        "BasicAuth",
        "BearerAuth",
        "HeaderAuth",
    )
}


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _signatures(text: str) -> list[tuple[str, list[str]]]:
    """Every ``Class(a, b, ...)`` the page writes for a config class, with its names."""
    found = []
    for match in re.finditer(r"`(\w+)\(([^`()]*)\)", text.replace("\n", " ")):
        if match.group(1) in CLASSES:
            names = [n.strip() for n in match.group(2).split(",") if n.strip()]
            found.append((match.group(1), names))
    return found


def test_every_config_field_docs_client_names_exists() -> None:
    text = DOC.read_text()
    signatures = _signatures(text)
    assert signatures, "docs/client.md writes no config class signature"
    for cls, names in signatures:
        unknown = set(names) - _fields(CLASSES[cls])
        assert not unknown, f"docs/client.md: {cls} has no field(s) {sorted(unknown)}"
    for cls, attr in re.findall(r"`(\w+)\.(\w+)`", text):
        if cls in CLASSES:
            assert attr in _fields(CLASSES[cls]), f"docs/client.md: {cls}.{attr} does not exist"


@pytest.mark.parametrize("cls", ["ClientConfig", "Timeouts", "Retries", "TLSConfig"])
def test_docs_client_lists_every_field(cls: str) -> None:
    written = {name for c, names in _signatures(DOC.read_text()) if c == cls for name in names}
    assert written == _fields(CLASSES[cls]), f"docs/client.md: {cls} fields differ"
