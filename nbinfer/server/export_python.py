"""Export of a Python model (``Model`` subclass, function) as a Triton Python-backend entry.

A model defined in a file is *portable*: its source is copied (``user_model.py``; the whole
file, or just the model and what it uses when the file needs more of nbinfer) beside
``nbinfer_runtime.py``, a numpy-only module carrying the pieces of :mod:`nbinfer.server.model`
a model needs, generated from nbinfer's own source. A model that exists only as a live object
(notebook cell, closure, constructor arguments) takes the *pickled* route: cloudpickle, the
same Python version. ``nbinfer_export.json`` says which route was taken and what the target needs;
:func:`write_execution_env` turns those needs into Triton's execution-environment recipe (a
conda + conda-pack script whose result ``config.pbtxt`` names as ``EXECUTION_ENV_PATH``).

Imports the model API only (reads its source to vendor it); :mod:`nbinfer.server.export`
calls :func:`write_python` and owns the rest of the entry (config, labels).
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import re
import shlex
import shutil
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.server.model import FunctionModel, Model
from nbinfer.server.paths import NAME_PATTERN

__all__ = [
    "ENV_SCRIPT",
    "EXECUTION_ENV",
    "RUNTIME_NAMES",
    "RUNTIME_PYTHON",
    "ExecutionEnv",
    "NAME_RULE",
    "check_env_name",
    "check_python_export",
    "name_problem",
    "python_requirements",
    "runtime_source",
    "write_execution_env",
    "write_python",
]

logger = logging.getLogger("nbinfer")

#: The nbinfer names an exported source may use; they come with the vendored runtime.
RUNTIME_NAMES = frozenset({"FunctionModel", "InferContext", "Model", "TensorDef", "model"})
_RUNTIME_MODULES = ("nbinfer", "nbinfer.server", "nbinfer.server.model")
#: The definitions of nbinfer.server.model that the vendored runtime carries.
_VENDORED = (
    "normalize_datatype",
    "TensorDef",
    "_dims",
    "as_tensor_def",
    "InferContext",
    "_wants_context",
    "ModelOption",
    "_TENSORS",
    "_LABELS",
    "MODEL_OPTIONS",
    "Model",
    "_dtype_from_annotation",
    "FunctionModel",
    "model",
)
_BEGIN = "# -- nbinfer: begin vendored"
_END = "# -- nbinfer: end vendored --"
_SOURCE_FILE = "user_model.py"
#: Python the vendored runtime needs (dataclass slots, str.removeprefix, zip(strict=)).
RUNTIME_PYTHON = ">=3.10"


def _top_level_span(node: ast.stmt) -> tuple[int, int]:
    decorators = getattr(node, "decorator_list", None) or []
    first = min([node.lineno] + [d.lineno for d in decorators])
    return first, node.end_lineno or node.lineno


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    return []


def _vendored_source() -> str:
    """The pieces of nbinfer.server.model (plus a numpy-only dtype table) as one source text."""
    from nbinfer.protocol.dtypes import DATATYPES, TRITON_TYPES, datatype_of_triton

    model_module = sys.modules[FunctionModel.__module__]  # nbinfer.server.model
    source = Path(model_module.__file__ or "").read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    imports: list[str] = []
    bodies: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if module and not module.startswith(("nbinfer", "__future__")):
                imports.append(ast.unparse(node))
        elif set(_bound_names(node)) & set(_VENDORED):
            first, last = _top_level_span(node)
            bodies.append("\n".join(lines[first - 1 : last]))
    table = {dt: numpy_dtype(dt).str for dt in DATATYPES if dt != "BF16"}
    triton = {name: datatype_of_triton(name) for name in TRITON_TYPES if name != "TYPE_INVALID"}
    shims = f"""
class InvalidInputError(ValueError):
    \"\"\"A declaration or a value a model cannot take.\"\"\"


class TensorSpec:
    \"\"\"Metadata type of nbinfer (never made here).\"\"\"


Parameters = dict
logger = logging.getLogger("nbinfer")
_NUMPY = {table!r}
DATATYPES = tuple(_NUMPY) + ("BYTES",)
_FROM_TRITON = {triton!r}
TRITON_TYPES = {{**_FROM_TRITON, "TYPE_INVALID": 0}}


def datatype_of_triton(name):
    return _FROM_TRITON[name]


def numpy_dtype(datatype):
    if datatype == "BYTES":
        return np.dtype(object)
    try:
        return np.dtype(_NUMPY[datatype])
    except KeyError as exc:
        raise InvalidInputError(f"unknown datatype {{datatype!r}}") from exc


def datatype_of(dtype):
    dt = np.dtype(dtype)
    if dt.kind in "OSUT":
        return "BYTES"
    for name, code in _NUMPY.items():
        if np.dtype(code) == dt.newbyteorder("<") or np.dtype(code) == dt:
            return name
    raise TypeError(f"numpy dtype {{dt}} has no v2 datatype")
"""
    origin = "vendored from nbinfer.server.model of nbinfer " + _nbinfer_version()
    return "\n".join([f"# {origin}", *imports, shims, *(b + "\n\n" for b in bodies)])


def _nbinfer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbinfer")
    except PackageNotFoundError:
        return "(source tree)"


def runtime_source() -> str:
    """The ``nbinfer_runtime.py`` a portable export ships: numpy-only, no nbinfer install."""
    template = (Path(__file__).parent / "export_runtime" / "runtime.py").read_text("utf-8")
    head, rest = template.split(_BEGIN, 1)
    _, tail = rest.split(_END, 1)
    return head + _vendored_source() + tail


class _NotPortable(Exception):
    """Why a model's source cannot be exported without nbinfer (the message)."""


def _nbinfer_uses(tree: ast.AST) -> list[str]:
    """What ``tree`` uses of nbinfer beyond the vendored runtime (empty: it is portable)."""
    problems: list[str] = []
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "nbinfer":
                    continue
                if a.name not in _RUNTIME_MODULES:
                    problems.append(f"import {a.name}")
                aliases.add(a.asname or "nbinfer")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nbinfer":
            if node.level == 0 and node.module not in _RUNTIME_MODULES:
                problems.append(f"from {node.module} import ...")
                continue
            problems.extend(
                f"from {node.module} import {a.name}"
                for a in node.names
                if a.name not in RUNTIME_NAMES | {"server", "model"}
            )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr not in RUNTIME_NAMES | {"server", "model"}
        ):
            problems.append(f"{node.value.id}.{node.attr}")
    return sorted(set(problems))


def _extract(source: str, target: str) -> str:
    """The statements of ``source`` that top-level ``target`` needs, in their order."""
    tree = ast.parse(source)
    lines = source.splitlines()
    defs: dict[str, list[int]] = {}
    for index, node in enumerate(tree.body):
        for name in _bound_names(node):
            defs.setdefault(name, []).append(index)
    if target not in defs:
        raise _NotPortable(f"{target!r} is not defined at the top level of its module")
    keep: dict[int, set[str]] = {}
    todo = [target]
    while todo:
        name = todo.pop()
        for index in defs.get(name, []):
            node = tree.body[index]
            names = keep.setdefault(index, set())
            if name in names:
                continue
            names.add(name)
            if not isinstance(node, ast.Import | ast.ImportFrom):
                todo.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    out = []
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            out.append(ast.unparse(node))
        elif index in keep and isinstance(node, ast.Import | ast.ImportFrom):
            node.names = [
                a for a in node.names if (a.asname or a.name).split(".")[0] in keep[index]
            ]
            out.append(ast.unparse(node))
        elif index in keep:
            first, last = _top_level_span(node)
            out.append("\n\n" + "\n".join(lines[first - 1 : last]))
    return "\n".join(out) + "\n"


def _requirements(*trees: ast.AST) -> list[str]:
    """Distributions the sources import (beyond the standard library), pinned as installed."""
    from importlib.metadata import PackageNotFoundError, version

    tops: set[str] = {"numpy"}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops.add(node.module.split(".")[0])
    skip = set(sys.stdlib_module_names) | {"nbinfer", "triton_python_backend_utils", "__future__"}
    dists = _providers(tops - skip - {"numpy"})  # numpy is written unpinned, whoever ships it
    out = []
    for top in sorted(tops - skip):
        for dist in dists.get(top, [top]):
            try:
                out.append(f"{dist}=={version(dist)}" if top != "numpy" else "numpy")
            except PackageNotFoundError:
                out.append(dist)
    return sorted(set(out))


def _providers(tops: set[str]) -> dict[str, list[str]]:
    """The installed distributions that provide each of ``tops`` (top-level import names).

    :func:`importlib.metadata.packages_distributions` for these names only: a distribution's
    ``top_level.txt``, else the top-level names of the ``.py`` files it lists. That function
    builds a path object for every file of every installed distribution (seconds in a large
    environment); here a file list is parsed only when one of ``tops`` appears in its text.
    """
    from importlib.metadata import distributions

    found: dict[str, list[str]] = {}
    if not tops:
        return found
    for dist in distributions():
        names = set((dist.read_text("top_level.txt") or "").split())
        if not names:
            listing = dist.read_text("RECORD") or dist.read_text("SOURCES.txt") or ""
            if any(top in listing for top in tops):
                names = {
                    f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name
                    for f in dist.files or ()
                    if f.suffix == ".py"
                }
        for top in sorted(tops & names):
            found.setdefault(top, []).append(dist.metadata["Name"])
    return found


def _model_source(model: Model) -> tuple[Path, str, str]:
    """(file, attribute, kind) of where the model is defined in a file.

    Raises:
        _NotPortable: the model exists only as a live object (notebook, closure, lambda ...).
    """
    if isinstance(model, FunctionModel):
        obj: Any = model.fn
        kind = "function"
    else:
        obj = type(model)
        kind = "class"
    qualname = getattr(obj, "__qualname__", "")
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    if module is None or not file or module.__name__ == "__main__":
        raise _NotPortable(f"{qualname or obj!r} is defined in a notebook or __main__, not a file")
    if "<" in qualname or "." in qualname:
        raise _NotPortable(f"{qualname} is not defined at the top level of {file}")
    if kind == "class":
        try:
            fresh = type(model)()
            fresh.finalize()
        except Exception as exc:
            raise _NotPortable(f"{qualname}() cannot be made again: {exc}") from exc
        if fresh.input_defs() != model.input_defs() or fresh.output_defs() != model.output_defs():
            raise _NotPortable(f"the object differs from a fresh {qualname}() (constructor args)")
    elif kind == "function" and isinstance(vars(module).get(obj.__name__), Model):
        kind = "instance"  # @nbinfer.model: the module binds the name to the model itself
    return Path(file), obj.__name__, kind


def _write_source_python(model: Model, version_dir: Path) -> dict[str, Any]:
    """Copy the model's source (whole file, else just what it needs) + the vendored runtime."""
    path, attr, kind = _model_source(model)
    source = path.read_text(encoding="utf-8")
    whole = not _nbinfer_uses(ast.parse(source))
    if not whole:
        source = _extract(source, attr)
        problems = _nbinfer_uses(ast.parse(source))
        if problems:
            raise _NotPortable(
                f"{path.name} uses parts of nbinfer that are not vendored: {', '.join(problems)} "
                f"(portable sources may use {', '.join(sorted(RUNTIME_NAMES))})"
            )
    if (whole and type(model).__module__.startswith("nbinfer_model_")) or (
        whole and getattr(getattr(model, "fn", None), "__module__", "").startswith("nbinfer_model_")
    ):
        shutil.copytree(  # a repository model's own files (weights ...) stay beside its source
            path.parent,
            version_dir,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", path.name),
        )
    (version_dir / _SOURCE_FILE).write_text(source, encoding="utf-8")
    (version_dir / "nbinfer_runtime.py").write_text(runtime_source(), encoding="utf-8")
    return {
        "route": "source",
        "file": _SOURCE_FILE,
        "attr": attr,
        "kind": kind,
        "copied_from": str(path) + ("" if whole else f" (only {attr} and what it uses)"),
        "requires": {"python": RUNTIME_PYTHON, "packages": _requirements(ast.parse(source))},
    }


def _write_pickled_python(model: Model, version_dir: Path, reason: str) -> dict[str, Any]:
    import cloudpickle

    obj: Any = model.fn if isinstance(model, FunctionModel) else model
    _pickle_by_value([obj if isinstance(model, FunctionModel) else type(model)])
    try:
        data = cloudpickle.dumps(obj)
    except Exception as exc:
        raise InvalidInputError(
            f"model {model.name!r} cannot be exported: cloudpickle failed on "
            f"{type(obj).__name__}: {type(exc).__name__}: {exc}"
        ) from exc
    pickle_name = "function.pkl" if isinstance(model, FunctionModel) else "model.pkl"
    (version_dir / pickle_name).write_bytes(data)
    (version_dir / "nbinfer_runtime.py").write_text(runtime_source(), encoding="utf-8")
    py = f"=={sys.version_info.major}.{sys.version_info.minor}"
    packages = ["cloudpickle", "numpy"]
    if not isinstance(model, FunctionModel):
        packages.append(f"nbinfer=={_nbinfer_version()}")
    note = (
        f"PICKLED (not portable): {reason}. The target's Python must be {py[2:]} with "
        f"{', '.join(packages)} and every library the code imports; define the model in a file "
        "(a Model subclass or an @nbinfer.model function) for a numpy-only export."
    )
    logger.warning("model %r: %s", model.name, note)
    return {
        "route": "pickle",
        "file": pickle_name,
        "note": note,
        "requires": {"python": py, "packages": packages},
    }


def _pickle_by_value(objs: Sequence[Any]) -> None:
    """Make cloudpickle store code from modules a fresh interpreter could not import."""
    import cloudpickle

    for obj in objs:
        mod_name = getattr(obj, "__module__", None) or ""
        module = sys.modules.get(mod_name)
        if module is None or mod_name == "__main__":
            continue
        if mod_name.startswith(("nbinfer_model_", "nbinfer_triton_model_")):
            with contextlib.suppress(ValueError):  # already registered
                cloudpickle.register_pickle_by_value(module)


def check_python_export(model: Model) -> None:
    """Refuse a model its Triton Python-backend export could not run (before writing files).

    Raises:
        InvalidInputError: a decoupled or stateful model, or BF16 tensors (numpy has no
            bfloat16, so Triton's ``Tensor.as_numpy()`` refuses them and the numpy-only
            runtime has no dtype for them).
    """
    if model.is_decoupled or model.stateful:
        what = "decoupled" if model.is_decoupled else "stateful (sequence)"
        raise InvalidInputError(
            f"model {model.name!r} is {what}: its Triton export is not supported yet"
        )
    bf16 = [d.name for d in (*model.input_defs(), *model.output_defs()) if d.datatype == "BF16"]
    if bf16:
        raise InvalidInputError(
            f"model {model.name!r} has BF16 tensors ({', '.join(bf16)}): Triton's Python backend "
            "gives them no numpy view (Tensor.as_numpy refuses BF16), so its Python-backend "
            "export could not run them; declare FP32 or FP16, or export a TorchScript / ONNX "
            "model (native backends take BF16)"
        )


def write_python(model: Model, version_dir: Path, format: str) -> dict[str, Any]:
    """The Python-backend files: ``model.py`` (entry), runtime, source or pickle, settings."""
    check_python_export(model)
    settings: dict[str, Any]
    if format == "pickle":
        settings = _write_pickled_python(model, version_dir, "format='pickle' was asked for")
    else:
        try:
            settings = _write_source_python(model, version_dir)
        except _NotPortable as exc:
            settings = _write_pickled_python(model, version_dir, str(exc))
    entry = Path(__file__).parent / "export_runtime" / "entry.py"
    shutil.copyfile(entry, version_dir / "model.py")
    (version_dir / "nbinfer_export.json").write_text(
        json.dumps(settings, indent=2) + "\n", encoding="utf-8"
    )
    return settings


# -- Triton's execution environment -----------------------------------------------------------
#: Default name (beside ``config.pbtxt``) of the environment Triton's Python backend runs in.
EXECUTION_ENV = "python_env.tar.gz"
#: The script that builds it.
ENV_SCRIPT = "build_python_env.sh"
#: The name rule of :func:`name_problem`, for messages.
NAME_RULE = "ASCII letters, digits, '_', '.', '-'; not starting with '.' or '-'; at most 128"


@dataclass(frozen=True)
class ExecutionEnv:
    """Triton's execution-environment recipe written beside an exported Python model.

    ``target`` is the archive (``*.tar.gz``) or unpacked directory the script builds in the
    model directory; ``config.pbtxt`` names it as :attr:`parameter`.
    """

    script: Path
    target: str
    python: str
    packages: tuple[str, ...]

    @property
    def parameter(self) -> str:
        """The ``EXECUTION_ENV_PATH`` value: relative to the model, so the bucket can move."""
        return f"$$TRITON_MODEL_DIRECTORY/{self.target}"

    @property
    def packed(self) -> bool:
        """Whether Triton unpacks an archive at load (else it uses the directory as is)."""
        return self.target.endswith(".tar.gz")


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a plain name nbinfer writes into files and scripts (``None``: it is).

    A plain name is the server's model-name rule (:data:`~nbinfer.server.paths.NAME_PATTERN`):
    ASCII letters, digits, ``_``, ``.``, ``-``, not starting with ``.`` or ``-``, at most 128
    characters; so no path separator, whitespace, control character (a trailing newline) or
    shell metacharacter.
    """
    if not isinstance(value, str):
        return f"it is a {type(value).__name__}, not a string"
    if not value:
        return "it is empty"
    for char in value:
        if not (char.isascii() and (char.isalnum() or char in "_.-")):
            return f"character {_shown_char(char)} is not allowed"
    if value[0] in ".-":
        return f"it starts with {value[0]!r}"
    if NAME_PATTERN.fullmatch(value) is None:
        return f"it has {len(value)} characters (at most 128)"
    return None


def _shown_char(char: str) -> str:
    """A character, readable in a message: its repr, code point and kind."""
    kind = ""
    if unicodedata.category(char).startswith("C"):
        kind = ", a control character"
    elif char.isspace():
        kind = ", white space"
    return f"{char!r} (U+{ord(char):04X}{kind})"


def check_env_name(name: str, *, option: str = "execution_env") -> None:
    """Refuse an environment name that is not a plain name inside the model directory.

    Args:
        name: The environment's name.
        option: What the name was given as, for the message (``--execution-env``).

    Raises:
        InvalidInputError: a path, ``..``, an empty name, or a character outside the name rule
            (Triton leaves an ``EXECUTION_ENV_PATH`` escaping ``$$TRITON_MODEL_DIRECTORY``
            undefined, and the name lands in ``config.pbtxt`` and ``build_python_env.sh``).
    """
    problem = name_problem(name)
    if problem is None and name in (ENV_SCRIPT, "config.pbtxt"):
        problem = "the export writes a file of that name itself"
    if problem is not None:
        raise InvalidInputError(
            f"{option} {name!r} is refused: {problem}. An execution environment must be a file "
            f"or directory name inside the model directory ({NAME_RULE}; e.g. "
            f"{EXECUTION_ENV!r} for an archive, 'python_env' for a directory)"
        )


def python_requirements(version_dir: Path) -> dict[str, Any]:
    """What a hand-written Triton Python model in ``version_dir`` imports (its ``.py`` files)."""
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(version_dir.rglob("*.py"))]
    return {"python": RUNTIME_PYTHON, "packages": _requirements(*trees)}


def _env_python(requires: str, asked: str | None) -> str:
    """The ``X.Y`` to build: ``asked`` (default: this interpreter's) if the export allows it."""
    version = asked or f"{sys.version_info.major}.{sys.version_info.minor}"
    found = re.fullmatch(r"3\.(\d+)", version)
    if found is None:
        raise InvalidInputError(f"execution environment Python {version!r} is not 3.<minor>")
    if requires.startswith("==") and version != requires[2:]:
        raise InvalidInputError(
            f"this export is pickled: its execution environment needs Python {requires[2:]} "
            f"(the pickling interpreter's), not {version}"
        )
    if requires.startswith(">="):
        floor = tuple(int(x) for x in requires[2:].split("."))
        if (3, int(found.group(1))) < floor:
            raise InvalidInputError(
                f"this export needs Python {requires}; an execution environment of {version} "
                "cannot run it"
            )
    return version


def _sh_double_quoted(text: str) -> str:
    """``text`` escaped for the inside of a double-quoted bash word (a literal, never expanded)."""
    return re.sub(r'([\\"$`])', r"\\\1", text)


def write_execution_env(
    model_dir: Path, target: str, requires: dict[str, Any], *, python: str | None = None
) -> ExecutionEnv:
    """Write ``build_python_env.sh``: Triton's documented conda + conda-pack recipe.

    The recipe is the one of Triton's python_backend README ("Creating Custom Execution
    Environments"): a conda environment with the Python and packages the export needs, packed
    with conda-pack; ``target`` ending in ``.tar.gz`` keeps the archive, any other name unpacks
    it into that directory (faster model loads). The environment's Python must be the one of
    the image's ``triton_python_backend_stub``.

    Raises:
        InvalidInputError: a bad ``target`` or a Python version the export cannot run on.
    """
    check_env_name(target)
    version = _env_python(str(requires.get("python") or RUNTIME_PYTHON), python)
    env = ExecutionEnv(model_dir / ENV_SCRIPT, target, version, tuple(requires["packages"]))
    if env.packed:
        place = 'mv "$WORK/env.tar.gz" "$TARGET"'
    else:
        place = 'mkdir -p "$TARGET"\ntar -xzf "$WORK/env.tar.gz" -C "$TARGET"  # has bin/activate'
    packages = " ".join(shlex.quote(p) for p in env.packages)
    text = f"""#!/usr/bin/env bash
# Builds the Python execution environment of the Triton model in this directory (written by
# nbinfer export). The recipe is Triton's (python_backend README, "Creating Custom Execution
# Environments"): a conda environment with Python {version} and the packages the model imports,
# packed with conda-pack. config.pbtxt names the result as EXECUTION_ENV_PATH
# ({env.parameter}).
#
# Run it with conda (or mamba: CONDA=mamba) on PATH, on Linux of the Triton image's CPU
# architecture:  bash {ENV_SCRIPT}
# Python {version} must be the Python of the image's triton_python_backend_stub (else build that
# stub too, same README); edit PACKAGES to pin versions the image needs (e.g. 'numpy<2' for
# Python backends built against numpy 1.x).
set -euo pipefail

PYTHON_VERSION={shlex.quote(version)}
PACKAGES=({packages})
CONDA="${{CONDA:-conda}}"
MODEL_DIR="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
TARGET="$MODEL_DIR/{_sh_double_quoted(target)}"

if ! command -v "$CONDA" >/dev/null 2>&1; then
    echo "{ENV_SCRIPT}: needs conda on PATH (or CONDA=/path/to/conda or mamba)" >&2
    exit 127
fi
# packages installed outside the environment (~/.local) must not leak into the pack
export PYTHONNOUSERSITE=True
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$CONDA" create -y -p "$WORK/env" --override-channels -c conda-forge "python=$PYTHON_VERSION" pip
"$WORK/env/bin/python" -m pip install "${{PACKAGES[@]}}" conda-pack
"$WORK/env/bin/conda-pack" -p "$WORK/env" -o "$WORK/env.tar.gz"
rm -rf "$TARGET"
{place}
echo "$TARGET (Python $PYTHON_VERSION: ${{PACKAGES[*]}}) is ready; config.pbtxt uses it"
"""
    env.script.write_text(text, encoding="utf-8")
    env.script.chmod(0o755)
    return env
