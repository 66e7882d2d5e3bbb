"""Export a served model as a Triton model repository entry, plus a KServe manifest.

:func:`export_model` writes ``<out>/<name>/config.pbtxt`` (Triton text format) and
``<out>/<name>/<version>/`` holding ``model.onnx`` (ONNX models), ``model.pt`` (TorchScript) or a
Triton Python-backend ``model.py``, plus a labels file per labelled output. The directory is a
Triton / KServe model repository, and nbinfer serves it back unchanged::

    path = export_model(model, "model_repository")
    print(kserve_manifest("iris", "gs://bucket/model_repository"))

Python models (functions, ``Model`` subclasses) are exported as a Triton Python-backend
``model.py`` that loads the object from a cloudpickle file next to it: this is only portable to
a Triton whose Python environment has the same Python version, ``cloudpickle``, ``numpy`` and
the libraries the code imports (``nbinfer`` too for ``Model`` subclasses).
"""

from __future__ import annotations

import argparse
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
FORMATS = ("auto", "onnx", "torchscript", "python")

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
        model["resources"] = {
            "limits": {"nvidia.com/gpu": int(gpus)},
            "requests": {"nvidia.com/gpu": int(gpus)},
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
        _write_pickled_python(model, version_dir)
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


_GENERATED_HEADER = """\
# Generated by `nbinfer export` -- a Triton Python-backend model.
#
# Serves: {what}
# loaded from {pickle} with cloudpickle. Portable only to a Triton whose Python
# environment has the same Python version ({py}), cloudpickle, numpy and the
# libraries the code imports{extra}. Re-export from the source to change it.
"""

_GENERATED_BODY = '''\
import asyncio
import inspect
import json
import os
import types

import cloudpickle
import numpy as np
import triton_python_backend_utils as pb_utils

PICKLE = {pickle!r}
KIND = {kind!r}
CALL = {call!r}
PASS_CONTEXT = {pass_context!r}


async def _awaited(value):
    return await value


def _as_numpy(value):
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class TritonPythonModel:
    """Runs the pickled object (see the header)."""

    def initialize(self, args):
        here = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(here, PICKLE), "rb") as f:
            self.obj = cloudpickle.load(f)
        if KIND == "model" and not self.obj.ready:
            self.obj.load()
            self.obj.ready = True
        config = json.loads(args["model_config"])
        self.model_name = args["model_name"]
        self.model_version = args["model_version"]
        self.inputs = [i["name"] for i in config.get("input", [])]
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"]))
            for o in config.get("output", [])
        ]

    def _context(self, request):
        if KIND == "model":
            from nbinfer.server.model import InferContext

            return InferContext(
                model_name=self.model_name,
                model_version=self.model_version,
                request_id=request.request_id(),
                parameters=json.loads(request.parameters() or "{{}}"),
                requested_outputs=list(request.requested_output_names()),
            )
        return types.SimpleNamespace(
            model_name=self.model_name,
            model_version=self.model_version,
            request_id=request.request_id(),
            parameters=json.loads(request.parameters() or "{{}}"),
            requested_outputs=list(request.requested_output_names()),
            response_parameters={{}},
        )

    def _call(self, fn, *args, **kwargs):
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
        return result

    def _hook(self, name, value, context):
        m = self.obj
        fn = getattr(m, name)
        if m.hook_wants_context(name):
            return self._call(fn, value, context)
        return self._call(fn, value)

    def _run(self, inputs, context):
        if KIND == "model":
            m = self.obj
            if m.overrides("preprocess"):
                inputs = self._hook("preprocess", inputs, context)
            result = self._hook("predict", inputs, context)
            if m.overrides("postprocess"):
                result = self._hook("postprocess", result, context)
            return result
        kwargs = {{"context": context}} if PASS_CONTEXT else {{}}
        if CALL == "single":
            return self._call(self.obj, next(iter(inputs.values())), **kwargs)
        if CALL == "kwargs":
            return self._call(self.obj, **inputs, **kwargs)
        ordered = [inputs[n] for n in self.inputs if n in inputs]
        return self._call(self.obj, *ordered, **kwargs)

    def _tensors(self, result):
        names = [n for n, _ in self.outputs]
        if isinstance(result, dict):
            produced = dict(result)
        elif isinstance(result, tuple) and len(names) > 1:
            produced = dict(zip(names, result))
        else:
            produced = {{names[0]: result}}
        tensors = []
        for name, dtype in self.outputs:
            if name not in produced:
                continue
            arr = _as_numpy(produced[name])
            if dtype is np.object_:
                if arr.dtype.kind == "U":
                    arr = np.char.encode(arr, "utf-8")
                arr = arr.astype(np.object_)
            elif dtype is not None and arr.dtype != dtype:
                arr = arr.astype(dtype)
            tensors.append(pb_utils.Tensor(name, arr))
        return tensors

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                inputs = {{}}
                for name in self.inputs:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is not None:
                        inputs[name] = tensor.as_numpy()
                result = self._run(inputs, self._context(request))
                responses.append(pb_utils.InferenceResponse(output_tensors=self._tensors(result)))
            except Exception as exc:
                error = pb_utils.TritonError(f"{{type(exc).__name__}}: {{exc}}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses

    def finalize(self):
        if KIND == "model" and self.obj is not None:
            self.obj.unload()
        self.obj = None
'''


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


def _write_pickled_python(model: Model, version_dir: Path) -> None:
    import cloudpickle

    if isinstance(model, FunctionModel):
        obj: Any = model.fn
        kind = "function"
        what = f"the Python function {getattr(obj, '__qualname__', '?')}"
        pickle_name = "function.pkl"
        names = [d.name for d in model.input_defs()]
        params = model._params
        if len(names) == 1 and (not params or names[0] not in params):
            call = "single"
        elif model._var_kw or all(n in params for n in names):
            call = "kwargs"
        else:
            call = "positional"
        pass_context = model._pass_context
        _pickle_by_value([obj])
        extra = ""
    else:
        obj = model
        kind = "model"
        what = f"an nbinfer model object ({type(model).__name__})"
        pickle_name = "model.pkl"
        call = "model"
        pass_context = True
        _pickle_by_value([type(model)])
        extra = ", and nbinfer itself"
    try:
        data = cloudpickle.dumps(obj)
    except Exception as exc:
        raise InvalidInputError(
            f"model {model.name!r} cannot be exported: cloudpickle failed on "
            f"{type(obj).__name__}: {type(exc).__name__}: {exc}"
        ) from exc
    (version_dir / pickle_name).write_bytes(data)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    source = _GENERATED_HEADER.format(what=what, pickle=pickle_name, py=py, extra=extra)
    source += "\n" + _GENERATED_BODY.format(
        pickle=pickle_name, kind=kind, call=call, pass_context=pass_context, what=what
    )
    (version_dir / "model.py").write_text(source, encoding="utf-8")


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
