"""The public surface is exactly nbinfer.__all__ (STYLE.md #1)."""

from __future__ import annotations

import builtins
import subprocess
import sys

import pytest

import nbinfer
import nbinfer.errors


def test_all_names_resolve_and_are_sorted_unique() -> None:
    assert len(set(nbinfer.__all__)) == len(nbinfer.__all__)
    missing = [name for name in nbinfer.__all__ if not hasattr(nbinfer, name)]
    assert missing == []


def test_public_attributes_are_exactly_all() -> None:
    # Submodules and the ``from __future__ import annotations`` feature are not API; dir()
    # lists the lazy server names too (imported on first use).
    public = {
        name
        for name in dir(nbinfer)
        if not name.startswith("_")
        and not isinstance(getattr(nbinfer, name), type(sys))
        and name != "annotations"
    }
    assert public == set(nbinfer.__all__) - {"__version__"}


def test_public_api_has_docstrings() -> None:
    undocumented = [
        name
        for name in nbinfer.__all__
        if callable(getattr(nbinfer, name)) and not (getattr(nbinfer, name).__doc__ or "").strip()
    ]
    assert undocumented == []


def test_import_nbinfer_does_not_import_ipython_or_heavy_deps() -> None:
    code = (
        "import sys, nbinfer; "
        "bad = [m for m in ('IPython', 'ipywidgets', 'matplotlib', 'torch', 'onnxruntime') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_package_is_typed() -> None:
    from importlib.resources import files

    assert files("nbinfer").joinpath("py.typed").is_file()


def test_capability_errors_are_public_and_in_the_tree() -> None:
    assert issubclass(nbinfer.UnsupportedError, nbinfer.NbinferError)
    assert not issubclass(nbinfer.UnsupportedError, nbinfer.ServerError)  # decided locally
    caps = nbinfer.Capabilities("kserve", "0.21.0", ("model_repository_extension",))
    err = caps.unsupported("statistics", "inference statistics", "Read its metrics instead.")
    assert isinstance(err, nbinfer.UnsupportedError)
    assert (err.server, err.version, err.extension) == ("kserve", "0.21.0", "statistics")
    assert "server 'kserve' 0.21.0 does not offer the statistics extension" in str(err)


def test_request_timeout_error_is_the_builtin_kind_and_shadows_nothing() -> None:
    assert issubclass(nbinfer.RequestTimeoutError, builtins.TimeoutError)
    assert issubclass(nbinfer.RequestTimeoutError, nbinfer.TransportError)
    assert "TimeoutError" not in nbinfer.__all__ and "TimeoutError" not in nbinfer.errors.__all__
    namespace: dict[str, object] = {}
    exec("from nbinfer import *; from nbinfer.errors import *", namespace)
    assert "TimeoutError" not in namespace  # a star import leaves the builtin alone


@pytest.mark.parametrize("module", [nbinfer, nbinfer.errors], ids=["nbinfer", "nbinfer.errors"])
def test_timeout_error_is_a_deprecated_alias_for_one_release(module: object) -> None:
    with pytest.warns(DeprecationWarning, match=r"TimeoutError is deprecated.*RequestTimeoutError"):
        alias = module.TimeoutError  # type: ignore[attr-defined]
    assert alias is nbinfer.RequestTimeoutError
    with pytest.raises(builtins.TimeoutError):  # old handlers still catch what is raised
        raise alias("slow")
