"""Model backends of the embedded server: ONNX Runtime, PyTorch and Triton's Python backend.

Each backend is optional and imported lazily, so a CPU-only install without torch / onnxruntime
never pays for them. :func:`model_from_repository_entry` turns one version of a Triton-layout
model directory into an nbinfer :class:`~nbinfer.server.model.Model`::

    <repo>/<model>/config.pbtxt              platform "onnxruntime_onnx"  -> <N>/model.onnx
    <repo>/<model>/<N>/model.onnx
    <repo>/<model>/config.pbtxt              platform "pytorch_libtorch"  -> <N>/model.pt
    <repo>/<model>/<N>/model.pt
    <repo>/<model>/config.pbtxt              backend "python"             -> <N>/model.py
    <repo>/<model>/<N>/model.py              (class TritonPythonModel)

Reads configs with :mod:`nbinfer.server.model_config`; never imports the repository (the
repository imports this package to build a version's model).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nbinfer.errors import InvalidInputError
from nbinfer.server.model import Model
from nbinfer.server.model_config import apply_config, read_config
from nbinfer.server.paths import ModelFiles

__all__ = [
    "ONNX_PLATFORMS",
    "PYTHON_BACKENDS",
    "TORCH_PLATFORMS",
    "load_model_dir",
    "model_from_repository_entry",
]

logger = logging.getLogger("nbinfer")

#: Platform / backend names served by :mod:`nbinfer.server.backends.onnx`.
ONNX_PLATFORMS = frozenset({"onnxruntime_onnx", "onnxruntime", "onnx"})
#: Platform / backend names served by :mod:`nbinfer.server.backends.torch`.
TORCH_PLATFORMS = frozenset({"pytorch_libtorch", "pytorch", "torch", "torchscript"})
#: Backend names served by :mod:`nbinfer.server.backends.python_backend`.
PYTHON_BACKENDS = frozenset({"python"})

_TRITON_PY_CLASS = re.compile(r"^\s*class\s+TritonPythonModel\b", re.MULTILINE)


def _kind(config: Mapping[str, Any], version_dir: Path) -> str | None:
    """Which backend serves this entry: "onnx", "torch", "python" or None (not ours)."""
    platform = str(config.get("platform") or "").lower()
    backend = str(config.get("backend") or "").lower()
    for value in (platform, backend):
        if value in ONNX_PLATFORMS:
            return "onnx"
        if value in TORCH_PLATFORMS:
            return "torch"
    script = version_dir / "model.py"
    python_ok = backend in PYTHON_BACKENDS or (not platform and not backend)
    if python_ok and script.is_file() and _TRITON_PY_CLASS.search(script.read_text("utf-8")):
        return "python"
    if platform or backend:
        return None
    # no platform / backend: Triton guesses from the file name
    if (version_dir / "model.onnx").exists():
        return "onnx"
    if (version_dir / "model.pt").is_file():
        return "torch"
    return None


# Backends that read one model file: its default name, whether loading it runs code (the
# upload gate applies) and the platform the missing-file error names.
_MODEL_FILES = {
    "onnx": ("model.onnx", False, "onnxruntime_onnx"),
    "torch": ("model.pt", True, "pytorch_libtorch"),
}


def _model_file(
    files: ModelFiles, version_dir: Path, config: Mapping[str, Any], kind: str, model: str
) -> Path:
    """The version's model file: ``default_model_filename`` (confined to the model directory).

    Raises:
        InvalidInputError: the file is not there.
    """
    fallback, code, platform = _MODEL_FILES[kind]
    version = version_dir.name
    name = config.get("default_model_filename")
    rel = str(name) if name else fallback
    if code:
        path = files.code_file(rel, base=version, what="default_model_filename")
        found = path.is_file()
    else:
        path = files.file(rel, base=version, what="default_model_filename")
        found = path.exists()
    if not found:
        raise InvalidInputError(
            f"model {model!r} version {version}: no {path.name} in {version_dir} "
            f"(platform {platform})"
        )
    return path


def model_from_repository_entry(
    model_dir: Path,
    version_dir: Path,
    config: dict[str, Any],
    *,
    files: ModelFiles | None = None,
) -> Model | None:
    """Build the model of one version directory when a backend here serves it, else None.

    Dispatches on the config's ``platform`` / ``backend``: ``onnxruntime_onnx`` /
    ``onnxruntime`` -> ONNX Runtime on ``<N>/model.onnx``; ``pytorch_libtorch`` / ``pytorch`` ->
    TorchScript ``<N>/model.pt``; ``python`` (or none) with a ``<N>/model.py`` defining
    ``class TritonPythonModel`` -> the Triton Python backend shim. Without platform and backend,
    ``model.onnx`` / ``model.pt`` in the version directory pick the backend, as in Triton.
    Returns None for everything else (e.g. an nbinfer ``Model`` subclass in ``model.py``).

    The returned model is not loaded yet; the caller applies ``config`` and runs ``load()``.
    ``config`` may be completed in place (inputs / outputs Triton would auto-complete), so
    pass the same dict on to ``apply_config``.

    ``files`` is the path policy (default: files relative to ``model_dir`` only): the model
    file named by ``default_model_filename`` stays inside the model directory, and a file
    whose loading runs code (TorchScript, ``model.py``) obeys the code-upload gate.

    Raises:
        InvalidInputError: the entry is ours but broken (missing file, bad declarations), or
            its files break the path policy.
        ImportError: the backend's optional dependency is missing (names the extra).
    """
    kind = _kind(config, version_dir)
    if kind is None:
        return None
    if files is None:
        files = ModelFiles(model_dir)
    name = model_dir.name
    version = version_dir.name
    if kind == "onnx":
        from nbinfer.server.backends.onnx import OnnxModel

        path = _model_file(files, version_dir, config, kind, name)
        return OnnxModel.from_config(path, config, name=name, version=version)
    if kind == "torch":
        from nbinfer.server.backends.torch import TorchModel

        path = _model_file(files, version_dir, config, kind, name)
        return TorchModel.from_config(path, config, name=name, version=version)
    from nbinfer.server.backends.python_backend import TritonPythonBackendModel

    files.code_file("model.py", base=version, what="model file")
    return TritonPythonBackendModel.from_config(model_dir, version_dir, config, name=name)


def load_model_dir(model_dir: str | Path, *, version: str | int | None = None) -> Model | None:
    """Build (not load) the model of a Triton-layout model directory served by a backend here.

    Reads the config, picks ``version`` (default: the highest), dispatches with
    :func:`model_from_repository_entry` and applies the config (labels, max_batch_size ...).
    Returns None when no backend here serves it (e.g. an nbinfer ``Model`` in ``model.py``).

    Example::

        m = load_model_dir("models/resnet")
        ModelRepository(models=[m])

    Raises:
        InvalidInputError: no such version / broken entry.
    """
    mdir = Path(model_dir)
    config = read_config(mdir)
    versions = sorted((p.name for p in mdir.iterdir() if p.is_dir() and p.name.isdigit()), key=int)
    if version is not None:
        if str(version) not in versions:
            raise InvalidInputError(
                f"model directory {str(mdir)!r} has no version {version}; versions: {versions}"
            )
        chosen = str(version)
    elif versions:
        chosen = versions[-1]
    else:
        raise InvalidInputError(f"no version directory (e.g. {mdir / '1'}) in {mdir}")
    model = model_from_repository_entry(mdir, mdir / chosen, config)
    if model is None:
        return None
    model.version = chosen
    apply_config(model, config, name=mdir.name, model_dir=mdir)
    return model
