"""The ``nbinfer`` command line.

Layer: a front at the top of the tree (like the notebook layer): imports the server, export and
profiler lazily, inside each command, so ``nbinfer version`` stays instant; never IPython.

``nbinfer serve [--demo] [--model-repository DIR] ...`` runs the embedded inference server in the
foreground (the same process and options as ``python -m nbinfer.server``).
``nbinfer export --model-repository DIR --model NAME --out DIR`` writes a Triton repository entry
(and ``--kserve-manifest FILE --storage-uri URI`` a KServe InferenceService).
``nbinfer profile URL MODEL [--concurrency 1 2 4 | --request-rate 100 200] [--shared-memory
system]`` load-profiles a model on any v2 server. ``nbinfer version`` prints the version.
Nothing is parsed at import time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _version() -> str:
    from nbinfer import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nbinfer`` console script; returns the exit code."""
    from nbinfer.server.__main__ import add_server_arguments, choose_ports

    parser = argparse.ArgumentParser(
        prog="nbinfer",
        description="KServe v2 / Open Inference Protocol inference for notebooks.",
    )
    parser.add_argument("--version", action="version", version=f"nbinfer {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run the embedded inference server (HTTP + gRPC) in the foreground",
        description="Run nbinfer's embedded KServe v2 inference server (HTTP + gRPC) on "
        "Triton's ports 8000 / 8001 when they are free (else on free ports, and it says so). "
        "Prints 'NBINFER READY http=... grpc=...' once both listen; stops on Ctrl-C / SIGTERM.",
    )
    add_server_arguments(serve, conventional_ports=True)
    export = sub.add_parser(
        "export",
        help="write a model as a Triton repository entry (+ a KServe InferenceService manifest)",
        description="Export one model of a model repository as a Triton model repository entry "
        "and, optionally, a KServe InferenceService manifest.",
    )
    from nbinfer.server.export import add_export_arguments

    add_export_arguments(export)
    prof = sub.add_parser(
        "profile",
        help="load-profile a model on any v2 server (throughput, latency percentiles)",
        description="Measure throughput and latency of MODEL on the v2 server at URL: a "
        "concurrency sweep (closed loop) or fixed request rates (open loop, --request-rate).",
    )
    prof.add_argument("url", help="the server: http://host:port or grpc://host:port")
    prof.add_argument("model", help="the model name")
    prof.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    prof.add_argument("--request-rate", type=float, nargs="+", help="requests/s (open loop)")
    prof.add_argument("--batch-size", type=int, default=1)
    prof.add_argument("--window", type=float, default=0.5, help="seconds per window")
    prof.add_argument("--max-windows", type=int, default=6)
    prof.add_argument("--warmup", type=float, default=0.5, help="seconds before measuring")
    prof.add_argument("--stability", type=float, default=0.1)
    prof.add_argument(
        "--shared-memory",
        choices=["none", "system"],
        default="none",
        help="system: tensors go through POSIX shared memory (server on this host), not the wire",
    )
    prof.add_argument("--csv", help="write the results to this CSV file")
    prof.add_argument("--json", help="write the results to this JSON file (records)")
    prof.add_argument("--png", help="draw the plots to this PNG file")
    sub.add_parser("version", help="print the nbinfer version")

    args = parser.parse_args(argv)
    if args.command == "serve":
        for notice in choose_ports(args):
            print(notice, file=sys.stderr, flush=True)
        if args.parent_pid is not None:
            from nbinfer.server.app import watch_parent_early

            watch_parent_early(args.parent_pid, pdeathsig=args.pdeathsig)
        from nbinfer.server.app import ServerOptions, run

        return run(ServerOptions.from_namespace(args))
    if args.command == "export":
        from nbinfer.server.export import run_export

        return run_export(args)
    if args.command == "profile":
        from nbinfer.profiling import run_profile

        return run_profile(args)
    if args.command == "version":
        print(f"nbinfer {_version()}")
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
