"""The import layering of ARCHITECTURE.md holds (checked statically over the package's source)."""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbinfer"

# Which nbinfer modules each area may import (prefix match), per ARCHITECTURE.md.
_BASE = ("nbinfer.errors", "nbinfer.config", "nbinfer.protocol")
ALLOWED: dict[str, tuple[str, ...]] = {
    # The renderers (pure, duck-typed: they import nothing of the classes they draw), low enough
    # that every layer's repr hook names its renderer there.
    "nbinfer.render": ("nbinfer.render",),
    "nbinfer.errors": ("nbinfer.render",),  # NbinferError._repr_mimebundle_: the error card
    "nbinfer.config": ("nbinfer.errors",),
    "nbinfer.protocol": ("nbinfer.errors", "nbinfer.protocol", "nbinfer.render"),
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
        "nbinfer.render",
    ),
    "nbinfer.interop": (
        "nbinfer.errors",
        "nbinfer.protocol",
        "nbinfer.interop",
        "nbinfer.render",
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
        "nbinfer.render",
        # Lazy, inside Session.profile() only: the load profiler (a thin front).
        "nbinfer.profiling",
    ),
    # Spark's batch UDF (issue 28): a client per Spark worker, the output columns of interop;
    # pyspark imported lazily.
    "nbinfer.spark": (*_BASE, "nbinfer.client", "nbinfer.interop", "nbinfer.spark"),
    # The load profiler: drives an AsyncClient, builds inputs with interop; its frame's repr
    # hook names its renderer (nbinfer.render.profile; matplotlib lives there, lazily).
    "nbinfer.profiling": (
        *_BASE,
        "nbinfer.client",
        "nbinfer.capabilities",  # shared_memory="system" asks what the server advertises
        "nbinfer.profiling",
        "nbinfer.interop",
        "nbinfer.render",
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
#: The renderers may use these optional heavy dependencies, imported inside a function only.
RENDER_LAZY = ("matplotlib", "pandas", "PIL")

#: Jupyter's display hooks: outside the notebook layer each names its renderer in render.
DISPLAY_HOOKS = ("_repr_mimebundle_", "_repr_html_", "_repr_pretty_", "_repr_svg_", "_repr_png_")
#: Hooks that draw without a renderer of ours, each with why.
OWN_DISPLAY: dict[tuple[str, str], str] = {
    ("nbinfer.interop.probabilities", "_repr_html_"): "pandas' own to_html, with our formatters",
}
#: Calls that import the module named by their first argument, a string literal: importlib's,
#: ``__import__``, importlib.resources' ``files`` (imports the package), session.ops' ``imported``.
IMPORT_CALLS = ("import_module", "__import__", "files", "find_spec", "imported")
#: Calls reading a table of ``name -> module`` strings (PEP 562 lazy attributes): an edge each.
LAZY_TABLE_CALLS = ("lazy_attributes",)
#: Modules importing a module whose name is not a literal (so no edge can be read), with why.
#: Any other fails the test below: name the module as a string literal instead.
DYNAMIC_IMPORTS: dict[str, str] = {
    "nbinfer._lazy": "imports the lazy tables' modules: read as edges where the tables are",
    "nbinfer.session.ops": "imported(name): every call names its module as a literal",
    "nbinfer.server.backends.optional": "optional third-party backends (onnxruntime, torch)",
    "nbinfer.server.exception_handlers": "a user's handler, by the dotted path they configured",
    "nbinfer.server.export_runtime.runtime": "an __import__ hook for the exported source",
}


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


def _call_name(func: ast.expr) -> str:
    """``import_module`` for ``importlib.import_module(...)``, ``import_module(...)`` and a
    private alias (``_lazy_attributes`` for ``lazy_attributes``)."""
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name if name.startswith("__") else name.lstrip("_")


def _literal(node: ast.expr, constants: dict[str, str] | None = None) -> str | None:
    """The string ``node`` holds: a literal, or a module-level constant's (``_DATA``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return (constants or {}).get(node.id) if isinstance(node, ast.Name) else None


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound once to a string literal (``_DATA = "nbinfer.interop.data"``)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            value = _literal(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if value is not None:
                found.update({t.id: value for t in targets if isinstance(t, ast.Name)})
    return found


def _string_imports(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """``(module, node)`` for each module imported by its name as a string.

    ``importlib.import_module("nbinfer.x")`` and the other :data:`IMPORT_CALLS` with a literal
    name, and every module of a ``name -> module`` table handed to ``lazy_attributes``.
    """
    tables: dict[str, ast.Dict] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            tables.update({t.id: node.value for t in targets if isinstance(t, ast.Name)})
    constants = _constants(tree)
    found: list[tuple[str, ast.AST]] = []
    for node in _walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node.func)
        if name in IMPORT_CALLS and node.args and (module := _literal(node.args[0], constants)):
            found.append((module, node))
        elif name in LAZY_TABLE_CALLS:
            for arg in node.args:
                table = tables.get(arg.id) if isinstance(arg, ast.Name) else arg
                if isinstance(table, ast.Dict):
                    found += [(m, node) for v in table.values if (m := _literal(v))]
    return found


def _dynamic_imports(tree: ast.Module) -> list[int]:
    """Lines importing a module whose name is no literal (an edge the graph cannot see)."""
    called = {id(node.func) for node in _walk(tree) if isinstance(node, ast.Call)}
    constants = _constants(tree)
    lines = []
    for node in _walk(tree):
        if isinstance(node, ast.Call) and _call_name(node.func) in IMPORT_CALLS:
            if not node.args or _literal(node.args[0], constants) is None:
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Name | ast.Attribute)
            and _call_name(node) in ("import_module", "__import__")
            and id(node) not in called
        ):  # handed over to be called elsewhere: run_in_executor(None, import_module, name)
            lines.append(node.lineno)
    return sorted(set(lines))


@functools.cache
def _walk(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of ``tree`` (``ast.walk``), listed once per tree: each test walks them."""
    return tuple(ast.walk(tree))


@functools.cache
def _tree(path: Path) -> ast.Module:
    """``path`` parsed, once per run (the tests here only read the trees)."""
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def _imports(path: Path) -> tuple[str, ...]:
    """Absolute names of every module ``path`` imports (relative imports resolved).

    Statements anywhere in the module (in functions too) and string imports
    (:func:`_string_imports`).
    """
    tree = _tree(path)
    package = _package_of(path)
    found: list[str] = []
    for node in _walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.extend(_targets(node, package))
    found += [module for module, _ in _string_imports(tree)]
    return tuple(found)


def _within(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it (``nbinfer.server.modelio`` is not in ``.model``)."""
    return module == prefix or module.startswith(prefix + ".")


def _area(module: str, table: dict[str, tuple[str, ...]]) -> str | None:
    for area in table:
        if _within(module, area):
            return area
    return None


@pytest.fixture(scope="module", autouse=True)
def _forget_the_trees() -> Iterator[None]:
    """Drop the parsed trees after this module: kept alive, they make every later garbage
    collection of the run (pytest's own at the end included) walk millions of nodes."""
    yield
    for cached in (_import_graph, _imports, _walk, _tree):
        cached.cache_clear()


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "_generated" not in p.parts)
#: Every module of the package by name, generated stubs included (to resolve imports).
MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_layering(path: Path) -> None:
    module = _module_name(path)
    imports = _imports(path)
    area = _area(module, ALLOWED)
    if area is not None:
        internal = [m for m in imports if m == "nbinfer" or m.startswith("nbinfer.")]
        bad = [
            m
            for m in internal
            if not any(_within(m, a) for a in ALLOWED[area]) and (module, m) not in LAZY_EDGES
        ]
        assert bad == [], f"{module} may not import {bad} (allowed: {ALLOWED[area]})"
    forbidden = FORBIDDEN_THIRD_PARTY.get(_area(module, FORBIDDEN_THIRD_PARTY) or "", ())
    if not module.startswith("nbinfer.notebook"):
        forbidden = tuple(set(forbidden) | set(NOTEBOOK_ONLY))
    if _within(module, "nbinfer.render"):  # lazily only: test_renderers_import_heavy_deps_...
        forbidden = tuple(set(forbidden) - set(RENDER_LAZY))
    bad3 = [m for m in imports if m.split(".")[0] in forbidden]
    assert bad3 == [], f"{module} may not import {bad3}"


GENERATED = "nbinfer.protocol._generated"
STUB_CODEC = "nbinfer.protocol.grpc"


def _stub_names() -> set[str]:
    """The names under which ``protocol/grpc.py`` holds generated stub modules (``pb`` ...)."""
    tree = _tree(MODULES[STUB_CODEC])
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
    tree = _tree(path)
    package = _package_of(path)
    codec_aliases: set[str] = set()  # local names bound to the nbinfer.protocol.grpc module
    uses: list[str] = []
    for node in _walk(tree):
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
    for node in _walk(tree):
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

    Every ``import`` / ``from`` statement anywhere in the module (in functions and methods:
    lazy imports are edges too) and every string import (``importlib.import_module("...")``,
    the lazy-attribute tables, :func:`_string_imports`). Left out: ``if TYPE_CHECKING:`` blocks
    only (never run).
    """
    module = _module_name(path)
    tree = _tree(path)
    skipped: set[int] = set()
    for node in _walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    named: list[tuple[str, int]] = [
        (target, node.lineno)
        for node in _walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped
        for target in _targets(node, _package_of(path))
    ]
    named += [
        (target, getattr(node, "lineno", 0))
        for target, node in _string_imports(tree)
        if id(node) not in skipped
    ]
    edges: dict[str, int] = {}
    for target, line in sorted(named, key=lambda pair: pair[1]):
        while target and target not in MODULES:  # the deepest module it names
            target = target.rpartition(".")[0]
        if target and target != module:
            edges.setdefault(target, line)
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


@functools.cache
def _import_graph() -> dict[str, dict[str, int]]:
    """``module -> {imported module -> line}`` over the whole package, lazy imports included
    (built once per run: the tests only read it)."""
    return {name: _runtime_edges(path) for name, path in MODULES.items() if GENERATED not in name}


def test_import_graph_has_no_cycle_lazy_and_string_imports_included() -> None:
    # ARCHITECTURE: no import loops anywhere, lazy (in-function) and string imports included;
    # no exemption: a loop fails with its modules and the line of each import.
    graph = _import_graph()
    named = [
        " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(loop))
        + f" -> {loop[-1]}"
        for loop in _loops(graph)
    ]
    assert named == [], "import loops:\n" + "\n".join(named)


def test_the_graph_sees_lazy_and_string_imports() -> None:
    # The graph is only as good as what it reads: an in-function import, an import_module
    # string and a lazy-attribute table are each an edge.
    tree = ast.parse(
        "import importlib\n"
        "_LAZY = {'Thing': 'nbinfer.session.core'}\n"
        "def hook():\n"
        "    from nbinfer.render import html\n"
        "    return importlib.import_module('nbinfer.notebook.widgets')\n"
        "__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)\n"
        "_HOME = 'nbinfer.interop.data'\n"
        "files(_HOME)\n"
    )
    assert sorted(m for m, _ in _string_imports(tree)) == [
        "nbinfer.interop.data",
        "nbinfer.notebook.widgets",
        "nbinfer.session.core",
    ]
    graph = _import_graph()
    assert "nbinfer.render.error_card" in graph["nbinfer.errors"]  # inside the repr hook
    assert "nbinfer.interop.pandas" in graph["nbinfer.session.frames"]  # imported("...")
    assert "nbinfer.notebook.widgets" in graph["nbinfer"]  # the lazy nbinfer.browse
    hidden = ast.parse("import importlib\ndef f(name):\n    return importlib.import_module(name)")
    assert _dynamic_imports(hidden) == [3]


def test_every_dynamic_import_is_named() -> None:
    # An import whose module is no literal hides its edge from the graph: only the modules of
    # DYNAMIC_IMPORTS may have one (each says why); a listed one without any fails too.
    dynamic = {
        _module_name(path): lines for path in SOURCES if (lines := _dynamic_imports(_tree(path)))
    }
    unnamed = {name: lines for name, lines in dynamic.items() if name not in DYNAMIC_IMPORTS}
    assert unnamed == {}, (
        f"import by a name that is no literal (the graph cannot see it): {unnamed}"
    )
    gone = sorted(set(DYNAMIC_IMPORTS) - set(dynamic))
    assert gone == [], f"no dynamic import left, delete them from DYNAMIC_IMPORTS: {gone}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_notebook_layer_imports_it(path: Path) -> None:
    # The notebook layer is the top floor: no module below imports it, lazily or not. Only the
    # package's facade (``nbinfer/__init__``: load_ipython_extension, the lazy nbinfer.browse)
    # stands above it.
    module = _module_name(path)
    if module == "nbinfer" or _within(module, "nbinfer.notebook"):
        return
    found = [m for m in _imports(path) if _within(m, "nbinfer.notebook")]
    assert found == [], f"{module} imports the notebook layer: {found}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_display_hooks_name_their_renderer_in_render(path: Path) -> None:
    # STYLE #10: a class's _repr_*_ names a duck-typed renderer in nbinfer.render.
    module = _module_name(path)
    if _within(module, "nbinfer.notebook") or _within(module, "nbinfer.render"):
        return
    tree = _tree(path)
    # Names bound at module level by `from nbinfer.render... import name`: a hook may call them.
    drawn_by_render = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and any(_within(t, "nbinfer.render") for t in _targets(node, _package_of(path)))
        for alias in node.names
    }
    bare = [
        f"{fn.name} (line {fn.lineno})"
        for fn in _walk(tree)
        if isinstance(fn, ast.FunctionDef)
        and fn.name in DISPLAY_HOOKS
        and (module, fn.name) not in OWN_DISPLAY
        and not any(
            _within(target, "nbinfer.render")
            for node in ast.walk(fn)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in _targets(node, _package_of(path))
        )
        and not any(
            isinstance(node, ast.Name) and node.id in drawn_by_render for node in ast.walk(fn)
        )
    ]
    assert bare == [], f"{module}: display hooks that draw without a renderer: {bare}"


def test_renderers_import_heavy_dependencies_only_inside_functions() -> None:
    # `import nbinfer.render.x` stays light (stdlib + numpy): Pillow, pandas and matplotlib
    # are imported inside the function that needs them.
    eager: list[str] = []
    for path in SOURCES:
        if not _within(_module_name(path), "nbinfer.render"):
            continue
        tree = _tree(path)
        inside = {
            id(node)
            for fn in _walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn)
        }
        inside |= {
            id(node)
            for block in _walk(tree)
            if isinstance(block, ast.If) and _is_type_checking(block)
            for node in ast.walk(block)
        }
        eager += [
            f"{path.name}:{node.lineno} {target}"
            for node in _walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in inside
            for target in _targets(node, _package_of(path))
            if target.split(".")[0] in RENDER_LAZY
        ]
    assert eager == [], f"heavy imports at module level in nbinfer.render: {eager}"


#: The 800-line cap on a module (issue 30). Modules still over it, each to be split by the
#: change that owns it; a listed one back under the cap fails too (delete it here).
MAX_LINES = 800
KNOWN_LONG: frozenset[str] = frozenset()


def test_no_module_is_over_800_lines() -> None:
    lines = {_module_name(p): len(p.read_text().splitlines()) for p in SOURCES}
    long = {name for name, n in lines.items() if n > MAX_LINES}
    assert sorted(long - KNOWN_LONG) == [], f"over {MAX_LINES} lines: split them"
    gone = sorted(KNOWN_LONG - long)
    assert gone == [], f"now within {MAX_LINES} lines, delete them from KNOWN_LONG: {gone}"
