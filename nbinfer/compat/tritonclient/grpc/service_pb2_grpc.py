"""``tritonclient.grpc.service_pb2_grpc``: the ``GRPCInferenceService`` stub.

Layer: compat (imports ``nbinfer.errors``, ``config``, ``protocol``, ``client``, ``interop`` and
compat itself); never the server, the session or the notebook layer.

Example (as Triton's ``grpc_explicit_*`` examples use it)::

    import grpc
    from nbinfer.compat.tritonclient.grpc import service_pb2, service_pb2_grpc

    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel("localhost:8001"))
    reply = stub.ModelInfer(service_pb2.ModelInferRequest(model_name="simple", ...))

Each RPC of :data:`nbinfer.protocol.grpc.RPCS` is an attribute of the stub, with nbinfer's
messages as request and answer. ``GRPCInferenceServiceServicer`` and
``add_GRPCInferenceServiceServicer_to_server`` serve the same service from a ``grpc.Server``;
``GRPCInferenceService.ServerLive(request, "localhost:8001", insecure=True)`` (each RPC) makes
one call without a channel of your own (grpc's experimental one-off calls).
"""

from __future__ import annotations

from typing import Any

from nbinfer.protocol.grpc import RPCS, SERVICE_NAME, Rpc

__all__ = [
    "GRPCInferenceService",
    "GRPCInferenceServiceServicer",
    "GRPCInferenceServiceStub",
    "add_GRPCInferenceServiceServicer_to_server",
]


class GRPCInferenceServiceStub:
    """Client stub: ``stub.ModelInfer(request)``, ``stub.ModelStreamInfer(iterator)``, ...

    Args:
        channel: A ``grpc.Channel`` (or ``grpc.aio.Channel``: then the calls are awaitable).
    """

    def __init__(self, channel: Any) -> None:
        for rpc in RPCS.values():
            make = getattr(channel, rpc.kind)
            setattr(
                self,
                rpc.name,
                make(
                    rpc.path,
                    request_serializer=rpc.request.SerializeToString,
                    response_deserializer=rpc.response.FromString,
                ),
            )


class GRPCInferenceServiceServicer:
    """Server side: override the RPCs you serve (the others answer ``UNIMPLEMENTED``)."""

    def __getattr__(self, name: str) -> Any:
        if name not in RPCS:
            raise AttributeError(name)

        def unimplemented(request: Any, context: Any) -> Any:
            import grpc

            context.set_code(grpc.StatusCode.UNIMPLEMENTED)
            context.set_details(f"Method {name} not implemented!")
            raise NotImplementedError(f"Method {name} not implemented!")

        return unimplemented


def add_GRPCInferenceServiceServicer_to_server(servicer: Any, server: Any) -> None:
    """Register ``servicer``'s RPCs on a ``grpc.Server`` (or ``grpc.aio.Server``)."""
    import grpc

    handlers = {}
    for rpc in RPCS.values():
        make = getattr(grpc, f"{rpc.kind}_rpc_method_handler")
        handlers[rpc.name] = make(
            getattr(servicer, rpc.name),
            request_deserializer=rpc.request.FromString,
            response_serializer=rpc.response.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))


class GRPCInferenceService:
    """One call to ``target`` per RPC, without a channel of your own.

    As tritonclient's generated module has them: ``GRPCInferenceService.ModelInfer(request,
    "localhost:8001", insecure=True, timeout=10)``. grpc keeps the channels of such calls, and
    warns once that its one-off calls are experimental (``ExperimentalApiWarning``), as it does
    for tritonclient's.
    """


def _one_off(rpc: Rpc) -> Any:
    def call(
        request: Any,
        target: str,
        options: Any = (),
        channel_credentials: Any = None,
        call_credentials: Any = None,
        insecure: bool = False,
        compression: Any = None,
        wait_for_ready: bool | None = None,
        timeout: float | None = None,
        metadata: Any = None,
    ) -> Any:
        import grpc.experimental

        send = getattr(grpc.experimental, rpc.kind)
        return send(
            request,
            target,
            rpc.path,
            rpc.request.SerializeToString,
            rpc.response.FromString,
            options,
            channel_credentials,
            insecure,
            call_credentials,
            compression,
            wait_for_ready,
            timeout,
            metadata,
        )

    call.__name__ = call.__qualname__ = rpc.name
    call.__doc__ = f"One ``{rpc.name}`` call to ``target`` (a ``host:port``)."
    return staticmethod(call)


for _rpc in RPCS.values():
    setattr(GRPCInferenceService, _rpc.name, _one_off(_rpc))
