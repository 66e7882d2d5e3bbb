"""The protocol layer knows nothing of DataFrames: no module under nbinfer/protocol names pandas.

DataFrame planning lives in ``nbinfer.interop.pandas`` (ARCHITECTURE.md); the protocol layer's
code (imports, names, attributes, strings other than docstrings) never mentions pandas or a
DataFrame, so it neither imports one, lazily or by name (``importlib.import_module("pandas")``,
``sys.modules["pandas"]``), nor grows a ``from_dataframe``. Docstrings and comments may still
say where such things live.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PROTOCOL = Path(__file__).resolve().parents[2] / "nbinfer" / "protocol"
SOURCES = sorted(PROTOCOL.rglob("*.py"))
#: What a mention looks like: ``pandas``, ``pd`` as a name of its own, ``DataFrame`` in any case.
MENTION = re.compile(r"pandas|dataframe|^pd$", re.IGNORECASE)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string nodes that are docstrings (module, class, function)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def _words(node: ast.AST) -> list[str]:
    """The identifiers and module names a node itself carries."""
    if isinstance(node, ast.Import):
        return [w for a in node.names for w in (a.name, a.asname) if w]
    if isinstance(node, ast.ImportFrom):
        return [node.module or "", *(w for a in node.names for w in (a.name, a.asname) if w)]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    return []


def mentions(source: str) -> list[str]:
    """``"line N: word"`` for each mention of pandas / DataFrames in ``source``'s code."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        words = _words(node)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            words = re.findall(r"\w+", node.value)
        line = getattr(node, "lineno", 0)
        found += [f"line {line}: {w}" for w in words if MENTION.search(w)]
    return sorted(set(found), key=lambda m: int(m.split(":")[0].removeprefix("line ")))


@pytest.mark.parametrize(
    "code",
    [
        "import pandas",
        "import pandas as pd",
        "from pandas import DataFrame",
        "import importlib\nimportlib.import_module('pandas')",
        "import sys\nsys.modules.get('pandas')",
        "def from_dataframe(frame):\n    return frame",
        "class Request:\n    def to_DataFrame(self):\n        pass",
        "def f(dataframe=None):\n    pass",
        "x = pd.concat([])",
    ],
)
def test_the_finder_sees_each_kind_of_mention(code: str) -> None:
    assert mentions(code) != []


def test_the_finder_leaves_docstrings_and_comments_alone() -> None:
    code = '"""Tables: see nbinfer.interop.pandas (DataFrame planning)."""\n'
    code += 'def f():\n    """Not a DataFrame."""\n    return 1  # pandas lives elsewhere\n'
    assert mentions(code) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PROTOCOL)))
def test_protocol_module_never_mentions_pandas_or_dataframes(path: Path) -> None:
    found = mentions(path.read_text(encoding="utf-8"))
    assert found == [], (
        f"nbinfer/protocol/{path.relative_to(PROTOCOL)} mentions DataFrames in code {found}: "
        "DataFrame planning lives in nbinfer.interop.pandas"
    )
