"""simple_sequence / simple_dyna_sequence stand-in: OUTPUT = INPUT + START (+ CORRID at END)."""

import numpy as np
import triton_python_backend_utils as pb_utils


def _control(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = _control(request, "INPUT").astype(np.int64)
            value = value + _control(request, "START")
            end, corrid = _control(request, "END"), _control(request, "CORRID")
            if end is not None and corrid is not None:
                value = value + np.where(end != 0, corrid.astype(np.int64), 0)
            ready = _control(request, "READY")
            value = np.where(ready != 0, value, 0).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", value)]))
        return responses
