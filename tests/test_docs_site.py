"""The documentation site builds with ``mkdocs build --strict``, and a broken link fails it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build(
    config: Path, out: Path, cwd: Path, *, execute: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", NBINFER_DOCS_EXECUTE=str(execute).lower())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # The executed notebooks reach nothing past loopback (the guard of tests/test_notebooks.py).
    guard = str(ROOT / "tests" / "offline")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (guard, env.get("PYTHONPATH", "")) if p)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600, env=env)


@pytest.mark.torch  # notebook 04 serves a torch module when torch is there, says so when not
@pytest.mark.timeout(600)
def test_site_builds_strict_with_api_reference_and_executed_notebooks(tmp_path: Path) -> None:
    out = _build(ROOT / "mkdocs.yml", tmp_path / "site", tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("nbinfer.Session", "nbinfer.Client", "nbinfer.InferResult"):
        assert f'id="{name}"' in api, name
    # The client faces' methods are derived from one declaration each: the reference shows them
    # as methods with the declaration's docstring (docs/_ext/client_faces.py), async on one face.
    for face in ("Client", "AsyncClient"):
        start = api.index(f'id="nbinfer.{face}.is_server_live"')
        entry = api[start : start + 2000]
        assert "Whether the server is live." in entry, face
        assert ("async" in entry) == (face == "AsyncClient"), face
    rendered = sorted(p.parent.name for p in (tmp_path / "site" / "notebooks").glob("*/index.html"))
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert rendered == notebooks
    # The notebooks are committed without outputs; the site shows them executed.
    page = (tmp_path / "site" / "notebooks" / "02_dataframes" / "index.html").read_text()
    assert "index aligned: True" in page
    assert "data:image/png;base64" in page  # the matplotlib plot
    # A progress bar leaves its summary line, never a widget stuck at 0 % (issue 31).
    assert re.search(r"iris: 1,000,000 rows in [\d.]+ s \(", page), "no progress summary"
    for path in (tmp_path / "site" / "notebooks").glob("*/index.html"):
        assert "0%|" not in path.read_text(), path.parent.name


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs", symlinks=False)
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "concepts.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    out = _build(copy / "mkdocs.yml", tmp_path / "site", tmp_path, execute=False)
    assert out.returncode != 0
    assert "no-such-page.md" in out.stderr
