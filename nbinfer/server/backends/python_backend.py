"""Triton Python backend: run an unchanged ``TritonPythonModel`` as an nbinfer model.

A repository entry with ``backend: "python"`` and ``<N>/model.py`` defining ``class
TritonPythonModel`` (``initialize(args)``, ``execute(requests) -> responses``, ``finalize()``)
is imported with :mod:`nbinfer.server.backends.triton_utils` registered as
``triton_python_backend_utils``. Each inference request becomes one ``pb_utils.InferenceRequest``
passed to ``execute([request])``; an error response (or an exception) becomes an
:class:`~nbinfer.errors.InferenceError` carrying the model's message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import queue
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import nbinfer.server.backends.triton_utils as pb_utils
from nbinfer.errors import InferenceError, InvalidInputError
from nbinfer.protocol.dtypes import triton_type
from nbinfer.server.backends.scripts import SysPath, import_script
from nbinfer.server.model import InferContext, Model
from nbinfer.server.model_config import config_tensor_defs
from nbinfer.server.pbtxt import config_device

__all__ = ["TritonPythonBackendModel", "import_triton_model"]

logger = logging.getLogger("nbinfer")

# How often a decoupled model's stream checks whether its client gave up.
_POLL_SECONDS = 0.25


def import_triton_model(script: Path, name: str, version: str) -> type[Any]:
    """Import ``script`` with the shim installed and return its ``TritonPythonModel`` class.

    Raises:
        InvalidInputError: the import fails or the file defines no ``TritonPythonModel``.
    """
    pb_utils.install()
    module = import_script(script, "nbinfer_triton_model", name, version, search=script.parent)
    cls = getattr(module, "TritonPythonModel", None)
    if not isinstance(cls, type):
        raise InvalidInputError(f"{script} defines no class TritonPythonModel")
    return cls


class TritonPythonBackendModel(Model):
    """A Triton Python-backend model (``TritonPythonModel``) served by nbinfer.

    Build it with :meth:`from_config` (the repository does); the config's ``input`` / ``output``
    (or the class's ``auto_complete_config``) declare the tensors.

    Args:
        model_class: The ``TritonPythonModel`` class.
        name: Model name.
        model_dir: The model directory (``args["model_repository"]``).
        version: The version (``args["model_version"]``).
        config: The Triton-shaped config (``args["model_config"]``).
    """

    platform = ""
    backend = "python"

    def __init__(
        self,
        model_class: type[Any],
        *,
        name: str,
        model_dir: Path,
        version: str = "1",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        cfg = dict(config or {})
        device = config_device(cfg) or "auto"
        super().__init__(
            name,
            inputs=config_tensor_defs(cfg, "input"),
            outputs=config_tensor_defs(cfg, "output"),
            max_batch_size=int(cfg.get("max_batch_size", 0) or 0),
            version=version,
            device="cpu" if device == "auto" else device,
        )
        self.model_class = model_class
        self.model_dir = Path(model_dir)
        self.config = cfg
        # Triton's decoupled models answer through get_response_sender(): 0..N responses
        self.decoupled = bool((cfg.get("model_transaction_policy") or {}).get("decoupled"))
        self.instance: Any = None
        # Triton runs one execute() at a time per model instance; models may rely on it.
        self._execute_lock = threading.Lock()
        if not self.input_defs() and not self.output_defs():
            raise InvalidInputError(
                f"Python-backend model {name!r} declares no inputs / outputs: add 'input' and "
                "'output' to its config.pbtxt (or define auto_complete_config)"
            )

    @classmethod
    def from_config(
        cls, model_dir: Path, version_dir: Path, config: dict[str, Any], *, name: str
    ) -> TritonPythonBackendModel:
        """Import ``<version_dir>/model.py`` and wrap its ``TritonPythonModel``.

        A class ``auto_complete_config`` completes ``config`` in place, as in Triton.

        Raises:
            InvalidInputError: no ``model.py`` / no ``TritonPythonModel`` / bad declarations.
        """
        script = version_dir / "model.py"
        if not script.is_file():
            raise InvalidInputError(
                f"model {name!r}: no model.py in {version_dir} (backend python)"
            )
        model_class = import_triton_model(script, name, version_dir.name)
        auto = getattr(model_class, "auto_complete_config", None)
        if callable(auto):
            given = pb_utils.ModelConfig({"name": name, **config})
            try:
                completed = auto(given)
            except Exception as exc:
                raise InvalidInputError(
                    f"model {name!r}: auto_complete_config raised {type(exc).__name__}: {exc}"
                ) from exc
            result = completed if isinstance(completed, pb_utils.ModelConfig) else given
            for key, value in result.as_dict().items():
                if key != "name":
                    config[key] = value
        return cls(
            model_class, name=name, model_dir=model_dir, version=version_dir.name, config=config
        )

    def _full_config(self) -> dict[str, Any]:
        cfg = dict(self.config)
        cfg["name"] = self.name
        cfg["backend"] = "python"
        cfg["max_batch_size"] = int(self.max_batch_size)
        for key, defs in (("input", self.input_defs()), ("output", self.output_defs())):
            given = {str(e.get("name")): e for e in cfg.get(key) or [] if isinstance(e, Mapping)}
            entries = []
            for d in defs:
                entry = dict(given.get(d.name, {}))
                entry.update(
                    {
                        "name": d.name,
                        "data_type": triton_type(d.datatype),
                        "dims": list(d.dims),
                    }
                )
                entries.append(entry)
            cfg[key] = entries
        return cfg

    def load(self) -> None:
        """Instantiate ``TritonPythonModel`` and call ``initialize(args)``."""
        gpu = self.device.startswith("cuda")
        args = {
            "model_config": json.dumps(self._full_config()),
            "model_instance_kind": "GPU" if gpu else "CPU",
            "model_instance_name": f"{self.name}_0_0",
            "model_instance_device_id": self.device.split(":", 1)[1] if gpu else "0",
            "model_repository": str(self.model_dir),
            "model_version": str(self.version),
            "model_name": self.name,
        }
        instance = self.model_class()
        init = getattr(instance, "initialize", None)
        if callable(init):
            with SysPath(self.model_dir / str(self.version)):
                init(args)
        self.instance = instance

    def unload(self) -> None:
        """Call ``finalize()`` when the model defines it."""
        instance, self.instance = self.instance, None
        fin = getattr(instance, "finalize", None)
        if callable(fin):
            fin()

    def _request(
        self,
        inputs: dict[str, Any],
        context: InferContext,
        sender: pb_utils.ResponseSender | None = None,
    ) -> pb_utils.InferenceRequest:
        params = dict(context.parameters)
        correlation = params.get("sequence_id", 0)
        flags = 0
        if params.get("sequence_start"):
            flags |= pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
        if params.get("sequence_end"):
            flags |= pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
        version = int(self.version) if str(self.version).isdigit() else -1
        return pb_utils.InferenceRequest(
            model_name=self.name,
            inputs=[pb_utils.Tensor(n, a) for n, a in inputs.items()],
            requested_output_names=list(context.requested_outputs),
            correlation_id=correlation if isinstance(correlation, int | str) else 0,
            request_id=context.request_id,
            flags=flags,
            parameters=params,
            model_version=version,
            sender=sender,
        )

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        """Run ``execute([request])`` and return the response's tensors by name.

        A decoupled model (``model_transaction_policy { decoupled: true }``) gives an iterator
        of the responses it sends through ``get_response_sender()``, until the final flag.

        Raises:
            InferenceError: the response carries an error or ``execute`` raised.
        """
        if self.decoupled:
            return self._stream(inputs, context)
        if len(context.merged) > 1:
            return self._predict_merged(inputs, context)
        request = self._request(inputs, context)
        result = self._execute(request)
        return self._tensors(self._single_response(result, request), context)

    def _predict_merged(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """A merged batch as Triton hands it over: one request per client request.

        Each request has its own rows, parameters, correlation id and flags, all in one
        ``execute()``; the responses' tensors are joined again along the batch axis.
        """
        requests = []
        start = 0
        for row_context, rows in context.merged:
            own = dataclasses.replace(row_context, requested_outputs=context.requested_outputs)
            part = {name: array[start : start + rows] for name, array in inputs.items()}
            requests.append(self._request(part, own))
            start += rows
        result = self._execute(*requests)
        if not isinstance(result, list | tuple) or len(result) != len(requests):
            got = len(result) if isinstance(result, list | tuple) else type(result).__name__
            raise InferenceError(
                f"model {self.name!r}: execute() gave {got} responses for {len(requests)} "
                "requests; it must return one InferenceResponse per request",
                model=self.name,
            )
        parts = [self._tensors(response, context) for response in result]
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}

    def _execute(self, *requests: pb_utils.InferenceRequest) -> Any:
        instance = self.instance
        if instance is None:
            raise InferenceError(f"model {self.name!r} is not loaded", model=self.name)
        try:
            with self._execute_lock:
                result = instance.execute(list(requests))
                if inspect.isawaitable(result):
                    result = asyncio.run(_awaited(result))
        except InferenceError:
            raise
        except Exception as exc:
            message = exc.message() if isinstance(exc, pb_utils.TritonError) else str(exc)
            raise InferenceError(
                f"model {self.name!r}: {message or type(exc).__name__}", model=self.name
            ) from exc
        return result

    def _tensors(
        self, response: pb_utils.InferenceResponse, context: InferContext
    ) -> dict[str, Any]:
        error = response.error()
        if error is not None:
            raise InferenceError(f"model {self.name!r}: {error.message()}", model=self.name)
        params = json.loads(response.parameters() or "{}")
        if isinstance(params, dict) and params:
            context.response_parameters.update(params)
        return {t.name(): t.as_numpy() for t in response.output_tensors()}

    def _stream(self, inputs: dict[str, Any], context: InferContext) -> Iterator[dict[str, Any]]:
        """The responses of a decoupled model, as it sends them (from any of its threads)."""
        sent: queue.SimpleQueue[Any] = queue.SimpleQueue()
        sender = pb_utils.ResponseSender(sent, cancelled=lambda: context.cancelled)
        result = self._execute(self._request(inputs, context, sender))
        for response in result or ():  # a decoupled execute() should return None
            yield self._tensors(response, context)
        while True:
            try:
                response, final = sent.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if context.cancelled:
                    return
                continue
            if response is not None:
                yield self._tensors(response, context)
            if final:
                return

    def _single_response(
        self, result: Any, request: pb_utils.InferenceRequest
    ) -> pb_utils.InferenceResponse:
        sent = request.get_response_sender().responses
        if result is None:
            responses = sent  # decoupled: responses went through the sender
        elif isinstance(result, list | tuple):
            responses = list(result)
        else:
            raise InferenceError(
                f"model {self.name!r}: execute() must return a list of InferenceResponse, got "
                f"{type(result).__name__}",
                model=self.name,
            )
        if len(responses) != 1:
            raise InferenceError(
                f"model {self.name!r}: execute() gave {len(responses)} responses for 1 request; "
                "a model sending several declares model_transaction_policy { decoupled: true }",
                model=self.name,
            )
        response = responses[0]
        if not isinstance(response, pb_utils.InferenceResponse):
            raise InferenceError(
                f"model {self.name!r}: execute() returned a {type(response).__name__}, not a "
                "pb_utils.InferenceResponse",
                model=self.name,
            )
        return response

    def __repr__(self) -> str:
        return f"<TritonPythonBackendModel {self.name!r} version={self.version!r}>"


async def _awaited(value: Any) -> Any:
    return await value
