"""The import layering of ARCHITECTURE.md holds (checked statically over the package's source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbinfer"

# Which nbinfer modules each area may import (prefix match), per ARCHITECTURE.md.
_BASE = ("nbinfer.errors", "nbinfer.config", "nbinfer.protocol")
ALLOWED: dict[str, tuple[str, ...]] = {
    "nbinfer.errors": (),
    "nbinfer.config": ("nbinfer.errors",),
    "nbinfer.protocol": ("nbinfer.errors", "nbinfer.protocol"),
    "nbinfer.transports": (
        "nbinfer.errors",
        "nbinfer.config",
        "nbinfer.protocol",
        "nbinfer.transports",
    ),
    "nbinfer.client": (
        "nbinfer.errors",
        "nbinfer.config",
        "nbinfer.protocol",
        "nbinfer.transports",
        "nbinfer.client",
    ),
    "nbinfer.interop": (
        "nbinfer.errors",
        "nbinfer.protocol",
        "nbinfer.interop",
        # Lazy, inside ClassificationFrame._repr_html_ only: the classify grid is drawn there.
        "nbinfer.notebook.gallery",
    ),
    "nbinfer.server": (*_BASE, "nbinfer.server", "nbinfer._lazy"),  # _lazy: a leaf (PEP 562 hooks)
    # What a server offers (Session.capabilities): reads metadata through a client, no I/O
    # of its own; the session and the notebook layer build on it.
    "nbinfer.capabilities": ("nbinfer.errors", "nbinfer.client"),
    # Ported tritonclient / KServe code (issue 17): faces over the client and protocol layers,
    # never the server or the session.
    "nbinfer.compat": (
        *_BASE,
        "nbinfer.client",
        "nbinfer.interop",
        "nbinfer.compat",
    ),
    "nbinfer.session": (
        *_BASE,
        "nbinfer.transports",
        "nbinfer.client",
        "nbinfer.interop",
        "nbinfer.server",
        "nbinfer.capabilities",
        # Lazy, inside Session.browse() only: the model browser is a view over the session.
        "nbinfer.notebook.widgets",
        # Lazy, inside Session.profile() only: the load profiler (a thin front).
        "nbinfer.profiling",
    ),
    # The load profiler: drives an AsyncClient, builds inputs with interop; its frame's repr
    # hook imports the profile renderer lazily (matplotlib lives there, not here).
    "nbinfer.profiling": (
        *_BASE,
        "nbinfer.client",
        "nbinfer.interop",
        "nbinfer.notebook.profile_display",
    ),
}

# Named lazy edges outside the table: (importing module, imported module), each inside one method.
# InferResult.to_dataframe builds its frame with interop.pandas (interop only imports protocol).
LAZY_EDGES: set[tuple[str, str]] = {("nbinfer.client.results", "nbinfer.interop.pandas")}

# Third-party modules each area must never import (even lazily).
FORBIDDEN_THIRD_PARTY: dict[str, tuple[str, ...]] = {
    "nbinfer.protocol": (
        "pandas",
        "pycurl",
        "aiohttp",
        "httpx",
        "uvicorn",
        "IPython",
        "ipywidgets",
    ),
    "nbinfer.server": ("IPython", "ipywidgets", "pandas", "matplotlib", "pycurl", "aiohttp"),
    "nbinfer.transports": ("IPython", "ipywidgets", "pandas"),
    "nbinfer.client": ("IPython", "ipywidgets"),
    "nbinfer.session": ("IPython", "ipywidgets"),
}
NOTEBOOK_ONLY = ("IPython", "ipywidgets", "matplotlib")

#: The one lazy edge into the notebook layer (ARCHITECTURE.md): any module's three-line
#: ``_repr_mimebundle_`` hook imports the renderers inside the method, never at import time.
DISPLAY_EDGE = "nbinfer.notebook.display"
DISPLAY_HOOKS = ("_repr_mimebundle_", "_repr_html_")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append(node.module or "")
            else:
                base = package[: len(package) - node.level + 1]
                found.append(".".join([*base, node.module] if node.module else base))
    return found


def _area(module: str, table: dict[str, tuple[str, ...]]) -> str | None:
    for area in table:
        if module == area or module.startswith(area + "."):
            return area
    return None


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "_generated" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_layering(path: Path) -> None:
    module = _module_name(path)
    imports = _imports(path)
    area = _area(module, ALLOWED)
    if area is not None:
        internal = [
            m for m in imports if (m == "nbinfer" or m.startswith("nbinfer.")) and m != DISPLAY_EDGE
        ]
        bad = [
            m
            for m in internal
            if not any(m.startswith(a) for a in ALLOWED[area]) and (module, m) not in LAZY_EDGES
        ]
        assert bad == [], f"{module} may not import {bad} (allowed: {ALLOWED[area]})"
    forbidden = FORBIDDEN_THIRD_PARTY.get(_area(module, FORBIDDEN_THIRD_PARTY) or "", ())
    if not module.startswith("nbinfer.notebook"):
        forbidden = tuple(set(forbidden) | set(NOTEBOOK_ONLY))
    bad3 = [m for m in imports if m.split(".")[0] in forbidden]
    assert bad3 == [], f"{module} may not import {bad3}"


def test_protocol_grpc_is_the_only_user_of_generated_stubs() -> None:
    users = [
        _module_name(p)
        for p in SOURCES
        if any("_generated" in m for m in _imports(p))
        or "from nbinfer.protocol._generated" in p.read_text()
        or "from ._generated" in p.read_text()
    ]
    assert set(users) <= {"nbinfer.protocol.grpc"}, users


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_display_edge_only_inside_repr_hooks(path: Path) -> None:
    if _module_name(path).startswith("nbinfer.notebook"):
        return
    tree = ast.parse(path.read_text(), filename=str(path))
    inside_hooks = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef) and fn.name in DISPLAY_HOOKS
        for node in ast.walk(fn)
    }
    stray = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == DISPLAY_EDGE
        and id(node) not in inside_hooks
    ]
    assert stray == [], f"{path.name}: {DISPLAY_EDGE} imported outside a repr hook at {stray}"
