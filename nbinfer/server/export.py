"""Export a served model as a Triton model repository entry, plus a KServe manifest.

:func:`export_model` writes ``<out>/<name>/config.pbtxt`` (Triton text format) and
``<out>/<name>/<version>/`` holding ``model.onnx`` (ONNX models), ``model.pt`` (TorchScript) or a
Triton Python-backend ``model.py``, plus a labels file per labelled output. The directory is a
Triton / KServe model repository, and nbinfer serves it back unchanged::

    path = export_model(model, "model_repository")
    print(kserve_manifest("iris", "gs://bucket/model_repository"))

Python models (``Model`` subclasses, functions) become a Triton Python-backend entry
``model.py`` over ``nbinfer_runtime.py``, a numpy-only module carrying the few pieces of nbinfer a
model needs (``Model``, its hooks, ``InferContext``), generated from nbinfer's own source. A model
defined in a file is *portable*: its source is copied (``user_model.py``; the whole file, or
just the model and what it uses when the file needs more of nbinfer), so Triton's Python needs
numpy and what that code imports, nothing of nbinfer. A model that exists only as a live object
(notebook cell, closure, constructor arguments) takes the *pickled* route, labelled as such in
``nbinfer_export.json``: cloudpickle, the same Python version (and nbinfer for ``Model``
objects). ``nbinfer_export.json`` says what the target needs; ONNX and TorchScript stay native.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import logging
import re
import shutil
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.server.model import FunctionModel, Model, TensorDef

__all__ = [
    "FORMATS",
    "add_export_arguments",
    "config_to_pbtxt",
    "export_model",
    "kserve_manifest",
    "main_export",
    "run_export",
    "to_yaml",
]

logger = logging.getLogger("nbinfer")

#: Export formats; "auto" picks from the model's kind.
FORMATS = ("auto", "onnx", "torchscript", "python", "pickle")

_ENUM_FIELDS = frozenset({"data_type", "kind", "format", "priority", "timeout_action"})
_MAP_FIELDS = frozenset({"parameters", "input_map", "output_map"})
_ENUM_VALUE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


# -- config.pbtxt -----------------------------------------------------------------------------
def _pb_scalar(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if key in _ENUM_FIELDS and _ENUM_VALUE.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _pb_fields(obj: Mapping[str, Any], indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    for key, value in obj.items():
        if value is None:
            continue
        if key in _MAP_FIELDS and isinstance(value, Mapping):
            for k, v in value.items():
                lines.append(f"{pad}{key} {{")
                lines.append(f"{pad}  key: {json.dumps(str(k), ensure_ascii=False)}")
                if isinstance(v, Mapping):
                    lines.append(f"{pad}  value {{")
                    lines.extend(_pb_fields(v, indent + 2))
                    lines.append(f"{pad}  }}")
                else:
                    lines.append(f"{pad}  value: {_pb_scalar('value', v)}")
                lines.append(f"{pad}}}")
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{key} {{")
            lines.extend(_pb_fields(value, indent + 1))
            lines.append(f"{pad}}}")
        elif isinstance(value, list | tuple):
            if value and all(isinstance(v, Mapping) for v in value):
                lines.append(f"{pad}{key} [")
                for i, item in enumerate(value):
                    lines.append(f"{pad}  {{")
                    lines.extend(_pb_fields(item, indent + 2))
                    lines.append(f"{pad}  }}" + ("," if i < len(value) - 1 else ""))
                lines.append(f"{pad}]")
            else:
                items = ", ".join(_pb_scalar(key, v) for v in value)
                lines.append(f"{pad}{key}: [ {items} ]")
        else:
            lines.append(f"{pad}{key}: {_pb_scalar(key, value)}")
    return lines


def config_to_pbtxt(config: Mapping[str, Any]) -> str:
    """Write a Triton-shaped config dict in protobuf text format (``config.pbtxt``).

    Example::

        config_to_pbtxt({"name": "m", "max_batch_size": 8,
                         "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]})
    """
    return "\n".join(_pb_fields(config, 0)) + "\n"


# -- KServe manifest ------------------------------------------------------------------------
_YAML_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./\-]*$")
_YAML_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if _YAML_PLAIN.match(text) and text.lower() not in _YAML_RESERVED:
        return text
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(obj: Any, indent: int = 0) -> str:
    """A tiny YAML emitter for dicts, lists and scalars (block style, JSON-quoted strings)."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            k = _yaml_scalar(key)
            if isinstance(value, Mapping | list) and value:
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(value, indent + 1).rstrip("\n"))
            elif isinstance(value, Mapping):
                lines.append(f"{pad}{k}: {{}}")
            elif isinstance(value, list):
                lines.append(f"{pad}{k}: []")
            else:
                lines.append(f"{pad}{k}: {_yaml_scalar(value)}")
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, Mapping | list) and item:
                body = to_yaml(item, indent + 1).rstrip("\n").split("\n")
                lines.append(f"{pad}- {body[0].lstrip()}")
                lines.extend(body[1:])
            else:
                lines.append(f"{pad}- {_yaml_scalar(item)}")
    else:
        lines.append(f"{pad}{_yaml_scalar(obj)}")
    return "\n".join(lines) + "\n"


_RUNTIMES = {"triton": ("kserve-tritonserver", "triton")}
_PROTOCOLS = ("v1", "v2", "grpc-v2")
#: The protocolVersions KServe's ServingRuntime of each known runtime supports (its webhook
#: rejects an InferenceService asking another one of that runtime).
_RUNTIME_PROTOCOLS = {"triton": ("v2", "grpc-v2")}
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def kserve_manifest(
    name: str,
    storage_uri: str,
    *,
    runtime: str = "triton",
    protocol: str = "v2",
    model_format: str | None = None,
    namespace: str | None = None,
    gpus: int = 0,
    min_replicas: int | None = None,
) -> str:
    """A KServe ``InferenceService`` YAML serving the model repository at ``storage_uri``.

    Args:
        name: The InferenceService name (a DNS label: lowercase letters, digits, '-').
        storage_uri: Where the exported repository lives (``gs://``, ``s3://``, ``pvc://`` ...).
        runtime: ``"triton"`` (KServe's ``kserve-tritonserver``) or the name of another
            ServingRuntime.
        protocol: ``"v2"`` (REST), ``"grpc-v2"`` or ``"v1"``.
        model_format: The ``modelFormat`` name (default ``"triton"``).
        namespace: Optional namespace.
        gpus: GPUs to request (``nvidia.com/gpu``); 0 = none.
        min_replicas: Optional ``minReplicas`` (0 allows scale to zero).

    Example::

        yaml_text = kserve_manifest("iris", "gs://bucket/repo")

    Raises:
        InvalidInputError: an invalid name, protocol or empty storage URI.
    """
    if len(name) > 63 or not _DNS_LABEL.match(name):
        suggestion = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "model"
        if not suggestion[0].isalpha():
            suggestion = f"m-{suggestion}"
        raise InvalidInputError(
            f"InferenceService name {name!r} is not a DNS label (lowercase letters, digits and "
            f"'-', starting with a letter, at most 63 characters); e.g. {suggestion[:63]!r}"
        )
    if protocol not in _PROTOCOLS:
        raise InvalidInputError(f"protocol {protocol!r} is not one of {', '.join(_PROTOCOLS)}")
    if not storage_uri:
        raise InvalidInputError("storage_uri is empty; give where the exported repository lives")
    supported = _RUNTIME_PROTOCOLS.get(runtime)
    if supported is not None and protocol not in supported:
        raise InvalidInputError(
            f"KServe's {_RUNTIMES[runtime][0]} runtime serves protocol {' and '.join(supported)} "
            f"only (its ServingRuntime lists no {protocol!r}); use --protocol v2 or grpc-v2"
        )
    runtime_name, default_format = _RUNTIMES.get(runtime, (runtime, "triton"))
    model: dict[str, Any] = {
        "modelFormat": {"name": model_format or default_format},
        "protocolVersion": protocol,
        "runtime": runtime_name,
        "storageUri": storage_uri,
    }
    if protocol == "grpc-v2":
        model["ports"] = [{"name": "h2c", "protocol": "TCP", "containerPort": 9000}]
    if gpus:
        quantity = str(int(gpus))  # a Kubernetes quantity: kserve's models take strings only
        model["resources"] = {
            "limits": {"nvidia.com/gpu": quantity},
            "requests": {"nvidia.com/gpu": quantity},
        }
    predictor: dict[str, Any] = {}
    if min_replicas is not None:
        predictor["minReplicas"] = int(min_replicas)
    predictor["model"] = model
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    manifest = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": {"predictor": predictor},
    }
    return to_yaml(manifest)


# -- export -----------------------------------------------------------------------------------
def _triton_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


def _tensor_entry(d: TensorDef, *, is_input: bool, label_file: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": d.name,
        "data_type": _triton_type(d.datatype),
        "dims": list(d.dims) if d.dims else [1],
    }
    if d.reshape is not None:
        entry["reshape"] = {"shape": list(d.reshape)}
    if is_input and d.optional:
        entry["optional"] = True
    if not is_input and label_file:
        entry["label_filename"] = label_file
    return entry


def _label_files(outputs: Sequence[TensorDef]) -> dict[str, str]:
    labelled = [d for d in outputs if d.labels]
    if len(labelled) == 1:
        return {labelled[0].name: "labels.txt"}
    return {d.name: f"{re.sub(r'[^A-Za-z0-9_.-]', '_', d.name)}_labels.txt" for d in labelled}


def _kind_of(model: Model) -> str:
    # importing the backend modules is cheap: torch / onnxruntime load only when used
    from nbinfer.server.backends.onnx import OnnxModel
    from nbinfer.server.backends.python_backend import TritonPythonBackendModel
    from nbinfer.server.backends.torch import TorchModel

    if isinstance(model, OnnxModel):
        return "onnx"
    if isinstance(model, TorchModel):
        return "torchscript"
    if isinstance(model, TritonPythonBackendModel):
        return "triton_python"
    return "python"


def _resolve_format(model: Model, kind: str, format: str) -> str:
    if format == "auto":
        return {"onnx": "onnx", "torchscript": "torchscript"}.get(kind, "python")
    if format == "onnx" and kind != "onnx":
        raise InvalidInputError(
            f"model {model.name!r} ({type(model).__name__}) cannot be exported as ONNX here; "
            "export it to ONNX with its framework first (e.g. torch.onnx.export) and serve that "
            "file with OnnxModel, or use format='python'"
        )
    if format == "pickle" and kind != "python":
        raise InvalidInputError(
            f"model {model.name!r} ({type(model).__name__}) is exported natively; "
            "format='pickle' is for Python models"
        )
    if format == "torchscript" and kind != "torchscript":
        raise InvalidInputError(
            f"model {model.name!r} ({type(model).__name__}) is not a torch model; use "
            "format='python'"
        )
    return format


def export_model(
    model: Model,
    out_dir: str | Path,
    *,
    name: str | None = None,
    version: int | str = 1,
    format: str = "auto",
) -> Path:
    """Write ``model`` as a Triton model repository entry ``<out_dir>/<name>``; return its path.

    Args:
        model: The model (ONNX, torch, Triton Python backend, function or ``Model`` subclass).
            Its declarations (``model.finalize()`` runs if needed) become ``config.pbtxt``.
        out_dir: The model repository directory (created if needed).
        name: The exported model's name (default: the model's).
        version: The version directory to write (replaced if present).
        format: ``"auto"``, ``"onnx"`` (ONNX models), ``"torchscript"`` (torch models) or
            ``"python"`` (Triton Python backend; functions / ``Model`` objects are stored with
            cloudpickle next to a generated ``model.py``).

    Example::

        export_model(nbinfer.server.demo.Iris(), "repo")   # repo/iris/{config.pbtxt,1/...}

    Raises:
        InvalidInputError: the format does not fit the model, or the model cannot be serialised.
    """
    if format not in FORMATS:
        raise InvalidInputError(f"unknown export format {format!r}; use one of {FORMATS}")
    model_name = name or model.name
    if not model_name or not _NAME.match(model_name):
        raise InvalidInputError(
            f"cannot export model named {model_name!r}: use letters, digits, '_', '-', '.'"
        )
    version_str = str(version)
    if not version_str.isdigit() or int(version_str) < 1:
        raise InvalidInputError(f"version must be a positive integer, got {version!r}")
    if "_input_defs" not in model.__dict__:
        model.finalize()
    kind = _kind_of(model)
    format = _resolve_format(model, kind, format)
    model_dir = Path(out_dir) / model_name
    version_dir = model_dir / version_str
    if version_dir.exists():
        shutil.rmtree(version_dir)
    version_dir.mkdir(parents=True)
    config: dict[str, Any] = {"name": model_name}
    if format == "onnx":
        shutil.copyfile(model.path, version_dir / "model.onnx")  # type: ignore[attr-defined]
        config["platform"] = "onnxruntime_onnx"
    elif format == "torchscript":
        _write_torchscript(model, version_dir / "model.pt")
        config["platform"] = "pytorch_libtorch"
    elif kind == "triton_python":
        _copy_triton_python(model, model_dir, version_dir)
        config["backend"] = "python"
    else:
        _write_python(model, version_dir, format)
        config["backend"] = "python"
    config["max_batch_size"] = int(model.max_batch_size)
    outs = model.output_defs()
    label_files = _label_files(outs)
    config["input"] = [_tensor_entry(d, is_input=True) for d in model.input_defs()]
    config["output"] = [
        _tensor_entry(d, is_input=False, label_file=label_files.get(d.name, "")) for d in outs
    ]
    if kind == "triton_python":
        _keep_extra_config(config, model)
    params = {
        str(k): {"string_value": str(v)}
        for k, v in (model.parameters or {}).items()
        if str(k) not in ("device", "model_class")
    }
    if params:
        config["parameters"] = params
    for d in outs:
        if d.labels and d.name in label_files:
            (model_dir / label_files[d.name]).write_text(
                "\n".join(d.labels) + "\n", encoding="utf-8"
            )
    (model_dir / "config.pbtxt").write_text(config_to_pbtxt(config), encoding="utf-8")
    logger.info("exported model %r to %s (%s)", model.name, model_dir, format)
    return model_dir


def _keep_extra_config(config: dict[str, Any], model: Model) -> None:
    """Carry over the Triton config fields of a Python-backend model that we do not generate."""
    original: Mapping[str, Any] = getattr(model, "config", {}) or {}
    skip = {"name", "platform", "backend", "max_batch_size", "input", "output", "parameters"}
    for key, value in original.items():
        if key not in skip and key not in config:
            config[key] = value


def _write_torchscript(model: Model, target: Path) -> None:
    torch = __import__("torch")
    path = getattr(model, "path", None)
    if path is not None:
        shutil.copyfile(path, target)
        return
    module = model.module  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        # TorchScript is deprecated in recent torch but is what Triton's pytorch backend loads
        warnings.simplefilter("ignore", DeprecationWarning)
        if not isinstance(module, torch.jit.ScriptModule):
            try:
                module = torch.jit.script(module)
            except Exception as exc:
                logger.warning(
                    "torch.jit.script failed for model %r (%s); tracing with example inputs "
                    "instead (shapes or control flow may be baked in)",
                    model.name,
                    exc,
                )
                module = _trace(model, module, torch)
        torch.jit.save(module, str(target))


def _trace(model: Model, module: Any, torch: Any) -> Any:
    from nbinfer.server.backends.torch import from_numpy

    examples = []
    for d in model.input_defs():
        shape = ([1] if model.max_batch_size > 0 else []) + [1 if x < 0 else x for x in d.dims]
        examples.append(from_numpy(np.zeros(shape, dtype=numpy_dtype(d.datatype))))
    try:
        with torch.inference_mode():
            return torch.jit.trace(module.cpu().eval(), tuple(examples))
    except Exception as exc:
        raise InvalidInputError(
            f"model {model.name!r}: cannot convert the module to TorchScript (script and trace "
            f"failed: {exc}); pass a torch.jit.ScriptModule or use format='python'"
        ) from exc


def _copy_triton_python(model: Model, model_dir: Path, version_dir: Path) -> None:
    src_model_dir = Path(model.model_dir)  # type: ignore[attr-defined]
    src_version = src_model_dir / str(model.version)
    shutil.copytree(
        src_version, version_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    for item in src_model_dir.iterdir():
        if item.is_file() and item.name not in ("config.pbtxt", "config.json"):
            shutil.copyfile(item, model_dir / item.name)


# -- Python models: portable source, or the pickled route for live objects ---------------------
#: The nbinfer names an exported source may use; they come with the vendored runtime.
RUNTIME_NAMES = frozenset({"FunctionModel", "InferContext", "Model", "TensorDef", "model"})
_RUNTIME_MODULES = ("nbinfer", "nbinfer.server", "nbinfer.server.model")
#: The definitions of nbinfer.server.model that the vendored runtime carries.
_VENDORED = (
    "_TRITON_TO_V2",
    "normalize_datatype",
    "TensorDef",
    "_dims",
    "as_tensor_def",
    "InferContext",
    "_wants_context",
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
    from nbinfer.protocol.dtypes import DATATYPES

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
    shims = f"""
class InvalidInputError(ValueError):
    \"\"\"A declaration or a value a model cannot take.\"\"\"


class TensorSpec:
    \"\"\"Metadata type of nbinfer (never made here).\"\"\"


Parameters = dict
logger = logging.getLogger("nbinfer")
_NUMPY = {table!r}
DATATYPES = tuple(_NUMPY) + ("BYTES",)


def numpy_dtype(datatype):
    if datatype == "BYTES":
        return np.dtype(object)
    try:
        return np.dtype(_NUMPY[datatype])
    except KeyError:
        raise InvalidInputError(f"unknown datatype {{datatype!r}}") from None


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


def _requirements(tree: ast.AST) -> list[str]:
    """Distributions the source imports (beyond the standard library), pinned as installed."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    tops: set[str] = {"numpy"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    skip = set(sys.stdlib_module_names) | {"nbinfer", "triton_python_backend_utils", "__future__"}
    dists = packages_distributions()
    out = []
    for top in sorted(tops - skip):
        for dist in dists.get(top, [top]):
            try:
                out.append(f"{dist}=={version(dist)}" if top != "numpy" else "numpy")
            except PackageNotFoundError:
                out.append(dist)
    return sorted(set(out))


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


def _write_python(model: Model, version_dir: Path, format: str) -> dict[str, Any]:
    """The Python-backend files: ``model.py`` (entry), runtime, source or pickle, settings."""
    if model.is_decoupled or model.stateful:
        what = "decoupled" if model.is_decoupled else "stateful (sequence)"
        raise InvalidInputError(
            f"model {model.name!r} is {what}: its Triton export is not supported yet"
        )
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


# -- CLI ----------------------------------------------------------------------------------------
def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``nbinfer export`` to ``parser`` (e.g. a ``cli.py`` subparser)."""
    parser.add_argument(
        "--model-repository",
        required=True,
        metavar="DIR",
        help="the model repository holding the model",
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="the model to export")
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="the repository directory to write"
    )
    parser.add_argument("--name", default=None, help="exported name (default: the model's)")
    parser.add_argument("--version", type=int, default=1, help="version directory (1)")
    parser.add_argument("--format", default="auto", choices=FORMATS, help="export format")
    parser.add_argument(
        "--kserve-manifest",
        metavar="FILE",
        default=None,
        help="also write a KServe InferenceService YAML here",
    )
    parser.add_argument(
        "--storage-uri",
        metavar="URI",
        default=None,
        help="where the exported repository will live (for the manifest)",
    )
    parser.add_argument("--runtime", default="triton", help="KServe runtime (triton)")
    parser.add_argument(
        "--protocol", default="v2", choices=_PROTOCOLS, help="KServe protocol version (v2)"
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbinfer export",
        description="Export a model as a Triton / KServe model repository entry.",
    )
    add_export_arguments(parser)
    return parser


def _load_source(repo_dir: Path, name: str) -> tuple[Model, Any]:
    """Load ``name`` from a repository directory; returns the model and the repository."""
    from nbinfer.server.backends import load_model_dir
    from nbinfer.server.repository import ModelRepository

    model_dir = repo_dir / name
    if not model_dir.is_dir():
        known = sorted(p.name for p in repo_dir.iterdir() if p.is_dir())
        raise InvalidInputError(
            f"no model {name!r} in {str(repo_dir)!r}; models: {', '.join(known) or '(none)'}"
        )
    model = load_model_dir(model_dir)
    if model is not None:
        repo = ModelRepository(models=[model], device="cpu")
    else:
        repo = ModelRepository(repo_dir, load=[name], device="cpu")
    mv = repo.resolve(name)
    assert mv.model is not None
    return mv.model, repo


def main_export(argv: list[str]) -> int:
    """``nbinfer export ...``: export one model of a repository; returns the exit code.

    Example::

        nbinfer export --model-repository models --model iris --out exported
            --kserve-manifest iris.yaml --storage-uri gs://bucket/exported
    """
    return run_export(_build_parser().parse_args(argv))


def run_export(args: argparse.Namespace) -> int:
    """Run ``nbinfer export`` from options parsed with :func:`add_export_arguments`."""
    if args.kserve_manifest and not args.storage_uri:
        sys.stderr.write("nbinfer export: --kserve-manifest needs --storage-uri\n")
        return 2
    repo: Any = None
    try:
        model, repo = _load_source(Path(args.model_repository), args.model)
        path = export_model(
            model, args.out, name=args.name, version=args.version, format=args.format
        )
        sys.stdout.write(f"exported {args.model!r} to {path}\n")
        settings_file = path / str(args.version) / "nbinfer_export.json"
        if settings_file.is_file():  # Python models: what Triton's Python needs
            settings = json.loads(settings_file.read_text(encoding="utf-8"))
            needs = settings["requires"]
            sys.stdout.write(
                f"{settings['route']} route; Triton's Python needs Python {needs['python']} and "
                f"{', '.join(needs['packages'])}\n"
            )
            if settings.get("note"):
                sys.stdout.write(settings["note"] + "\n")
        if args.kserve_manifest:
            isvc = re.sub(r"[^a-z0-9-]+", "-", (args.name or args.model).lower()).strip("-")
            text = kserve_manifest(
                isvc, args.storage_uri, runtime=args.runtime, protocol=args.protocol
            )
            Path(args.kserve_manifest).write_text(text, encoding="utf-8")
            sys.stdout.write(f"wrote KServe manifest {args.kserve_manifest}\n")
    except (NbinferError, ImportError, OSError) as exc:
        sys.stderr.write(f"nbinfer export: {exc}\n")
        return 1
    finally:
        if repo is not None:
            repo.close()
    return 0
