"""The stream path checks and honours request parameters as ``infer`` does; a model whose
declarations change gets a scheduler built from the new ones (in-process dataplane)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import InvalidInputError, ServerUnavailableError
from nbinfer.protocol.types import InferInput, InferRequest, InferResponse
from nbinfer.server import DataPlane, FunctionModel, Model, ModelRepository
from nbinfer.server.model import InferContext


async def ticks(n: Any) -> AsyncIterator[Any]:
    """A decoupled model: one response at once, the next ones a long while later."""
    for i in range(int(n[0])):
        if i:
            await asyncio.sleep(3.0)
        yield np.array([i], np.int32)


def decoupled() -> Model:
    return FunctionModel(ticks, inputs=[("n", "INT32", [1])], outputs=[("i", "INT32", [1])])


def request(model: str, **parameters: Any) -> InferRequest:
    n = np.array([3], np.int32)
    return InferRequest([InferInput("n", "INT32", [1], n)], model_name=model, parameters=parameters)


def serve(models: list[Model], scenario: Callable[[DataPlane], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        dp = DataPlane(ModelRepository(models=models))
        try:
            return await scenario(dp)
        finally:
            await dp.close()

    return asyncio.run(main())


async def collect(dp: DataPlane, req: InferRequest) -> list[InferResponse]:
    return [r async for r in dp.infer_stream(req)]


@pytest.mark.parametrize(
    ("parameter", "value"),
    [("priority", "high"), ("priority", -1), ("timeout", "soon"), ("timeout", 1.5)],
)
def test_a_stream_refuses_a_malformed_priority_or_timeout_as_infer_does(
    parameter: str, value: Any
) -> None:
    model = decoupled()
    assert model.is_decoupled

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return await collect(dp, request("ticks", **{parameter: value}))

    with pytest.raises(InvalidInputError, match=f"'{parameter}' must be a non-negative integer"):
        serve([model], scenario)


def test_a_decoupled_model_stops_at_the_request_timeout_and_counts_a_cancel() -> None:
    model = decoupled()
    got: list[int] = []

    async def scenario(dp: DataPlane) -> dict[str, Any]:
        with pytest.raises(ServerUnavailableError, match="timed out after 300000 µs") as info:
            async for response in dp.infer_stream(request("ticks", timeout=300_000)):
                got.append(int(response.outputs[0].data[0]))  # type: ignore[index]
        assert info.value.context["model"] == "ticks"
        stats: dict[str, Any] = dp.statistics("ticks")["model_stats"][0]
        return stats

    stats = serve([model], scenario)
    assert got == [0]  # the first response came; the stream ended at the deadline
    assert stats["response_stats"]["0"]["cancel"]["count"] == 1  # given up, as Triton counts
    assert stats["inference_stats"]["fail"]["count"] == 0


def test_a_decoupled_model_within_its_timeout_sends_every_response() -> None:
    def quick(n: Any) -> Any:
        for i in range(int(n[0])):
            yield np.array([i], np.int32)

    model = FunctionModel(quick, inputs=[("n", "INT32", [1])], outputs=[("i", "INT32", [1])])

    async def scenario(dp: DataPlane) -> list[int]:
        responses = await collect(dp, request("quick", timeout=30_000_000))
        return [int(r.outputs[0].data[0]) for r in responses]  # type: ignore[index]

    assert serve([model], scenario) == [0, 1, 2]


class Rows(Model):
    """Dynamic batching; records the batch of every predict call."""

    name = "rows"
    max_batch_size = 2
    inputs = (("X", "FP32", [3]),)
    outputs = (("Y", "FP32", [3]),)

    def __init__(self) -> None:
        self.dynamic_batching = {"max_queue_delay_microseconds": 300_000}
        super().__init__()
        self.batches: list[int] = []

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        self.batches.append(int(inputs["X"].shape[0]))
        return {"Y": inputs["X"] * 2}


def test_a_model_whose_max_batch_size_changes_is_scheduled_with_the_new_one() -> None:
    model = Rows()
    x = np.ones((1, 3), np.float32)

    async def four(dp: DataPlane) -> None:
        req = InferRequest([InferInput("X", "FP32", [1, 3], x)], model_name="rows")
        await asyncio.gather(*(dp.infer(req) for _ in range(4)))

    async def scenario(dp: DataPlane) -> None:
        await four(dp)
        model.max_batch_size = 4  # the served I/O is stale now: rebuilt on the next request
        await four(dp)

    serve([model], scenario)
    assert model.batches == [2, 2, 4]


class SequenceTicks(Model):
    """A stateful decoupled model: counts its calls per sequence, then ticks as ``ticks``."""

    name = "sequence_ticks"
    stateful = True
    inputs = (("n", "INT32", [1]),)
    outputs = (("i", "INT32", [1]),)

    async def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        context.state["calls"] = context.state.get("calls", 0) + 1
        async for tick in ticks(inputs["n"]):
            yield {"i": tick + 10 * context.state["calls"]}


def test_a_stream_left_early_releases_its_sequence_at_once() -> None:
    def call(start: bool) -> InferRequest:
        return request("sequence_ticks", sequence_id=7, sequence_start=start)

    async def scenario(dp: DataPlane) -> tuple[bool, list[int]]:
        stream = dp.infer_stream(call(True))
        first = await anext(stream)
        await stream.aclose()  # the client leaves while the model still has responses to send
        slot = dp.sequences.acquire(
            "sequence_ticks", first.model_version, 7, start=False, idle_us=60_000_000
        )
        locked = slot.lock.locked()
        dp.sequences.release(slot, end=False)
        # the sequence goes on with its state: the second call sees the first one's count
        async with aclosing(dp.infer_stream(call(False))) as again:
            second = await anext(again)
        return locked, [int(r.outputs[0].data[0]) for r in (first, second)]  # type: ignore[index]

    locked, values = serve([SequenceTicks()], scenario)
    assert not locked  # released when the stream closed, not whenever a finalizer runs
    assert values == [10, 20]
