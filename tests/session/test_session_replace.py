"""A new local Session replaces the earlier ones: re-running the README's cell leaves one server.

IPython's ``Out`` history keeps every displayed session alive, so "nothing references it any
more" cannot be what stops the old server: a new local ``Session()`` closes the earlier local
sessions of the process (``keep_previous=True`` keeps them; ``Session.shared()`` and sessions
with a URL are never replaced). Live servers are counted from ``/proc`` (children of the process
whose command line runs ``nbinfer.server``).
"""

from __future__ import annotations

import gc
import os
import sys
import textwrap
import weakref
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

import nbinfer
from nbinfer.errors import ConnectError, InvalidInputError
from nbinfer.session import Session
from tests.children import python_json

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def server_children(pid: int | None = None) -> list[int]:
    """The live nbinfer servers ``pid`` (default: this process) started, by /proc: its
    ``python -m nbinfer.server`` children, and the children of its fork servers
    (``nbinfer.server.forkserver``, which fork every server after the first)."""
    pid = os.getpid() if pid is None else pid
    procs: dict[int, tuple[int, str, list[bytes]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone in between
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        procs[int(entry.name)] = (int(fields[1]), fields[0], cmdline)
    forkservers = {
        p
        for p, (ppid, _, argv) in procs.items()
        if ppid == pid and b"nbinfer.server.forkserver" in argv
    }
    return sorted(
        p
        for p, (ppid, state, argv) in procs.items()
        if state != "Z" and (ppid in forkservers or (ppid == pid and b"nbinfer.server" in argv))
    )


# The README's cell ("In a notebook"), displayed: IPython's Out history keeps each session.
README_CELL = "import nbinfer\n\nsession = nbinfer.Session()\nsession"

RERUN = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from tests.session.test_session_replace import README_CELL, server_children

    shell = InteractiveShell.instance()
    counts, shown = [], []
    for _ in range(5):
        result = shell.run_cell(README_CELL, store_history=True)
        result.raise_error()
        counts.append(len(server_children()))
        shown.append(result.result is shell.user_ns["session"])
    first = shell.user_ns["Out"][1]  # the first run's session, kept by the output history
    try:
        first.infer("iris", [5.1, 3.5, 1.4, 0.2])
    except Exception as exc:
        error = [type(exc).__name__, str(exc)]
    else:
        error = None
    print(json.dumps({
        "counts": counts,
        "shown": shown,
        "out": len(shell.user_ns["Out"]),
        "first_running": first.server.running,
        "error": error,
        "second": shell.user_ns["Out"][2].url,
        "current": shell.user_ns["session"].url,
        "sessions": [s.url for s in shell.user_ns["nbinfer"].sessions()],
    }))
    """
)


def test_readme_cell_displayed_five_times_leaves_one_server() -> None:
    root = Path(__file__).resolve().parents[2]
    report = python_json(
        ["-c", RERUN],
        timeout=110,
        cwd=root,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), *sys.path])),
    )
    assert report["shown"] == [True] * 5  # each run displayed its session: Out holds all five
    assert report["out"] == 5
    assert report["counts"] == [1, 1, 1, 1, 1], report
    assert not report["first_running"]
    kind, message = report["error"]
    assert kind == "ConnectError"
    assert "was replaced by a newer local nbinfer.Session()" in message
    assert report["second"] in message  # names the session that replaced it
    assert "keep_previous=True" in message  # and how to keep both
    assert report["sessions"] == [report["current"]]


@pytest.fixture
def already() -> tuple[set[int], list[Session]]:
    """Servers and sessions that other tests of the run left in this process (not this test's)."""
    return set(server_children()), list(nbinfer.sessions())


def new_children(already: tuple[set[int], list[Session]]) -> list[int]:
    """The server children this test started that are still alive, sorted."""
    return sorted(set(server_children()) - already[0])


def new_sessions(already: tuple[set[int], list[Session]]) -> list[Session]:
    """The open sessions this test created, oldest first."""
    return [s for s in nbinfer.sessions() if s not in already[1]]


def test_keep_previous_keeps_both_and_a_plain_session_replaces_them(
    already: tuple[set[int], list[Session]],
) -> None:
    first = Session(device="cpu", demo=False)
    second = Session(device="cpu", demo=False, keep_previous=True)
    try:
        assert first.server is not None and second.server is not None
        assert first.server.running and second.server.running
        assert len(new_children(already)) == 2
        assert "iris" not in set(first.models["name"])  # both answer
        assert new_sessions(already) == [first, second]
        third = Session(device="cpu", demo=False)
        try:
            assert not first.server.running and not second.server.running
            assert new_children(already) == [third.server.pid]
            assert new_sessions(already) == [third]
            assert "replaced by a newer Session" in repr(first)
            for old in (first, second):
                with pytest.raises(ConnectError, match="replaced by a newer local") as caught:
                    old.models  # noqa: B018
                assert third.url in str(caught.value)
            with pytest.raises(ConnectError, match="keep_previous=True"):
                first.restart()
        finally:
            third.close()
    finally:
        first.close()
        second.close()
    assert new_children(already) == []


def test_remote_and_shared_sessions_are_never_replaced(
    already: tuple[set[int], list[Session]],
) -> None:
    shared = Session.shared(device="cpu", demo=False)
    try:
        plain = Session(device="cpu", demo=False)  # does not replace the shared one
        remote = Session(plain.url, token=plain.token)
        try:
            assert shared.server is not None and shared.server.running
            newer = Session(device="cpu", demo=False)  # replaces `plain` only
            try:
                assert plain.server is not None and not plain.server.running
                assert shared.server.running and Session.shared(device="cpu", demo=False) is shared
                assert remote in nbinfer.sessions()  # open: it did not start that server
                pids = sorted([shared.server.pid, newer.server.pid])  # type: ignore[union-attr]
                assert new_children(already) == pids
            finally:
                newer.close()
        finally:
            remote.close()
            plain.close()
    finally:
        shared.close()


def test_keep_previous_is_refused_for_a_url() -> None:
    with pytest.raises(InvalidInputError, match="keep_previous applies to a local server"):
        Session("127.0.0.1:1", keep_previous=True)


def test_a_displayed_session_holds_no_reference_to_itself(
    already: tuple[set[int], list[Session]],
) -> None:
    """The rich display returns strings: dropping the session stops its server at once."""
    shell = InteractiveShell.instance()
    session = Session(device="cpu", demo=False)
    server = session.server
    assert server is not None
    data, _ = shell.display_formatter.format(session)
    assert "text/html" in data and "Session" in data["text/plain"]
    ref = weakref.ref(session)
    del session
    gc.collect()
    assert ref() is None  # nothing the display made (or cached) keeps it
    assert not server.running
    assert new_children(already) == []
