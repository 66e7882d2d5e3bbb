"""session.generate in a real Jupyter kernel: ONE display, updated in place as tokens arrive.

The kernel is a real ipykernel started with jupyter_client (as JupyterLab and VS Code start
theirs); the test reads the IOPub messages the frontend would get.
"""

from __future__ import annotations

import itertools
import os
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import nbinfer
session = nbinfer.Session(device="cpu")
reply = session.generate("story", "Alice", max_tokens=20, seed=1, token_delay_ms=60)
reply
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # IPC sockets, not TCP ports: no port to race other processes for
    where = tmp_path_factory.mktemp("kernel") / "kernel"
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(where))
    manager.start_kernel(env=env)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        yield client
    finally:
        client.execute("session.close()")
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(client: Any, code: str) -> list[dict[str, Any]]:
    """Execute ``code``; the IOPub messages of that execution, in order."""
    msg_id = client.execute(code)
    messages = []
    while True:
        try:
            msg = client.get_iopub_msg(timeout=90)
        except queue.Empty:  # pragma: no cover - a hung kernel
            raise AssertionError(f"no idle after {[m['msg_type'] for m in messages]}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages


def test_generate_streams_into_one_display_updated_in_place(kernel: Any) -> None:
    messages = _run(kernel, CODE)
    errors = [m["content"] for m in messages if m["msg_type"] == "error"]
    assert errors == []
    displays = [m for m in messages if m["msg_type"] == "display_data"]
    updates = [m for m in messages if m["msg_type"] == "update_display_data"]
    assert len(displays) == 1  # one output, never a new one per token
    display_id = displays[0]["content"]["transient"]["display_id"]
    assert {u["content"]["transient"]["display_id"] for u in updates} == {display_id}
    texts = [u["content"]["data"]["text/plain"] for u in updates]
    # it grew over time: several distinct states, each extending the one before
    assert len(set(texts)) >= 3
    grown = [t.split("\n[story:")[0] for t in texts]  # the text, without its stats line
    assert len(set(grown)) >= 3
    assert all(b.startswith(a) for a, b in itertools.pairwise(grown))
    final = updates[-1]["content"]["data"]
    assert "tokens 20" in final["text/plain"] and "TTFT" in final["text/html"]
    assert 'class="g-cursor"' not in final["text/html"]  # finished: no cursor left
    assert 'class="g-cursor"' in updates[0]["content"]["data"]["text/html"]
    # no token was printed as a stream of its own
    assert [m for m in messages if m["msg_type"] == "stream"] == []
    # the cell's Out is a one-line summary: the text is not shown twice
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert "(text shown above)" in result["content"]["data"]["text/plain"]
    assert "text/html" not in result["content"]["data"]


def test_the_result_shown_in_a_later_cell_draws_the_whole_text(kernel: Any) -> None:
    messages = _run(kernel, "reply")
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    data = result["content"]["data"]
    assert "text shown above" not in data["text/plain"] and "g-text" in data["text/html"]


def test_the_stop_button_ends_the_stream_and_keeps_the_text(kernel: Any) -> None:
    manager = kernel.parent
    msg_id = kernel.execute(
        'stopped = session.generate("story", "Alice", max_tokens=500, seed=2, token_delay_ms=50)'
    )
    messages: list[dict[str, Any]] = []
    interrupted = False
    while True:
        msg = kernel.get_iopub_msg(timeout=90)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        updates = [m for m in messages if m["msg_type"] == "update_display_data"]
        if not interrupted and len(updates) >= 3:  # streaming: press the stop button
            manager.interrupt_kernel()
            interrupted = True
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    (error,) = [m["content"] for m in messages if m["msg_type"] == "error"]
    assert error["ename"] == "KeyboardInterrupt"
    final = [m for m in messages if m["msg_type"] == "update_display_data"][-1]["content"]["data"]
    assert "stopped" in final["text/html"] and 'class="g-cursor"' not in final["text/html"]
    kept = final["text/plain"].split("\n[story:")[0]
    assert kept.strip() and "tokens 500" not in final["text/plain"]  # ended early, text kept
    # the server let the generation go: the next one starts at once and completes
    after = _run(kernel, 'print(session.generate("story", "Alice", max_tokens=3, display=False))')
    assert [m for m in after if m["msg_type"] == "error"] == []
