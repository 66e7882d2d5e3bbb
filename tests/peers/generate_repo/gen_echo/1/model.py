"""Echoes one input of every generate-mappable datatype (``in_<type>`` -> ``out_<type>``).

For the generate-extension datatype tests; runs on real Triton and nbinfer's shim alike.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

TYPES = (
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "fp32",
    "fp64",
    "string",
)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for t in TYPES:
                tensor = pb_utils.get_input_tensor_by_name(request, f"in_{t}")
                outputs.append(pb_utils.Tensor(f"out_{t}", np.ascontiguousarray(tensor.as_numpy())))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
