"""The documentation site builds with ``mkdocs build --strict``, and a broken link fails it.

The site shows the notebooks executed: the copies ``tests/test_notebooks.py`` checks, run once on
the binder kernel (``tests/notebook_runs.py``) and rendered through ``NBINFER_DOCS_NOTEBOOKS``
(``docs/_ext/executed_notebooks.py``); ``.ci/run``'s newcomer pass builds the site the same way
from the notebooks its plain install executed. The broken link is checked on a site of two pages
built with the same ``mkdocs.yml`` (``INHERIT``), not on a second build of the whole site.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build(
    config: Path, out: Path, cwd: Path, *, executed: Path | None = None, strict: bool = True
) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` (``strict=False``: as strict as ``config`` says); the notebooks
    rendered from ``executed`` (else not executed)."""
    flags = ["--strict"] if strict else []
    cmd = [sys.executable, "-m", "mkdocs", "build", *flags, "-f", str(config), "-d", str(out)]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", NBINFER_DOCS_EXECUTE="false")
    env.pop("NBINFER_DOCS_NOTEBOOKS", None)
    if executed is not None:
        env["NBINFER_DOCS_NOTEBOOKS"] = str(executed)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # The executed notebooks reach nothing past loopback (the guard of tests/test_notebooks.py).
    guard = str(ROOT / "tests" / "offline")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (guard, env.get("PYTHONPATH", "")) if p)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600, env=env)


@pytest.mark.timeout(1800)  # the first to ask builds the binder kernel and runs the notebooks
def test_site_builds_strict_with_api_reference_and_executed_notebooks(
    tmp_path: Path, executed_notebook: Callable[[str], Path]
) -> None:
    executed = tmp_path / "executed"
    executed.mkdir()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy(executed_notebook(notebook.stem), executed / notebook.name)
    out = _build(ROOT / "mkdocs.yml", tmp_path / "site", tmp_path, executed=executed)
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
    # ... and its download link offers the committed notebook, not the executed copy.
    offered = tmp_path / "site" / "notebooks" / "02_dataframes" / "02_dataframes.ipynb"
    assert offered.read_bytes() == (ROOT / "notebooks" / "02_dataframes.ipynb").read_bytes()


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """Our ``mkdocs.yml`` whole (``INHERIT``: theme, plugins, hooks, link validation, ``strict``),
    on a site of two pages instead of the full one (whose build the test above runs): a broken
    link is the build's one warning, and the strict mode our config sets (no ``--strict`` here)
    aborts on it."""
    site = tmp_path / "repo"
    # the config's hook and mkdocstrings extension, found next to the config as in the repository
    shutil.copytree(ROOT / "docs" / "_ext", site / "docs" / "_ext")
    (site / "docs" / "index.md").write_text("# Home\n\nSee [the page](page.md).\n")
    (site / "docs" / "page.md").write_text("# Page\n\nSee [nowhere](no-such-page.md).\n")
    config = site / "mkdocs.yml"
    nav = "nav:\n  - Home: index.md\n  - Page: page.md\n"
    config.write_text(f"INHERIT: {json.dumps(str(ROOT / 'mkdocs.yml'))}\n{nav}")
    out = _build(config, tmp_path / "site", tmp_path, strict=False)
    assert out.returncode != 0
    warnings = [line for line in out.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, out.stderr[-4000:]
    assert "'no-such-page.md'" in warnings[0], warnings
    assert "Aborted with 1 warnings in strict mode" in out.stdout + out.stderr, out.stdout
