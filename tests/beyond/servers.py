"""Servers for the "beyond one machine" tests: several real nbinfer servers on 127.0.0.1.

Each serves the demo models (``iris``) and a repository of three Python models:
``double`` (``Y = 2 * X``, FP32 ``[-1, 4]``, sleeps ``sleep`` seconds per batch, default
0.02), ``picky`` (as ``double``, but refuses batches holding a negative value, naming
the row) and ``slow`` (as ``double``, sleeping 0.2 s: calls are still in flight when a server is
killed); ``two`` returns ``Y = 2 * X`` and ``S``, each row's sum (FP64 ``[-1]``). Each
server's models append their name to a file of that server's own when a call's work is done
(:func:`completed`): what a killed server finished, which its statistics can no longer tell.
The file is named by the server's session id (its pid: servers start sessions of their own),
not passed in the server's environment: servers whose environments differ cannot share the
launcher's fork server (nbinfer/server/forkserver.py), and each would start a new one.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from nbinfer.server.launcher import LocalServer

_MODEL = """
import os
import time

import numpy as np

from nbinfer.server.model import Model

SLEEP = {sleep}
DONE = os.path.join({done!r}, f"{{os.getsid(0)}}.log")


class M(Model):
    def predict(self, inputs, context):
        x = inputs["X"]
        if {picky} and (x < 0).any():
            row = int(np.argwhere(x < 0)[0][0])
            raise ValueError(f"row {{row}} holds a negative measurement")
        time.sleep(SLEEP)
        if os.path.exists(DONE):  # a server of start_servers()
            with open(DONE, "a") as out:
                out.write("{name}\\n")
        return {{"Y": x * 2}}
"""

_CONFIG = """
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [ -1, 4 ] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [ -1, 4 ] }]
"""


_TWO = """
import numpy as np

from nbinfer.server.model import Model


class Two(Model):
    def predict(self, inputs, context):
        x = inputs["X"]
        return {"Y": x * 2, "S": x.sum(axis=1, dtype=np.float64)}
"""

_TWO_CONFIG = """
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [ -1, 4 ] }]
output [
  { name: "Y" data_type: TYPE_FP32 dims: [ -1, 4 ] },
  { name: "S" data_type: TYPE_FP64 dims: [ -1 ] }
]
"""


def _done(repo: Path) -> Path:
    """The folder of the files :func:`completed` reads, beside the repository."""
    return repo.parent / f"{repo.name}-done"


def _done_file(server: LocalServer) -> Path:
    assert server.model_repository is not None and server.pid is not None
    return _done(Path(server.model_repository)) / f"{server.pid}.log"


def write_repository(root: Path, sleep: float = 0.02) -> Path:
    """A model repository with ``double``, ``picky`` and ``slow`` (see the module doc)."""
    for name, model_sleep, picky in (
        ("double", sleep, False),
        ("picky", 0.0, True),
        ("slow", 0.2, False),
    ):
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        source = _MODEL.format(sleep=model_sleep, picky=picky, name=name, done=str(_done(root)))
        (root / name / "1" / "model.py").write_text(source)
        (root / name / "config.pbtxt").write_text(_CONFIG)
    _done(root).mkdir(exist_ok=True)
    (root / "two" / "1").mkdir(parents=True, exist_ok=True)
    (root / "two" / "1" / "model.py").write_text(_TWO)
    (root / "two" / "config.pbtxt").write_text(_TWO_CONFIG)
    return root


def start_servers(count: int, repo: Path) -> list[LocalServer]:
    """``count`` servers of ``repo`` (+ the demo models), without a token (workers need none)."""
    servers: list[LocalServer] = []
    try:
        for _ in range(count):
            server = LocalServer(model_repository=repo, demo=True, device="cpu", auth_token=None)
            servers.append(server.start())
            _done_file(server).write_text("")  # its models record in it (and not an earlier pid's)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers


def revive(servers: list[LocalServer], repo: Path) -> list[LocalServer]:
    """``servers``, each one that no longer runs (a test killed it) replaced by a fresh one."""
    for i, server in enumerate(servers):
        if not server.running:
            server.stop()
            servers[i] = start_servers(1, repo)[0]
    return servers


def completed(server: LocalServer, model: str) -> int:
    """The calls of ``model`` whose work ``server`` finished (answered or not: a server killed
    right after may not have sent the answer), counted by the model itself."""
    done = _done_file(server)
    return done.read_text().split().count(model)


def kill(server: LocalServer) -> None:
    """Kill a server the hard way (SIGKILL: no drain, connections reset)."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
