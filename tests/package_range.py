"""Testing a dependency across the range pyproject.toml allows: its oldest and newest release.

A version is installed with ``pip install --target`` into a directory of its own, which a test puts
first on ``PYTHONPATH`` of the subprocess under test (used by ``tests/test_cloudpickle_range.py``
and ``tests/test_pycurl_range.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def allowed_range(package: str) -> str:
    """pyproject's requirement on ``package`` without its name, e.g. ``>=3.0,<4``."""
    pattern = rf'^\s*"{re.escape(package)}([^";]*)[";]'
    (spec,) = re.findall(pattern, (ROOT / "pyproject.toml").read_text(), re.M)
    return spec.strip()


def requirement(package: str, which: str) -> str:
    """``package==<lower bound>`` (``which="oldest"``) or the whole range (``"newest"``)."""
    spec = allowed_range(package)
    if which == "newest":
        return f"{package}{spec}"
    match = re.search(r">=\s*([\w.]+)", spec)
    assert match, f"{package} needs a lower bound in pyproject.toml, got {spec!r}"
    return f"{package}=={match[1]}"


def install(target: Path, package: str, which: str) -> str:
    """Install the ``which`` end of ``package``'s range (alone) into ``target``; its version."""
    wanted = requirement(package, which)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    done = subprocess.run([*cmd, wanted], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"cannot install {wanted} here: {done.stderr.strip()[-400:]}")
    (dist,) = target.glob(f"{package}-*.dist-info")
    return dist.name.removeprefix(f"{package}-").removesuffix(".dist-info")


def env_first_on_path(target: Path) -> dict[str, str]:
    """This process's environment with ``target`` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    return env
