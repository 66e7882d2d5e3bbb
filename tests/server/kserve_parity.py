"""KServe's own code against nbinfer, and a KServe explainer for nbinfer's client; a subprocess.

Never import this module (or kserve) in the pytest process: kserve parses ``sys.argv`` at import
and registers ``inference.*`` protos in protobuf's default pool, which clashes with tritonclient.

* ``python kserve_parity.py clients --url http://127.0.0.1:P`` runs KServe's
  ``InferenceRESTClient`` (v1 and v2: health, model metadata / readiness, infer, explain) against
  the server at ``--url`` and prints what it got as one JSON object.
* ``python kserve_parity.py serve --http-port P --grpc-port Q`` serves ``explainer`` (FP32
  ``X`` [-1, 2]): v1 ``:predict`` sums rows, ``:explain`` answers
  ``{"explanations": {"contributions": x / row sum}}``, as a KServe explainer would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


async def _clients(url: str) -> dict[str, Any]:
    import httpx
    from kserve import InferenceRESTClient, RESTConfig
    from kserve.protocol.infer_type import InferInput, InferRequest

    out: dict[str, Any] = {}
    v2 = InferenceRESTClient(RESTConfig(protocol="v2", timeout=30))
    try:
        out["v2_live"] = await v2.is_server_live(url)
        out["v2_ready"] = await v2.is_server_ready(url)
        out["v2_model_ready"] = await v2.is_model_ready(url, "add_sub_t")
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        inputs = []
        for name in ("INPUT0", "INPUT1"):
            tensor = InferInput(name=name, shape=[1, 16], datatype="FP32")
            tensor.set_data_from_numpy(x, binary_data=True)
            inputs.append(tensor)
        request = InferRequest(model_name="add_sub_t", infer_inputs=inputs)
        response = await v2.infer(url, request, model_name="add_sub_t")
        out["v2_infer"] = {o.name: o.as_numpy().tolist() for o in response.outputs}
    finally:
        await v2.close()
    # InferenceRESTClient has no v2 metadata call: KServe users read it with httpx
    async with httpx.AsyncClient(timeout=30) as http:
        out["v2_metadata"] = (await http.get(f"{url}/v2/models/add_sub_t")).json()
    v1 = InferenceRESTClient(RESTConfig(protocol="v1", timeout=30))
    try:
        out["v1_live"] = await v1.is_server_live(url)
        out["v1_model_ready"] = await v1.is_model_ready(url, "explained")
        out["v1_predict"] = await v1.infer(url, {"instances": [[1.0, 3.0]]}, model_name="explained")
        out["v1_explain"] = await v1.explain(url, "explained", {"instances": [[1.0, 3.0]]})
    finally:
        await v1.close()
    return out


def _serve(http_port: int, grpc_port: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
    import kserve
    from kserve_server import _bind_loopback  # the suite's KServe peer: loopback only

    _bind_loopback()

    class Explainer(kserve.Model):
        def __init__(self) -> None:
            super().__init__("explainer")
            self.ready = True

        def predict(self, payload: Any, headers: Any = None) -> Any:
            x = np.asarray(payload["instances"], dtype=np.float32)
            return {"predictions": x.sum(axis=1).tolist()}

        def explain(self, payload: Any, headers: Any = None) -> Any:
            x = np.asarray(payload["instances"], dtype=np.float32)
            share = x / x.sum(axis=1, keepdims=True)
            return {"explanations": {"contributions": share.tolist()}}

    kserve.ModelServer(http_port=http_port, grpc_port=grpc_port, workers=1).start([Explainer()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["clients", "serve"])
    parser.add_argument("--url", default="")
    parser.add_argument("--http-port", type=int, default=0)
    parser.add_argument("--grpc-port", type=int, default=0)
    args, _ = parser.parse_known_args()
    if args.mode == "clients":
        print(json.dumps(asyncio.run(_clients(args.url))))
    else:
        _serve(args.http_port, args.grpc_port)


if __name__ == "__main__":
    main()
