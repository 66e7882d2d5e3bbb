"""The import layering of ARCHITECTURE.md holds (checked statically over the package's source)."""

from __future__ import annotations

import ast
import itertools
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
    # The offline test transport (MockTransport): an engine like the real ones, below the client.
    "nbinfer.testing": (*_BASE, "nbinfer.transports"),
    # Ported tritonclient / KServe code (issue 17): faces over the client and protocol layers,
    # never the server or the session.
    "nbinfer.compat": (
        *_BASE,
        "nbinfer.client",
        "nbinfer.interop",
        "nbinfer.compat",
    ),
    # From the server only its launcher (the local server) and its model module (serve()).
    "nbinfer.session": (
        *_BASE,
        "nbinfer.transports",
        "nbinfer.client",
        "nbinfer.interop",
        "nbinfer.server.launcher",
        "nbinfer.server.model",
        "nbinfer.capabilities",
        "nbinfer.session",
        # Lazy, inside Session.browse() only: the model browser is a view over the session.
        "nbinfer.notebook.widgets",
        # Lazy, inside Session.profile() only: the load profiler (a thin front).
        "nbinfer.profiling",
    ),
    # Spark's batch UDF (issue 28): a client per Spark worker; pyspark imported lazily.
    "nbinfer.spark": (*_BASE, "nbinfer.client", "nbinfer.spark"),
    # The load profiler: drives an AsyncClient, builds inputs with interop; its frame's repr
    # hook imports the profile renderer lazily (matplotlib lives there, not here).
    "nbinfer.profiling": (
        *_BASE,
        "nbinfer.client",
        "nbinfer.capabilities",  # shared_memory="system" asks what the server advertises
        "nbinfer.profiling",
        "nbinfer.interop",
        "nbinfer.notebook.profile_display",
    ),
}

# Named lazy edges outside the table: (importing module, imported module), each inside one method.
# InferResult.to_dataframe builds its frame with interop.pandas (interop only imports protocol).
# Session.serve() of a torch.nn.Module builds the torch backend's model (torch already imported).
LAZY_EDGES: set[tuple[str, str]] = {
    ("nbinfer.client.results", "nbinfer.interop.pandas"),
    ("nbinfer.session.serving", "nbinfer.server.backends.torch"),
}

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
NOTEBOOK_ONLY = ("IPython", "ipywidgets", "anywidget", "matplotlib")

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


def _package_of(path: Path) -> list[str]:
    package = _module_name(path).split(".")
    return package if path.name == "__init__.py" else package[:-1]


def _from_base(node: ast.ImportFrom, package: list[str]) -> str:
    """The module a ``from ... import`` statement imports from (relative ones resolved)."""
    if node.level == 0:
        return node.module or ""
    parent = package[: len(package) - node.level + 1]
    return ".".join([*parent, node.module] if node.module else parent)


def _targets(node: ast.Import | ast.ImportFrom, package: list[str]) -> list[str]:
    """The modules one import statement names.

    ``from pkg import name`` names ``pkg.name`` when that is a module of the package (like
    ``import pkg.name``: either way ``pkg/__init__`` runs first, as for every submodule), else
    ``pkg``.
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _from_base(node, package)
    named = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    return list(dict.fromkeys(named))


def _imports(path: Path) -> list[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _package_of(path)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.extend(_targets(node, package))
    return found


def _within(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it (``nbinfer.server.modelio`` is not in ``.model``)."""
    return module == prefix or module.startswith(prefix + ".")


def _area(module: str, table: dict[str, tuple[str, ...]]) -> str | None:
    for area in table:
        if _within(module, area):
            return area
    return None


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "_generated" not in p.parts)
#: Every module of the package by name, generated stubs included (to resolve imports).
MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


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
            if not any(_within(m, a) for a in ALLOWED[area]) and (module, m) not in LAZY_EDGES
        ]
        assert bad == [], f"{module} may not import {bad} (allowed: {ALLOWED[area]})"
    forbidden = FORBIDDEN_THIRD_PARTY.get(_area(module, FORBIDDEN_THIRD_PARTY) or "", ())
    if not module.startswith("nbinfer.notebook"):
        forbidden = tuple(set(forbidden) | set(NOTEBOOK_ONLY))
    bad3 = [m for m in imports if m.split(".")[0] in forbidden]
    assert bad3 == [], f"{module} may not import {bad3}"


GENERATED = "nbinfer.protocol._generated"
STUB_CODEC = "nbinfer.protocol.grpc"


def _stub_names() -> set[str]:
    """The names under which ``protocol/grpc.py`` holds generated stub modules (``pb`` ...)."""
    tree = ast.parse(MODULES[STUB_CODEC].read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(_within(t, GENERATED) for t in _targets(node, ["nbinfer", "protocol"])):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign) and ast.unparse(node.value) in names:
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _stub_uses(path: Path, stubs: set[str]) -> list[str]:
    """Where ``path`` reaches generated stubs: directly, or re-exported by the gRPC codec."""
    tree = ast.parse(path.read_text())
    package = _package_of(path)
    codec_aliases: set[str] = set()  # local names bound to the nbinfer.protocol.grpc module
    uses: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if any(_within(t, GENERATED) for t in _targets(node, package)):
            uses.append(f"line {node.lineno}: imports {GENERATED}")
        base = _from_base(node, package) if isinstance(node, ast.ImportFrom) else None
        if base == STUB_CODEC:
            reexported = sorted(a.name for a in node.names if a.name in stubs)
            if reexported:
                uses.append(f"line {node.lineno}: imports {reexported} from {STUB_CODEC}")
        for alias in node.names:
            module = alias.name if base is None else f"{base}.{alias.name}"
            if module == STUB_CODEC:
                codec_aliases.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in stubs:
            owner = ast.unparse(node.value)
            if owner in codec_aliases:
                uses.append(f"line {node.lineno}: {owner}.{node.attr}")
    return sorted(uses, key=lambda use: int(use.split(":")[0].removeprefix("line ")))


#: Modules still reaching the stubs through ``protocol.grpc``'s ``pb``, each with why. Any
#: other user fails the test, and so does a listed one that no longer does (delete it here).
KNOWN_STUB_USERS: dict[str, str] = {
    "nbinfer.compat.tritonclient.grpc.service_pb2": "tritonclient's public module of the messages",
    "nbinfer.compat.tritonclient.grpc.model_config_pb2": "tritonclient's public module of configs",
}


def test_protocol_grpc_is_the_only_user_of_generated_stubs() -> None:
    # ARCHITECTURE: protocol/grpc.py is the only module touching generated stubs, so nothing
    # else reaches them either directly or through a name it re-exports (``grpc.pb``).
    stubs = _stub_names()
    assert stubs, f"{STUB_CODEC} no longer imports the stubs: update this test"
    users = {
        _module_name(path): uses
        for path in SOURCES
        if _module_name(path) != STUB_CODEC and (uses := _stub_uses(path, stubs))
    }
    others = {name: uses for name, uses in users.items() if name not in KNOWN_STUB_USERS}
    assert others == {}, f"only {STUB_CODEC} may use the generated gRPC stubs: {others}"
    gone = sorted(set(KNOWN_STUB_USERS) - set(users))
    assert gone == [], f"no longer use the stubs, delete them from KNOWN_STUB_USERS: {gone}"


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
        "_typing.TYPE_CHECKING",
    )


def _runtime_edges(path: Path) -> dict[str, int]:
    """``imported module -> line`` for what ``path`` imports when it runs, lazy imports included.

    Left out: ``if TYPE_CHECKING:`` blocks (never run), and the top floor's lazy doors: an
    import of an ``nbinfer.notebook`` module from outside the notebook layer inside a function
    (repr hooks, ``Session.browse``, ``load_ipython_extension``); the layering table names
    each, and at module level such an import still counts.
    """
    module = _module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _within(
            module, "nbinfer.notebook"
        ):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom | ast.Import) and all(
                    _within(t, "nbinfer.notebook") for t in _targets(inner, _package_of(path))
                ):
                    skipped.add(id(inner))
    edges: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
            for target in _targets(node, _package_of(path)):
                while target and target not in MODULES:  # the deepest module it names
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.setdefault(target, node.lineno)
    return edges


def _components(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _shortest_loop(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """The shortest way round a component from its first module: ``[a, b, ..., a]``."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        step = []
        for v in frontier:
            for w in sorted(set(graph[v]) & component):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    step.append(w)
        frontier = step
    raise AssertionError(f"{sorted(component)} is not a loop")


def _loops(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One import loop per strongly connected component, as ``[a, b, ..., a]``."""
    return sorted(_shortest_loop(graph, c) for c in _components(graph))


def test_the_loop_finder_names_each_loop() -> None:
    graph = {
        "a": {"b": 1},
        "b": {"c": 2},
        "c": {"a": 3, "d": 4},
        "d": {},
        "x": {"y": 5},
        "y": {"x": 6},
    }
    assert _loops(graph) == [["a", "b", "c", "a"], ["x", "y", "x"]]
    assert _loops({"a": {"b": 1}, "b": {}}) == []


#: Loops found by the test below that are known and not yet undone, each named with why it is
#: there. Any other loop fails the test, and so does a listed one that is gone (delete it here).
KNOWN_LOOPS: dict[tuple[str, ...], str] = {}


def test_no_import_loop_anywhere_in_the_package() -> None:
    # ARCHITECTURE: no import loops anywhere, lazy (in-function) imports included.
    graph = {name: _runtime_edges(path) for name, path in MODULES.items() if GENERATED not in name}
    loops = {tuple(loop) for loop in _loops(graph)}
    named = [
        " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(loop))
        + f" -> {loop[-1]}"
        for loop in sorted(loops - set(KNOWN_LOOPS))
    ]
    assert named == [], "import loops:\n" + "\n".join(named)
    gone = sorted(set(KNOWN_LOOPS) - loops)
    assert gone == [], f"no longer loops, delete them from KNOWN_LOOPS: {gone}"


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


#: The 800-line cap on a module (issue 30). Modules still over it, each to be split by the
#: change that owns it; a listed one back under the cap fails too (delete it here).
MAX_LINES = 800
KNOWN_LONG: frozenset[str] = frozenset(
    {
        "nbinfer.compat._triton",
        "nbinfer.compat.kserve",
        "nbinfer.interop.images",
        "nbinfer.notebook.display",
        "nbinfer.notebook.widgets",
        "nbinfer.server.repository",
        "nbinfer.protocol.tensors",
        "nbinfer.session.core",
    }
)


def test_no_module_is_over_800_lines() -> None:
    lines = {_module_name(p): len(p.read_text().splitlines()) for p in SOURCES}
    long = {name for name, n in lines.items() if n > MAX_LINES}
    assert sorted(long - KNOWN_LONG) == [], f"over {MAX_LINES} lines: split them"
    gone = sorted(KNOWN_LONG - long)
    assert gone == [], f"now within {MAX_LINES} lines, delete them from KNOWN_LONG: {gone}"
