#!/usr/bin/env python
"""A tritonclient.http program as users write it: add / subtract two INT32 vectors."""

import argparse
import sys

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-v", "--verbose", action="store_true", default=False)
    parser.add_argument("-u", "--url", type=str, default="localhost:8000")
    FLAGS = parser.parse_args()

    try:
        triton_client = httpclient.InferenceServerClient(url=FLAGS.url, verbose=FLAGS.verbose)
    except Exception as e:
        print("client creation failed: " + str(e))
        sys.exit(1)

    if not triton_client.is_server_live() or not triton_client.is_server_ready():
        print("FAILED: server not live / ready")
        sys.exit(1)
    model_name = "simple"
    if not triton_client.is_model_ready(model_name):
        print("FAILED: model not ready")
        sys.exit(1)

    metadata = triton_client.get_server_metadata()
    if "binary_tensor_data" not in metadata["extensions"]:
        print("FAILED: server metadata " + str(metadata))
        sys.exit(1)
    model_metadata = triton_client.get_model_metadata(model_name)
    if model_metadata["name"] != model_name or len(model_metadata["inputs"]) != 2:
        print("FAILED: model metadata " + str(model_metadata))
        sys.exit(1)

    input0_data = np.arange(start=0, stop=16, dtype=np.int32).reshape(1, 16)
    input1_data = np.full(shape=(1, 16), fill_value=-1, dtype=np.int32)

    inputs = [
        httpclient.InferInput("INPUT0", [1, 16], "INT32"),
        httpclient.InferInput("INPUT1", [1, 16], "INT32"),
    ]
    # one input as JSON, one as binary tensor data
    inputs[0].set_data_from_numpy(input0_data, binary_data=False)
    inputs[1].set_data_from_numpy(input1_data, binary_data=True)

    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=False),
    ]
    results = triton_client.infer(model_name, inputs, outputs=outputs, request_id="7")

    output0_data = results.as_numpy("OUTPUT0")
    output1_data = results.as_numpy("OUTPUT1")
    for i in range(16):
        print(f"{input0_data[0][i]} + {input1_data[0][i]} = {output0_data[0][i]}")
        print(f"{input0_data[0][i]} - {input1_data[0][i]} = {output1_data[0][i]}")
        if (input0_data[0][i] + input1_data[0][i]) != output0_data[0][i]:
            print("sync infer error: incorrect sum")
            sys.exit(1)
        if (input0_data[0][i] - input1_data[0][i]) != output1_data[0][i]:
            print("sync infer error: incorrect difference")
            sys.exit(1)

    response = results.get_response()
    if response["model_name"] != model_name or response.get("id") != "7":
        print("FAILED: response " + str(response))
        sys.exit(1)
    if results.get_output("OUTPUT1")["datatype"] != "INT32" or results.as_numpy("NOPE") is not None:
        print("FAILED: get_output / as_numpy of a missing output")
        sys.exit(1)

    # async_infer: a handle whose get_result() waits
    async_requests = [triton_client.async_infer(model_name, inputs) for _ in range(4)]
    for request in async_requests:
        if not np.array_equal(request.get_result().as_numpy("OUTPUT0"), output0_data):
            print("async infer error")
            sys.exit(1)

    statistics = triton_client.get_inference_statistics(model_name=model_name)
    if len(statistics["model_stats"]) != 1:
        print("FAILED: Inference Statistics")
        sys.exit(1)

    try:
        triton_client.infer("no_such_model", inputs)
        print("FAILED: an unknown model answered")
        sys.exit(1)
    except InferenceServerException as e:
        if e.status() != "404" or "no_such_model" not in e.message():
            print("FAILED: unexpected error " + str(e))
            sys.exit(1)

    try:
        bad = httpclient.InferInput("INPUT0", [1, 16], "INT32")
        bad.set_data_from_numpy(np.zeros((1, 16), dtype=np.float32))
        print("FAILED: a float32 array was accepted for INT32")
        sys.exit(1)
    except InferenceServerException:
        pass

    triton_client.close()
    print("PASS: infer")
