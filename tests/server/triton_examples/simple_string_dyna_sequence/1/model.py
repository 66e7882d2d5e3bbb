"""simple_string_dyna_sequence stand-in: a running sum per correlation id (kept by the model)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = str(request.correlation_id())
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            flags = request.flags()
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.sums[key] = np.zeros_like(value)
            total = self.sums.get(key, np.zeros_like(value)) + value
            self.sums[key] = total
            out = total
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
                out = total + int(key)
                self.sums.pop(key, None)
            tensor = pb_utils.Tensor("OUTPUT", out.astype(np.int32))
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses
