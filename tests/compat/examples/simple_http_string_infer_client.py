#!/usr/bin/env python
"""A tritonclient.http program with BYTES tensors: numbers sent and returned as strings."""

import argparse
import sys

import numpy as np
import tritonclient.http as httpclient
import tritonclient.utils as utils

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-u", "--url", type=str, default="localhost:8000")
    FLAGS = parser.parse_args()

    client = httpclient.InferenceServerClient(FLAGS.url)
    model_name = "simple_string"

    in0 = np.arange(start=0, stop=16, dtype=np.int32).reshape(1, 16)
    in1 = np.ones(shape=(1, 16), dtype=np.int32)
    expected_sum = in0 + in1
    expected_diff = in0 - in1

    in0_strings = np.array([str(x) for x in in0.reshape(in0.size)], dtype=object).reshape(1, 16)
    in1_strings = np.array(
        [str(x).encode("utf-8") for x in in1.reshape(in1.size)], dtype=np.object_
    )
    in1_strings = in1_strings.reshape(1, 16)

    for binary in (True, False):
        inputs = [
            httpclient.InferInput("INPUT0", in0_strings.shape, "BYTES"),
            httpclient.InferInput(
                "INPUT1", in1_strings.shape, utils.np_to_triton_dtype(np.object_)
            ),
        ]
        inputs[0].set_data_from_numpy(in0_strings, binary_data=binary)
        inputs[1].set_data_from_numpy(in1_strings, binary_data=binary)
        outputs = [
            httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary),
            httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary),
        ]
        results = client.infer(model_name, inputs, outputs=outputs)
        out0 = results.as_numpy("OUTPUT0")
        out1 = results.as_numpy("OUTPUT1")
        for i in range(16):
            print(f"{in0_strings[0][i]} + {in1_strings[0][i]} = {out0[0][i]}")
            if expected_sum[0][i] != int(out0[0][i]) or expected_diff[0][i] != int(out1[0][i]):
                print("error: incorrect result")
                sys.exit(1)

    # the BYTES wire codec of tritonclient.utils
    serialized = utils.serialize_byte_tensor(in0_strings)
    if utils.serialized_byte_size(serialized) != sum(4 + len(str(x)) for x in range(16)):
        print("error: serialized size")
        sys.exit(1)
    round_trip = utils.deserialize_bytes_tensor(serialized.item())
    if [x.decode() for x in round_trip] != [str(x) for x in range(16)]:
        print("error: deserialize_bytes_tensor")
        sys.exit(1)
    if (
        utils.triton_to_np_dtype("INT32") != np.int32
        or utils.triton_to_np_dtype("BYTES") != np.object_
    ):
        print("error: triton_to_np_dtype")
        sys.exit(1)

    print("PASS: string")
