"""Ported code keeps its shape: tritonclient- and KServe-shaped faces over nbinfer.

- :mod:`nbinfer.compat.tritonclient` — ``http``, ``grpc`` and ``utils`` (with
  ``utils.shared_memory``) as tritonclient lays them out.
- :mod:`nbinfer.compat.kserve` — KServe's ``InferRequest`` / ``InferResponse`` / ``InferInput``
  / ``InferOutput``, ``RESTConfig`` and the v2 ``InferenceRESTClient`` / ``InferenceGRPCClient``.

Nothing here is imported by ``import nbinfer``. docs/compat.md lists what ports unchanged.
"""
