"""Model files of the repository: a version's code, its model object, uploads and overrides.

Importing a version's code, load / unload of the model object, fingerprints of a directory,
config overrides of a load request and uploaded files.

Split out of :mod:`nbinfer.server.repository` (the class that drives them stays there).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from nbinfer.errors import (
    InvalidInputError,
    NbinferError,
)
from nbinfer.server.backends import model_from_repository_entry
from nbinfer.server.backends.scripts import import_script
from nbinfer.server.model import Model
from nbinfer.server.paths import ModelFiles, check_relative_path
from nbinfer.server.pbtxt import string_params

logger = logging.getLogger("nbinfer")


def _import_model(path: Path, name: str, version: str, config: Mapping[str, Any]) -> Model:
    module = import_script(path, "nbinfer_model", name, version)
    mod_name = module.__name__
    wanted_class = string_params(config).get("model_class")
    classes = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, Model)
        and obj.__module__ == mod_name
        and (wanted_class is None or obj.__name__ == wanted_class)
    ]
    instances = [obj for obj in vars(module).values() if isinstance(obj, Model)]
    if len(classes) == 1:
        try:
            return classes[0]()
        except Exception as exc:
            raise InvalidInputError(
                f"{path}: {classes[0].__name__}() failed: {type(exc).__name__}: {exc}"
            ) from exc
    if not classes and len(instances) == 1:
        return instances[0]
    if len(classes) > 1:
        raise InvalidInputError(
            f"{path} defines several Model subclasses ({', '.join(c.__name__ for c in classes)}); "
            "keep one or name it with the config parameter 'model_class'"
        )
    raise InvalidInputError(
        f"{path} defines no nbinfer Model subclass (or Model instance / @nbinfer.model function)"
    )


def _model_of_version(files: ModelFiles, version: str, config: dict[str, Any]) -> Model:
    """Build (not load) the model of one version directory.

    The backends (ONNX Runtime, TorchScript, Triton's Python backend) claim their entries;
    everything else is an nbinfer ``Model`` defined in ``<version>/model.py``.
    """
    model_dir = files.root
    version_dir = model_dir / version
    model = model_from_repository_entry(model_dir, version_dir, config, files=files)
    if model is not None:
        return model
    script = files.code_file("model.py", base=version, what="model file")
    if not script.is_file():
        platform = config.get("platform") or config.get("backend") or "?"
        raise InvalidInputError(
            f"no {version}/model.py in {model_dir} (platform {platform!r} is not served here: "
            "nbinfer serves ONNX, TorchScript, Triton Python backend models and nbinfer Models "
            "defined in <version>/model.py)"
        )
    return _import_model(script, model_dir.name, version, config)


def _load_model_object(model: Model, default_device: str = "cpu") -> None:
    """Resolve the device, validate the declarations and run ``load()`` (blocking)."""
    model.device = model.resolve_device(model.device or default_device)
    model.finalize()
    try:
        ok = model.load()
    except NbinferError:
        raise
    except Exception as exc:
        raise InvalidInputError(f"load() raised {type(exc).__name__}: {exc}") from exc
    if ok is False:
        raise InvalidInputError("load() returned False")
    model.ready = True


def _fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Names, sizes and modification times of every file under ``directory``."""
    rows: list[tuple[str, int, int]] = []
    for root, _dirs, names in os.walk(directory):
        for n in names:
            path = os.path.join(root, n)
            try:
                st = os.stat(path)
            except OSError:
                continue
            rows.append((os.path.relpath(path, directory), st.st_size, st.st_mtime_ns))
    return tuple(sorted(rows))


def _relative_text(text: str, model_dir: Path | None, name: str) -> str:
    """``text`` with the server's absolute model directory shown as the model's name.

    Load errors name files relative to the model directory (``linear/1/model.onnx``), never
    the operator's repository path or a temporary copy.
    """
    if model_dir is None:
        return text
    spellings = {str(model_dir), os.path.abspath(model_dir)}
    with contextlib.suppress(OSError):
        spellings.add(str(model_dir.resolve()))
    for spelling in sorted(spellings, key=len, reverse=True):
        text = text.replace(spelling, name)
    return text


def _reason(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, NbinferError) else f"{type(exc).__name__}: {exc}"


def _unload_model_object(model: Model) -> None:
    model.ready = False
    try:
        model.unload()
    except Exception:
        logger.exception("unload() of model %r raised", model.name)


def _parse_config_override(
    name: str, config: str | Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The load request's config override, its file names checked by the path policy.

    A malformed one fails the load in Triton's words ("failed to load 'NAME' ...") first.
    """
    if config is None or config == "":
        return None
    if isinstance(config, Mapping):
        data: Any = dict(config)
    else:
        try:
            data = json.loads(config)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"failed to load {name!r}: the load 'config' parameter is not valid JSON: {exc}"
            ) from exc
    if not isinstance(data, dict):
        raise InvalidInputError(
            f"failed to load {name!r}: the load 'config' parameter must be a JSON object"
        )
    _check_config_paths(data)
    return data


def _check_config_paths(config: Mapping[str, Any]) -> None:
    """Refuse a config override naming files outside the model directory, before any work."""
    filename = config.get("default_model_filename")
    if filename:
        check_relative_path(str(filename), what="default_model_filename")
    for key in ("input", "output"):
        items = config.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping) and item.get("label_filename"):
                what = f"config {key} {str(item.get('name'))!r}: label_filename"
                check_relative_path(str(item["label_filename"]), what=what)


#: File types a load request may upload without ``allow_code_upload``: data only (never code,
#: never pickles; ``.npy`` / ``.npz`` are read with ``allow_pickle=False``).
DATA_FILE_SUFFIXES = frozenset({".onnx", ".pbtxt", ".json", ".txt", ".csv", ".npy", ".npz"})


def _write_files(model_dir: Path, plan: Sequence[tuple[PurePosixPath, bytes]]) -> None:
    """Write validated uploads under ``model_dir``, never through a symbolic link."""
    files = ModelFiles(model_dir, strict=True)
    for rel, content in plan:
        target = files.file(str(rel), what="file override")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
