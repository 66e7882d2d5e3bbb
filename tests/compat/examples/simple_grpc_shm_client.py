#!/usr/bin/env python
"""A tritonclient.grpc program with system shared memory for inputs and outputs."""

import argparse
import os
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient import utils

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-u", "--url", type=str, default="localhost:8001")
    FLAGS = parser.parse_args()

    triton_client = grpcclient.InferenceServerClient(url=FLAGS.url)
    triton_client.unregister_system_shared_memory()

    model_name = "simple"
    suffix = str(os.getpid())
    input0_data = np.arange(start=0, stop=16, dtype=np.int32)
    input1_data = np.ones(shape=16, dtype=np.int32)
    input_byte_size = input0_data.size * input0_data.itemsize
    output_byte_size = input_byte_size

    shm_op0_handle = shm.create_shared_memory_region(
        "output0_data", "/output0_simple" + suffix, output_byte_size
    )
    shm_op1_handle = shm.create_shared_memory_region(
        "output1_data", "/output1_simple" + suffix, output_byte_size
    )
    triton_client.register_system_shared_memory(
        "output0_data", "/output0_simple" + suffix, output_byte_size
    )
    triton_client.register_system_shared_memory(
        "output1_data", "/output1_simple" + suffix, output_byte_size
    )

    shm_ip_handle = shm.create_shared_memory_region(
        "input_data", "/input_simple" + suffix, input_byte_size * 2
    )
    shm.set_shared_memory_region(shm_ip_handle, [input0_data])
    shm.set_shared_memory_region(shm_ip_handle, [input1_data], offset=input_byte_size)
    triton_client.register_system_shared_memory(
        "input_data", "/input_simple" + suffix, input_byte_size * 2
    )

    status = triton_client.get_system_shared_memory_status()
    if len(status.regions) != 3:
        print("FAILED: status " + str(status))
        sys.exit(1)

    inputs = [
        grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
        grpcclient.InferInput("INPUT1", [1, 16], "INT32"),
    ]
    inputs[0].set_shared_memory("input_data", input_byte_size)
    inputs[1].set_shared_memory("input_data", input_byte_size, offset=input_byte_size)

    outputs = [
        grpcclient.InferRequestedOutput("OUTPUT0"),
        grpcclient.InferRequestedOutput("OUTPUT1"),
    ]
    outputs[0].set_shared_memory("output0_data", output_byte_size)
    outputs[1].set_shared_memory("output1_data", output_byte_size)

    results = triton_client.infer(model_name=model_name, inputs=inputs, outputs=outputs)

    output0 = results.get_output("OUTPUT0")
    if output0 is None:
        print("OUTPUT0 is missing in the response.")
        sys.exit(1)
    output0_data = shm.get_contents_as_numpy(
        shm_op0_handle, utils.triton_to_np_dtype(output0.datatype), output0.shape
    )
    output1 = results.get_output("OUTPUT1")
    output1_data = shm.get_contents_as_numpy(
        shm_op1_handle, utils.triton_to_np_dtype(output1.datatype), output1.shape
    )
    for i in range(16):
        print(f"{input0_data[i]} + {input1_data[i]} = {output0_data[0][i]}")
        if (input0_data[i] + input1_data[i]) != output0_data[0][i]:
            print("shm infer error: incorrect sum")
            sys.exit(1)
        if (input0_data[i] - input1_data[i]) != output1_data[0][i]:
            print("shm infer error: incorrect difference")
            sys.exit(1)

    triton_client.unregister_system_shared_memory()
    for handle in (shm_ip_handle, shm_op0_handle, shm_op1_handle):
        shm.destroy_shared_memory_region(handle)
    print("PASS: system shared memory")
