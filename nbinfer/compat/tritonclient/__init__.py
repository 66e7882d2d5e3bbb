"""tritonclient's module layout over nbinfer: ``http``, ``grpc`` and ``utils``.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

A tritonclient program ports by changing its imports only::

    import nbinfer.compat.tritonclient.grpc as grpcclient
    from nbinfer.compat.tritonclient.utils import InferenceServerException
"""
