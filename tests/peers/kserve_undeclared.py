"""A KServe ``ModelServer`` whose models declare no inputs or outputs (KServe's default).

Usage: ``python tests/peers/kserve_undeclared.py --http-port P --grpc-port Q``

A ``kserve.Model`` that does not override ``get_input_types`` / ``get_output_types`` answers
metadata with ``"inputs": []``: the common case for KServe models written by hand, and the one
``Session.infer(model, frame)`` must map by column name. Models (same behaviour as the
``kserve`` peer): ``add_sub`` (FP32 ``INPUT0`` + / - ``INPUT1``), ``times_two`` (INT64 ``INPUT0``
* 2), ``upper`` (BYTES ``INPUT0`` upper-cased). Run as a subprocess only (see
``tests/client/kserve_server.py`` for why), bound to 127.0.0.1 the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
from kserve_server import _bind_loopback, _parse


def main() -> None:
    args = _parse()
    import kserve
    from kserve.errors import InvalidInput
    from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

    _bind_loopback()

    class Undeclared(kserve.Model):
        """Inputs by name -> outputs by ``fn``; declares nothing in its metadata."""

        def __init__(self, name: str, inputs: tuple[str, ...], fn: Any) -> None:
            super().__init__(name)
            self.inputs = inputs
            self.fn = fn
            self.ready = True

        def predict(
            self, payload: InferRequest, headers: dict[str, str] | None = None
        ) -> InferResponse:
            arrays = []
            for name in self.inputs:
                tensor = payload.get_input_by_name(name)
                if tensor is None:
                    got = [t.name for t in payload.inputs]
                    raise InvalidInput(
                        f"model '{self.name}' expects {list(self.inputs)}, got {got}"
                    )
                arrays.append(tensor.as_numpy())
            outputs = []
            for i, (value, datatype) in enumerate(self.fn(*arrays)):
                out = InferOutput(name=f"OUTPUT{i}", shape=list(value.shape), datatype=datatype)
                out.set_data_from_numpy(value)
                outputs.append(out)
            return InferResponse(
                response_id=payload.id or "",
                model_name=self.name,
                infer_outputs=outputs,
                use_binary_outputs=payload.use_binary_outputs,
                requested_outputs=payload.request_outputs or None,
            )

    def upper(x: np.ndarray) -> list[tuple[np.ndarray, str]]:
        flat = [(v if isinstance(v, bytes) else str(v).encode()).upper() for v in x.ravel()]
        return [(np.array(flat, dtype=np.object_).reshape(x.shape), "BYTES")]

    models = [
        Undeclared(
            "add_sub",
            ("INPUT0", "INPUT1"),
            lambda a, b: [(a + b, "FP32"), (a - b, "FP32")],
        ),
        Undeclared("times_two", ("INPUT0",), lambda x: [(x * 2, "INT64")]),
        Undeclared("upper", ("INPUT0",), upper),
    ]
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1).start(models)


if __name__ == "__main__":
    main()
