"""What a portable export ships next to the user's source (package data, copied by ``export``).

Layer: these modules run inside Triton, where nbinfer is not installed: stdlib and numpy only
(``runtime``'s marked block is the one nbinfer import, replaced on export).

* :mod:`.runtime` becomes ``<version>/nbinfer_runtime.py``: its marked import block is replaced
  by the few pieces of :mod:`nbinfer.server.model` a model needs (``Model``, ``FunctionModel``,
  ``model``, ``InferContext``, ``TensorDef``), extracted from nbinfer's own source, so the
  exported model needs numpy and nothing of nbinfer.
* :mod:`.entry` becomes ``<version>/model.py``: Triton's ``TritonPythonModel`` over it.

Both files are plain modules here too, so they are linted, type-checked and tested in place.
"""
