"""v2 / Open Inference Protocol clients: :class:`Client` (sync) and :class:`AsyncClient` (asyncio).

Both faces share one core: every API call is declared once (:mod:`nbinfer.client.api`) as an
*op* (a generator yielding transport calls, see :mod:`nbinfer.transports`) and driven either by
a blocking engine (sockets or pycurl, grpcio) or an asyncio one (aiohttp, grpc.aio). The URL
picks the protocol: ``http://`` / ``https://`` (or a bare ``host:port``) speak REST,
``grpc://`` / ``grpcs://`` speak gRPC.

Example::

    import numpy as np
    import nbinfer

    with nbinfer.Client("http://127.0.0.1:8000") as client:
        result = client.infer("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                          "INPUT1": np.ones((1, 16), np.float32)})
        print(result.as_numpy("OUTPUT0"))

The sync client is thread-safe and works inside a running event loop (a Jupyter cell): it does
no asyncio at all.

Layout: ``results`` (InferResult, InferSequence), ``core`` (configuration, binding, ops), ``api``
(each public call declared once), ``sync`` / ``aio`` (the two thin faces), ``callbacks`` (where
user callbacks run). The package imports errors, config, protocol and transports only.
"""

from __future__ import annotations

from nbinfer.client.aio import AsyncClient

# replicas builds on the faces and makes Client([urls]) / AsyncClient([urls]) its own
from nbinfer.client.replicas import AsyncReplicaClient, ReplicaClient
from nbinfer.client.results import InferResult, InferSequence
from nbinfer.client.sync import Client

#: The public short name of :class:`InferSequence` (inside nbinfer, ``Sequence`` is
#: :class:`collections.abc.Sequence`).
Sequence = InferSequence

__all__ = [
    "AsyncClient",
    "AsyncReplicaClient",
    "Client",
    "InferResult",
    "InferSequence",
    "ReplicaClient",
    "Sequence",
]
