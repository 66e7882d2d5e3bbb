#!/usr/bin/env python
"""A tritonclient.grpc program as users write it: sync, async (callback) and streaming."""

import argparse
import queue
import sys
from functools import partial

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def callback(user_data, result, error):
    if error:
        user_data.put(error)
    else:
        user_data.put(result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-v", "--verbose", action="store_true", default=False)
    parser.add_argument("-u", "--url", type=str, default="localhost:8001")
    FLAGS = parser.parse_args()

    try:
        triton_client = grpcclient.InferenceServerClient(url=FLAGS.url, verbose=FLAGS.verbose)
    except Exception as e:
        print("channel creation failed: " + str(e))
        sys.exit()

    model_name = "simple"
    if not (triton_client.is_server_live() and triton_client.is_model_ready(model_name)):
        print("FAILED: server / model not ready")
        sys.exit(1)

    metadata = triton_client.get_model_metadata(model_name)
    if metadata.name != model_name or [i.name for i in metadata.inputs] != ["INPUT0", "INPUT1"]:
        print("FAILED: model metadata " + str(metadata))
        sys.exit(1)
    as_json = triton_client.get_model_metadata(model_name, as_json=True)
    if as_json["name"] != model_name:
        print("FAILED: model metadata as json " + str(as_json))
        sys.exit(1)
    config = triton_client.get_model_config(model_name)
    if config.config.name != model_name:
        print("FAILED: model config " + str(config))
        sys.exit(1)

    inputs = [
        grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
        grpcclient.InferInput("INPUT1", [1, 16], "INT32"),
    ]
    input0_data = np.arange(start=0, stop=16, dtype=np.int32)
    input0_data = np.expand_dims(input0_data, axis=0)
    input1_data = np.ones(shape=(1, 16), dtype=np.int32)
    inputs[0].set_data_from_numpy(input0_data)
    inputs[1].set_data_from_numpy(input1_data)
    outputs = [
        grpcclient.InferRequestedOutput("OUTPUT0"),
        grpcclient.InferRequestedOutput("OUTPUT1"),
    ]

    results = triton_client.infer(
        model_name=model_name, inputs=inputs, outputs=outputs, client_timeout=10.0
    )
    output0_data = results.as_numpy("OUTPUT0")
    output1_data = results.as_numpy("OUTPUT1")
    if not (
        np.array_equal(input0_data + input1_data, output0_data)
        and np.array_equal(input0_data - input1_data, output1_data)
    ):
        print("sync infer error: incorrect results")
        sys.exit(1)
    response = results.get_response()
    if response.model_name != model_name or len(response.outputs) != 2:
        print("FAILED: response " + str(response))
        sys.exit(1)
    if results.get_output("OUTPUT0").datatype != "INT32":
        print("FAILED: get_output")
        sys.exit(1)

    # async_infer with a callback
    user_data = queue.Queue()
    triton_client.async_infer(
        model_name=model_name, inputs=inputs, callback=partial(callback, user_data), outputs=outputs
    )
    data_item = user_data.get(timeout=10)
    if isinstance(data_item, InferenceServerException) or not np.array_equal(
        data_item.as_numpy("OUTPUT0"), output0_data
    ):
        print("async infer error: " + str(data_item))
        sys.exit(1)

    # the bidirectional stream
    stream_data = queue.Queue()
    triton_client.start_stream(callback=partial(callback, stream_data))
    for i in range(3):
        triton_client.async_stream_infer(model_name, inputs, request_id=str(i), outputs=outputs)
    ids = set()
    for _ in range(3):
        item = stream_data.get(timeout=10)
        if isinstance(item, InferenceServerException):
            print("stream infer error: " + str(item))
            sys.exit(1)
        ids.add(item.get_response().id)
        if not np.array_equal(item.as_numpy("OUTPUT1"), output1_data):
            print("stream infer error: incorrect results")
            sys.exit(1)
    triton_client.stop_stream()
    if ids != {"0", "1", "2"}:
        print("stream infer error: ids " + str(ids))
        sys.exit(1)

    # errors carry gRPC status codes
    try:
        triton_client.get_model_metadata("no_such_model")
        print("FAILED: an unknown model answered")
        sys.exit(1)
    except InferenceServerException as e:
        if e.status() != "StatusCode.NOT_FOUND":
            print("FAILED: unexpected error " + str(e))
            sys.exit(1)

    statistics = triton_client.get_inference_statistics(model_name=model_name)
    if len(statistics.model_stats) != 1 or statistics.model_stats[0].inference_count < 5:
        print("FAILED: Inference Statistics " + str(statistics))
        sys.exit(1)

    print("PASS: infer")
