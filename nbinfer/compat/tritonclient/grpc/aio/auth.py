"""``tritonclient.grpc.aio.auth``: ``BasicAuth``, a plugin adding an ``Authorization`` header.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example::

    client.register_plugin(BasicAuth("user", "secret"))
"""

from nbinfer.compat._triton import BasicAuth

__all__ = ["BasicAuth"]
