"""Seldon MLServer custom runtimes for the interop matrix (run inside MLServer's own venv)."""

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse


class _Tensors(MLModel):
    async def load(self) -> bool:
        return True

    def compute(self, arrays):
        raise NotImplementedError

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        arrays = {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}
        try:
            outputs = self.compute(arrays)
        except KeyError as exc:
            raise InferenceError(f"missing input {exc}") from exc
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[NumpyCodec.encode_output(name, arr) for name, arr in outputs.items()],
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
