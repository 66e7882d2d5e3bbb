"""The probe models of triton_examples/ (probe_*): each answers the tensors it received (control
inputs included) as one JSON string. One file, written into every probe_*/1/ by
``tests/server/triton_calls.py::examples_repository``."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

NAMES = ("INPUT", "START", "END", "READY", "CORRID")


def _plain(array):
    if array.dtype == np.object_:
        return [x.decode() if isinstance(x, bytes) else str(x) for x in array.ravel()]
    return array.ravel().tolist()


class TritonPythonModel:
    def initialize(self, args):
        self.batched = json.loads(args["model_config"]).get("max_batch_size", 0) > 0

    def execute(self, requests):
        responses = []
        for request in requests:
            seen = {}
            for name in NAMES:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    array = tensor.as_numpy()
                    seen[name] = [str(array.dtype), list(array.shape), _plain(array)]
            text = np.array([json.dumps(seen, sort_keys=True).encode()], dtype=np.object_)
            out = text.reshape(1, 1) if self.batched else text
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
