"""The binder kernel of the notebook tests and the notebooks executed on it, once per session.

``binder_kernel``: a virtualenv made only from binder/requirements.txt + binder/postBuild, as a
kernelspec whose kernel has no network (``tests/offline/sitecustomize.py`` refuses connections
past loopback from Python; where the machine allows it, a network namespace with only loopback up
stops C libraries too; see ``tests/test_notebooks.py``).

``executed_notebook(name)``: ``notebooks/NAME.ipynb`` executed top to bottom on that kernel, kept in
a folder of this session keyed by the notebook's content hash, so ``tests/test_notebooks.py``
(which checks each run) and ``tests/test_docs_site.py`` (which renders the executed copies) run
each notebook once; the first asked for runs them all, two at a time, each in a kernel of its own
(the group is the suite's longest). A notebook that failed fails every test asking for it, with
the same error.
Both files are one xdist group (``tests/conftest.py``), so they share this session's copies.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a notebook cell may take on the binder kernel.
CELL_TIMEOUT = 600

KERNEL = "nbinfer-binder"
#: The guard's ``sitecustomize``: the whole ``PYTHONPATH`` of the notebook kernel.
OFFLINE = ROOT / "tests" / "offline"
#: The notebook kernel's ``PYSPARK_SUBMIT_ARGS`` (see :func:`binder_kernel`).
SPARK_SUBMIT_ARGS = "--driver-java-options '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' pyspark-shell"
#: The notebooks that take longest on the binder kernel, started first (Spark and Dask; torch).
LONGEST_NOTEBOOKS = [
    ROOT / "notebooks" / "09_beyond_one_machine.ipynb",
    ROOT / "notebooks" / "04_serve_your_model.ipynb",
]
#: Runs the command after it in a network namespace of its own with only loopback up.
NETNS = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "netns"]


def _network_namespace() -> list[str]:
    """:data:`NETNS` when this machine can make one whose loopback works, else ``[]``."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return []
    loopback = (
        "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "socket.create_connection(s.getsockname()).close()"
    )
    probe = subprocess.run(
        [*NETNS, sys.executable, "-c", loopback], capture_output=True, timeout=60
    )
    return NETNS if probe.returncode == 0 else []


def _run(cmd: list[str], **kwargs: object) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"


#: Recipe inputs: a change to any of them makes a new cached virtualenv (:func:`_recipe_key`).
RECIPE = ("binder/requirements.txt", "binder/postBuild", "pyproject.toml")


def binder_cache() -> Path:
    """Where applied binder recipes are kept between sessions (``$NBINFER_BINDER_CACHE``)."""
    default = Path.home() / ".cache" / "nbinfer-binder"
    return Path(os.environ.get("NBINFER_BINDER_CACHE", default))


def _recipe_key(env: dict[str, str]) -> str:
    parts = [sys.version, env["NBINFER_TORCH_SPEC"], *((ROOT / f).read_text() for f in RECIPE)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _apply_recipe(env_dir: Path, tree: Path, env: dict[str, str]) -> None:
    """binder/requirements.txt, then binder/postBuild from ``tree`` (a copy of this checkout)."""
    env = dict(env, PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}")
    python = str(env_dir / "bin" / "python")
    requirements = str(tree / "binder" / "requirements.txt")
    _run([python, "-m", "pip", "install", "-q", "-r", requirements], env=env)
    _run(["bash", str(tree / "binder" / "postBuild")], env=env, cwd=tree)


def _copy_tree(to: Path) -> Path:
    """This checkout without its VCS, build artefacts and tool caches (mypy's is ~40 MB after
    `.ci/run`'s lint); postBuild must leave none here."""
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "*.egg-info", "__pycache__", "build", "site", ".*_cache", ".hypothesis"
    )
    shutil.copytree(ROOT, to, ignore=ignore)
    return to


#: A cached recipe virtualenv nobody copied for this long is deleted (each holds ~2 GB: torch).
UNUSED_DAYS = 7


def _copy_cached_base(tree: Path, env: dict[str, str], to: Path) -> None:
    """Hard-link a copy of a virtualenv the binder recipe was applied to into ``to``.

    The base is kept under :func:`binder_cache` keyed by the recipe's inputs (torch and the
    requirements install once, not every session). Each copy stamps its base; bases of other
    recipes nobody copied for :data:`UNUSED_DAYS` are deleted (a change to the recipe's inputs
    makes a new one: without this the cache grew by ~2 GB each time). Making, copying and pruning
    all hold the cache's lock, so a base is never deleted while it is copied.
    """
    cache = binder_cache()
    cache.mkdir(parents=True, exist_ok=True)
    base = cache / f"binder-{_recipe_key(env)}"
    with open(cache / "binder.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions must not fill one venv at once
        if not (base / ".complete").exists():
            shutil.rmtree(base, ignore_errors=True)
            venv.create(base, with_pip=True)
            _apply_recipe(base, tree, env)
            (base / ".complete").write_text("the binder recipe applied\n")
        (base / ".used").touch()
        _run(["cp", "-al", str(base), str(to)])
        for other in cache.glob("binder-*"):
            stamp = other / ".used"
            used = stamp.stat().st_mtime if stamp.exists() else other.stat().st_mtime
            if other != base and time.time() - used > UNUSED_DAYS * 86400:
                shutil.rmtree(other, ignore_errors=True)


@pytest.fixture(scope="session")
def binder_kernel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A virtualenv made only from binder/requirements.txt + binder/postBuild, as a kernelspec
    whose kernel has no network (see the module docstring).

    The recipe runs in full every session, on a hard-linked copy of a virtualenv it was applied
    to before (:func:`_copy_cached_base`): what is already there is kept, nbinfer installs afresh
    from this checkout, and the cached one stays as it was (pip replaces files, never rewrites
    them).
    """
    base = tmp_path_factory.mktemp("binder")
    env_dir = base / "venv"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # This machine cannot reach download.pytorch.org; the same CPU build is installable by pin.
    env.setdefault("NBINFER_TORCH_SPEC", "torch==2.13.0")
    # postBuild runs from the repository root; copy the tree so the build leaves no artefacts here.
    tree = _copy_tree(base / "repo")
    _copy_cached_base(tree, env, env_dir)
    _apply_recipe(env_dir, tree, env)
    python = str(env_dir / "bin" / "python")
    installed = subprocess.run(
        [python, "-c", "import nbinfer, pathlib; print(pathlib.Path(nbinfer.__file__).parent)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=base,
        check=True,
    ).stdout.strip()
    assert installed.startswith(str(env_dir)), f"nbinfer of the binder kernel is {installed}"
    for module in (tree / "nbinfer").rglob("*.py"):  # this checkout's nbinfer, not a cached one
        copy = Path(installed) / module.relative_to(tree / "nbinfer")
        assert copy.read_bytes() == module.read_bytes(), f"{copy} is not this checkout's"
    spec_dir = base / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    netns = _network_namespace()
    spec = {
        "argv": [*netns, python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nbinfer (binder, offline)",
        "language": "python",
        "env": {
            # only the guard: the kernel imports nbinfer from its own virtualenv, not this checkout
            "PYTHONPATH": str(OFFLINE),
            # 09's Spark driver JVM (local mode: the executors too) lives for seconds: the quick
            # JIT tier and one GC thread take about a third less CPU than the defaults, same
            # results (pyspark reads this when the notebook's SparkSession starts its JVM)
            "PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS,
        },
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return {
        "jupyter_path": str(base),
        "python": python,
        # ZMQ over TCP would stop at the namespace's own loopback; Unix sockets cross it.
        "transport": "ipc" if netns else "tcp",
    }


def _client(nb: Any, kernel: dict[str, str], tmp: Path, timeout: int) -> Any:
    """An nbclient for ``nb`` on the offline binder kernel, run in ``tmp/cwd``."""
    from nbclient import NotebookClient
    from traitlets.config import Config

    config = Config()
    config.KernelManager.transport = kernel["transport"]
    if kernel["transport"] == "ipc":
        # an absolute socket path: a relative one would resolve in two different directories
        # (ours and the kernel's); this one keeps the sockets out of the notebook's
        config.KernelManager.ip = str(tmp / "kernel")
    cwd = tmp / "cwd"
    cwd.mkdir()
    return NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        config=config,
        resources={"metadata": {"path": str(cwd)}},
    )


#: Notebooks executed at once on the binder kernel (each in a kernel of its own): one per core of
#: the 2-core CI machine; the group's wall time is the suite's longest.
AT_ONCE = 2


async def _execute_all(paths: list[Path], kernel: dict[str, str], tmp: Path) -> dict[Path, Any]:
    """Each of ``paths`` executed on the binder kernel, :data:`AT_ONCE` at a time, each in
    ``tmp/<name>``: path -> the executed notebook, or the exception it raised (CellExecutionError:
    a cell failed)."""
    import asyncio

    import nbformat

    slots = asyncio.Semaphore(AT_ONCE)

    async def one(path: Path) -> Any:
        async with slots:
            nb = nbformat.read(path, as_version=4)
            run = tmp / path.stem
            run.mkdir()
            await _client(nb, kernel, run, timeout=CELL_TIMEOUT).async_execute()
            return nb

    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = kernel["jupyter_path"]  # the kernelspec, for every kernel
    try:
        answers = await asyncio.gather(*(one(p) for p in paths), return_exceptions=True)
    finally:
        if previous is None:
            del os.environ["JUPYTER_PATH"]
        else:
            os.environ["JUPYTER_PATH"] = previous
    return dict(zip(paths, answers, strict=True))


@pytest.fixture(scope="session")
def executed_notebook(
    binder_kernel: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """``name -> path`` of ``notebooks/NAME.ipynb`` executed on the binder kernel, run once.

    The first call runs every notebook of ``notebooks/`` (:data:`AT_ONCE` at a time, the
    longest first); the later ones read the copies.
    """
    import asyncio

    import nbformat

    cache = tmp_path_factory.mktemp("executed-notebooks")
    failures: dict[str, BaseException] = {}

    def key_of(source: Path) -> str:
        return hashlib.sha256(source.read_bytes()).hexdigest()[:16]

    def run(sources: list[Path]) -> None:
        todo = [s for s in sources if not (cache / key_of(s) / s.name).exists()]
        todo = [s for s in todo if key_of(s) not in failures]
        if not todo:
            return
        runs = cache / f"run-{len(list(cache.iterdir()))}"
        runs.mkdir()
        for source, answer in asyncio.run(_execute_all(todo, binder_kernel, runs)).items():
            if isinstance(answer, BaseException):
                failures[key_of(source)] = answer
                continue
            out = cache / key_of(source) / source.name
            out.parent.mkdir()
            nbformat.write(answer, out)

    def executed(name: str) -> Path:
        source = ROOT / "notebooks" / f"{name}.ipynb"
        if not list(cache.iterdir()):  # the first call: all of them, the longest first
            every = sorted((ROOT / "notebooks").glob("*.ipynb"), key=lambda p: p.name)
            run([*LONGEST_NOTEBOOKS, *(p for p in every if p not in LONGEST_NOTEBOOKS)])
        run([source])
        key = key_of(source)
        if key in failures:
            raise failures[key]
        return cache / key / source.name

    return executed
