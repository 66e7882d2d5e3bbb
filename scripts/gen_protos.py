"""Regenerate nbinfer's protobuf stubs from protos/*.proto.

Usage::

    python scripts/gen_protos.py            # writes nbinfer/protocol/_generated/
    python scripts/gen_protos.py --out DIR  # writes somewhere else (the freshness test uses this)

The stubs are committed. They are generated with the exact grpcio-tools version pinned in
pyproject.toml (its bundled protoc emits gencode that runs on protobuf 6.31+ and 7.x), and then
post-processed so that nbinfer can live in one process with tritonclient and kserve, which
register the same ``inference.*`` messages in protobuf's default descriptor pool:

* every ``*_pb2.py`` adds its file to the private pool of ``_generated/_pool.py`` instead of
  ``descriptor_pool.Default()``;
* imports between the generated modules are made package-relative (grpc_service.proto
  imports model_config.proto publicly, so ``grpc_service_pb2`` also exposes ``ModelConfig``);
* the message classes get the real module name (so they pickle and print properly).

No gRPC service stubs are generated: ``nbinfer/protocol/grpc.py`` keeps the table of RPCs.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tempfile
from pathlib import Path

#: The grpcio-tools version the committed stubs come from (keep equal to pyproject's pin).
GRPCIO_TOOLS_VERSION = "1.75.1"

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
PACKAGE = "nbinfer.protocol._generated"
DEFAULT_OUT = ROOT / "nbinfer" / "protocol" / "_generated"
#: Compiled in this order; a file may import only the ones before it.
PROTOS = ("model_config.proto", "grpc_service.proto")

HEADER = "# Post-processed by scripts/gen_protos.py (private descriptor pool). DO NOT EDIT!\n"

INIT_PY = '''"""Generated protobuf stubs of protos/*.proto (see scripts/gen_protos.py). DO NOT EDIT!

Use them through :mod:`nbinfer.protocol.grpc` (``from nbinfer.protocol.grpc import pb``).
"""
'''

POOL_PY = '''"""The private descriptor pool of nbinfer's generated stubs. DO NOT EDIT!

Written by scripts/gen_protos.py. tritonclient and kserve define the same ``inference.*``
messages in protobuf's default pool, which refuses a second, different definition of a name;
nbinfer's messages live here instead, so all of them can be imported in one process.
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
'''


def check_tools_version() -> None:
    """Exit with a message unless the pinned grpcio-tools version is installed."""
    try:
        found = importlib.metadata.version("grpcio-tools")
    except importlib.metadata.PackageNotFoundError:
        found = "not installed"
    if found != GRPCIO_TOOLS_VERSION:
        sys.exit(
            f"gen_protos.py needs grpcio-tools=={GRPCIO_TOOLS_VERSION} (found {found}); "
            f"run: pip install grpcio-tools=={GRPCIO_TOOLS_VERSION}"
        )


def _module(proto: str) -> str:
    return proto.removesuffix(".proto") + "_pb2"


def _relative_imports(text: str) -> str:
    """``import x_pb2 as y`` / ``from x_pb2 import *`` -> package-relative forms."""
    for name in (_module(p) for p in PROTOS):
        text = re.sub(rf"^import {name} as ", f"from . import {name} as ", text, flags=re.M)
        text = re.sub(rf"^from {name} import ", f"from .{name} import ", text, flags=re.M)
    return text


def _postprocess_py(text: str, module: str) -> str:
    out = text.replace(
        "_descriptor_pool.Default().AddSerializedFile(", "_POOL.AddSerializedFile(", 1
    )
    if out == text:
        raise RuntimeError(f"{module}.py: no descriptor_pool.Default() call to replace")
    out = out.replace(
        "from google.protobuf.internal import builder as _builder\n",
        "from google.protobuf.internal import builder as _builder\n"
        "from ._pool import POOL as _POOL\n",
        1,
    )
    # The default symbol database would not know our private pool; nothing needs it.
    out = out.replace("_sym_db = _symbol_database.Default()\n", "")
    out = out.replace("from google.protobuf import symbol_database as _symbol_database\n", "")
    out = out.replace("from google.protobuf import descriptor_pool as _descriptor_pool\n", "")
    out = _relative_imports(out)
    out = out.replace(
        f"_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, '{module}', _globals)",
        "_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, __name__, _globals)",
    )
    if "__name__, _globals)" not in out:
        raise RuntimeError(f"{module}.py: unexpected gencode layout (BuildTopDescriptors...)")
    return HEADER + out


def _postprocess_pyi(text: str) -> str:
    return HEADER + _relative_imports(text)


def generate(out_dir: Path) -> list[Path]:
    """Compile protos/ into ``out_dir`` and post-process the result; return the files written."""
    from grpc_tools import protoc  # imported here so --help works without grpcio-tools

    check_tools_version()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        include = Path(protoc.__file__).parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            *(str(PROTO_DIR / p) for p in PROTOS),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed (see its output above)")
        written = []
        for proto in PROTOS:
            mod = _module(proto)
            py = (Path(tmp) / f"{mod}.py").read_text(encoding="utf-8")
            pyi = (Path(tmp) / f"{mod}.pyi").read_text(encoding="utf-8")
            for name, content in (
                (f"{mod}.py", _postprocess_py(py, mod)),
                (f"{mod}.pyi", _postprocess_pyi(pyi)),
            ):
                target = out_dir / name
                target.write_text(content, encoding="utf-8", newline="\n")
                written.append(target)
    for name, content in (("__init__.py", INIT_PY), ("_pool.py", POOL_PY)):
        target = out_dir / name
        target.write_text(content, encoding="utf-8", newline="\n")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
