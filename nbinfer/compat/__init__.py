"""Ported code keeps its shape: tritonclient- and KServe-shaped faces over nbinfer.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

- :mod:`nbinfer.compat.tritonclient` — ``http``, ``grpc`` and ``utils`` (with
  ``utils.shared_memory``) as tritonclient lays them out.
- :mod:`nbinfer.compat.kserve` — KServe's ``InferRequest`` / ``InferResponse`` / ``InferInput``
  / ``InferOutput``, ``RESTConfig`` and the v2 ``InferenceRESTClient`` / ``InferenceGRPCClient``.

Nothing here is imported by ``import nbinfer``. docs/compat.md lists what ports unchanged.
"""
