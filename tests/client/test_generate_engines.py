"""generate_stream on every engine: curl (default), aiohttp (default async), httpx and gRPC.

Each streams from nbinfer's server incrementally, and closing the stream early closes the
connection, which the model observes as a cancellation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbinfer import AsyncClient, Client
from nbinfer.server.launcher import LocalServer

REPO = (Path(__file__).parents[1] / "peers" / "generate_repo").resolve()


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    local = LocalServer(model_repository=REPO, demo=False, device="cpu", auth_token=None)
    local.start()
    yield local
    local.stop()


def _cancel_seen(record: Path) -> int:
    deadline = time.monotonic() + 20
    while not (record.exists() and record.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(record.read_text())


@pytest.mark.parametrize("engine", ["pycurl", "httpx"])
def test_sync_engines_stream_and_cancel(server: LocalServer, engine: str, tmp_path: Path) -> None:
    record = tmp_path / "cancelled.txt"
    with Client(server.http_url, http_engine=engine) as c:  # type: ignore[arg-type]
        words = [
            x["text_output"] for x in c.generate_stream("gen_words", text_input="a b", max_tokens=3)
        ]
        assert words == ["a ", "b ", "a "]
        assert c.generate("gen_words", text_input="q", max_tokens=1)["text_output"] == "q "
        for chunk in c.generate_stream(
            "gen_words", text_input="z", max_tokens=100000, delay_ms=20, cancel_file=str(record)
        ):
            if chunk["index"] == 1:
                break
        assert 2 <= _cancel_seen(record) < 100000
        # the client is still usable after the abandoned stream
        assert c.generate("gen_words", text_input="r", max_tokens=1)["index"] == 0


@pytest.mark.parametrize("engine", ["aiohttp", "httpx"])
def test_async_engines_stream_and_cancel(server: LocalServer, engine: str, tmp_path: Path) -> None:
    record = tmp_path / "cancelled.txt"

    async def main() -> list[str]:
        async with AsyncClient(server.http_url, http_engine=engine) as c:  # type: ignore[arg-type]
            words = [
                x["text_output"]
                async for x in c.generate_stream("gen_words", text_input="a b", max_tokens=3)
            ]
            async for chunk in c.generate_stream(
                "gen_words", text_input="z", max_tokens=100000, delay_ms=20, cancel_file=str(record)
            ):
                if chunk["index"] == 1:
                    break
            return words

    assert asyncio.run(main()) == ["a ", "b ", "a "]
    assert 2 <= _cancel_seen(record) < 100000


def test_grpc_streams_arrive_in_order_and_a_closed_one_cancels(
    server: LocalServer, tmp_path: Path
) -> None:
    """The gRPC face (one request on ModelStreamInfer, read on the caller's thread, sync and
    asyncio): every token in order, and leaving the loop cancels the generation."""
    records = [tmp_path / "sync.txt", tmp_path / "async.txt"]
    with Client(server.grpc_url) as c:
        chunks = list(c.generate_stream("gen_words", text_input="a b c", max_tokens=60))
        for chunk in c.generate_stream(
            "gen_words", text_input="z", max_tokens=100000, delay_ms=20, cancel_file=str(records[0])
        ):
            if chunk["index"] == 1:
                break
        assert c.generate("gen_words", text_input="r", max_tokens=1)["index"] == 0

    async def main() -> list[int]:
        async with AsyncClient(server.grpc_url) as c:
            indices = [
                x["index"]
                async for x in c.generate_stream("gen_words", text_input="q", max_tokens=60)
            ]
            async for chunk in c.generate_stream(
                "gen_words",
                text_input="z",
                max_tokens=100000,
                delay_ms=20,
                cancel_file=str(records[1]),
            ):
                if chunk["index"] == 1:
                    break
            return indices

    assert [x["index"] for x in chunks] == list(range(60))
    assert [x["text_output"] for x in chunks[:4]] == ["a ", "b ", "c ", "a "]
    assert asyncio.run(main()) == list(range(60))
    for record in records:
        assert 2 <= _cancel_seen(record) < 100000
