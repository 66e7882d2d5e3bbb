"""The real v2 peers, installed once and started once per test session (reusable fixtures).

Every server fixture below is session-scoped and yields a :class:`Peer`: ``name``,
``http_url`` (``http://127.0.0.1:P``), ``grpc_url`` (``grpc://127.0.0.1:Q``), ``models`` (the
names it serves) and ``binary_http`` (whether it takes the binary tensor extension). Each serves
the same ``add_sub`` (FP32 ``INPUT0``, ``INPUT1`` [-1, 16] -> ``OUTPUT0`` sum, ``OUTPUT1``
difference), ``times_two`` (INT64 [-1] -> x * 2), ``upper`` (BYTES [-1] -> upper-cased) and
``identity_bf16`` (BF16 [-1] -> the same; Triton's is ``triton_models/``, MLServer's declares no
tensors since its types have no BF16):

* ``nbinfer_peer``  nbinfer's own ``LocalServer`` (demo models + ``tests/peers/models``).
* ``triton``        real ``tritonserver`` 2.51 (from the ``nvidia-pytriton`` wheel, Python
  backend) serving the nbinfer *exports* of those models, with a numpy-only Python standing in
  for a stock Triton image (see PEERS.md for why it is set up this way); also ``negate``.
* ``triton_launcher`` a function ``(repository) -> Peer`` starting more Tritons (stopped at the
  end of the session: all peer processes get SIGTERM together once the last peers test ran).
* ``mlserver``      Seldon MLServer 1.7 (``parallel_workers=0``), runtimes in ``mlserver_models``.
* ``kserve``        KServe's ``ModelServer`` (``tests/client/kserve_server.py``, a subprocess in
  the kserve venv: kserve's protos clash with tritonclient's, so it is never imported here).
* ``kserve_undeclared`` KServe again, its models declaring no inputs (``kserve_undeclared.py``).
* ``kserve_python`` the kserve venv's interpreter, for scripts that run KServe's own client
  (``kserve_clients.py``).
* ``triton_restricted`` Triton with the repository and statistics APIs behind ``admin-key``.

Peers live in their own virtualenvs (``venvs.py``: ``~/.cache/nbinfer-peers/<peer>-<hash>``,
built on first use, ~15 s each when cold); a peer that cannot be installed skips its tests with
the reason. Use them from any test directory with ``pytest_plugins = ["tests.peers.conftest"]``
or by moving a test under ``tests/peers/``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.ports import free_port

sys.path.insert(0, str(Path(__file__).parent))
from peer import MATRIX_MODELS, Peer
from venvs import PeerUnavailable, ensure_venv, python_of

HERE = Path(__file__).parent
PEER_MODELS = HERE / "models"
#: Hand-written Triton Python models (copied into the Triton repository beside the exports).
TRITON_MODELS = HERE / "triton_models"
KSERVE_SCRIPT = HERE.parent / "client" / "kserve_server.py"
START_TIMEOUT = 90.0


_STARTED: list[Peer] = []


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After this worker's last peers test, every peer process gets SIGTERM at once.

    Their fixtures' teardowns (at the end of the worker's session) then only reap them: the
    Tritons, MLServer and KServe drain side by side while other tests run, not one after another
    in the suite's last seconds (17 s of the tail). The peers tests run together (one xdist group,
    and one directory in collection order), so no peers test follows this point.
    """
    if nextitem is None or not nextitem.nodeid.startswith("tests/peers/"):
        for peer in _STARTED:
            peer.terminate()


def _wait_ready(peer: Peer, what: str) -> Peer:
    deadline = time.monotonic() + START_TIMEOUT
    url = f"{peer.http_url}/v2/health/ready"
    while time.monotonic() < deadline:
        if peer.process is not None and peer.process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return peer
        except OSError:
            pass
        time.sleep(0.2)
    out = peer.output()
    peer.stop()
    raise RuntimeError(f"{what} did not become ready at {url}:\n{out}")


def _start(name: str, cmd: list[str], *, env: dict[str, str], cwd: Path, **kw: object) -> Peer:
    log = open(cwd / f"{name}.log", "w+b")  # noqa: SIM115 - closed by Peer.stop
    http_port, grpc_port = int(kw.pop("http_port")), int(kw.pop("grpc_port"))  # type: ignore[call-overload]
    process = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    peer = Peer(name, http_port, grpc_port, process=process, log=log, **kw)  # type: ignore[arg-type]
    _STARTED.append(peer)
    return _wait_ready(peer, name)


def _venv_or_skip(peer: str) -> Path:
    try:
        return ensure_venv(peer)
    except PeerUnavailable as exc:
        pytest.skip(f"{peer} cannot be installed on this machine: {exc}")


# -- nbinfer ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def nbinfer_peer() -> Iterator[Peer]:
    from nbinfer.server.launcher import LocalServer

    # peers are called by every client kind (tritonclient, curl, ...): no token, as nbinfer serve
    server = LocalServer(model_repository=PEER_MODELS, demo=True, device="cpu", auth_token=None)
    server.start()
    http = int(server.http_url.rsplit(":", 1)[1])
    grpc = int(server.grpc_url.rsplit(":", 1)[1])
    models = (*MATRIX_MODELS, "negate", "identity_bf16")
    yield Peer("nbinfer", http, grpc, models=models, stop_fn=server.stop)
    server.stop()


# -- real Triton -------------------------------------------------------------------------------


def _triton_home(venv: Path) -> tuple[Path, list[str]]:
    """A copy of the wheel's tritonserver dir with this Python's backend stub; the lib path."""
    site = Path(
        subprocess.check_output(
            [str(python_of(venv)), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            text=True,
        ).strip()
    )
    src = site / "pytriton" / "tritonserver"
    home = venv / "triton-home"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = src / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        pytest.skip(f"the nvidia-pytriton wheel has no Python backend stub for Python {version}")
    if not (home / "backends" / "python" / stub.name).is_file():
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(src, home)
        shutil.copy2(stub, home / "backends" / "python" / stub.name)
    libs = [str(sysconfig.get_config_var("LIBDIR")), str(site / "nvidia_pytriton.libs")]
    return home, libs


@pytest.fixture(scope="session")
def triton_launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Peer]]:
    venv = _venv_or_skip("triton")
    stock = _venv_or_skip("stock-python")
    home, libs = _triton_home(venv)
    started: list[Peer] = []

    def launch(
        repository: Path,
        models: tuple[str, ...] = MATRIX_MODELS,
        *,
        flags: tuple[str, ...] = (),
        path: str | None = None,
    ) -> Peer:
        http, grpc = free_port(), free_port()
        env = dict(os.environ)
        # Triton's embedded Python finds its prefix through `python3` on PATH (PYTHONPATH is
        # ignored): the numpy-only venv plays a stock Triton image's Python (``path`` replaces
        # that PATH, e.g. for models bringing their own execution environment).
        env["PATH"] = path or f"{stock / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["LD_LIBRARY_PATH"] = os.pathsep.join([*libs, env.get("LD_LIBRARY_PATH", "")])
        env.pop("PYTHONPATH", None)
        cmd = [
            str(home / "bin" / "tritonserver"),
            f"--model-repository={repository}",
            f"--backend-directory={home / 'backends'}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            f"--http-port={http}",
            f"--grpc-port={grpc}",
            "--allow-metrics=false",
            "--exit-timeout-secs=5",
            *flags,
        ]
        cwd = tmp_path_factory.mktemp("triton")
        peer = _start(
            "triton", cmd, env=env, cwd=cwd, http_port=http, grpc_port=grpc, models=models
        )
        started.append(peer)
        return peer

    yield launch
    for peer in started:
        peer.stop()


def export_peer_models(out: Path) -> Path:
    """Export demo ``add_sub`` / ``echo`` and the models of ``tests/peers/models`` to ``out``.

    ``triton_models/`` (Triton-only models) are copied beside them.
    """
    from nbinfer.server.demo.models import AddSub, Echo
    from nbinfer.server.export import export_model
    from nbinfer.server.repository import ModelRepository

    for demo in (AddSub(), Echo()):
        export_model(demo, out)
    repo = ModelRepository(PEER_MODELS, device="cpu")
    try:
        for name in ("times_two", "upper", "negate"):
            model = repo.resolve(name).model
            assert model is not None
            export_model(model, out)
    finally:
        repo.close()
    shutil.copytree(TRITON_MODELS, out, dirs_exist_ok=True)
    return out


@pytest.fixture(scope="session")
def triton_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_peer_models(tmp_path_factory.mktemp("triton-repo"))


@pytest.fixture(scope="session")
def triton(triton_launcher: Callable[..., Peer], triton_repository: Path) -> Peer:
    models = (*MATRIX_MODELS, "negate", "echo", "identity_bf16", "held")
    return triton_launcher(triton_repository, models=models)


#: The header a restricted Triton expects on its repository and statistics APIs.
RESTRICTED_HEADER = ("admin-key", "secret")


@pytest.fixture(scope="session")
def triton_restricted(triton_launcher: Callable[..., Peer], triton_repository: Path) -> Peer:
    """Triton with its model repository and statistics APIs behind ``admin-key: secret``.

    How teams deploy a shared Triton (and how PyTriton-fronted servers answer): metadata and
    inference stay open, listing / loading models and statistics need the header.
    """
    restriction = "model-repository,statistics:{}={}".format(*RESTRICTED_HEADER)
    flags = (f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}")
    peer = triton_launcher(
        triton_repository, models=(*MATRIX_MODELS, "negate", "echo"), flags=flags
    )
    peer.access = RESTRICTED_HEADER
    return peer


# -- Seldon MLServer ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mlserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    venv = _venv_or_skip("mlserver")
    root = tmp_path_factory.mktemp("mlserver")
    shutil.copy(HERE / "mlserver_models" / "models.py", root / "models.py")
    http, grpc = free_port(), free_port()
    settings = {
        "parallel_workers": 0,  # MLServer 1.7's workers fail with uvloop >= 0.22 (PEERS.md)
        "host": "127.0.0.1",
        "http_port": http,
        "grpc_port": grpc,
        "metrics_port": free_port(),
        "metrics_endpoint": None,
    }
    (root / "settings.json").write_text(json.dumps(settings))
    fp32 = [("INPUT0", "FP32", [-1, 16]), ("INPUT1", "FP32", [-1, 16])]
    declared = {
        "add_sub": ("AddSub", fp32, [("OUTPUT0", "FP32", [-1, 16]), ("OUTPUT1", "FP32", [-1, 16])]),
        "times_two": ("TimesTwo", [("INPUT0", "INT64", [-1])], [("OUTPUT0", "INT64", [-1])]),
        "upper": ("Upper", [("INPUT0", "BYTES", [-1])], [("OUTPUT0", "BYTES", [-1])]),
        "identity_bf16": ("Identity", [], []),  # MLServer's Datatype has no BF16 to declare
    }
    for name, (cls, ins, outs) in declared.items():
        (root / name).mkdir()
        doc = {
            "name": name,
            "implementation": f"models.{cls}",
            "inputs": [{"name": n, "datatype": d, "shape": s} for n, d, s in ins],
            "outputs": [{"name": n, "datatype": d, "shape": s} for n, d, s in outs],
        }
        (root / name / "model-settings.json").write_text(json.dumps(doc))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [str(venv / "bin" / "mlserver"), "start", str(root)]
    peer = _start(
        "mlserver", cmd, env=env, cwd=root, http_port=http, grpc_port=grpc, binary_http=False
    )
    yield peer
    peer.stop()


# -- KServe ModelServer ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def kserve_python() -> Path:
    """The interpreter of the kserve venv (kserve's protos clash with tritonclient's)."""
    return python_of(_venv_or_skip("kserve"))


def _start_kserve(python: Path, script: Path, cwd: Path) -> Peer:
    """Run one of the suite's KServe scripts (``--http-port P --grpc-port Q``) on loopback."""
    http, grpc = free_port(), free_port()
    cmd = [str(python), str(script), "--http-port", str(http), "--grpc-port", str(grpc)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    peer = _start("kserve", cmd, env=env, cwd=cwd, http_port=http, grpc_port=grpc)
    return _wait_port(peer, grpc)


def _wait_port(peer: Peer, port: int) -> Peer:
    """``peer`` once ``port`` takes connections (KServe opens gRPC beside HTTP, not before)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return peer
        except OSError:
            time.sleep(0.1)
    out = peer.output()
    peer.stop()
    raise RuntimeError(f"{peer.name} never opened port {port}:\n{out}")


@pytest.fixture(scope="session")
def kserve(kserve_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    peer = _start_kserve(kserve_python, KSERVE_SCRIPT, tmp_path_factory.mktemp("kserve"))
    yield peer
    peer.stop()


@pytest.fixture(scope="session")
def kserve_undeclared(
    kserve_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Peer]:
    """KServe whose ``add_sub`` / ``times_two`` / ``upper`` declare no inputs (its default)."""
    cwd = tmp_path_factory.mktemp("kserve-undeclared")
    peer = _start_kserve(kserve_python, HERE / "kserve_undeclared.py", cwd)
    yield peer
    peer.stop()
