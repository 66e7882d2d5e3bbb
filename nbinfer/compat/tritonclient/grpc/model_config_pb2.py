"""``tritonclient.grpc.model_config_pb2``: Triton's model configuration messages.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

``ModelConfig``, ``ModelInput`` (with ``ModelInput.FORMAT_NCHW`` ...), ``DataType``
(``TYPE_FP32`` ...) and the rest of ``model_config.proto``, as nbinfer's generated messages.
"""

from nbinfer.protocol._generated.model_config_pb2 import *  # noqa: F403
from nbinfer.protocol._generated.model_config_pb2 import DESCRIPTOR as DESCRIPTOR
