"""Seldon MLServer custom runtimes for the interop matrix (run inside MLServer's own venv)."""

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


def _array(inp):
    if inp.datatype == "BYTES":  # JSON gives str, gRPC bytes; keep the declared shape
        values = getattr(inp.data, "root", inp.data)
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in values]
        return np.array(flat, dtype=object).reshape(inp.shape)
    return NumpyCodec.decode_input(inp).reshape(inp.shape)


def _output(name, arr):
    if arr.dtype == object:
        flat = [bytes(v) for v in arr.reshape(-1)]
        return ResponseOutput(name=name, shape=list(arr.shape), datatype="BYTES", data=flat)
    out = NumpyCodec.encode_output(name, arr)
    out.shape = list(arr.shape)  # NumpyCodec makes [N] into [N, 1]
    return out


class _Tensors(MLModel):
    async def load(self) -> bool:
        return True

    def compute(self, arrays):
        raise NotImplementedError

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        arrays = {i.name: _array(i) for i in payload.inputs}
        try:
            outputs = self.compute(arrays)
        except KeyError as exc:
            raise InferenceError(f"missing input {exc}") from exc
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[_output(name, arr) for name, arr in outputs.items()],
        )


class AddSub(_Tensors):
    def compute(self, arrays):
        a, b = arrays["INPUT0"], arrays["INPUT1"]
        return {"OUTPUT0": a + b, "OUTPUT1": a - b}


class TimesTwo(_Tensors):
    def compute(self, arrays):
        return {"OUTPUT0": arrays["INPUT0"] * np.int64(2)}


class Upper(_Tensors):
    def compute(self, arrays):
        data = arrays["INPUT0"]
        flat = [bytes(v).upper() for v in data.reshape(-1)]
        return {"OUTPUT0": np.array(flat, dtype=object).reshape(data.shape)}


class Identity(_Tensors):
    def compute(self, arrays):
        return {name.replace("INPUT", "OUTPUT"): arr for name, arr in arrays.items()}
