"""Async engines close what they open, per event loop (issue 16: resources).

An ``AsyncClient`` used from successive ``asyncio.run`` calls, or from a second loop running in
a thread, must not leave a session, a channel or a connection behind: each loop's resources are
closed inside that loop when it shuts down, and ``aclose()`` closes them everywhere.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import warnings
from typing import Any

import numpy as np

from nbinfer import AsyncClient


def _sockets(url: str) -> int:
    """This process's TCP connections to the server at ``url`` (the server is another process).

    Only connections to that server's port count: another test's leftover thread (a
    background listing, a reconnecting channel) may open sockets elsewhere meanwhile.
    """
    port = int(url.rsplit(":", 1)[1].strip("/"))
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            ours.add(link[len("socket:[") : -1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as rows:
                lines = rows.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            count += remote_port == port and fields[3] != "0A" and fields[9] in ours
    return count


class _Leaks:
    """Collects ResourceWarnings, unraisable exceptions and asyncio's 'Unclosed ...' errors."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def __enter__(self) -> _Leaks:
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always")
        self._hook = sys.unraisablehook
        sys.unraisablehook = lambda u: self.found.append(f"unraisable: {u.exc_value!r}")
        self._handler = logging.Handler(logging.ERROR)
        self._handler.emit = lambda record: self.found.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("asyncio").addHandler(self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        gc.collect()
        gc.collect()
        logging.getLogger("asyncio").removeHandler(self._handler)
        sys.unraisablehook = self._hook
        self._warnings.__exit__(*exc)
        self.found += [str(w.message) for w in self._caught if w.category is ResourceWarning]


def _rounds(client: AsyncClient, rounds: int) -> None:
    async def use() -> None:
        assert await client.is_server_live()
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        result = await client.infer("iris", {"input": x})
        assert result.output_names

    for _ in range(rounds):
        asyncio.run(use())


def test_three_event_loops_leave_no_unclosed_transport(url: str) -> None:
    gc.collect()
    before = _sockets(url)
    with _Leaks() as leaks:
        client = AsyncClient(url)
        _rounds(client, 3)
        assert _sockets(url) == before, "a finished loop kept its connections open"
        asyncio.run(client.aclose())
        del client
    assert leaks.found == []
    assert _sockets(url) == before


def test_client_still_works_after_its_loops_closed_their_resources(url: str) -> None:
    client = AsyncClient(url)
    try:
        _rounds(client, 2)
        _rounds(client, 1)  # a fresh loop gets fresh resources
    finally:
        asyncio.run(client.aclose())


def test_aclose_closes_the_resources_of_a_loop_running_in_another_thread(url: str) -> None:
    loop = asyncio.new_event_loop()
    gc.collect()
    before = _sockets(url)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with _Leaks() as leaks:
            client = AsyncClient(url)
            other = asyncio.run_coroutine_threadsafe(client.is_server_live(), loop)
            assert other.result(timeout=30)
            _rounds(client, 1)  # this thread's loops meanwhile
            assert _sockets(url) > before  # the other loop's connection is open
            asyncio.run(client.aclose())
            assert _sockets(url) == before
            del client, other
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    assert leaks.found == []


def test_a_loop_closed_without_shutdown_does_not_break_later_loops(url: str) -> None:
    """``loop.close()`` without ``shutdown_asyncgens()`` leaves nothing to close in; the engine
    lets go of that loop's resource quietly and the next loop gets a fresh one."""
    client = AsyncClient(url)
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(client.is_server_live())
    finally:
        loop.close()  # no shutdown_asyncgens(): the user's choice
    with _Leaks() as leaks:
        _rounds(client, 1)
        asyncio.run(client.aclose())
        del client, loop
    # The abandoned loop's own session may be reported unclosed; nothing else may go wrong.
    assert [f for f in leaks.found if "nclosed" not in f] == []
