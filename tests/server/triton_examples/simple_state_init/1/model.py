"""Implicit state: OUTPUT = ACC_IN + INPUT, written back as ACC_OUT for the next request."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            acc = pb_utils.get_input_tensor_by_name(request, "ACC_IN").as_numpy()
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            total = (acc + value).astype(acc.dtype)
            tensors = [pb_utils.Tensor("OUTPUT", total), pb_utils.Tensor("ACC_OUT", total)]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
