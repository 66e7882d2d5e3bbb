"""The committed protobuf stubs are exactly what scripts/gen_protos.py makes from protos/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "nbinfer" / "protocol" / "_generated"
SCRIPT = ROOT / "scripts" / "gen_protos.py"


def _script_pin() -> str:
    match = re.search(r'^GRPCIO_TOOLS_VERSION = "([^"]+)"', SCRIPT.read_text(), re.M)
    assert match, "gen_protos.py lost its GRPCIO_TOOLS_VERSION"
    return match.group(1)


def test_committed_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    fresh = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    committed = sorted(
        p.name for p in GENERATED.iterdir() if p.is_file() and p.suffix in {".py", ".pyi"}
    )
    assert fresh == committed
    stale = [
        name for name in fresh if (tmp_path / name).read_bytes() != (GENERATED / name).read_bytes()
    ]
    assert not stale, (
        f"stale stubs {stale}: run `python scripts/gen_protos.py` and commit the result"
    )


def test_generator_pin_matches_pyproject_test_extra() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [
        d
        for d in pyproject["project"]["optional-dependencies"]["test"]
        if d.startswith("grpcio-tools")
    ]
    assert pins == [f"grpcio-tools=={_script_pin()}"]


@pytest.mark.parametrize("module", ["grpc_service_pb2.py", "model_config_pb2.py"])
def test_gencode_runs_on_protobuf_6_and_7(module: str) -> None:
    text = (GENERATED / module).read_text()
    # protobuf accepts gencode of the same or the previous major version: 6.31 gencode runs on
    # runtime 6.31+ and 7.x, while 7.x gencode would refuse runtime 6 (which tritonclient pins).
    match = re.search(
        r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),",
        text,
    )
    assert match, "no runtime version check found in the gencode"
    assert (int(match.group(1)), int(match.group(2))) == (6, 31)


@pytest.mark.parametrize("module", ["grpc_service_pb2.py", "model_config_pb2.py"])
def test_gencode_uses_the_private_pool_and_relative_imports(module: str) -> None:
    text = (GENERATED / module).read_text()
    assert "_descriptor_pool.Default()" not in text
    assert "_POOL.AddSerializedFile(" in text
    assert not re.search(r"^import \w+_pb2", text, re.M)
    assert not re.search(r"^from \w+_pb2 import", text, re.M)


def test_generator_refuses_another_grpcio_tools_version(tmp_path: Path) -> None:
    # Run the script with a fake grpcio-tools version reported by importlib.metadata.
    code = (
        "import importlib.metadata as m, runpy, sys\n"
        "real = m.version\n"
        "m.version = lambda name: '0.0.1' if name == 'grpcio-tools' else real(name)\n"
        f"sys.argv = ['gen_protos.py', '--out', {str(tmp_path)!r}]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert f"grpcio-tools=={_script_pin()}" in result.stderr
    assert not any(tmp_path.iterdir())
