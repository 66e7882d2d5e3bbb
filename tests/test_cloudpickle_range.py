"""A served function's traceback shows the user's file, line and cell source with every cloudpickle
the package allows: the oldest (pyproject's lower bound) and the newest release the range admits.

Each version is installed with ``pip install --target`` into a directory of its own and put first
on ``PYTHONPATH`` of a subprocess (the kernel) and so of the local server it starts, so both ends
pickle and unpickle with that version. This is how the range in pyproject.toml is decided:
cloudpickle 3.1.3 started writing every ``co_filename`` as ``"<dynamic-code>"``; nbinfer now
carries the origin itself (``nbinfer/server/pickling.py``) and this test proves it across the range.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.package_range import env_first_on_path, install

KERNEL = textwrap.dedent(
    """
    import json, sys, urllib.request
    import cloudpickle
    from IPython.core.interactiveshell import InteractiveShell
    import nbinfer

    sys.path.insert(0, sys.argv[1])
    from served_module import fails_in_a_file

    shell = InteractiveShell.instance()
    cells = [
        "import numpy as np, nbinfer\\nsession = nbinfer.Session(demo=False)",
        "def bad(x: np.ndarray) -> np.ndarray:\\n    scale = 3\\n"
        "    return x / (scale - 3) + {}['k']",
        "session.serve(bad, inputs=[('x', 'FP32', [-1])], outputs=[('y', 'FP32', [-1])]);",
    ]
    for cell in cells:
        shell.run_cell(cell, store_history=True).raise_error()
    session = shell.user_ns["session"]
    session.serve(fails_in_a_file, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
    out = {"version": cloudpickle.__version__, "server": {}}
    token = session.server.auth_token
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    for name in ("bad", "fails_in_a_file"):
        body = json.dumps(
            {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1.0]}]}
        ).encode()
        request = urllib.request.Request(
            f"{session.server.http_url}/v2/models/{name}/infer", data=body,
            headers={"Content-Type": "application/json", **auth},
        )
        try:
            urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            out["server"][name] = json.loads(exc.read())["error"]
    print(json.dumps(out))
    session.close()
    """
)

MODULE = textwrap.dedent(
    """
    import numpy as np


    def fails_in_a_file(x: np.ndarray) -> np.ndarray:
        raise RuntimeError("from a module of the user's own")
    """
)


@pytest.mark.parametrize("which", ["oldest", "newest"])
def test_served_function_traceback_keeps_file_line_and_cell_source(
    which: str, tmp_path: Path
) -> None:
    version = install(tmp_path / "site", "cloudpickle", which)
    (tmp_path / "user").mkdir()
    module = tmp_path / "user" / "served_module.py"
    module.write_text(MODULE)
    env = env_first_on_path(tmp_path / "site")
    done = subprocess.run(
        [sys.executable, "-c", KERNEL, str(tmp_path / "user")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"] == version, "the kernel did not import the cloudpickle under test"
    cell = out["server"]["bad"]
    # The server's own text (no client fill-in): the cell's file, its line and its source line.
    assert "<dynamic-code>" not in cell, f"cloudpickle {version}: {cell}"
    assert ", line 3, in bad\n    return x / (scale - 3) + {}['k']" in cell, (
        f"cloudpickle {version}: the cell's source line is missing on the server:\n{cell}"
    )
    in_file = out["server"]["fails_in_a_file"]
    assert f'File "{module}", line 6, in fails_in_a_file' in in_file, (
        f"cloudpickle {version}: the module's file name or line was lost:\n{in_file}"
    )
    assert 'raise RuntimeError("from a module of the user\'s own")' in in_file
