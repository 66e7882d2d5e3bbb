"""Config round-trip model: SCORES = the first four values of each IMAGE."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            scores = image.reshape(image.shape[0], -1)[:, :4].astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORES", scores)]))
        return responses
