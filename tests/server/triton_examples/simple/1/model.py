"""`simple` stand-in: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32 [-1, 16]).

Its tensors are completed by ``auto_complete_config`` as Triton's platforms complete the real
``simple``'s from its model file, so a load with a config override that names only
``max_batch_size`` (what ``simple_*_model_control.py`` sends) keeps them.
"""

import triton_python_backend_utils as pb_utils

TENSORS = {
    "input": [{"name": f"INPUT{i}", "data_type": "TYPE_INT32", "dims": [16]} for i in (0, 1)],
    "output": [{"name": f"OUTPUT{i}", "data_type": "TYPE_INT32", "dims": [16]} for i in (0, 1)],
}


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        given = config.as_dict()
        for kind, add in (("input", config.add_input), ("output", config.add_output)):
            have = {entry["name"] for entry in given.get(kind) or []}
            for entry in TENSORS[kind]:
                if entry["name"] not in have:
                    add(entry)
        return config

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
