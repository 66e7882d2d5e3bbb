"""The suite's own selection (tests/conftest.py): unit / integration / e2e markers from a test's
path, fixtures and module, and ``NBINFER_SERIAL`` splitting the ``serial`` tests from the rest.

Every selection is a real ``pytest --collect-only`` with the options and environment a user
would give; all of them run in one child interpreter, one after another (:data:`COLLECT`), so
the suite and its conftest are imported once, not once per selection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: One module of each kind: pure codec tests, a module-scoped server, the notebooks.
FILES = ["tests/protocol/test_v1.py", "tests/server/test_auth.py", "tests/test_notebooks.py"]
SERIAL_FILE = "tests/reliability/test_attacks_at_once.py"
#: name -> (pytest arguments, NBINFER_SERIAL or None for unset): the selections compared below.
SELECTIONS: dict[str, tuple[list[str], str | None]] = {
    "all": (FILES, None),
    **{kind: (["-m", kind, *FILES], None) for kind in ("unit", "integration", "e2e")},
    "serial": ([SERIAL_FILE, "-m", "serial"], None),
    "only": ([SERIAL_FILE], "only"),
    "later": ([SERIAL_FILE], "later"),
    "sometimes": ([SERIAL_FILE], "sometimes"),
}
#: The child: ``pytest.main(["--collect-only", ...])`` for each selection read as JSON from
#: stdin, with ``NBINFER_SERIAL`` set as asked; prints {name: [exit code, stdout, stderr]}.
COLLECT = textwrap.dedent(
    """
    import contextlib, io, json, os, sys
    import pytest

    done = {}
    for name, (args, serial) in json.load(sys.stdin).items():
        os.environ.pop("NBINFER_SERIAL", None)
        if serial is not None:
            os.environ["NBINFER_SERIAL"] = serial
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", *args])
        done[name] = [int(code), out.getvalue(), err.getvalue()]
    print(json.dumps(done))
    """
)


@pytest.fixture(scope="module")
def collected() -> dict[str, tuple[int, str, str]]:
    """Each of :data:`SELECTIONS` -> (exit code, stdout, stderr) of its collection."""
    env = {k: v for k, v in os.environ.items() if k != "NBINFER_SERIAL"}  # scripts/check sets it
    done = subprocess.run(
        [sys.executable, "-c", COLLECT],
        input=json.dumps(SELECTIONS),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {name: (code, out, err) for name, (code, out, err) in json.loads(done.stdout).items()}


def _ids(collected: dict[str, tuple[int, str, str]], name: str) -> set[str]:
    """The node ids selection ``name`` collected (it must have succeeded or selected none)."""
    code, out, err = collected[name]
    assert code in (0, 5), f"{name}: exit {code}\n{out[-3000:]}\n{err[-3000:]}"
    return {line for line in out.splitlines() if "::" in line}


@pytest.mark.timeout(600)
def test_every_test_gets_exactly_one_kind_from_its_path_fixtures_and_module(
    collected: dict[str, tuple[int, str, str]],
) -> None:
    everything = _ids(collected, "all")
    kinds = {kind: _ids(collected, kind) for kind in ("unit", "integration", "e2e")}
    assert set().union(*kinds.values()) == everything
    assert sum(len(ids) for ids in kinds.values()) == len(everything)  # no test in two kinds
    by_file = {kind: {nodeid.split("::", 1)[0] for nodeid in ids} for kind, ids in kinds.items()}
    assert by_file == {"unit": {FILES[0]}, "integration": {FILES[1]}, "e2e": {FILES[2]}}


@pytest.mark.timeout(600)
def test_nbinfer_serial_splits_the_serial_tests_from_the_rest(
    collected: dict[str, tuple[int, str, str]],
) -> None:
    serial = _ids(collected, "serial")
    assert serial, "the attack test is marked serial"
    assert _ids(collected, "only") == serial
    assert not _ids(collected, "later") & serial
    code, out, err = collected["sometimes"]
    assert code != 0 and "NBINFER_SERIAL must be" in out + err
