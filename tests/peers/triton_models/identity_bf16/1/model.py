"""BF16 in, the same BF16 out, on Triton's Python backend.

numpy has no bfloat16 (``as_numpy()`` refuses BF16 tensors), so the tensor passes through
DLPack, as Triton's python_backend README advises for BF16.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            output = pb_utils.Tensor.from_dlpack("OUTPUT0", tensor.to_dlpack())
            responses.append(pb_utils.InferenceResponse([output]))
        return responses
