"""Generated protobuf stubs of protos/*.proto (see scripts/gen_protos.py). DO NOT EDIT!

Use them through :mod:`nbinfer.protocol.grpc` (``from nbinfer.protocol.grpc import pb``).
"""
