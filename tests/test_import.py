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
