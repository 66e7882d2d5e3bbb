#!/usr/bin/env python
"""A KServe SDK program as users write it: v2 REST and gRPC clients, request / response types."""

import argparse
import asyncio
import sys

import httpx
import numpy as np
from kserve import (
    InferenceGRPCClient,
    InferenceRESTClient,
    InferInput,
    InferRequest,
    InferResponse,
    RESTConfig,
)


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


async def main(rest_url, grpc_url):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.int32)
    input0 = InferInput(name="INPUT0", shape=[1, 16], datatype="INT32")
    input0.set_data_from_numpy(a, binary_data=False)
    input1 = InferInput(name="INPUT1", shape=[1, 16], datatype="INT32")
    input1.set_data_from_numpy(b, binary_data=False)
    request = InferRequest(model_name="simple", infer_inputs=[input0, input1], request_id="r1")

    # REST, protocol v2
    config = RESTConfig(protocol="v2", timeout=httpx.Timeout(30.0, connect=5.0), retries=2)
    client = InferenceRESTClient(config=config)
    if not await client.is_model_ready(rest_url, "simple"):
        fail("model not ready")
    response = await client.infer(rest_url, request, model_name="simple")
    if not isinstance(response, InferResponse) or response.model_name != "simple":
        fail("response " + str(response))
    if not np.array_equal(response.get_output_by_name("OUTPUT0").as_numpy(), a + b):
        fail("OUTPUT0")
    if not np.array_equal(response.get_output_by_name("OUTPUT1").as_numpy(), a - b):
        fail("OUTPUT1")
    if response.get_output_by_name("NOPE") is not None:
        fail("an unknown output was found")

    # a plain v2 JSON body works as well
    body = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.ravel().tolist()},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b.ravel().tolist()},
        ]
    }
    response = await client.infer(rest_url, body, model_name="simple")
    if response.outputs[0].as_numpy().tolist() != (a + b).tolist():
        fail("dict request")
    await client.close()

    # the types' own codecs
    rest_body, json_length = request.to_rest()
    if json_length is not None or rest_body["inputs"][0]["data"] != a.ravel().tolist():
        fail("to_rest " + str(rest_body))
    again = InferRequest.from_grpc(request.to_grpc())
    if not np.array_equal(again.get_input_by_name("INPUT1").as_numpy(), b):
        fail("to_grpc / from_grpc")
    if request.get_input_by_name("NOPE") is not None:
        fail("an unknown input was found")
    response_body, _ = response.to_rest()
    if InferResponse.from_rest(response_body).outputs[1].as_numpy().tolist() != (a - b).tolist():
        fail("InferResponse.to_rest / from_rest")
    frame = request.as_dataframe()
    if list(frame.columns) != ["INPUT0", "INPUT1"]:
        fail("as_dataframe " + str(frame))

    # gRPC
    grpc_client = InferenceGRPCClient(url=grpc_url)
    if not await grpc_client.is_server_ready():
        fail("gRPC server not ready")
    response = await grpc_client.infer(infer_request=request)
    if not np.array_equal(response.outputs[0].as_numpy(), a + b):
        fail("gRPC OUTPUT0")
    if not np.array_equal(InferResponse.from_grpc(response.to_grpc()).outputs[1].as_numpy(), a - b):
        fail("gRPC response round trip")
    await grpc_client.close()
    print("PASS: kserve v2")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rest-url", default="http://localhost:8080")
    parser.add_argument("--grpc-url", default="localhost:8081")
    args = parser.parse_args()
    asyncio.run(main(args.rest_url, args.grpc_url))
