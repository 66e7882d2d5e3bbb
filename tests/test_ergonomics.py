"""Notebook habits: re-run cells, single samples, one array for one input, model tracebacks."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import nbinfer
from nbinfer.session import Session

RERUN = textwrap.dedent(
    """
    import psutil
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    for _ in range(5):
        result = shell.run_cell(%r, store_history=True)
        result.raise_error()
    servers = psutil.Process().children()
    print(len(servers), len(shell.user_ns["nbinfer"].sessions()))
    """
)


@pytest.mark.parametrize(
    "cell",
    [
        "import nbinfer\\nsession = nbinfer.Session(demo=False)",
        # displayed, so IPython's Out history keeps every one alive: shared() is the answer
        "import nbinfer\\nsession = nbinfer.Session.shared(demo=False)\\nsession",
    ],
    ids=["unreferenced-session-stops-its-server", "shared-session-reused"],
)
def test_rerunning_a_session_cell_five_times_leaves_one_server(cell: str) -> None:
    code = RERUN % cell.replace("\\n", "\n")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.splitlines()[-1].split() == ["1", "1"], out.stderr


def test_sessions_lists_open_sessions_and_forgets_closed_ones() -> None:
    with Session(demo=False) as first:
        second = Session(first.url)
        listed = nbinfer.sessions()
        assert listed.index(first) < listed.index(second)
        second.close()
        assert second not in nbinfer.sessions()
    assert first not in nbinfer.sessions()
    assert first.server is not None and not first.server.running


def test_shared_session_is_one_per_options_and_restarts_after_close() -> None:
    shared = Session.shared(demo=False)
    try:
        assert Session.shared(demo=False) is shared
        other = Session.shared(demo=False, protocol="grpc")
        assert other is not shared and other.protocol == "grpc"
        other.close()
    finally:
        shared.close()
    again = Session.shared(demo=False)
    try:
        assert again is not shared and again.server is not None and again.server.running
    finally:
        again.close()
