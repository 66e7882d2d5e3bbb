"""Ported code keeps its shape: tritonclient- and KServe-shaped faces over nbinfer.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

- :mod:`nbinfer.compat.tritonclient` — ``http`` and ``grpc`` (each with its ``aio`` face and
  ``auth``), ``grpc.service_pb2`` / ``service_pb2_grpc`` / ``model_config_pb2``, and ``utils``
  (with ``utils.shared_memory``), as tritonclient lays them out.
- :mod:`nbinfer.compat.kserve` — KServe's ``InferRequest`` / ``InferResponse`` / ``InferInput``
  / ``InferOutput``, ``RESTConfig``, the v2 ``InferenceRESTClient`` / ``InferenceGRPCClient``,
  ``InvalidInput`` and the codec / parameter helpers.

Nothing here is imported by ``import nbinfer``. docs/compat.md lists what ports unchanged.
"""
