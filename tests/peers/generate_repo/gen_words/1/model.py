"""A decoupled word-streaming model for the generate-extension tests (Triton Python backend).

Streams ``max_tokens`` responses: the words of ``text_input`` in turn, one per response
(``text_output``, with its ``index``). Request parameters (the generate request's top-level
fields that are not inputs): ``delay_ms`` between words, ``fail_at`` (the response index that
is an error instead), ``cancel_file`` (where the index at which the client's cancellation was
observed is written). Runs on real Triton and on nbinfer's Python-backend shim alike.
"""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            thread = threading.Thread(target=self.stream, args=(request,), daemon=True)
            thread.start()
            self.threads.append(thread)
        return None

    def stream(self, request):
        sender = request.get_response_sender()
        params = json.loads(request.parameters() or "{}")
        text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
        if isinstance(text, bytes):
            text = text.decode()
        words = str(text).split() or [""]
        count = int(
            pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy().reshape(-1)[0]
        )
        delay = float(params.get("delay_ms", 0)) / 1000.0
        fail_at = int(params.get("fail_at", -1))
        cancel_file = params.get("cancel_file", "")
        for i in range(count):
            if sender.is_cancelled():
                if cancel_file:
                    with open(cancel_file, "w") as f:
                        f.write(str(i))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            if i == fail_at:
                error = pb_utils.TritonError(f"gen_words failed at token {i}")
                sender.send(
                    pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return
            word = words[i % len(words)] + " "
            out = pb_utils.Tensor("text_output", np.array([word.encode()], dtype=np.object_))
            idx = pb_utils.Tensor("index", np.array([i], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx]))
            if delay:
                time.sleep(delay)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)
