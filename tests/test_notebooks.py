"""Every notebook in notebooks/ runs top to bottom in a fresh kernel of a virtualenv built from
binder/'s files alone (so the Binder recipe cannot drift from the code), with no network, and is
committed clean.

"No network" is enforced on the kernel and everything it spawns (the embedded server, ``nbinfer``
commands), in two layers: ``tests/offline/sitecustomize.py`` (on the kernel's ``PYTHONPATH``)
refuses any Python-level connection or name look-up beyond loopback with a clear
``NoNetworkError``; and, where the machine allows it (root with ``unshare`` and ``ip``, as here
and on CI), the kernel runs in a network namespace of its own with only loopback up, which also
stops what C libraries do below Python (libcurl, grpc core). The kernel then talks to nbclient
over Unix sockets (ZMQ ``ipc``), which cross namespaces. A notebook that reached the internet
fails here as it would on an offline machine; a probe notebook proves the guard bites.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import notebook_runs
import pytest
from notebook_runs import _client

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
    "08_generative",
    "09_beyond_one_machine",
]


def test_the_notebooks_are_there_and_committed_without_outputs() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3", path.name
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell["outputs"] and cell["execution_count"] is None, path.name


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_top_to_bottom_in_the_binder_environment(
    name: str, binder_kernel: dict[str, str], executed_notebook: Callable[[str], Path]
) -> None:
    import nbformat

    # executed once per session (tests/notebook_runs.py); raises CellExecutionError naming the cell
    nb = nbformat.read(executed_notebook(name), as_version=4)
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    assert binder_kernel["python"] != sys.executable


@pytest.mark.timeout(1500)
def test_the_engines_notebook_matched_the_pandas_path_through_dask_spark_arrow_and_polars(
    executed_notebook: Callable[[str], Path],
) -> None:
    """09 checks each engine's result against the pandas path in its own cells; its printed
    verdicts say those checks ran. Spark runs wherever Java is (``.ci/run`` installs it); without
    Java the notebook says it skipped Spark and why."""
    import nbformat

    nb = nbformat.read(executed_notebook("09_beyond_one_machine"), as_version=4)
    printed = "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stdout"
    )
    assert "200,000 rows, identical to the pandas path: True" in printed
    assert "pyarrow.Table: 1000 rows, same values: True" in printed
    assert "polars.DataFrame: 1000 rows, same values: True" in printed
    if shutil.which("java") is not None:
        assert "10,000 rows through Spark, identical to the pandas path: True" in printed
    else:
        assert "Spark section skipped: no Java runtime" in printed


#: Cells reaching past loopback from Python, and the error each must end in at once; ``None``:
#: the cell must pass (loopback stays open; a Python subprocess inherits the guard).
PYTHON_PROBES = [
    ("import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=60)", "NoNetworkError"),
    ("socket.socket().connect(('192.0.2.1', 80))", "NoNetworkError"),
    ("socket.getaddrinfo('pypi.org', 443)", "NoNetworkError"),
    (
        "import urllib.request\nurllib.request.urlopen('https://pypi.org/simple/', timeout=60)",
        "URLError",
    ),
    (
        "import subprocess, sys\n"
        "child = \"import socket; socket.socket().connect(('192.0.2.1', 80))\"\n"
        "done = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True)\n"
        "assert 'NoNetworkError' in done.stderr, done.stderr",
        None,
    ),
    (
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(server.getsockname()).close()\n"
        "server.close()\n"
        "socket.getaddrinfo('localhost', 80)",
        None,
    ),
]
#: The same from C, below any audit hook (libcurl for HTTP, grpc core): the namespace's work.
C_PROBES = [
    (
        "import nbinfer\nnbinfer.Client('http://192.0.2.1:8000').get_server_metadata()",
        "ConnectError",
    ),
    ("nbinfer.Client('grpc://192.0.2.1:8001').get_server_metadata()", "ConnectError"),
]


@pytest.fixture(scope="module")
def probed(
    binder_kernel: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> list[str | None]:
    """Each probe's error, :data:`PYTHON_PROBES` then :data:`C_PROBES` (these only where the
    kernel has a network namespace of its own), run as the cells of one notebook on one offline
    kernel."""
    import nbformat

    probes = PYTHON_PROBES + (C_PROBES if binder_kernel["transport"] == "ipc" else [])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code, _ in probes])
    client = _client(nb, binder_kernel, tmp_path_factory.mktemp("probes"), timeout=15)
    client.allow_errors = True  # a connect that waits (timeout above) fails the tests
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", binder_kernel["jupyter_path"])
        client.execute()
    return [
        next((out["ename"] for out in cell.outputs if out["output_type"] == "error"), None)
        for cell in nb.cells
    ]


@pytest.mark.timeout(300)
def test_a_cell_reaching_past_loopback_fails_at_once_under_the_guard(
    probed: list[str | None],
) -> None:
    assert probed[: len(PYTHON_PROBES)] == [want for _, want in PYTHON_PROBES]


@pytest.mark.timeout(300)
def test_libcurl_and_grpc_core_cannot_reach_past_loopback_either(
    binder_kernel: dict[str, str], probed: list[str | None]
) -> None:
    if binder_kernel["transport"] != "ipc":
        pytest.skip("no network namespace on this machine (needs root, unshare and ip)")
    assert probed[len(PYTHON_PROBES) :] == [want for _, want in C_PROBES]


def test_the_binder_cache_keeps_recent_recipes_and_deletes_long_unused_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each recipe change makes a ~2 GB virtualenv in the cache: one nobody copied for
    ``UNUSED_DAYS`` goes, the current one and recently used ones stay (tests/notebook_runs.py)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("NBINFER_BINDER_CACHE", str(cache))
    env = {"NBINFER_TORCH_SPEC": "torch==0"}
    current = cache / f"binder-{notebook_runs._recipe_key(env)}"
    old, recent = cache / "binder-old", cache / "binder-recent"
    for base in (current, old, recent):
        (base / "bin").mkdir(parents=True)
        (base / "bin" / "python").write_text("#")
        (base / ".complete").write_text("applied\n")
        (base / ".used").touch()
    long_ago = time.time() - (notebook_runs.UNUSED_DAYS + 1) * 86400
    os.utime(old / ".used", (long_ago, long_ago))
    notebook_runs._copy_cached_base(tmp_path, env, tmp_path / "copy")
    assert (tmp_path / "copy" / "bin" / "python").samefile(current / "bin" / "python")
    assert sorted(p.name for p in cache.glob("binder-*")) == sorted([current.name, recent.name])
