"""The Python snippets of docs/quickstart.md run as written (against a real local server)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_quickstart_python_blocks_run(tmp_path: Path) -> None:
    text = (DOCS / "quickstart.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "quickstart has no python block"
    script = tmp_path / "quickstart.py"
    script.write_text("\n".join(blocks))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]


def test_quickstart_documented_values_hold() -> None:
    import numpy as np

    import nbinfer

    with nbinfer.Session(device="cpu", demo=False) as session:

        def double(x):  # type: ignore[no-untyped-def]
            return x * 2

        session.serve(double, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
        y = session.infer("double", {"x": [1.0, 2.0]}).as_numpy("y")
        assert y.dtype == np.float32
        np.testing.assert_array_equal(y, [2.0, 4.0])
