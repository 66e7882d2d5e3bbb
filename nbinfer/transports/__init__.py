"""Transports: the I/O under :mod:`nbinfer.client`.

An *engine* performs one call that a binding (:mod:`nbinfer.protocol.http_binding`,
:mod:`nbinfer.protocol.grpc_binding`) yielded: sockets
(:mod:`~nbinfer.transports.socket_engine`) and pycurl (:mod:`~nbinfer.transports.curl_engine`) /
aiohttp (:mod:`~nbinfer.transports.aiohttp_engine`) / httpx
(:mod:`~nbinfer.transports.httpx_engine`) for HTTP, grpcio / grpc.aio
(:mod:`~nbinfer.transports.grpc`) for gRPC; the asyncio engines own one session / channel per
event loop (:mod:`nbinfer.transports.loops`). The client drives a binding's op with a sync or an
async engine, so the protocol logic exists once for both faces. Engines translate engine errors
into :mod:`nbinfer.errors` classes with ``raise ... from exc``. This package is I/O only: routes,
messages and wire formats live in :mod:`nbinfer.protocol`; nothing here imports the client,
session or server. The call objects are re-exported from :mod:`nbinfer.protocol.calls`.
"""

from __future__ import annotations

from nbinfer.protocol.calls import (
    Call,
    CallOptions,
    GrpcCall,
    GrpcReply,
    Headers,
    HttpCall,
    HttpReply,
    Op,
    Pause,
)

__all__ = [
    "Call",
    "CallOptions",
    "GrpcCall",
    "GrpcReply",
    "Headers",
    "HttpCall",
    "HttpReply",
    "Op",
    "Pause",
]
