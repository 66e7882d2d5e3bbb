"""Peer virtualenvs: one per peer, installed once under a cache dir, keyed by a hash of its pins.

Each peer (real Triton from the ``nvidia-pytriton`` wheel, Seldon MLServer, KServe, a numpy-only
Python standing in for a stock Triton image) pins packages that clash with each other and with
ours, so each gets its own virtualenv under ``$NBINFER_PEERS_CACHE`` (default
``~/.cache/nbinfer-peers``): ``<peer>-<hash of its pins>/``. A venv is reused once its
``.complete`` marker exists; an install that fails leaves no marker, so the next run retries.
Usable as a script to warm the cache::

    python tests/peers/venvs.py triton mlserver kserve stock-python
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

#: The pins of each peer's virtualenv (changing a pin makes a new venv).
PINS: dict[str, tuple[str, ...]] = {
    # ships tritonserver 2.51 with the Python backend (stubs per Python version)
    "triton": ("nvidia-pytriton==0.7.0",),
    # what a stock Triton image's Python has: numpy 1.x and nothing else
    "stock-python": ("numpy<2",),
    # MLServer 1.7 fails to start workers with uvloop >= 0.22 (see PEERS.md)
    "mlserver": ("mlserver==1.7.1", "uvloop<0.22"),
    # KServe's ModelServer and InferenceRESTClient: its protos clash with tritonclient's
    "kserve": ("kserve==0.21.0",),
}


class PeerUnavailable(RuntimeError):
    """A peer cannot be installed on this machine (the reason is the message)."""


def cache_root() -> Path:
    """Where peer venvs live."""
    default = Path.home() / ".cache" / "nbinfer-peers"
    return Path(os.environ.get("NBINFER_PEERS_CACHE", default))


def venv_dir(peer: str) -> Path:
    """The venv directory of ``peer`` (keyed by the interpreter version and its pins)."""
    key = "\n".join((f"{sys.version_info.major}.{sys.version_info.minor}", *PINS[peer]))
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_root() / f"{peer}-{digest}"


def python_of(venv: Path) -> Path:
    """The venv's interpreter."""
    return venv / "bin" / "python"


def ensure_venv(peer: str) -> Path:
    """Create and fill ``peer``'s venv unless it is already complete; returns its directory.

    Raises:
        PeerUnavailable: the install failed (pip's output is in the message).
    """
    venv = venv_dir(peer)
    marker = venv / ".complete"
    if marker.exists():
        return venv
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f"{peer}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest runs must not fill one venv at once
        if marker.exists():
            return venv
        started = time.monotonic()
        base = getattr(sys, "_base_executable", sys.executable)
        steps = [
            [base, "-m", "venv", "--clear", str(venv)],
            [str(python_of(venv)), "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [str(python_of(venv)), "-m", "pip", "install", "-q", *PINS[peer]],
        ]
        for cmd in steps:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
            if done.returncode != 0:
                raise PeerUnavailable(
                    f"cannot install peer {peer!r} ({' '.join(cmd[3:])}): "
                    f"{(done.stderr or done.stdout)[-2000:]}"
                )
        seconds = time.monotonic() - started
        marker.write_text(f"installed in {seconds:.1f} s\n")
    return venv


if __name__ == "__main__":
    for name in sys.argv[1:] or list(PINS):
        t0 = time.monotonic()
        path = ensure_venv(name)
        print(f"{name}: {path} ({time.monotonic() - t0:.1f} s)", flush=True)
