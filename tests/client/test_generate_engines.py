"""generate_stream on every HTTP engine: curl (default), aiohttp (default async) and httpx.

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
