"""A model's Triton-shaped config: reading it, applying it to a :class:`Model`, writing it back.

Owns what the repository, the backends and the export share about ``config.pbtxt`` /
``config.json``: :func:`read_config` (a model directory's file as Triton-shaped JSON),
:func:`config_tensor_defs` (its ``input`` / ``output`` entries as :class:`TensorDef`),
:func:`apply_config` (a config onto a model object, checked against its declarations) and
:func:`model_config_json` (a loaded model as the JSON ``GET .../config`` answers). Which
model option lives under which config key is declared once, in
:data:`~nbinfer.server.model.MODEL_OPTIONS`.

Imports the model API, the path policy, the pbtxt parser and the scheduler's number check
only: the repository and the backends import this module, never the other way round.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import triton_type
from nbinfer.server.batcher import non_negative_int
from nbinfer.server.model import MODEL_OPTIONS, Model, TensorDef, normalize_datatype
from nbinfer.server.paths import ModelFiles
from nbinfer.server.pbtxt import config_device, parse_pbtxt, string_params

__all__ = [
    "apply_config",
    "config_tensor_defs",
    "model_config_json",
    "read_config",
    "sequence_batching_json",
    "server_fed_tensors",
    "triton_type",
]

#: The options a config holds as one top-level scalar (``max_batch_size: 8``): written from
#: the model's attribute and read back the same way.
_SCALAR_OPTIONS = tuple(
    o for o in MODEL_OPTIONS if o.config_key in ("name", "platform", "backend", "max_batch_size")
)


def server_fed_tensors(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """The input / output names the sequence batcher handles (control inputs, implicit state).

    Clients never send or receive them: they are not the model's declared tensors.
    """
    sb = config.get("sequence_batching")
    if not isinstance(sb, Mapping):
        return frozenset(), frozenset()
    ins = {str(e.get("name")) for e in _as_list(sb.get("control_input"))}
    outs = set()
    for state in _as_list(sb.get("state")):
        ins.add(str(state.get("input_name")))
        outs.add(str(state.get("output_name")))
    return frozenset(ins), frozenset(outs)


def read_config(model_dir: Path) -> dict[str, Any]:
    """A model directory's ``config.pbtxt`` / ``config.json`` as Triton-shaped JSON ({} if none).

    Raises:
        InvalidInputError: the file is malformed.
    """
    pbtxt = model_dir / "config.pbtxt"
    if pbtxt.is_file():
        return parse_pbtxt(pbtxt.read_text(encoding="utf-8"), source=str(pbtxt))
    js = model_dir / "config.json"
    if not js.is_file():
        return {}
    try:
        data = json.loads(js.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{js}: invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{js}: the config must be a JSON object")
    return data


def _labels(files: ModelFiles, label_file: str, what: str) -> list[str]:
    path = files.file(label_file, what=f"{what}: label_filename")
    if not path.is_file():
        raise InvalidInputError(f"{what}: label file {label_file!r} not found")
    labels = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    while labels and not labels[-1]:
        labels.pop()
    return labels


def config_tensor_defs(
    config: Mapping[str, Any], key: str, files: ModelFiles | None = None
) -> list[TensorDef]:
    """The ``input`` / ``output`` entries of a Triton config as :class:`TensorDef`.

    Label files are read through ``files`` (the model directory's path policy); without it
    the entries keep their ``label_filename`` and get no labels (a backend building its model
    before the repository applies the config).

    Raises:
        InvalidInputError: an entry has no name, an unknown data_type, missing or invalid dims,
            or a label file that is missing or outside the model directory.
    """
    entries = config.get(key) or []
    if not isinstance(entries, list):
        raise InvalidInputError(f"config: {key!r} must be a list")
    defs: list[TensorDef] = []
    for i, item in enumerate(entries):
        if not isinstance(item, Mapping) or not item.get("name"):
            raise InvalidInputError(f"config: {key} #{i} has no name")
        name = str(item["name"])
        what = f"config {key} {name!r}"
        dt = item.get("data_type", item.get("datatype"))
        if dt is None:
            raise InvalidInputError(f"{what}: no data_type")
        try:
            datatype = normalize_datatype(str(dt))
        except InvalidInputError as exc:
            raise InvalidInputError(f"{what}: unknown data_type {dt!r}") from exc
        dims_raw = item.get("dims", item.get("shape"))
        if dims_raw is None:
            raise InvalidInputError(f"{what}: no dims")
        try:
            dims = [int(d) for d in dims_raw]
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{what}: dims must be integers, got {dims_raw!r}") from exc
        if any(d < -1 or d == 0 for d in dims):
            raise InvalidInputError(f"{what}: dims must be -1 or positive, got {dims}")
        reshape = None
        if isinstance(item.get("reshape"), Mapping):
            reshape = [int(d) for d in item["reshape"].get("shape") or []]
        label_file = str(item.get("label_filename") or "")
        defs.append(
            TensorDef(
                name=name,
                datatype=datatype,
                dims=dims,
                optional=bool(item.get("optional", False)),
                reshape=reshape,
                labels=_labels(files, label_file, what) if label_file and files else None,
                label_filename=label_file,
            )
        )
    return defs


def _merge_defs(
    model_name: str, kind: str, from_config: list[TensorDef], from_model: list[TensorDef]
) -> list[TensorDef]:
    if not from_config:
        return from_model
    if not from_model:
        return from_config
    by_name = {d.name: d for d in from_model}
    config_names = [d.name for d in from_config]
    if set(by_name) != set(config_names):
        raise InvalidInputError(
            f"model {model_name!r}: config {kind}s {sorted(config_names)} do not match the "
            f"model's declared {kind}s {sorted(by_name)}"
        )
    merged = []
    for c in from_config:
        m = by_name[c.name]
        if m.datatype != c.datatype:
            raise InvalidInputError(
                f"model {model_name!r} {kind} {c.name!r}: config data_type "
                f"{triton_type(c.datatype)} does not match the model's {m.datatype}"
            )
        if list(m.dims) != list(c.dims):
            raise InvalidInputError(
                f"model {model_name!r} {kind} {c.name!r}: config dims {c.dims} do not match "
                f"the model's {m.dims}"
            )
        if c.labels is None and m.labels is not None:
            c.labels = m.labels
        merged.append(c)
    return merged


def apply_config(
    model: Model,
    config: Mapping[str, Any],
    *,
    name: str,
    model_dir: Path | None,
    files: ModelFiles | None = None,
) -> None:
    """Apply a Triton-shaped config to a model object and validate the result.

    ``files`` is the path policy for files the config names (label files); by default the
    model directory, with paths relative to it only.

    Raises:
        InvalidInputError: the config is malformed, names a file outside the model directory,
            or contradicts the model's declarations.
    """
    if files is None and model_dir is not None:
        files = ModelFiles(model_dir)
    cfg_name = config.get("name")
    if cfg_name and str(cfg_name) != name:
        raise InvalidInputError(
            f"config name {cfg_name!r} does not match the model directory name {name!r}"
        )
    model.name = name
    if "max_batch_size" in config:
        model.max_batch_size = non_negative_int(config["max_batch_size"], "config max_batch_size")
    if config.get("platform"):
        model.platform = str(config["platform"])
    if config.get("backend"):
        model.backend = str(config["backend"])
    # the sequence batcher's control / state tensors are the server's, not the clients'
    fed_in, fed_out = server_fed_tensors(config)
    own_ins = [d for d in model.input_defs() if d.name not in fed_in]
    own_outs = [d for d in model.output_defs() if d.name not in fed_out]
    ins = _merge_defs(name, "input", config_tensor_defs(config, "input", files), own_ins)
    outs = _merge_defs(name, "output", config_tensor_defs(config, "output", files), own_outs)
    model.set_defs(ins, outs)
    params = string_params(config)
    if params:
        merged = dict(model.parameters or {})
        merged.update(params)
        model.parameters = merged
    device = config_device(config)
    if device is not None:
        model.device = device
    groups = config.get("instance_group") or []
    counts = [int(g.get("count", 1)) for g in groups if isinstance(g, Mapping)]
    if counts:
        model.max_concurrency = sum(counts)


#: The fields Triton fills in on every input / output entry (model_config.proto defaults).
_INPUT_DEFAULTS: dict[str, Any] = {
    "format": "FORMAT_NONE",
    "is_shape_tensor": False,
    "allow_ragged_batch": False,
    "optional": False,
    "is_non_linear_format_io": False,
}
_OUTPUT_DEFAULTS: dict[str, Any] = {
    "label_filename": "",
    "is_shape_tensor": False,
    "is_non_linear_format_io": False,
}
#: Top-level fields Triton always answers (empty when the config leaves them out).
_TOP_DEFAULTS: dict[str, Any] = {
    "runtime": "",
    "batch_input": [],
    "batch_output": [],
    "model_warmup": [],
    "cc_model_filenames": {},
    "metric_tags": {},
}
#: The file Triton's backends look for in a version directory (its ``default_model_filename``).
_DEFAULT_MODEL_FILES = {"python": "model.py", "onnxruntime": "model.onnx", "pytorch": "model.pt"}
_CONTROL_DEFAULTS: dict[str, Any] = {
    "int32_false_true": [],
    "fp32_false_true": [],
    "bool_false_true": [],
    "data_type": "TYPE_INVALID",
}
#: The fields Triton fills in on the ``direct`` / ``oldest`` strategy of a sequence batcher.
_STRATEGY_DEFAULTS: dict[str, dict[str, Any]] = {
    "direct": {"max_queue_delay_microseconds": 0, "minimum_slot_utilization": 0.0},
    "oldest": {
        "max_candidate_sequences": 0,
        "preferred_batch_size": [],
        "max_queue_delay_microseconds": 0,
        "preserve_ordering": False,
    },
}
_STATE_DEFAULTS: dict[str, Any] = {
    "use_same_buffer_for_input_output": False,
    "use_growable_memory": False,
}


def _tensor_json(d: TensorDef, is_input: bool, given: Mapping[str, Any]) -> dict[str, Any]:
    """One entry as Triton answers it: its defaults, the file's fields, the model's truth."""
    out: dict[str, Any] = dict(_INPUT_DEFAULTS if is_input else _OUTPUT_DEFAULTS)
    out.update({k: v for k, v in given.items() if k not in ("datatype", "shape")})
    out.update({"name": d.name, "data_type": triton_type(d.datatype), "dims": list(d.dims)})
    if d.reshape is not None:
        out["reshape"] = {"shape": list(d.reshape)}
    if is_input:
        out["optional"] = d.optional
    else:
        out["label_filename"] = d.label_filename
    return out


def _entries_by_name(cfg: Mapping[str, Any], key: str) -> dict[str, Mapping[str, Any]]:
    entries = cfg.get(key)
    if not isinstance(entries, list):
        return {}
    return {str(e.get("name")): e for e in entries if isinstance(e, Mapping)}


def _as_list(value: Any) -> list[Mapping[str, Any]]:
    """A repeated message field's entries (one message written alone counts as one)."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, Mapping)]
    return [value] if isinstance(value, Mapping) else []


def sequence_batching_json(
    sb: Mapping[str, Any], idle_us: int | None = None, *, max_batch_size: int = 0
) -> dict[str, Any]:
    """A ``sequence_batching`` section with Triton's defaults filled in (controls, state).

    ``idle_us`` is the effective ``max_sequence_idle_microseconds`` when the file leaves it
    out; ``oldest`` without ``preferred_batch_size`` prefers ``max_batch_size``, as Triton.
    """
    out = dict(sb)
    if idle_us is not None and not out.get("max_sequence_idle_microseconds"):
        out["max_sequence_idle_microseconds"] = idle_us
    controls = []
    for entry in _as_list(sb.get("control_input")):
        item = dict(entry)
        item["control"] = [{**_CONTROL_DEFAULTS, **c} for c in _as_list(entry.get("control"))]
        controls.append(item)
    out["control_input"] = controls
    states = []
    for entry in _as_list(sb.get("state")):
        item = {**_STATE_DEFAULTS, **entry}
        item["initial_state"] = [dict(i) for i in _as_list(entry.get("initial_state"))]
        states.append(item)
    out["state"] = states
    out.setdefault("iterative_sequence", False)
    for strategy, defaults in _STRATEGY_DEFAULTS.items():
        if isinstance(sb.get(strategy), Mapping):
            out[strategy] = {**defaults, **sb[strategy]}
    oldest = out.get("oldest")
    if isinstance(oldest, dict) and not oldest["preferred_batch_size"] and max_batch_size > 0:
        oldest["preferred_batch_size"] = [max_batch_size]
    return out


def model_config_json(model: Model, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return the Triton-shaped config JSON of a loaded model (``base``: the file's config)."""
    cfg: dict[str, Any] = dict(base or {})
    params: dict[str, Any] = {
        str(k): {"string_value": str(v)} for k, v in (model.parameters or {}).items()
    }
    params["device"] = {"string_value": model.device}
    # Class labels travel in the config (Triton's label_filename is a server-side path): the
    # session reads them to name DataFrame columns. JSON list, one parameter per output.
    for d in model.output_defs():
        if d.labels:
            params[f"nbinfer.labels.{d.name}"] = {"string_value": json.dumps(list(d.labels))}
    gpu = model.device.startswith("cuda")
    given_groups = [g for g in _as_list(cfg.get("instance_group"))]
    instance_group = []
    for i, g in enumerate(given_groups or [{}]):
        # as Triton: a group without a name is "<model>_<i>"; the group Triton makes up when
        # the config has none is "<model>"
        default_name = f"{model.name}_{i}" if given_groups else model.name
        instance_group.append(
            {
                **{k: v for k, v in g.items() if k not in ("kind", "gpus")},
                "name": str(g.get("name") or default_name),
                "kind": "KIND_GPU" if gpu else "KIND_CPU",
                "count": int(g.get("count", model.max_concurrency or 1)),
                "gpus": [int(model.device.split(":", 1)[1])] if gpu else [],
                "secondary_devices": list(g.get("secondary_devices") or []),
                "profile": list(g.get("profile") or []),
                "passive": bool(g.get("passive", False)),
                "host_policy": str(g.get("host_policy") or ""),
            }
        )
    given_in, given_out = _entries_by_name(cfg, "input"), _entries_by_name(cfg, "output")
    for key, value in _TOP_DEFAULTS.items():
        cfg.setdefault(key, type(value)())
    default_file = _DEFAULT_MODEL_FILES.get(str(model.backend or ""))
    if default_file:
        cfg.setdefault("default_model_filename", default_file)
    if isinstance(cfg.get("sequence_batching"), Mapping):
        cfg["sequence_batching"] = sequence_batching_json(
            cfg["sequence_batching"], max_batch_size=int(model.max_batch_size)
        )
    cfg.update({o.config_key: getattr(model, o.name) for o in _SCALAR_OPTIONS})
    cfg.update(
        {
            "version_policy": cfg.get("version_policy") or {"latest": {"num_versions": 1}},
            "max_batch_size": int(model.max_batch_size),
            "input": [_tensor_json(d, True, given_in.get(d.name, {})) for d in model.input_defs()],
            "output": [
                _tensor_json(d, False, given_out.get(d.name, {})) for d in model.output_defs()
            ],
            "instance_group": instance_group,
            "parameters": params,
        }
    )
    return cfg
