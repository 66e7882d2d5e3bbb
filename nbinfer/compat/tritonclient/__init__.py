"""tritonclient's module layout over nbinfer: ``http``, ``grpc`` (each with ``aio``), ``utils``.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

A tritonclient program ports by changing its imports only::

    import nbinfer.compat.tritonclient.grpc as grpcclient
    import nbinfer.compat.tritonclient.http.aio as aiohttpclient
    from nbinfer.compat.tritonclient.grpc import service_pb2, service_pb2_grpc
    from nbinfer.compat.tritonclient.utils import InferenceServerException
"""
