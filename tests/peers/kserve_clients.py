"""KServe's own ``InferenceRESTClient`` (v1 and v2) against a v2 server; run in the kserve venv.

Usage: ``python tests/peers/kserve_clients.py < case.json``; prints one JSON object.

Runs only inside the ``kserve`` peer virtualenv (``venvs.py``): it imports kserve, whose protos
clash with tritonclient's, and never imports nbinfer. The case on stdin names the server and the
data (so the test computes what it expects)::

    {"url": "http://127.0.0.1:P", "fp32_model": "add_sub", "fp32": {"INPUT0": [[...]], ...},
     "int64_model": "times_two", "int64": {"INPUT0": [...]}, "v1_model": "times_two",
     "v1_instances": [...]}

Every v2 tensor goes as JSON (``binary_data=False``: no binary extension involved). What is
printed: ``v2`` (``live``, ``ready``, ``model_ready``, ``unknown_model_ready``, ``metadata``
as KServe's ``ModelMetadataResponse`` read it, ``fp32`` / ``int64`` answers) and ``v1``
(``live``, ``model_ready``, ``unknown_model_status``, ``predict``). An answer is
``{"model_name", "outputs": {name: {"datatype", "shape", "dtype", "data"}}}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
import numpy as np
from kserve import InferenceRESTClient, RESTConfig
from kserve.protocol.infer_type import InferInput, InferRequest, InferResponse
from kserve.protocol.rest.v2_datamodels import ModelMetadataResponse


def _answer(response: InferResponse) -> dict[str, Any]:
    outputs = {}
    for out in response.outputs:
        arr = out.as_numpy()
        outputs[out.name] = {
            "datatype": out.datatype,
            "shape": list(out.shape),
            "dtype": str(arr.dtype),
            "data": arr.tolist(),
        }
    return {"model_name": response.model_name, "outputs": outputs}


async def _infer(
    client: InferenceRESTClient, url: str, model: str, tensors: dict[str, Any], dtype: str
) -> dict[str, Any]:
    inputs = []
    for name, values in tensors.items():
        arr = np.asarray(values, dtype=dtype)
        datatype = {"float32": "FP32", "int64": "INT64"}[dtype]
        tensor = InferInput(name=name, shape=list(arr.shape), datatype=datatype)
        tensor.set_data_from_numpy(arr, binary_data=False)
        inputs.append(tensor)
    request = InferRequest(model_name=model, infer_inputs=inputs)
    response = await client.infer(url, request, model_name=model)
    assert isinstance(response, InferResponse), type(response)
    return _answer(response)


async def _v2(case: dict[str, Any]) -> dict[str, Any]:
    url = case["url"]
    out: dict[str, Any] = {}
    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=30))
    try:
        out["live"] = await client.is_server_live(url)
        out["ready"] = await client.is_server_ready(url)
        out["model_ready"] = await client.is_model_ready(url, case["fp32_model"])
        out["unknown_model_ready"] = await client.is_model_ready(url, "no_such_model")
        out["fp32"] = await _infer(client, url, case["fp32_model"], case["fp32"], "float32")
        out["int64"] = await _infer(client, url, case["int64_model"], case["int64"], "int64")
    finally:
        await client.close()
    # InferenceRESTClient has no metadata call: KServe users GET it and read it with KServe's
    # own response model (which validates every field).
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(f"{url}/v2/models/{case['fp32_model']}")
        reply.raise_for_status()
        out["metadata"] = ModelMetadataResponse.model_validate(reply.json()).model_dump()
    return out


async def _v1(case: dict[str, Any]) -> dict[str, Any]:
    url = case["url"]
    out: dict[str, Any] = {}
    client = InferenceRESTClient(RESTConfig(protocol="v1", timeout=30))
    try:
        out["live"] = await client.is_server_live(url)
        out["model_ready"] = await client.is_model_ready(url, case["v1_model"])
        try:  # v1 raises for anything but 2xx / 503
            await client.is_model_ready(url, "no_such_model")
            out["unknown_model_status"] = 200
        except httpx.HTTPStatusError as exc:
            out["unknown_model_status"] = exc.response.status_code
        payload = {"instances": case["v1_instances"]}
        out["predict"] = await client.infer(url, payload, model_name=case["v1_model"])
    finally:
        await client.close()
    return out


async def _main(case: dict[str, Any]) -> dict[str, Any]:
    return {"v2": await _v2(case), "v1": await _v1(case)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(json.load(sys.stdin)))))
