"""The batch_* models of triton_examples/: OUTPUT = INPUT + START per row (READY rows only),
after a pause of the config parameter ``pause_s`` per execution, so that requests of other
sequences queue meanwhile and join the next execution. SEEN is what the execution looked like
from each request: [requests in this execute(), this request's correlation id]. One file,
written into every batch_*/1/ by ``tests/server/triton_calls.py::examples_repository``."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _input(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters") or {}
        self.pause = float((params.get("pause_s") or {}).get("string_value", "0"))

    def execute(self, requests):
        time.sleep(self.pause)
        responses = []
        for request in requests:
            value = _input(request, "INPUT") + _input(request, "START")
            value = np.where(_input(request, "READY") != 0, value, 0).astype(np.int32)
            seen = np.array([[len(requests), request.correlation_id()]] * len(value), np.int32)
            outputs = [pb_utils.Tensor("OUTPUT", value), pb_utils.Tensor("SEEN", seen)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
