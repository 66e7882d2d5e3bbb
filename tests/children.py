"""Running a Python child that reports in JSON: the pattern of the tests that need a process of
their own (another uid, a clean interpreter, a peer's client library)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def unused_uid(start: int = 50_000) -> int:
    """The first uid from ``start`` that no account has and no process runs as: another local
    user who owns nothing on this machine (the tests that become it run as root, as CI does)."""
    running = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                running.add(entry.stat().st_uid)
            except OSError:
                continue
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in running:
                return uid
        uid += 1


#: Another local user (the uid and gid the tests' children drop to), chosen once per process.
OTHER_UID = unused_uid()


def python_json(
    args: Sequence[str],
    *,
    timeout: float = 120,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run this interpreter with ``args``; assert it exited 0 (its stderr's end otherwise) and
    return the JSON object on the last line it printed."""
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=None if env is None else dict(env),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report
