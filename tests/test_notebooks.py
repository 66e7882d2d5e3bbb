"""Every notebook in notebooks/ runs top to bottom in a fresh kernel of a virtualenv built from
binder/'s files alone (so the Binder recipe cannot drift from the code), and is committed clean."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = [
    "01_quickstart",
    "02_dataframes",
    "03_image_classification",
    "04_serve_your_model",
    "05_remote_servers",
    "06_async_and_performance",
    "07_magics_and_browser",
]
KERNEL = "nbinfer-binder"


def test_the_seven_notebooks_are_there_and_committed_without_outputs() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3", path.name
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell["outputs"] and cell["execution_count"] is None, path.name


def _run(cmd: list[str], **kwargs: object) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"


@pytest.fixture(scope="module")
def binder_kernel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A virtualenv made only from binder/requirements.txt + binder/postBuild, as a kernelspec."""
    base = tmp_path_factory.mktemp("binder")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    env = dict(os.environ)
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env.pop("PYTHONPATH", None)
    # This machine cannot reach download.pytorch.org; the same CPU build is installable by pin.
    env.setdefault("NBINFER_TORCH_SPEC", "torch==2.13.0")
    _run(
        [python, "-m", "pip", "install", "-q", "-r", str(ROOT / "binder" / "requirements.txt")],
        env=env,
    )
    # postBuild runs from the repository root; copy the tree so the build leaves no artefacts here.
    tree = base / "repo"
    shutil.copytree(
        ROOT,
        tree,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "*.egg-info", "__pycache__", "build", "site"
        ),
    )
    _run(["bash", str(tree / "binder" / "postBuild")], env=env, cwd=tree)
    spec_dir = base / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "nbinfer (binder)", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return {"jupyter_path": str(base), "python": python}


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_top_to_bottom_in_the_binder_environment(
    name: str, binder_kernel: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("JUPYTER_PATH", binder_kernel["jupyter_path"])
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name=KERNEL, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    assert binder_kernel["python"] != sys.executable
