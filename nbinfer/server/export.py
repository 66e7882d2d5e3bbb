"""Export a served model as a Triton model repository entry, plus a KServe manifest.

:func:`export_model` writes ``<out>/<name>/config.pbtxt`` (Triton text format) and
``<out>/<name>/<version>/`` holding ``model.onnx`` (ONNX models), ``model.pt`` (TorchScript) or a
Triton Python-backend ``model.py``, plus a labels file per labelled output. The directory is a
Triton / KServe model repository, and nbinfer serves it back unchanged::

    path = export_model(model, "model_repository")
    print(kserve_manifest("iris", "gs://bucket/model_repository"))

Python models (``Model`` subclasses, functions) become a Triton Python-backend entry: portable
source or, for live objects, a pickle (:mod:`nbinfer.server.export_python`); ONNX and TorchScript
stay native. Which model options the exported ``config.pbtxt`` carries is declared in
:data:`~nbinfer.server.model.MODEL_OPTIONS`. Owns the entry layout, the config, the labels, the
KServe manifest and ``nbinfer export``; imports the backends lazily and the repository only to
load a model for the command line.
"""

from __future__ import annotations

import argparse
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
from nbinfer.server.export_python import (
    EXECUTION_ENV,
    NAME_RULE,
    ExecutionEnv,
    check_env_name,
    check_python_export,
    name_problem,
    python_requirements,
    write_execution_env,
    write_python,
)
from nbinfer.server.model import MODEL_OPTIONS, Model, TensorDef
from nbinfer.server.model_config import triton_type
from nbinfer.server.pbtxt import config_to_pbtxt

__all__ = [
    "FORMATS",
    "add_export_arguments",
    "check_export_name",
    "export_model",
    "kserve_manifest",
    "main_export",
    "run_export",
    "to_yaml",
]

logger = logging.getLogger("nbinfer")

#: Export formats; "auto" picks from the model's kind.
FORMATS = ("auto", "onnx", "torchscript", "python", "pickle")

# -- KServe manifest ------------------------------------------------------------------------
_YAML_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./\-]*")
_YAML_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if _YAML_PLAIN.fullmatch(text) and text.lower() not in _YAML_RESERVED:
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
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


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
    if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
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
def _tensor_entry(d: TensorDef, *, is_input: bool, label_file: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": d.name,
        "data_type": triton_type(d.datatype),
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
    execution_env: str | None = None,
    execution_env_python: str | None = None,
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
        execution_env: For Python-backend exports, also write ``build_python_env.sh``
            (Triton's conda + conda-pack recipe for the Python and packages the export needs)
            and name its result in ``config.pbtxt`` as ``EXECUTION_ENV_PATH``: an archive
            (``"python_env.tar.gz"``) or, for any other name, an unpacked directory.
        execution_env_python: The ``X.Y`` of that environment (default: this interpreter's);
            it must be the Python of the target's ``triton_python_backend_stub``.

    Example::

        export_model(nbinfer.server.demo.Iris(), "repo")   # repo/iris/{config.pbtxt,1/...}

    Raises:
        InvalidInputError: the format does not fit the model, the model cannot be serialised,
            or an execution environment was asked for a native (ONNX / TorchScript) export.
    """
    return _export(
        model,
        out_dir,
        name=name,
        version=version,
        format=format,
        execution_env=execution_env,
        execution_env_python=execution_env_python,
    )[0]


def _export(
    model: Model,
    out_dir: str | Path,
    *,
    name: str | None,
    version: int | str,
    format: str,
    execution_env: str | None,
    execution_env_python: str | None,
) -> tuple[Path, ExecutionEnv | None]:
    """:func:`export_model`, also returning the execution-environment recipe it wrote."""
    if format not in FORMATS:
        raise InvalidInputError(f"unknown export format {format!r}; use one of {FORMATS}")
    model_name = name or model.name
    check_export_name(model_name, option="name" if name else "the model's name (pass name=)")
    version_str = str(version)
    if not version_str.isdigit() or int(version_str) < 1:
        raise InvalidInputError(f"version must be a positive integer, got {version!r}")
    if "_input_defs" not in model.__dict__:
        model.finalize()
    kind = _kind_of(model)
    format = _resolve_format(model, kind, format)
    if kind == "python":
        check_python_export(model)
    if execution_env is not None:
        _check_execution_env(model, format, execution_env)
    elif execution_env_python is not None:
        raise InvalidInputError("execution_env_python is the Python of an execution_env: give both")
    model_dir = Path(out_dir) / model_name
    version_dir = model_dir / version_str
    if version_dir.exists():
        shutil.rmtree(version_dir)
    version_dir.mkdir(parents=True)
    route, requires = _write_entry(model, kind, format, model_dir, version_dir)
    outs = model.output_defs()
    label_files = _label_files(outs)
    params = {
        str(k): {"string_value": str(v)}
        for k, v in (model.parameters or {}).items()
        if str(k) not in ("device", "model_class")
    }
    exported = {  # by config key; labels travel as the outputs' label files
        "name": model_name,
        "input": [_tensor_entry(d, is_input=True) for d in model.input_defs()],
        "output": [
            _tensor_entry(d, is_input=False, label_file=label_files.get(d.name, "")) for d in outs
        ],
        "max_batch_size": int(model.max_batch_size),
        "parameters": params or None,
    }
    config: dict[str, Any] = {"name": model_name, **route}
    for option in MODEL_OPTIONS:
        if option.exported and option.config_key in exported:
            config[option.config_key] = exported[option.config_key]
    if kind == "triton_python":
        _keep_extra_config(config, model)
    env = None
    if execution_env is not None:
        env = write_execution_env(model_dir, execution_env, requires, python=execution_env_python)
        config["parameters"] = {
            **(config.get("parameters") or {}),
            "EXECUTION_ENV_PATH": {"string_value": env.parameter},
        }
    for d in outs:
        if d.labels and d.name in label_files:
            (model_dir / label_files[d.name]).write_text(
                "\n".join(d.labels) + "\n", encoding="utf-8"
            )
    (model_dir / "config.pbtxt").write_text(config_to_pbtxt(config), encoding="utf-8")
    logger.info("exported model %r to %s (%s)", model.name, model_dir, format)
    return model_dir, env


def check_export_name(name: str, *, option: str = "name") -> None:
    """Refuse a model name an export cannot write (it becomes a directory and lands in files).

    The rule is the server's model-name rule: ASCII letters, digits, ``_``, ``.``, ``-``, not
    starting with ``.`` or ``-``, at most 128 characters (so no ``..``, separator, white space,
    control character such as a trailing newline, or shell metacharacter).

    Args:
        name: The model name.
        option: What the name was given as, for the message (``--name``, ``--model``).

    Raises:
        InvalidInputError: the name breaks the rule; the message names ``option`` and the
            offending character.
    """
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInputError(
            f"{option} {name!r} is refused: {problem}. A model name may only contain {NAME_RULE}"
        )


def _check_execution_env(model: Model, format: str, execution_env: str) -> None:
    if format in ("onnx", "torchscript"):
        raise InvalidInputError(
            f"model {model.name!r} exports natively ({format}): Triton's "
            f"{'onnxruntime' if format == 'onnx' else 'pytorch'} backend runs no Python, so "
            "an execution environment (EXECUTION_ENV_PATH) does not apply"
        )
    check_env_name(execution_env)


def _write_entry(
    model: Model, kind: str, format: str, model_dir: Path, version_dir: Path
) -> tuple[dict[str, str], dict[str, Any]]:
    """Write the version directory's files; the config's route and what its Python needs."""
    if format == "onnx":
        shutil.copyfile(model.path, version_dir / "model.onnx")  # type: ignore[attr-defined]
        return {"platform": "onnxruntime_onnx"}, {}
    if format == "torchscript":
        _write_torchscript(model, version_dir / "model.pt")
        return {"platform": "pytorch_libtorch"}, {}
    if kind == "triton_python":
        _copy_triton_python(model, model_dir, version_dir)
        return {"backend": "python"}, python_requirements(version_dir)
    return {"backend": "python"}, write_python(model, version_dir, format)["requires"]


def _keep_extra_config(config: dict[str, Any], model: Model) -> None:
    """Carry over the Triton config fields of a Python-backend model that we do not generate."""
    original: Mapping[str, Any] = getattr(model, "config", {}) or {}
    skip = {"platform", "backend", *(o.config_key for o in MODEL_OPTIONS if o.exported)}
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
        "--execution-env",
        nargs="?",
        const=EXECUTION_ENV,
        default=None,
        metavar="NAME",
        help="Python-backend exports: also write build_python_env.sh (Triton's conda-pack "
        f"recipe) and set EXECUTION_ENV_PATH to NAME in the model directory ({EXECUTION_ENV}; "
        "a name without .tar.gz is an unpacked directory)",
    )
    parser.add_argument(
        "--execution-env-python",
        default=None,
        metavar="X.Y",
        help="Python of that environment (default: this one's; must match Triton's stub)",
    )
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


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse names that land in files or scripts before anything is read or written.

    Raises:
        InvalidInputError: the message names the option and the offending character.
    """
    check_export_name(args.model, option="--model")
    if args.name is not None:
        check_export_name(args.name, option="--name")
    if args.execution_env is not None:
        check_env_name(args.execution_env, option="--execution-env")
    python = args.execution_env_python
    if python is not None and re.fullmatch(r"3\.[0-9]+", python) is None:
        raise InvalidInputError(f"--execution-env-python {python!r} is refused: use 3.<minor>")


def run_export(args: argparse.Namespace) -> int:
    """Run ``nbinfer export`` from options parsed with :func:`add_export_arguments`."""
    if args.kserve_manifest and not args.storage_uri:
        sys.stderr.write("nbinfer export: --kserve-manifest needs --storage-uri\n")
        return 2
    try:
        _check_arguments(args)
    except InvalidInputError as exc:
        sys.stderr.write(f"nbinfer export: {exc}\n")
        return 2
    repo: Any = None
    try:
        model, repo = _load_source(Path(args.model_repository), args.model)
        path, env = _export(
            model,
            args.out,
            name=args.name,
            version=args.version,
            format=args.format,
            execution_env=args.execution_env,
            execution_env_python=args.execution_env_python,
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
        if env is not None:
            sys.stdout.write(
                f"wrote {env.script}: run it (conda + conda-pack) to build {env.target} with "
                f"Python {env.python} and {', '.join(env.packages)}; config.pbtxt sets "
                f"EXECUTION_ENV_PATH to {env.parameter}\n"
            )
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
