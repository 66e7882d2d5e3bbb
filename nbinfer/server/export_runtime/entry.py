"""Triton Python-backend entry of a model exported by ``nbinfer export`` (generated).

Layer: stdlib, numpy and Triton's ``triton_python_backend_utils`` only; it reaches nbinfer's code
through the vendored ``nbinfer_runtime.py``.

Serves the model described by ``nbinfer_export.json`` beside this file, through the vendored
runtime ``nbinfer_runtime.py``; see that file. Re-export from the source to change it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any

import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

HERE = os.path.dirname(os.path.abspath(__file__))


def _runtime() -> Any:
    # one module per export directory: several exports may share a process (nbinfer's server)
    name = "nbinfer_runtime_" + "".join(c if c.isalnum() else "_" for c in HERE)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "nbinfer_runtime.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"no nbinfer_runtime.py in {HERE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


class TritonPythonModel:
    """Runs the exported model's hooks for each request."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Build and load the model (Triton calls this once per instance)."""
        with open(os.path.join(HERE, "nbinfer_export.json"), encoding="utf-8") as f:
            settings = json.load(f)
        config = json.loads(args["model_config"])
        self.rt = _runtime()
        self.model = self.rt.load_exported(HERE, settings, config)
        self.model.version = str(args.get("model_version") or self.model.version)
        self.inputs = [str(i["name"]) for i in config.get("input", [])]

    def _infer(self, request: Any) -> Any:
        inputs = {}
        for name in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                inputs[name] = tensor.as_numpy()
        requested = list(request.requested_output_names())
        ctx = self.rt.context(self.model, request.request_id(), request.parameters(), requested)
        result = self.rt.run(self.model, inputs, ctx)
        tensors = [
            pb_utils.Tensor(n, a) for n, a in self.rt.to_arrays(self.model, result, requested)
        ]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def execute(self, requests: list[Any]) -> list[Any]:
        """One response per request; a hook's exception becomes that request's error."""
        responses = []
        for request in requests:
            try:
                responses.append(self._infer(request))
            except Exception as exc:
                error = pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses

    def finalize(self) -> None:
        """Unload the model."""
        self.model.unload()
