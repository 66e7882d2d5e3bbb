"""ONNX Runtime backend: serve a ``.onnx`` file as an nbinfer :class:`~nbinfer.server.model.Model`.

Inputs and outputs come from the session's metadata (ONNX element types -> v2 datatypes,
symbolic / unknown dims -> -1). With ``max_batch_size > 0`` the first dim of every tensor is the
batch dim and is left out of the declarations (Triton semantics). Example::

    m = OnnxModel("model.onnx", name="mlp")
    repo = ModelRepository(models=[m])

Triton layout: ``<repo>/<model>/<N>/model.onnx`` with ``platform: "onnxruntime_onnx"``.

Layer: server backend; imports errors, protocol and server modules only, onnxruntime lazily
(the [onnx] extra); never the client, session or notebook layers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.server.backends.optional import require
from nbinfer.server.devices import check_device_request, cpu_fallback
from nbinfer.server.model import InferContext, Model, TensorDef, as_tensor_def
from nbinfer.server.model_config import config_tensor_defs, server_fed_tensors
from nbinfer.server.pbtxt import config_device

__all__ = ["ONNX_TO_V2", "OnnxModel", "onnx_providers"]

logger = logging.getLogger("nbinfer")

#: ONNX Runtime type strings -> v2 datatypes.
ONNX_TO_V2: dict[str, str] = {
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(float16)": "FP16",
    "tensor(bfloat16)": "BF16",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(bool)": "BOOL",
    "tensor(string)": "BYTES",
}


def _ort() -> Any:
    return require("onnxruntime", what="ONNX models")


def onnx_providers(device: str) -> tuple[list[Any], str]:
    """The execution providers for ``device`` and the device actually used.

    ``"auto"`` picks CUDA when ONNX Runtime has the CUDA provider, else the CPU (with a warning
    logged once); ``"cuda:N"`` without the CUDA provider is an error, as for every backend.

    Raises:
        InvalidInputError: a CUDA device that this machine or this onnxruntime cannot give.
    """
    dev = check_device_request(device)
    has_cuda = "CUDAExecutionProvider" in set(_ort().get_available_providers())
    if dev == "auto":
        if not has_cuda:
            return ["CPUExecutionProvider"], cpu_fallback(
                "auto", "this onnxruntime has no CUDAExecutionProvider"
            )
        dev = "cuda:0"
    if dev.startswith(("cuda", "gpu")):
        index = int(dev.split(":", 1)[1]) if ":" in dev else 0
        if not has_cuda:
            raise InvalidInputError(
                f"device {device!r} cannot be used: this onnxruntime has no "
                "CUDAExecutionProvider (install onnxruntime-gpu); use device='cpu' or 'auto'"
            )
        cuda = ("CUDAExecutionProvider", {"device_id": index})
        return [cuda, "CPUExecutionProvider"], f"cuda:{index}"
    return ["CPUExecutionProvider"], "cpu"


def _dims(shape: Sequence[Any]) -> list[int]:
    return [int(d) if isinstance(d, int) and d > 0 else -1 for d in shape]


def _compatible(declared: Sequence[int], actual: Sequence[int]) -> bool:
    if len(declared) != len(actual):
        return False
    return all(d == a or d == -1 or a == -1 for d, a in zip(declared, actual, strict=True))


class OnnxModel(Model):
    """An ONNX model served by ONNX Runtime.

    Args:
        path: The ``.onnx`` file.
        name: Model name.
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda:N"`` or ``""`` (the
            server's ``--device``).
        max_batch_size: 0 = declarations are the full shapes; > 0 = the first dim of every
            tensor is the batch dim (must be dynamic in the file) and is left out.
        inputs: Optional declarations overriding the file's (e.g. more specific dims); names
            must exist in the file and datatypes / ranks must agree.
        outputs: Optional declarations; may name a subset of the file's outputs.
        labels: Class labels (see :class:`~nbinfer.server.model.Model`).
        version: Model version.
        session_options: An ``onnxruntime.SessionOptions``.

    Example::

        m = OnnxModel("model.onnx", name="mlp", max_batch_size=8)

    Raises:
        ImportError: onnxruntime is not installed (``pip install 'nbinfer[onnx]'``).
        InvalidInputError: the file is missing or the declarations contradict it.
    """

    platform = "onnxruntime_onnx"
    backend = "onnxruntime"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str,
        device: str = "",
        max_batch_size: int = 0,
        inputs: Sequence[Any] | None = None,
        outputs: Sequence[Any] | None = None,
        labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
        version: str | int = "1",
        session_options: Any = None,
    ) -> None:
        super().__init__(
            name,
            max_batch_size=max_batch_size,
            labels=labels,
            version=version,
            device=device,
        )
        self.path = Path(path)
        if not self.path.is_file():
            raise InvalidInputError(f"ONNX model {name!r}: file {str(self.path)!r} not found")
        self.session_options = session_options
        self._declared_inputs = list(inputs) if inputs is not None else None
        self._declared_outputs = list(outputs) if outputs is not None else None
        self._session: Any = None
        self._session_device = ""
        # A first session reads the file's tensors; load() reopens it on the device the
        # repository resolved (resolve_device), which is where an unmet request fails.
        self._session, self._session_device = self._open(device if device == "auto" else "cpu")
        if device == "auto":
            # resolved from ONNX Runtime's providers (no torch import needed to find a GPU)
            self.device = self._session_device
        meta = self._session
        self._file_inputs = {i.name: self._file_def(i, "input") for i in meta.get_inputs()}
        self._file_outputs = {o.name: self._file_def(o, "output") for o in meta.get_outputs()}
        self._run_outputs: list[str] = []
        #: Graph inputs the server fills (sequence controls, implicit state): never declared.
        self._server_fed: frozenset[str] = frozenset()

    @classmethod
    def from_config(
        cls, path: Path, config: Mapping[str, Any], *, name: str, version: str = "1"
    ) -> OnnxModel:
        """Build from a Triton config (max_batch_size, input / output, instance_group)."""
        ins = config_tensor_defs(config, "input")
        outs = config_tensor_defs(config, "output")
        model = cls(
            path,
            name=name,
            device=config_device(config) or "",
            max_batch_size=int(config.get("max_batch_size", 0) or 0),
            inputs=ins or None,
            outputs=outs or None,
            version=version,
        )
        # the sequence batcher's control / state inputs are fed by the server
        model._server_fed = server_fed_tensors(config)[0]
        return model

    def _open(self, device: str) -> tuple[Any, str]:
        ort = _ort()
        providers, used = onnx_providers(device)
        try:
            session = ort.InferenceSession(
                str(self.path), sess_options=self.session_options, providers=providers
            )
        except Exception as exc:
            raise InvalidInputError(
                f"ONNX model {self.name!r}: onnxruntime cannot load {str(self.path)!r}: {exc}"
            ) from exc
        if used.startswith("cuda") and "CUDAExecutionProvider" not in session.get_providers():
            raise InvalidInputError(
                f"device {used!r} cannot be used: onnxruntime could not start CUDA for "
                f"{self.name!r}; use device='cpu' or 'auto'"
            )
        return session, used

    def _file_def(self, arg: Any, kind: str) -> TensorDef:
        datatype = ONNX_TO_V2.get(str(arg.type))
        if datatype is None:
            raise InvalidInputError(
                f"ONNX model {self.name!r}: {kind} {arg.name!r} has type {arg.type}, which the "
                f"v2 protocol cannot carry; supported: {', '.join(ONNX_TO_V2)}"
            )
        return TensorDef(arg.name, datatype, _dims(arg.shape or []))

    def _batchless(self, d: TensorDef, kind: str) -> TensorDef:
        if self.max_batch_size <= 0:
            return TensorDef(d.name, d.datatype, list(d.dims))
        if not d.dims or d.dims[0] != -1:
            raise InvalidInputError(
                f"ONNX model {self.name!r}: max_batch_size {self.max_batch_size} needs a dynamic "
                f"first (batch) dim, but {kind} {d.name!r} has shape {d.dims}"
            )
        return TensorDef(d.name, d.datatype, list(d.dims[1:]))

    def _defs(self, kind: str) -> list[TensorDef]:
        file_defs = self._file_inputs if kind == "input" else self._file_outputs
        declared = self._declared_inputs if kind == "input" else self._declared_outputs
        if declared is None:
            return [self._batchless(d, kind) for d in file_defs.values()]
        defs: list[TensorDef] = []
        for item in declared:
            d = as_tensor_def(item, what=f"model {self.name!r} {kind}")
            found = file_defs.get(d.name)
            if found is None:
                raise InvalidInputError(
                    f"ONNX model {self.name!r} has no {kind} {d.name!r}; the file's {kind}s: "
                    f"{', '.join(file_defs)}"
                )
            want = self._batchless(found, kind)
            if d.datatype != want.datatype:
                raise InvalidInputError(
                    f"ONNX model {self.name!r} {kind} {d.name!r}: declared {d.datatype} but the "
                    f"file has {want.datatype}"
                )
            seen = d.reshape if d.reshape is not None else d.dims
            if not _compatible(seen, want.dims):
                raise InvalidInputError(
                    f"ONNX model {self.name!r} {kind} {d.name!r}: declared dims {seen} do not "
                    f"fit the file's {want.dims}"
                    + (" (batch dim excluded: max_batch_size > 0)" if self.max_batch_size else "")
                )
            defs.append(d)
        if kind == "input":
            missing = sorted(set(file_defs) - {d.name for d in defs} - self._server_fed)
            if missing:
                raise InvalidInputError(
                    f"ONNX model {self.name!r}: input(s) {missing} of the file are not declared"
                )
        return defs

    def input_defs(self) -> list[TensorDef]:
        """The inputs: the declared ones checked against the file, else the file's own."""
        cached: list[TensorDef] | None = self.__dict__.get("_input_defs")
        return cached if cached is not None else self._defs("input")

    def output_defs(self) -> list[TensorDef]:
        """The outputs: the declared ones checked against the file, else the file's own."""
        cached: list[TensorDef] | None = self.__dict__.get("_output_defs")
        if cached is not None:
            return cached
        defs = self._defs("output")
        if self.labels is not None:
            saved_outputs, self.outputs = self.outputs, defs
            try:
                defs = super().output_defs()
            finally:
                self.outputs = saved_outputs
        return defs

    def resolve_device(self, device: str) -> str:
        """The device ONNX Runtime gives for ``device`` (its providers, not torch's GPUs).

        Raises:
            InvalidInputError: a CUDA device this machine or this onnxruntime cannot give.
        """
        return onnx_providers(device)[1]

    def load(self) -> None:
        """(Re)open the session when the device the server resolved differs from its own."""
        _, used = onnx_providers(self.device or "auto")
        if self._session is None or used != self._session_device:
            self._session, self._session_device = self._open(used)
        self.device = self._session_device
        self._run_outputs = [d.name for d in self.output_defs()]

    def unload(self) -> None:
        """Drop the session."""
        self._session = None

    def predict(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        """Run the session on the inputs; only the requested outputs are computed."""
        session = self._session
        if session is None:
            raise InvalidInputError(f"ONNX model {self.name!r} is not loaded")
        feeds: dict[str, Any] = {}
        for name, arr in inputs.items():
            if isinstance(arr, np.ndarray) and arr.dtype == object:
                arr = _to_str_array(arr)
            feeds[name] = arr
        names = self._run_outputs or [d.name for d in self.output_defs()]
        # a graph output the config leaves out is computed when asked for (implicit state)
        wanted = [
            n for n in context.requested_outputs if n in names or n in self._file_outputs
        ] or names
        results = session.run(wanted, feeds)
        return dict(zip(wanted, results, strict=True))

    def __repr__(self) -> str:
        return f"<OnnxModel {self.name!r} version={self.version!r} path={str(self.path)!r}>"


def _to_str_array(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """BYTES (object array of bytes) -> object array of str, as ONNX Runtime wants."""
    flat = arr.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for i, v in enumerate(flat):
        out[i] = v.decode("utf-8") if isinstance(v, bytes | bytearray) else str(v)
    return out.reshape(arr.shape)
