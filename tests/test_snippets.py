"""Every fenced bash / python block of README.md and docs/*.md runs as written (issue 20).

Each page runs as a reader would run it: its blocks in order, in a scratch directory; python
(and ipython) blocks in one IPython shell, like the cells of one notebook; bash blocks in bash.
Markers, an HTML comment on the line before a block (invisible on GitHub and the docs site):

``<!-- not-run: reason -->``
    The block is not run; the reason shows as a pytest skip.
``<!-- background -->``
    A bash block that starts a server: it runs in the background until it prints its
    ``NBINFER READY`` line and is stopped when the page ends. ``<!-- background: from TEXT -->``
    runs the block from ``TEXT`` on (what comes before, e.g. an install, is tested elsewhere:
    the README's install by :func:`test_readme_install_leaves_the_clone_clean`).

Blocks run as written when Triton's ports 8000 / 8001 are free. When either is busy on the
test machine, or another page holds them (the pages run on several xdist workers at once: the
first to take a lock file keeps Triton's ports until it ends), both are replaced by free ports
throughout the page (the same change in every block; a background ``nbinfer serve`` without
port options gets them), so a busy port does not fail a page. Blocks in other
languages (``text``, ``json``, ...) are not code to run; an unlabelled block fails the test.

A page's processes (its shell, bash blocks, servers, and what they start) run at a lower CPU
priority (:data:`NICE`): nothing here times them, and a page's load sweep (profiling.md runs
about twenty settings, each as fast as the machine allows for a fixed time) otherwise takes the
cores the suite's other tests are waiting for.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("bash", "python", "ipython")
NOT_CODE = ("text", "json", "yaml", "toml", "console", "output", "protobuf", "pbtxt")
MARKER = re.compile(r"^<!--\s*(not-run|background)\s*(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
BLOCK_TIMEOUT = 180.0
#: ``nice`` for every process a page starts (see the module docstring).
NICE = ["nice", "-n", "10"]


@dataclass
class Block:
    """One fenced block of a page."""

    page: Path
    line: int
    language: str
    code: str
    marker: str = ""
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` (top-level fences only), with the marker before each."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        previous = lines[i - 1] if i else ""
        marker = MARKER.match(previous.strip())
        found.append(
            Block(
                page,
                i + 1,
                fence.group(1).lower(),
                "\n".join(lines[i + 1 : end]) + "\n",
                marker.group(1) if marker else "",
                (marker.group(2) or "") if marker else "",
            )
        )
        i = end + 1
    return found


ALL = [b for page in PAGES for b in blocks(page)]
SKIPPED = [b for b in ALL if b.marker == "not-run"]
RUNNABLE = sorted(
    {b.page for b in ALL if b.language in RUN and b.marker != "not-run"}, key=PAGES.index
)


def test_every_block_is_labelled_and_every_skip_says_why() -> None:
    unlabelled = [b.where for b in ALL if not b.language]
    unknown = [b.where for b in ALL if b.language and b.language not in RUN + NOT_CODE]
    silent = [b.where for b in SKIPPED if not b.argument]
    assert (unlabelled, unknown, silent) == ([], [], [])


#: Not-run blocks are kept to a minimum (issue 20): installs into the reader's environment, the
#: test suites themselves, minutes of load, a large downloaded model, someone else's server.
#: Raise this only for a block that cannot run here at modest cost (seconds, no network).
MAX_NOT_RUN = 9  # 9: docs/beyond.md's Spark block (its JVM alone takes ~45 s here)


def test_not_run_blocks_stay_few() -> None:
    assert len(SKIPPED) <= MAX_NOT_RUN, [f"{b.where}: {b.argument}" for b in SKIPPED]


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_block_marked_not_run(block: Block) -> None:
    pytest.skip(f"{block.where}: {block.argument}")


# -- running a page --------------------------------------------------------------------------

#: The notebook stand-in: runs the cells it reads (JSON lines on stdin) in one IPython shell
#: and answers each on the reply pipe with null or the error's traceback.
SHELL = textwrap.dedent(
    """
    import json, os, sys, traceback
    from IPython.core.interactiveshell import InteractiveShell

    replies = os.fdopen(int(sys.argv[1]), "w")
    shell = InteractiveShell.instance(colors="NoColor")
    for line in sys.stdin:
        result = shell.run_cell(json.loads(line), store_history=True)
        error = result.error_before_exec or result.error_in_exec
        text = None if error is None else "".join(traceback.format_exception(error))
        sys.stdout.flush()
        replies.write(json.dumps(text) + "\\n")
        replies.flush()
    """
)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


#: Held by the page running on Triton's own ports 8000 / 8001 (one at a time across workers).
TRITON_PORTS_LOCK = Path(tempfile.gettempdir()) / "nbinfer-snippets-ports-8000-8001.lock"


def _lock(path: Path) -> IO[str] | None:
    """``path`` opened and exclusively locked (released when closed), or None when it is held."""
    handle = path.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


class Page:
    """The state of one page being run: scratch dir, environment, shell, background servers."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports_lock: IO[str] | None = _lock(TRITON_PORTS_LOCK)
        busy = not all(_port_free(port) for port in (8000, 8001))
        if busy and self.ports_lock is not None:
            self.ports_lock.close()  # someone else's server: nothing to keep
            self.ports_lock = None
        self.ports = {} if self.ports_lock else {"8000": str(free_port()), "8001": str(free_port())}
        self.env = dict(os.environ)
        self.env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + self.env["PATH"]
        self.env["MPLBACKEND"] = "Agg"
        self.env["PYTHONUNBUFFERED"] = "1"
        self.shell: subprocess.Popen[str] | None = None
        self.replies: IO[str] | None = None
        self.log = tmp / "shell.log"
        self.background: list[subprocess.Popen[str]] = []
        self.log_file: IO[str] | None = None

    def code(self, block: Block) -> str:
        code = block.code
        for port, free in self.ports.items():
            code = re.sub(rf"(?<!\d){port}(?!\d)", free, code)
        if block.marker == "background" and block.argument.startswith("from "):
            start = block.argument[5:].strip().strip("\"'")
            assert start in code, f"{block.where}: the block has no {start!r} to run from"
            code = code[code.index(start) :]
        if block.marker == "background" and self.ports and "--http-port" not in code:
            code = (
                f"{code.strip()} --http-port {self.ports['8000']} --grpc-port {self.ports['8001']}"
            )
        return code

    def python(self, block: Block) -> None:
        if self.shell is None:
            read, write = os.pipe()
            self.log_file = self.log.open("w")
            self.shell = subprocess.Popen(
                [*NICE, sys.executable, "-c", SHELL, str(write)],
                stdin=subprocess.PIPE,
                stdout=self.log_file,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=self.tmp,
                env=self.env,
                pass_fds=(write,),
            )
            os.close(write)
            self.replies = os.fdopen(read)
        assert self.shell.stdin is not None and self.replies is not None
        self.shell.stdin.write(json.dumps(self.code(block)) + "\n")
        self.shell.stdin.flush()
        reply = self.replies.readline()
        assert reply, f"{block.where}: the shell died\n{self.log.read_text()[-4000:]}"
        error = json.loads(reply)
        assert error is None, f"{block.where} failed:\n{block.code}\n{error}"

    def bash(self, block: Block) -> None:
        code = self.code(block)
        if block.marker == "background":
            self._start(block, code)
            return
        done = subprocess.run(
            [*NICE, "bash", "-euo", "pipefail", "-c", code],
            cwd=self.tmp,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
        )
        assert done.returncode == 0, (
            f"{block.where} failed ({done.returncode}):\n{code}\n{done.stdout}\n{done.stderr}"
        )

    def _start(self, block: Block, code: str) -> None:
        proc = subprocess.Popen(
            [*NICE, "bash", "-c", code],
            cwd=self.tmp,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.background.append(proc)
        assert proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("NBINFER READY") or time.monotonic() > deadline:
                break
        assert seen and seen[-1].startswith("NBINFER READY"), (
            f"{block.where}: no READY line from\n{code}\n{''.join(seen)}"
        )

    def close(self) -> None:
        # The shell (its sessions stop their servers at exit) and the background servers end
        # side by side: end of input and SIGTERM first, then the waits.
        if self.shell is not None:
            assert self.shell.stdin is not None
            self.shell.stdin.close()
        for proc in self.background:
            os.killpg(proc.pid, signal.SIGTERM)
        if self.shell is not None:
            try:
                self.shell.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.shell.kill()
                self.shell.wait()
        if self.replies is not None:
            self.replies.close()
        if self.log_file is not None:
            self.log_file.close()
        for proc in self.background:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self.ports_lock is not None:  # after its servers stopped: the ports are free again
            self.ports_lock.close()


@pytest.fixture
def page_runner(tmp_path: Path) -> Iterator[Page]:
    page = Page(tmp_path)
    try:
        yield page
    finally:
        page.close()


# A page runs several blocks (profiling.md runs three load sweeps): a page gets the time of
# a few blocks, not the suite's per-test default.
@pytest.mark.timeout(3 * BLOCK_TIMEOUT)
@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_page_runs_as_written(page: Path, page_runner: Page) -> None:
    for block in blocks(page):
        if block.marker == "not-run" or block.language not in RUN:
            continue
        if block.language == "bash":
            page_runner.bash(block)
        else:
            page_runner.python(block)


# -- the README's install leaves the clone clean ---------------------------------------------


def _readme_install() -> str:
    """The README's install command (the first bash block of its "Install" section)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## Install") + 1
    first = next(b for b in blocks(ROOT / "README.md") if b.line > start and b.language == "bash")
    return first.code.splitlines()[0].split("#")[0].strip()


def test_readme_install_leaves_the_clone_clean(tmp_path: Path) -> None:
    """A fresh clone, the README's ``pip install .`` into a virtualenv there: git status clean.

    ``--no-deps`` keeps it cheap (only the build backend is fetched, into pip's isolated build
    environment, so ``[build-system] requires`` is still resolved as a reader's install does):
    the build, which is what writes into the tree (``build/``, ``*.egg-info``), is the same as a
    full install's. The virtualenv is made without pip (``ensurepip`` cost more than the build)
    and this test environment's pip installs into it (``pip --python``).
    """
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    install = _readme_install()
    assert install == "pip install ."
    clone = tmp_path / "clone"
    subprocess.run([git, "clone", "-q", str(ROOT), str(clone)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip, *arguments = install.split()
    done = subprocess.run(
        [sys.executable, "-m", pip, "--python", str(python), *arguments, "-q", "--no-deps"],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"{install} failed:\n{done.stdout}\n{done.stderr}"
    # No deprecation the build backend announces (a table `license` would break builds from
    # setuptools' 2027 releases on): what builds today keeps building.
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    installed = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('nbinfer').origin)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert installed.stdout.startswith(str(venv)), installed  # the venv's copy, not the clone
    status = subprocess.run(
        [git, "status", "--porcelain", "--ignored=no"],
        cwd=clone,
        check=True,
        capture_output=True,
        text=True,
    )
    assert status.stdout == ""
    ignored = subprocess.run(
        [git, "status", "--porcelain", "--ignored"], cwd=clone, capture_output=True, text=True
    ).stdout
    assert "egg-info" in ignored or "build/" in ignored  # the build did write; git ignores it
