"""The stop button on a token stream: SIGINT in ``for chunk in client.generate_stream(...)``.

A child process streams from a decoupled model of nbinfer's server and is sent SIGINT after its
first tokens; the model records the token at which it saw the cancellation. Asserted: the child
got KeyboardInterrupt, and the model observed the cancel (it stopped long before its last token,
within ~1 s of the signal by the model's own clock: 20 ms per token, so < 50 tokens later).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbinfer.server.launcher import LocalServer
from tests.waiting import wait_for_text

REPO = (Path(__file__).parents[1] / "peers" / "generate_repo").resolve()

CHILD = r"""
import sys
from nbinfer import Client
url, record = sys.argv[1], sys.argv[2]
with Client(url) as client:
    try:
        for chunk in client.generate_stream(
            "gen_words", text_input="w", max_tokens=100000, delay_ms=20, cancel_file=record
        ):
            print("TOKEN", chunk["index"], flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
"""


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    local = LocalServer(model_repository=REPO, demo=False, device="cpu", auth_token=None)
    local.start()
    yield local
    local.stop()


@pytest.fixture(params=["http", "grpc"])
def url(server: LocalServer, request: pytest.FixtureRequest) -> str:
    """The server's URL on each wire."""
    return server.http_url if request.param == "http" else server.grpc_url


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """Where ``gen_words`` writes the token at which it saw the cancellation."""
    return tmp_path / "cancelled.txt"


def _cancelled_at(record: Path) -> int:
    """The token at which the model saw the cancellation (it writes it to ``record``)."""
    return int(wait_for_text(record, 20, "the model's record of the cancellation"))


def test_sigint_in_a_token_loop_cancels_the_generation_on_the_server(
    url: str, record: Path
) -> None:
    stop_button_cancels_the_generation(url, record)


def stop_button_cancels_the_generation(url: str, record: Path) -> None:
    """A child streams ``gen_words`` from ``url``; SIGINT after its third token must raise
    KeyboardInterrupt there and reach the model (``record``) within ~1 s of its tokens. Also run
    against tritonserver (tests/peers/test_triton_generate.py)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(record)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        tokens = 0
        for line in child.stdout:
            if line.startswith("TOKEN"):
                tokens += 1
                if tokens == 3:
                    break
        assert tokens == 3, "the child never streamed"
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
        assert "INTERRUPTED" in out, out
        seen_at = _cancelled_at(record)
        # the model observed the cancel a few tokens after the third (not at its 100 000th)
        assert 3 <= seen_at < 3 + 50, seen_at
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_closing_the_client_ends_a_stream_read_on_another_thread(url: str, record: Path) -> None:
    # A session closed while a cell's background thread still reads a generation: the stream
    # ends there with a transport error (the HTTP one is aborted by its progress callback, never
    # closed under the reading thread), and the model sees the cancellation.
    from nbinfer import Client
    from nbinfer.errors import NbinferError

    client = Client(url)
    tokens: list[int] = []
    ended: list[BaseException] = []
    three = threading.Event()

    def read() -> None:
        try:
            for chunk in client.generate_stream(
                "gen_words", text_input="w", max_tokens=100000, delay_ms=20, cancel_file=str(record)
            ):
                tokens.append(chunk["index"])
                if len(tokens) == 3:
                    three.set()
        except BaseException as exc:  # what the reader saw is the assertion below
            ended.append(exc)
        finally:
            three.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert three.wait(30) and len(tokens) >= 3, "the stream never started"
    closed_at, at_close = time.monotonic(), len(tokens)
    client.close()
    reader.join(10)
    assert not reader.is_alive(), "the stream outlived its client"
    assert time.monotonic() - closed_at < 5
    assert len(ended) == 1 and isinstance(ended[0], NbinferError), ended
    assert "closed" in str(ended[0]), ended  # why it ended, not "interrupted"
    # the model observed the cancel within ~1 s of the close (20 ms per token)
    seen_at = _cancelled_at(record)
    assert at_close <= seen_at < at_close + 50, (at_close, seen_at)
