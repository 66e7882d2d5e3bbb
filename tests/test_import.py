"""``import nbinfer`` stays light: the server is imported when a server feature is first used."""

from __future__ import annotations

import json
import subprocess
import sys
import types


def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (this one has imported the server already)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_nbinfer_leaves_the_server_package_unimported() -> None:
    code = (
        "import json, sys, nbinfer; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('nbinfer.server'))))"
    )
    assert json.loads(_fresh(code)) == []


def test_server_names_resolve_on_first_use_only() -> None:
    code = (
        "import sys, nbinfer; "
        "before = 'nbinfer.server.model' in sys.modules; "
        "m = nbinfer.Model; "
        "print(before, m.__module__, 'nbinfer.server.dataplane' in sys.modules)"
    )
    # Model needs its own module, not the dataplane behind the server package
    assert _fresh(code) == "False nbinfer.server.model False"


def test_local_server_does_not_import_the_dataplane() -> None:
    code = (
        "import sys, nbinfer; nbinfer.LocalServer; print('nbinfer.server.dataplane' in sys.modules)"
    )
    assert _fresh(code) == "False"


def test_lazy_names_are_listed_and_resolve() -> None:
    import nbinfer
    import nbinfer.server

    for name in ("Model", "model", "FunctionModel", "LocalServer"):
        assert name in dir(nbinfer)
        assert getattr(nbinfer, name) is getattr(nbinfer, name)
    for name in nbinfer.server.__all__:
        assert name in dir(nbinfer.server)
        assert getattr(nbinfer.server, name) is not None
    assert nbinfer.model.__module__ == "nbinfer.server.model"  # the decorator
    assert callable(nbinfer.model)


def test_unknown_attributes_still_raise_attribute_error() -> None:
    import nbinfer
    import nbinfer.server

    for module in (nbinfer, nbinfer.server):
        try:
            module.no_such_name  # noqa: B018
        except AttributeError as exc:
            assert "no_such_name" in str(exc)
        else:
            raise AssertionError(f"{module.__name__}.no_such_name resolved")


def test_no_public_name_shadows_its_module() -> None:
    code = (
        "import nbinfer.server.model as m; import types; "
        "print(isinstance(m, types.ModuleType), m.__name__)"
    )
    assert _fresh(code) == "True nbinfer.server.model"
    import nbinfer.server
    import nbinfer.server.model as m

    assert isinstance(m, types.ModuleType)
    # after the server names are all resolved too
    for name in nbinfer.server.__all__:
        getattr(nbinfer.server, name)
    assert nbinfer.server.model is m
    assert not isinstance(nbinfer.server.model, types.FunctionType)


def _import_graph(prefix: str) -> dict[str, set[str]]:
    """``module -> nbinfer modules it imports`` under ``prefix``, lazy and TYPE_CHECKING too."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    modules: dict[str, tuple[Path, bool]] = {}
    for path in (root / "nbinfer").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        if name.startswith(prefix) and not name.endswith("_pb2") and "_pb2_" not in name:
            modules[name] = (path, is_package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    package = package[: len(package) - node.level + 1]
                    base = ".".join([*package, base] if base else package)
                found = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for target in found:
                while target and target not in modules:  # the deepest module it names
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_server_package_has_no_import_loops() -> None:
    # e.g. the repository builds a backend's model and the backends read the config with
    # model_config: neither imports the other back, not even inside a function
    assert _cycles(_import_graph("nbinfer.server")) == []


def test_the_loop_finder_finds_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
