"""PyTorch backend: serve an ``nn.Module`` or a TorchScript file as an nbinfer model.

The module runs under ``torch.inference_mode()`` on the resolved device (CUDA when available for
``device="auto"``); NumPy inputs become tensors without a copy (``torch.from_numpy``) and CPU
outputs come back the same way (``Tensor.numpy()``). Example::

    m = TorchModel(net, name="mlp", inputs=[("x", "FP32", [-1, 4])],
                   outputs=[("y", "FP32", [-1, 3])])

Triton layout: ``<repo>/<model>/<N>/model.pt`` (TorchScript) with ``platform:
"pytorch_libtorch"``. As in Triton, tensors named ``<name>__<index>`` (``INPUT__0``,
``OUTPUT__1``) are matched to the forward arguments / returned tuple by index; unnamed
declarations ``(datatype, shape)`` get those names.

Layer: server backend; imports errors, protocol and server modules only, torch lazily (the
[torch] extra); never the client, session or notebook layers.
"""

from __future__ import annotations

import inspect
import logging
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.server.backends.optional import require
from nbinfer.server.devices import resolve_device
from nbinfer.server.model import InferContext, Model, TensorDef, as_tensor_def
from nbinfer.server.model_config import config_tensor_defs
from nbinfer.server.pbtxt import config_device

__all__ = ["TorchModel", "from_numpy", "to_numpy"]

logger = logging.getLogger("nbinfer")

_INDEXED = re.compile(r"^(.*)__(\d+)$")


def _torch() -> Any:
    return require("torch", what="PyTorch models")


_readonly_seen = False


def _from_numpy(torch: Any, arr: np.ndarray[Any, Any]) -> Any:
    global _readonly_seen
    if arr.flags.writeable or _readonly_seen:
        return torch.from_numpy(arr)
    # Request inputs are read-only views of the body (zero-copy). torch warns ONCE per process
    # that such tensors must not be written to; models never write to their inputs, so the
    # first (and only) warning is silenced.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tensor = torch.from_numpy(arr)
    _readonly_seen = True
    return tensor


def from_numpy(arr: np.ndarray[Any, Any], device: str = "cpu") -> Any:
    """NumPy -> torch tensor on ``device`` (no copy on the CPU; BF16 via a bit view).

    Raises:
        InvalidInputError: BYTES / object arrays (torch has no string tensors).
    """
    torch = _torch()
    if arr.dtype == object or arr.dtype.kind in "SU":
        raise InvalidInputError("torch models cannot take BYTES tensors")
    if arr.dtype == numpy_dtype("BF16"):
        tensor = torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    else:
        if any(s < 0 for s in arr.strides):
            arr = np.ascontiguousarray(arr)
        tensor = _from_numpy(torch, arr)
    if device != "cpu":
        tensor = tensor.to(device, non_blocking=True)
    return tensor


def to_numpy(value: Any) -> Any:
    """A torch tensor -> NumPy (no copy for CPU tensors; BF16 via a bit view); others unchanged."""
    torch = _torch()
    if not isinstance(value, torch.Tensor):
        return value
    t = value.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(numpy_dtype("BF16"))
    return t.numpy()


def _normalise(values: Sequence[Any], prefix: str, what: str) -> list[TensorDef]:
    defs: list[TensorDef] = []
    for i, item in enumerate(values):
        unnamed = (
            isinstance(item, tuple | list)
            and len(item) == 2
            and isinstance(item[1], list | tuple | int)
        ) or (isinstance(item, Mapping) and "name" not in item)
        if unnamed:
            if isinstance(item, Mapping):
                item = {**item, "name": f"{prefix}__{i}"}
            else:
                item = (f"{prefix}__{i}", item[0], item[1])
        defs.append(as_tensor_def(item, what=what))
    return defs


def _order(defs: Sequence[TensorDef]) -> list[str]:
    """Names in positional order: by ``__<index>`` when every name has one, else as declared."""
    matches = [_INDEXED.match(d.name) for d in defs]
    if defs and all(matches):
        return [d.name for _, d in sorted(zip(matches, defs, strict=True), key=_index_of)]
    return [d.name for d in defs]


def _index_of(pair: tuple[Any, TensorDef]) -> int:
    return int(pair[0].group(2))


class TorchModel(Model):
    """A PyTorch ``nn.Module`` (eager or TorchScript) or a TorchScript file as a model.

    Args:
        module_or_path: An ``nn.Module`` / ``torch.jit.ScriptModule`` or the path of a
            TorchScript file (``torch.jit.save``).
        name: Model name.
        inputs: Input declarations in forward-argument order (``(name, datatype, shape)``, or
            ``(datatype, shape)`` for Triton's ``INPUT__<i>`` names). When the names are the
            forward's parameter names they are passed by keyword.
        outputs: Output declarations in the order the module returns them (a tensor, a
            tuple / list, or a dict by output name).
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda:N"`` or ``""`` (the
            server's ``--device``).
        max_batch_size: Triton semantics (> 0: declarations exclude the batch dim).
        labels: Class labels (see :class:`~nbinfer.server.model.Model`).
        version: Model version.

    Example::

        m = TorchModel("model.pt", name="mlp", inputs=[("FP32", [-1, 4])],
                       outputs=[("FP32", [-1, 3])])   # INPUT__0 -> OUTPUT__0

    Raises:
        ImportError: torch is not installed (``pip install 'nbinfer[torch]'``).
        InvalidInputError: a missing file or bad declarations.
    """

    platform = "pytorch_libtorch"
    backend = "pytorch"

    def __init__(
        self,
        module_or_path: Any,
        *,
        name: str,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        device: str = "",
        max_batch_size: int = 0,
        labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
        version: str | int = "1",
    ) -> None:
        torch = _torch()
        ins = _normalise(inputs, "INPUT", f"model {name!r} input")
        outs = _normalise(outputs, "OUTPUT", f"model {name!r} output")
        super().__init__(
            name,
            inputs=ins,
            outputs=outs,
            max_batch_size=max_batch_size,
            labels=labels,
            version=version,
            device=device,
        )
        self.path: Path | None = None
        self.module: Any = None
        if isinstance(module_or_path, torch.nn.Module):
            self.module = module_or_path
        else:
            self.path = Path(module_or_path)
            if not self.path.is_file():
                raise InvalidInputError(
                    f"torch model {name!r}: TorchScript file {str(self.path)!r} not found"
                )
        self._input_order = _order(ins)
        self._output_order = _order(outs)
        self._by_keyword = False
        self._live: Any = None

    @classmethod
    def from_config(
        cls, path: Path, config: Mapping[str, Any], *, name: str, version: str = "1"
    ) -> TorchModel:
        """Build from a Triton ``pytorch_libtorch`` config (input / output are required).

        Raises:
            InvalidInputError: the config does not declare the inputs and outputs.
        """
        ins = config_tensor_defs(config, "input")
        outs = config_tensor_defs(config, "output")
        if not ins or not outs:
            raise InvalidInputError(
                f"model {name!r}: a TorchScript model needs 'input' and 'output' in its "
                "config.pbtxt (TorchScript files carry no tensor types)"
            )
        return cls(
            path,
            name=name,
            inputs=ins,
            outputs=outs,
            device=config_device(config) or "",
            max_batch_size=int(config.get("max_batch_size", 0) or 0),
            version=version,
        )

    @property
    def scripted(self) -> bool:
        """Whether the model is TorchScript (a file or a ``ScriptModule``)."""
        torch = _torch()
        return self.path is not None or isinstance(self.module, torch.jit.ScriptModule)

    def _forward_names(self, module: Any) -> list[str]:
        torch = _torch()
        try:
            if isinstance(module, torch.jit.ScriptModule):
                args = module.forward.schema.arguments
                return [a.name for a in args][1:]
            params = inspect.signature(module.forward).parameters.values()
            return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        except (AttributeError, TypeError, ValueError, RuntimeError):
            return []

    def load(self) -> None:
        """Load the TorchScript file / move the module to the device, in eval mode."""
        torch = _torch()
        device = resolve_device(self.device or "auto")
        if self.path is not None:
            try:
                with warnings.catch_warnings():
                    # TorchScript is deprecated in recent torch but is Triton's format
                    warnings.simplefilter("ignore", DeprecationWarning)
                    module = torch.jit.load(str(self.path), map_location=device)
            except Exception as exc:
                raise InvalidInputError(
                    f"torch model {self.name!r}: cannot load TorchScript {str(self.path)!r}: {exc}"
                ) from exc
        else:
            module = self.module.to(device)
        module.eval()
        self.device = device
        self._live = module
        names = set(self._forward_names(module))
        self._by_keyword = bool(names) and all(n in names for n in self._input_order)

    def unload(self) -> None:
        """Release the module (and cached CUDA memory)."""
        self._live = None
        torch = _torch()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def predict(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """Run the module under ``torch.inference_mode()``."""
        torch = _torch()
        module = self._live
        if module is None:
            raise InvalidInputError(f"torch model {self.name!r} is not loaded")
        device = self.device
        with torch.inference_mode():
            if self._by_keyword:
                kwargs = {n: from_numpy(a, device) for n, a in inputs.items()}
                result = module(**kwargs)
            else:
                args = [from_numpy(inputs[n], device) for n in self._input_order if n in inputs]
                result = module(*args)
            return self._outputs(result)

    def _outputs(self, result: Any) -> dict[str, Any]:
        order = self._output_order
        if isinstance(result, Mapping):
            return {str(k): to_numpy(v) for k, v in result.items()}
        if isinstance(result, tuple | list):
            if len(result) < len(order):
                raise InvalidInputError(
                    f"torch model {self.name!r} returned {len(result)} values for "
                    f"{len(order)} declared outputs ({', '.join(order)})"
                )
            return {n: to_numpy(v) for n, v in zip(order, result, strict=False)}
        return {order[0]: to_numpy(result)}

    def __repr__(self) -> str:
        src = str(self.path) if self.path is not None else type(self.module).__name__
        return f"<TorchModel {self.name!r} version={self.version!r} {src}>"
