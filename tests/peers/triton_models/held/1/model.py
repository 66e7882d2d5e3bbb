"""FP32 in, the same out, after holding the request a while, on Triton's Python backend.

For tests that need a request provably in flight on Triton: a request parameter ``started``
names a file this model creates when it begins a request (the test waits for it), and
``hold_s`` how long it then keeps the request (and every shared-memory region it names).
"""

import json
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters() or "{}")
            if params.get("started"):
                Path(params["started"]).touch()
            time.sleep(float(params.get("hold_s", 0.0)))
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", tensor.as_numpy())])
            )
        return responses
