"""nbinfer's own clients end to end against the embedded server: the gRPC stream (responses matched
to requests, sync and async), stateful sequences through :class:`nbinfer.Sequence`, and a system
shared-memory region holding a request's inputs and outputs."""

from __future__ import annotations

import asyncio
import os
import queue
import uuid
from collections.abc import AsyncIterator, Iterator
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import pytest

import nbinfer
from nbinfer import AsyncClient, Client, InferInput, RequestedOutput, Sequence
from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.server.launcher import LocalServer


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer(demo=True, device="cpu").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def grpc_url(server: LocalServer) -> str:
    return server.grpc_url


@pytest.fixture(params=["http", "grpc"])
def url(request: pytest.FixtureRequest, server: LocalServer) -> str:
    return server.http_url if request.param == "http" else server.grpc_url


def _pair(i: int) -> dict[str, np.ndarray[Any, Any]]:
    return {
        "INPUT0": np.full((1, 16), i, np.float32),
        "INPUT1": np.arange(16, dtype=np.float32).reshape(1, 16),
    }


# -- the stream ---------------------------------------------------------------------------------


def test_sync_stream_matches_every_response_to_its_request(grpc_url: str) -> None:
    replies: queue.Queue[tuple[Any, Any]] = queue.Queue()
    with Client(grpc_url) as client:
        client.start_stream(lambda result, error: replies.put((result, error)))
        try:
            for i in range(8):
                client.stream_infer("add_sub", _pair(i), request_id=f"r{i}")
            client.stream_infer(
                "repeat",
                {"INPUT": np.array([4, 2], np.int32), "COUNT": np.array([3], np.int32)},
                request_id="rep",
            )
            client.stream_infer("no_such_model", _pair(0), request_id="bad")
            got = [replies.get(timeout=10) for _ in range(8 + 3 + 1)]
        finally:
            client.stop_stream()
    results = {r.id: r for r, e in got if e is None and r.id.startswith("r") and r.id != "rep"}
    assert sorted(results) == sorted(f"r{i}" for i in range(8))
    for i in range(8):
        expected = _pair(i)["INPUT0"] + _pair(i)["INPUT1"]
        np.testing.assert_array_equal(results[f"r{i}"]["OUTPUT0"], expected)
    repeats = [r for r, e in got if e is None and r.id == "rep"]
    assert [int(r["INDEX"][0]) for r in repeats] == [0, 1, 2]
    assert all(r["OUTPUT"].tolist() == [4, 2] for r in repeats)
    errors = [e for _, e in got if e is not None]
    assert len(errors) == 1 and "no_such_model" in str(errors[0])
    assert getattr(errors[0], "request_id", None) == "bad"  # errors are matched to requests too


def test_async_stream_yields_responses_matched_by_id(grpc_url: str) -> None:
    async def scenario() -> dict[str, Any]:
        async with AsyncClient(grpc_url) as client:
            requests = [
                await client.build_request("add_sub", _pair(i), request_id=f"a{i}")
                for i in range(6)
            ]

            async def feed() -> AsyncIterator[nbinfer.InferRequest]:
                for req in requests:
                    await asyncio.sleep(0)
                    yield req

            return {r.id: r async for r in client.stream_infer(feed())}

    results = asyncio.run(scenario())
    assert sorted(results) == [f"a{i}" for i in range(6)]
    for i in range(6):
        np.testing.assert_array_equal(
            results[f"a{i}"]["OUTPUT1"], _pair(i)["INPUT0"] - _pair(i)["INPUT1"]
        )


# -- sequences ----------------------------------------------------------------------------------


def test_sequence_state_carries_across_calls(url: str) -> None:
    with Client(url) as client:
        seq = Sequence()
        totals = [
            int(
                client.infer("accumulate", {"INPUT": np.array(v, np.int32)}, sequence=seq)[
                    "OUTPUT"
                ][0]
            )
            for v in ([1, 2], [3], [4, 5])
        ]
        last = client.infer(
            "accumulate", {"INPUT": np.array([10], np.int32)}, sequence=seq, sequence_end=True
        )
        assert totals == [3, 6, 15]
        assert int(last["OUTPUT"][0]) == 25
        # another sequence starts from zero, whatever the first one did
        other = Sequence(f"s-{uuid.uuid4().hex[:8]}")
        first = client.infer("accumulate", {"INPUT": np.array([7], np.int32)}, sequence=other)
        assert int(first["OUTPUT"][0]) == 7
        # the ended sequence is gone on the server too
        with pytest.raises(InvalidInputError, match="not active"):
            client.infer("accumulate", {"INPUT": np.array([1], np.int32)}, sequence_id=seq.id)


def test_sequence_over_the_stream_keeps_its_order_and_state(grpc_url: str) -> None:
    replies: queue.Queue[tuple[Any, Any]] = queue.Queue()
    seq = Sequence()
    with Client(grpc_url) as client:
        client.start_stream(lambda result, error: replies.put((result, error)))
        try:
            for i, v in enumerate([5, 6, 7]):
                client.stream_infer(
                    "accumulate",
                    {"INPUT": np.array([v], np.int32)},
                    request_id=f"q{i}",
                    sequence=seq,
                    sequence_end=i == 2,
                )
            got = [replies.get(timeout=10) for _ in range(3)]
        finally:
            client.stop_stream()
    assert [(r.id, int(r["OUTPUT"][0])) for r, _ in got] == [("q0", 5), ("q1", 11), ("q2", 18)]
    assert seq.ended


# -- system shared memory -----------------------------------------------------------------------


@pytest.fixture
def region() -> Iterator[shared_memory.SharedMemory]:
    key = f"nbinfer_e2e_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    mem = shared_memory.SharedMemory(name=key, create=True, size=4 * 64)
    try:
        yield mem
    finally:
        mem.close()
        mem.unlink()


def test_shared_memory_region_holds_inputs_and_outputs(
    url: str, region: shared_memory.SharedMemory
) -> None:
    a = np.linspace(0, 1, 16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 3, np.float32)
    view = np.ndarray((4, 16), np.float32, buffer=region.buf)
    view[0], view[1] = a[0], b[0]
    view[2:] = 0
    with Client(url) as client:
        client.register_system_shared_memory("e2e", "/" + region.name, 4 * 64)
        try:
            status = client.get_system_shared_memory_status()
            assert [(r["name"], r["byte_size"]) for r in status] == [("e2e", 256)]

            def where(offset: int) -> dict[str, Any]:
                return {
                    "shared_memory_region": "e2e",
                    "shared_memory_byte_size": 64,
                    "shared_memory_offset": offset,
                }

            inputs = [
                InferInput("INPUT0", "FP32", [1, 16], None, where(0)),
                InferInput("INPUT1", "FP32", [1, 16], None, where(64)),
            ]
            outputs = [
                RequestedOutput("OUTPUT0", parameters=where(128)),
                RequestedOutput("OUTPUT1", parameters=where(192)),
            ]
            result = client.infer("add_sub", inputs, outputs=outputs)
            out = result.get_output("OUTPUT0")
            assert out.data is None
            assert out.parameters["shared_memory_region"] == "e2e"
            np.testing.assert_array_equal(view[2], (a + b)[0])
            np.testing.assert_array_equal(view[3], (a - b)[0])
            with pytest.raises(NbinferError, match="out of bounds"):
                client.infer(
                    "add_sub",
                    [inputs[0], InferInput("INPUT1", "FP32", [1, 16], None, where(224))],
                )
        finally:
            client.unregister_system_shared_memory()
        assert client.get_system_shared_memory_status() == []
