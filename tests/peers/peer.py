"""A running v2 peer server, as the fixtures of tests/peers/conftest.py yield it.

Its own module (not the conftest) so that test modules import it by a name no other directory
shares: ``from peer import Peer`` (``from conftest import Peer`` found whichever conftest was
imported first when tests of several directories ran in one invocation).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

#: The models every peer serves alike (tests/peers/conftest.py says what they compute).
MATRIX_MODELS = ("add_sub", "times_two", "upper")


@dataclass
class Peer:
    """A running v2 server."""

    name: str
    http_port: int
    grpc_port: int
    models: tuple[str, ...] = MATRIX_MODELS
    binary_http: bool = True
    #: ``(header, value)`` a restricted server expects on its restricted APIs (HTTP spelling).
    access: tuple[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    stop_fn: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"

    def output(self) -> str:
        if self.log is None:
            return ""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-6000:]

    def terminate(self) -> None:
        """Ask the process to exit (SIGTERM) without waiting: :meth:`stop` reaps it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def stop(self) -> None:
        if self.stop_fn is not None:
            self.stop_fn()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.log is not None:
            self.log.close()


#: The peer processes this worker started, in order.
