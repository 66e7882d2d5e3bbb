"""Loopback ports for programs told their port up front (peers, scripts, ``--http-port N``).

Picking a free port and starting a program that binds it later is a race: in between, any
process binding port 0 (every nbinfer server the suite starts, hundreds a run) can be handed
the same port by the kernel, and the program then fails to bind, or its health check reaches
the other server (a KServe peer's readiness probe read an nbinfer gRPC server's HTTP/2 bytes).
:func:`free_port` picks below the kernel's ephemeral range, which port 0 never hands out.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_GIVEN: set[int] = set()
_LOCK = threading.Lock()
_LOWEST = 10_000


def _ephemeral_start() -> int:
    """The first port the kernel hands out for port 0 (Linux default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on, that no port-0 bind can take, not given before
    in this process (two picks for one program never collide)."""
    top = _ephemeral_start()
    pick = random.SystemRandom()
    with _LOCK:
        for _ in range(1000):
            port = pick.randrange(_LOWEST, top)
            if port in _GIVEN:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _GIVEN.add(port)
            return port
    raise RuntimeError(f"no free loopback port in {_LOWEST}-{top - 1}")
