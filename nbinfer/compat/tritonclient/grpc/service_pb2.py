"""``tritonclient.grpc.service_pb2``: the v2 gRPC messages (``ModelInferRequest``, ...).

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

nbinfer's generated messages: the same names, fields and wire form as Triton's
``grpc_service.proto`` (with ``model_config.proto``'s names too, as Triton's module has them).
They live in nbinfer's own descriptor pool, so they are other Python classes than tritonclient's:
move a message between the two libraries with ``SerializeToString()`` / ``FromString()``.
"""

from nbinfer.protocol._generated.grpc_service_pb2 import *  # noqa: F403
from nbinfer.protocol._generated.grpc_service_pb2 import DESCRIPTOR as DESCRIPTOR
