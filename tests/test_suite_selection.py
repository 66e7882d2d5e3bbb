"""The suite's own selection (tests/conftest.py): unit / integration / e2e markers from a test's
path, fixtures and module, and ``NBINFER_SERIAL`` splitting the ``serial`` tests from the rest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: One module of each kind: pure codec tests, a module-scoped server, the notebooks.
FILES = ["tests/protocol/test_v1.py", "tests/server/test_auth.py", "tests/test_notebooks.py"]


def _collected(*args: str, **env: str) -> set[str]:
    """The node ids ``pytest --collect-only`` selects with ``args`` (and ``env``)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", *args]
    base = {k: v for k, v in os.environ.items() if k != "NBINFER_SERIAL"}  # scripts/check sets it
    done = subprocess.run(
        cmd, capture_output=True, text=True, cwd=ROOT, env={**base, **env}, timeout=300
    )
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


@pytest.mark.timeout(600)
def test_every_test_gets_exactly_one_kind_from_its_path_fixtures_and_module() -> None:
    everything = _collected(*FILES)
    kinds = {kind: _collected("-m", kind, *FILES) for kind in ("unit", "integration", "e2e")}
    assert set().union(*kinds.values()) == everything
    assert sum(len(ids) for ids in kinds.values()) == len(everything)  # no test in two kinds
    by_file = {kind: {nodeid.split("::", 1)[0] for nodeid in ids} for kind, ids in kinds.items()}
    assert by_file == {"unit": {FILES[0]}, "integration": {FILES[1]}, "e2e": {FILES[2]}}


@pytest.mark.timeout(600)
def test_nbinfer_serial_splits_the_serial_tests_from_the_rest() -> None:
    path = "tests/reliability/test_attacks_at_once.py"
    serial = _collected(path, "-m", "serial")
    assert serial, "the attack test is marked serial"
    assert _collected(path, NBINFER_SERIAL="only") == serial
    assert not _collected(path, NBINFER_SERIAL="later") & serial
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NBINFER_SERIAL": "sometimes"},
        timeout=300,
    )
    assert done.returncode != 0 and "NBINFER_SERIAL must be" in done.stdout + done.stderr
