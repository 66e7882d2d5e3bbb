"""A model's ``model.py`` edited in place runs its new code on the next load, even when the
edit keeps the file's size and its mtime second (what a bytecode cache is trusted by)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from nbinfer.server.backends.scripts import import_script

MODEL = "FACTOR = {}\n"


def test_an_edit_of_the_same_size_and_second_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bytecode written and read where it would be on a machine that caches it
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))
    script = tmp_path / "m" / "1" / "model.py"
    script.parent.mkdir(parents=True)
    script.write_text(MODEL.format(2))
    stamp = script.stat().st_mtime_ns
    assert import_script(script, "t", "m", "1").FACTOR == 2
    script.write_text(MODEL.format(3))  # same size
    os.utime(script, ns=(stamp, stamp))  # same mtime: edited within the same second
    assert import_script(script, "t", "m", "1").FACTOR == 3
