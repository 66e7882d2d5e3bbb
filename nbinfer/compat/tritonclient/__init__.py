"""tritonclient's module layout over nbinfer: ``http``, ``grpc`` and ``utils``.

A tritonclient program ports by changing its imports only::

    import nbinfer.compat.tritonclient.grpc as grpcclient
    from nbinfer.compat.tritonclient.utils import InferenceServerException
"""
