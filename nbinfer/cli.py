"""The ``nbinfer`` command line.

``nbinfer serve [--demo] [--model-repository DIR] ...`` runs the embedded inference server in the
foreground (the same process and options as ``python -m nbinfer.server``).
``nbinfer export --model-repository DIR --model NAME --out DIR`` writes a Triton repository entry
(and ``--kserve-manifest FILE --storage-uri URI`` a KServe InferenceService).
``nbinfer version`` prints the version. Nothing is parsed at import time.
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
    from nbinfer.server.__main__ import add_server_arguments

    parser = argparse.ArgumentParser(
        prog="nbinfer",
        description="KServe v2 / Open Inference Protocol inference for notebooks.",
    )
    parser.add_argument("--version", action="version", version=f"nbinfer {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run the embedded inference server (HTTP + gRPC) in the foreground",
        description="Run nbinfer's embedded KServe v2 inference server (HTTP + gRPC). Prints "
        "'NBINFER READY http=... grpc=...' once both listen; stops on Ctrl-C / SIGTERM.",
    )
    add_server_arguments(serve)
    export = sub.add_parser(
        "export",
        help="write a model as a Triton repository entry (+ a KServe InferenceService manifest)",
        description="Export one model of a model repository as a Triton model repository entry "
        "and, optionally, a KServe InferenceService manifest.",
    )
    from nbinfer.server.export import add_export_arguments

    add_export_arguments(export)
    sub.add_parser("version", help="print the nbinfer version")

    args = parser.parse_args(argv)
    if args.command == "serve":
        if args.parent_pid is not None:
            from nbinfer.server.app import watch_parent_early

            watch_parent_early(args.parent_pid, pdeathsig=args.pdeathsig)
        from nbinfer.server.app import ServerOptions, run

        return run(ServerOptions.from_namespace(args))
    if args.command == "export":
        from nbinfer.server.export import run_export

        return run_export(args)
    if args.command == "version":
        print(f"nbinfer {_version()}")
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
