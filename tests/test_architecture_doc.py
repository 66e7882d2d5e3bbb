"""docs/architecture.md's picture of the package matches the tree (issue 30).

Every module of ``nbinfer/`` is named in the section of its own package, and every module the
picture names exists there: adding, moving or deleting a module without the page fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nbinfer"
PAGE = ROOT / "docs" / "architecture.md"
#: Subtrees the picture names as one entry (generated stubs; tritonclient's import paths; data).
WHOLE = ("protocol/_generated", "compat/tritonclient", "interop/data", "server/export_runtime")
NAME = re.compile(r"\b[a-z_][a-z0-9_]*\.py\b|\b[a-z_][a-z0-9_]*/")


def _tree() -> list[str]:
    """The lines of the page's ``nbinfer/`` block, after its first line."""
    blocks = re.findall(r"```text\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    tree = next(b for b in blocks if b.startswith("nbinfer/\n"))
    return [line for line in tree.splitlines()[1:] if line.strip()]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _entries() -> list[tuple[int, str, str]]:
    """(indent, first word, the rest with its continuation lines) of each entry of the tree."""
    entries: list[tuple[int, str, str]] = []
    for line in _tree():
        depth = _indent(line)
        if depth in (2, 4):
            first, _, rest = line.strip().partition(" ")
            entries.append((depth, first, rest))
        else:  # a continuation line of the entry above
            depth, first, rest = entries[-1]
            entries[-1] = (depth, first, f"{rest} {line.strip()}")
    return entries


def _sections() -> dict[str, set[str]]:
    """Package path ("" for the top, "server", "server/backends") -> the names its picture holds:
    each entry's first word, plus the modules a module's or a sub-package's description lists
    (``(+ rest_bodies.py)``, ``backends/  onnx.py, torch.py``)."""
    sections: dict[str, set[str]] = {"": set()}
    package = ""
    for depth, first, rest in _entries():
        if depth == 2:
            sections[""].add(first)
            package = first.rstrip("/") if first.endswith("/") else ""
            sections.setdefault(package, set())
            if not first.endswith("/"):
                sections[""].update(NAME.findall(rest))
            continue
        sections[package].add(first)
        if not first.endswith("/"):
            sections[package].update(NAME.findall(rest))
        elif f"{package}/{first.rstrip('/')}" not in WHOLE:
            sections[f"{package}/{first.rstrip('/')}"] = set(NAME.findall(rest))
    return sections


def _modules() -> dict[str, set[str]]:
    """Package path -> the names its picture must hold (modules ``x.py``, sub-packages ``x/``)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(WHOLE):
            continue
        package, _, name = rel.rpartition("/")
        if name == "__init__.py":
            if package:
                parent, _, sub = package.rpartition("/")
                found.setdefault(parent, set()).add(sub + "/")
            else:
                found.setdefault("", set()).add(name)
            continue
        found.setdefault(package, set()).add(name)
    for whole in WHOLE:
        parent, _, sub = whole.rpartition("/")
        found.setdefault(parent, set()).add(sub + "/")
    return found


def _not_in(names: dict[str, set[str]], other: dict[str, set[str]]) -> list[str]:
    """``package: name`` of each of ``names`` that ``other`` lacks under the same package."""
    return sorted(
        f"{package or 'nbinfer'}: {name}"
        for package, found in names.items()
        for name in found
        if name not in other.get(package, set())
    )


def test_every_module_is_named_in_its_packages_section() -> None:
    missing = _not_in(_modules(), _sections())
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_every_module_the_picture_names_exists() -> None:
    ghosts = _not_in(_sections(), _modules())
    assert not ghosts, f"docs/architecture.md names what the tree lacks: {ghosts}"


def test_nothing_in_the_picture_is_marked_unbuilt() -> None:
    assert not [first for _, first, _ in _entries() if "*" in first]
