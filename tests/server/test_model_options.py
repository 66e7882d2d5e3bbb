"""The model options table agrees with Model, the config it answers and the config it exports."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import MappingProxyType
from typing import Any

from nbinfer.server.backends import load_model_dir
from nbinfer.server.export import export_model
from nbinfer.server.model import MODEL_OPTIONS, Model, TensorDef
from nbinfer.server.model_config import apply_config, model_config_json
from nbinfer.server.pbtxt import config_to_pbtxt, parse_pbtxt

#: A value other than the default for every option (a new option needs one here).
VALUES: dict[str, Any] = {
    "name": "opts",
    "inputs": [("x", "FP32", [-1])],
    "outputs": [("y", "FP32", [3])],
    "max_batch_size": 4,
    "labels": ["a", "b", "c"],
    "platform": "custom_platform",
    "backend": "custom_backend",
    "version": 7,
    "device": "cpu",
    "parameters": {"note": "kept"},
    "run_in_thread": False,
    "max_concurrency": 3,
}


class Opts(Model):
    """Every exported option away from its default, as class attributes (a portable export)."""

    name = "opts"
    inputs = (("x", "FP32", [-1]),)
    outputs = (("y", "FP32", [3]),)
    max_batch_size = 4
    labels = ("a", "b", "c")
    parameters = MappingProxyType({"note": "kept"})
    device = "cpu"
    max_concurrency = 3

    def predict(self, inputs: Any, context: Any) -> Any:
        return inputs["x"][:, :1].repeat(3, axis=1)


def _read(model: Model, name: str) -> Any:
    """An option as the model holds it, comparable across a config round trip."""
    if name == "inputs":
        return [(d.name, d.datatype, d.dims) for d in model.input_defs()]
    if name == "outputs":
        return [(d.name, d.datatype, d.dims) for d in model.output_defs()]
    if name == "labels":
        return [d.labels for d in model.output_defs()]
    return getattr(model, name)


def _defs(value: Any) -> list[tuple[str, str, list[int]]]:
    return [(n, dt, list(dims)) for n, dt, dims in value]


def test_the_table_is_models_signature_and_attributes() -> None:
    params = list(inspect.signature(Model.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [o.name for o in MODEL_OPTIONS]
    annotations: dict[str, str] = {}
    for klass in reversed(Model.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    for option, param in zip(MODEL_OPTIONS, params, strict=True):
        assert param.default is None, option.name
        assert str(param.annotation).startswith(option.type.removesuffix(" | None")), option.name
        assert str(param.annotation).endswith("None"), option.name
        assert annotations[option.name] == option.type, option.name
        assert getattr(Model, option.name) == option.default, option.name
    assert set(VALUES) == {o.name for o in MODEL_OPTIONS}


def test_init_sets_every_option_and_keeps_the_class_default_for_none() -> None:
    given = Model(**VALUES)
    for option in MODEL_OPTIONS:
        want = VALUES[option.name]
        assert getattr(given, option.name) == (option.coerce(want) if option.coerce else want)
    empty = Model()
    assert all(getattr(empty, o.name) == o.default for o in MODEL_OPTIONS)


def test_every_option_with_a_config_key_round_trips_through_config_pbtxt() -> None:
    original = Model(**VALUES)
    original.finalize()
    written = model_config_json(original)
    for option in MODEL_OPTIONS:
        if option.config_key:
            assert option.config_key.split(".")[0] in written, option.name
    text = config_to_pbtxt(written)
    fresh = Model()
    apply_config(fresh, parse_pbtxt(text), name=written["name"], model_dir=None)
    for option in MODEL_OPTIONS:
        if not option.config_key or option.name == "labels":
            continue
        if option.name == "parameters":  # the config's own parameters join the model's
            assert VALUES["parameters"].items() <= dict(fresh.parameters or {}).items()
        elif option.name in ("inputs", "outputs"):
            assert _read(fresh, option.name) == _defs(VALUES[option.name]), option.name
        else:
            assert _read(fresh, option.name) == VALUES[option.name], option.name
    # the served config carries labels as a parameter (label_filename is a server-side path)
    assert parse_pbtxt(text)["parameters"]["nbinfer.labels.y"]["string_value"] == '["a", "b", "c"]'


def test_options_without_a_config_key_leave_the_config_alone() -> None:
    base = Model(**{**VALUES, "version": None, "run_in_thread": None})
    base.finalize()
    for option in MODEL_OPTIONS:
        if option.config_key:
            continue
        changed = Model(**VALUES)
        changed.finalize()
        assert getattr(changed, option.name) != getattr(base, option.name), option.name
        assert model_config_json(changed) == model_config_json(base), option.name


def test_the_export_writes_exactly_the_exported_options_and_serves_them_back(
    tmp_path: Path,
) -> None:
    original = Opts()
    path = export_model(original, tmp_path / "repo")
    config = parse_pbtxt((path / "config.pbtxt").read_text(encoding="utf-8"))
    exported = {o.config_key.split(".")[0] for o in MODEL_OPTIONS if o.exported}
    route = {"backend"}  # the format chooses where it runs; the target chooses the device
    assert set(config) == exported | route
    assert config["backend"] == "python"
    assert "device" not in config["parameters"] and "instance_group" not in config

    served = load_model_dir(path)
    assert served is not None
    apply_config(served, config, name="opts", model_dir=path)
    for option in MODEL_OPTIONS:
        if not option.exported:
            continue
        if option.name == "parameters":
            assert dict(served.parameters or {}) == {"note": "kept"}
        else:
            assert _read(served, option.name) == _read(original, option.name), option.name
    assert served.output_defs()[0] == TensorDef(
        "y", "FP32", [3], labels=["a", "b", "c"], label_filename="labels.txt"
    )
