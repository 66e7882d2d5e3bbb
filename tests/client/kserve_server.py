"""A KServe ``ModelServer`` (the real peer) serving small test models; run as a subprocess.

Usage: ``python tests/client/kserve_server.py --http-port P --grpc-port Q``

Never import this module (or kserve) in the pytest process: kserve parses ``sys.argv`` at import
and registers ``inference.*`` protos in protobuf's default pool, which clashes with tritonclient.

Models:

* ``add_sub``    FP32 ``INPUT0``, ``INPUT1`` [-1, 16] -> ``OUTPUT0`` sum, ``OUTPUT1`` difference
* ``add_one``    FP32 ``INPUT0`` [-1, 4] -> ``OUTPUT0`` = INPUT0 + 1 (also KServe v1 ``:predict``)
* ``times_two``  INT64 ``INPUT0`` [-1] -> ``OUTPUT0`` = INPUT0 * 2
* ``upper``      BYTES ``INPUT0`` [-1] -> ``OUTPUT0`` = upper-cased INPUT0
* ``identity_bf16`` BF16 ``INPUT0`` [-1] -> ``OUTPUT0`` = INPUT0 (KServe's codec has no BF16)
* ``broken``     raises ``ValueError`` (an unexpected error in the model)
* ``refusing``   raises ``kserve.errors.InferenceError`` (a model-declared inference failure)

Every v2 model rejects a wrong input name / datatype with ``kserve.errors.InvalidInput``.

KServe 0.21 has no option to choose the listen address: uvicorn is bound to ``0.0.0.0`` and gRPC
to ``[::]`` (both hard-coded). To keep test traffic on loopback this script rewrites those two
addresses to ``127.0.0.1`` before the servers start.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

MAGIC_ERROR = "broken model exploded on purpose"
REFUSAL = "refusing model declines every request"


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    args, _ = parser.parse_known_args()
    return args


def _bind_loopback() -> None:
    """Make KServe's REST (0.0.0.0) and gRPC ([::]) servers listen on 127.0.0.1 only."""
    import grpc.aio._server as grpc_aio_server
    import kserve.protocol.rest.server as rest_server

    rest_init = rest_server.RESTServer.__init__

    def loopback_rest_init(self: Any, *args: Any, **kwargs: Any) -> None:
        rest_init(self, *args, **kwargs)
        self.config.host = "127.0.0.1"

    rest_server.RESTServer.__init__ = loopback_rest_init

    add_port = grpc_aio_server.Server.add_insecure_port

    def loopback_add_port(self: Any, address: str) -> int:
        for wildcard in ("[::]:", "0.0.0.0:"):
            if address.startswith(wildcard):
                address = "127.0.0.1:" + address[len(wildcard) :]
        return add_port(self, address)

    grpc_aio_server.Server.add_insecure_port = loopback_add_port


def main() -> None:  # noqa: C901 - the models are local classes: kserve is imported late
    args = _parse()
    import kserve
    from kserve.errors import InferenceError, InvalidInput
    from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

    _bind_loopback()

    class TensorModel(kserve.Model):
        """One input ``INPUT0`` of ``datatype``, one output ``OUTPUT0`` = ``fn(INPUT0)``."""

        def __init__(self, name: str, datatype: str, shape: list[int], fn: Any) -> None:
            super().__init__(name)
            self.datatype = datatype
            self.shape = shape
            self.fn = fn
            self.ready = True

        def get_input_types(self) -> list[dict[str, Any]]:
            return [{"name": "INPUT0", "datatype": self.datatype, "shape": self.shape}]

        def get_output_types(self) -> list[dict[str, Any]]:
            return [{"name": "OUTPUT0", "datatype": self.datatype, "shape": self.shape}]

        def predict_v1(self, payload: dict[str, Any]) -> dict[str, Any]:
            data = np.asarray(payload["instances"], dtype=np.float32)
            return {"predictions": self.fn(data).tolist()}

        def predict(
            self, payload: InferRequest | dict[str, Any], headers: dict[str, str] | None = None
        ) -> InferResponse | dict[str, Any]:
            if isinstance(payload, dict):
                return self.predict_v1(payload)
            tensor = payload.get_input_by_name("INPUT0")
            if tensor is None or len(payload.inputs) != 1:
                names = [t.name for t in payload.inputs]
                raise InvalidInput(f"model '{self.name}' expects one input INPUT0, got {names}")
            if tensor.datatype != self.datatype:
                raise InvalidInput(
                    f"model '{self.name}' expects INPUT0 as {self.datatype}, got {tensor.datatype}"
                )
            result = self.fn(tensor.as_numpy())
            # KServe's idiom: set the data through set_data_from_numpy (raw bytes). Passing the
            # array as ``data=`` makes 0.21's to_grpc() test its truth value and fail on any
            # multi-element output when the request came with raw_input_contents.
            output = InferOutput(name="OUTPUT0", shape=list(result.shape), datatype=self.datatype)
            output.set_data_from_numpy(result)
            return InferResponse(
                response_id=payload.id or "",
                model_name=self.name,
                infer_outputs=[output],
                use_binary_outputs=payload.use_binary_outputs,
                requested_outputs=payload.request_outputs or None,
            )

    class AddSub(TensorModel):
        """FP32 ``INPUT0``, ``INPUT1`` [-1, 16] -> ``OUTPUT0`` = sum, ``OUTPUT1`` = difference."""

        def __init__(self) -> None:
            super().__init__("add_sub", "FP32", [-1, 16], None)

        def get_input_types(self) -> list[dict[str, Any]]:
            return [
                {"name": n, "datatype": "FP32", "shape": [-1, 16]} for n in ("INPUT0", "INPUT1")
            ]

        def get_output_types(self) -> list[dict[str, Any]]:
            return [
                {"name": n, "datatype": "FP32", "shape": [-1, 16]} for n in ("OUTPUT0", "OUTPUT1")
            ]

        def predict(
            self, payload: InferRequest | dict[str, Any], headers: dict[str, str] | None = None
        ) -> InferResponse | dict[str, Any]:
            assert not isinstance(payload, dict)
            a = payload.get_input_by_name("INPUT0")
            b = payload.get_input_by_name("INPUT1")
            if a is None or b is None:
                raise InvalidInput("model 'add_sub' expects INPUT0 and INPUT1")
            x, y = a.as_numpy(), b.as_numpy()
            outputs = []
            for name, value in (("OUTPUT0", x + y), ("OUTPUT1", x - y)):
                out = InferOutput(name=name, shape=list(value.shape), datatype="FP32")
                out.set_data_from_numpy(value)
                outputs.append(out)
            return InferResponse(
                response_id=payload.id or "",
                model_name=self.name,
                infer_outputs=outputs,
                use_binary_outputs=payload.use_binary_outputs,
                requested_outputs=payload.request_outputs or None,
            )

    def upper(data: np.ndarray) -> np.ndarray:
        return np.array(
            [(v if isinstance(v, bytes) else str(v).encode()).upper() for v in data.ravel()],
            dtype=np.object_,
        ).reshape(data.shape)

    def explode(data: np.ndarray) -> np.ndarray:
        raise ValueError(MAGIC_ERROR)

    def refuse(data: np.ndarray) -> np.ndarray:
        raise InferenceError(REFUSAL)

    models = [
        TensorModel("add_one", "FP32", [-1, 4], lambda x: x + np.float32(1)),
        TensorModel("times_two", "INT64", [-1], lambda x: x * 2),
        TensorModel("upper", "BYTES", [-1], upper),
        TensorModel("identity_bf16", "BF16", [-1], lambda x: x),
        TensorModel("broken", "FP32", [-1], explode),
        TensorModel("refusing", "FP32", [-1], refuse),
        AddSub(),
    ]
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1).start(models)


if __name__ == "__main__":
    main()
