"""Dynamic batching, model instances, queue limits, timeouts and priorities (in-process)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from nbinfer.errors import (
    InferenceError,
    InvalidInputError,
    QueueFullError,
    ServerUnavailableError,
    grpc_code_of,
    status_of,
)
from nbinfer.protocol.types import InferInput, InferRequest, InferResponse, RequestedOutput
from nbinfer.server import DataPlane, Model, ModelRepository
from nbinfer.server.batcher import batch_key, concat_inputs, scheduling_policy, split_rows
from nbinfer.server.model import InferContext


class Recorder(Model):
    """Batching model: Y = 2X, S = row sums; records every predict call's batch."""

    name = "rec"
    max_batch_size = 16
    inputs = (("X", "FP32", [-1]),)
    outputs = (("Y", "FP32", [-1]), ("S", "FP32", [1]))
    sleep = 0.0

    #: every call waits until it is set (None: no wait): holds an instance busy for exactly as
    #: long as a test needs, where a sleep would race a loaded machine
    gate: threading.Event | None = None

    def __init__(self, **kw: Any) -> None:
        self.dynamic_batching = kw.pop("dynamic_batching", {"max_queue_delay_microseconds": 50_000})
        for key in ("sleep", "max_queue_size", "gate"):
            if key in kw:
                setattr(self, key, kw.pop(key))
        super().__init__(**kw)
        self.calls: list[np.ndarray] = []
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        x = inputs["X"]
        with self.lock:
            self.calls.append(x.copy())
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if np.isnan(x).any():
                raise ValueError("NaN in the input")
            if self.gate is not None:
                self.gate.wait(30)
            if self.sleep:
                time.sleep(self.sleep)
            context.response_parameters["batch_rows"] = int(x.shape[0])
            return {"Y": x * 2, "S": x.sum(axis=1, keepdims=True)}
        finally:
            with self.lock:
                self.active -= 1

    @property
    def batch_sizes(self) -> list[int]:
        return [int(c.shape[0]) for c in self.calls]


def req(x: np.ndarray, name: str = "rec", **params: Any) -> InferRequest:
    return InferRequest(
        inputs=[InferInput("X", "FP32", list(x.shape), x)], model_name=name, parameters=params
    )


def rows(start: int, n: int = 1, width: int = 3) -> np.ndarray:
    return (np.arange(n * width, dtype=np.float32).reshape(n, width) + 100 * start).astype(
        np.float32
    )


def check(resp: InferResponse, x: np.ndarray) -> None:
    out = {o.name: o.data for o in resp.outputs}
    np.testing.assert_array_equal(out["Y"], x * 2)
    np.testing.assert_array_equal(out["S"], x.sum(axis=1, keepdims=True))


def serve(models: list[Model], scenario: Callable[[DataPlane], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        dp = DataPlane(ModelRepository(models=models))
        try:
            return await scenario(dp)
        finally:
            await dp.close()

    return asyncio.run(main())


def test_concurrent_batch1_requests_share_predict_calls_and_get_their_own_rows() -> None:
    m = Recorder()
    xs = [rows(i) for i in range(16)]

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(await asyncio.gather(*(dp.infer(req(x)) for x in xs)))

    responses = serve([m], scenario)
    assert sum(m.batch_sizes) == 16
    assert len(m.calls) < 16  # merged (all 16 arrive within the 50 ms delay: one call)
    assert m.batch_sizes == [16]
    for resp, x in zip(responses, xs, strict=True):
        check(resp, x)
        assert resp.outputs[0].shape == [1, 3]
        assert resp.parameters["batch_rows"] == 16


def test_requests_with_several_rows_are_merged_and_split_back_exactly() -> None:
    m = Recorder()
    sizes = [1, 3, 2, 4, 1, 5]  # 16 rows in all
    xs = [rows(i, n) for i, n in enumerate(sizes)]

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(await asyncio.gather(*(dp.infer(req(x)) for x in xs)))

    responses = serve([m], scenario)
    assert m.batch_sizes == [16]
    for resp, x in zip(responses, xs, strict=True):
        check(resp, x)


def test_batches_never_exceed_max_batch_size() -> None:
    m = Recorder(max_batch_size=4)
    xs = [rows(i, 3) for i in range(4)]  # 3 rows each: no two fit together

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(await asyncio.gather(*(dp.infer(req(x)) for x in xs)))

    responses = serve([m], scenario)
    assert m.batch_sizes == [3, 3, 3, 3]
    for resp, x in zip(responses, xs, strict=True):
        check(resp, x)


def test_preferred_batch_size_dispatches_without_waiting_for_the_delay() -> None:
    m = Recorder(
        dynamic_batching={"max_queue_delay_microseconds": 2_000_000, "preferred_batch_size": [4]}
    )
    xs = [rows(i) for i in range(6)]

    async def scenario(dp: DataPlane) -> tuple[float, float]:
        start = time.perf_counter()
        tasks = [asyncio.ensure_future(dp.infer(req(x))) for x in xs]
        await asyncio.gather(*tasks[:4])
        first = time.perf_counter() - start
        for task, x in zip(tasks, xs, strict=True):
            check(await task, x)
        return first, time.perf_counter() - start

    first, total = serve([m], scenario)
    assert m.batch_sizes == [4, 2]
    assert first < 1.0  # the preferred batch of 4 did not wait the 2 s delay
    assert total >= 1.95  # the 2 left over waited for more requests up to the delay


def test_requests_that_arrive_together_share_a_batch_even_when_the_process_stalls() -> None:
    """Requests handed to the scheduler in one event-loop iteration join one batch, even when
    the process was descheduled longer than the delay between two of them (a loaded machine):
    the delay that ran out dispatches from the scheduler's loop, after all of them arrived."""
    m = Recorder()  # 50 ms delay

    async def stalled(dp: DataPlane, x: np.ndarray) -> InferResponse:
        time.sleep(0.08)  # descheduled past the delay, inside the same loop iteration
        return await dp.infer(req(x))

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        calls = [dp.infer(req(rows(0))), stalled(dp, rows(1)), dp.infer(req(rows(2)))]
        return list(await asyncio.gather(*calls))

    responses = serve([m], scenario)
    assert m.batch_sizes == [3]
    for i, resp in enumerate(responses):
        check(resp, rows(i))


def test_a_model_without_delay_runs_a_lone_request_at_once() -> None:
    m = Recorder(dynamic_batching={"max_queue_delay_microseconds": 0})

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(await asyncio.gather(*(dp.infer(req(rows(i))) for i in range(3))))

    responses = serve([m], scenario)
    assert m.batch_sizes[0] == 1  # dispatched as it arrived; the others queue behind it
    assert sum(m.batch_sizes) == 3
    for i, resp in enumerate(responses):
        check(resp, rows(i))


def test_max_queue_delay_holds_a_lone_request_that_long_and_no_longer() -> None:
    m = Recorder(dynamic_batching={"max_queue_delay_microseconds": 400_000})

    async def scenario(dp: DataPlane) -> tuple[float, list[InferResponse]]:
        start = time.perf_counter()
        check(await dp.infer(req(rows(0))), rows(0))
        lone = time.perf_counter() - start
        # a second request arriving within the delay joins the first one's batch
        first = asyncio.ensure_future(dp.infer(req(rows(1))))
        await asyncio.sleep(0.03)
        second = asyncio.ensure_future(dp.infer(req(rows(2))))
        return lone, [await first, await second]

    lone, responses = serve([m], scenario)
    assert 0.38 <= lone < 2.0
    assert m.batch_sizes == [1, 2]
    check(responses[0], rows(1))
    check(responses[1], rows(2))


def test_requests_with_different_trailing_shapes_are_not_merged() -> None:
    m = Recorder()
    xs = [rows(0, 1, 3), rows(1, 1, 5), rows(2, 2, 3), rows(3, 1, 5)]

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(await asyncio.gather(*(dp.infer(req(x)) for x in xs)))

    responses = serve([m], scenario)
    assert sorted(m.batch_sizes) == [2, 3]
    assert sorted(c.shape[1] for c in m.calls) == [3, 5]
    for resp, x in zip(responses, xs, strict=True):
        check(resp, x)


class Upper(Model):
    name = "upper"
    max_batch_size = 8
    inputs = (("T", "BYTES", [-1]),)
    outputs = (("U", "BYTES", [-1]),)
    dynamic_batching: ClassVar[dict[str, int]] = {"max_queue_delay_microseconds": 50_000}
    run_in_thread = False

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        t = inputs["T"]
        self.calls.append(t.shape[0])
        return np.vectorize(lambda b: b.upper(), otypes=[object])(t)


def test_bytes_tensors_are_merged_and_split() -> None:
    m = Upper()
    words = [[b"a", b"bc"], [b"def", b""], [b"xyz", b"q"]]

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(
            await asyncio.gather(
                *(
                    dp.infer(
                        InferRequest(
                            inputs=[InferInput("T", "BYTES", [1, 2], np.array([w], dtype=object))],
                            model_name="upper",
                        )
                    )
                    for w in words
                )
            )
        )

    responses = serve([m], scenario)
    assert m.calls == [3]
    for resp, w in zip(responses, words, strict=True):
        assert resp.outputs[0].data.tolist() == [[s.upper() for s in w]]


def test_a_failing_batch_fails_every_request_in_it_and_the_model_keeps_serving() -> None:
    m = Recorder()

    async def scenario(dp: DataPlane) -> tuple[list[Any], InferResponse]:
        # one poisoned request fails the whole batch it was merged into
        reqs = [req(rows(i)) for i in range(3)] + [req(np.full((1, 3), np.nan, np.float32))]
        results = await asyncio.gather(*(dp.infer(r) for r in reqs), return_exceptions=True)
        return list(results), await dp.infer(req(rows(9)))

    results, after = serve([m], scenario)
    assert m.batch_sizes[0] == 4
    assert all(isinstance(r, InferenceError) for r in results)
    assert all("NaN in the input" in str(r) and "'rec'" in str(r) for r in results)
    check(after, rows(9))


def test_a_batched_model_returning_the_wrong_number_of_rows_fails_clearly() -> None:
    class Bad(Recorder):
        def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
            x = inputs["X"]
            return {"Y": x[:1], "S": x[:1, :1]}

    async def scenario(dp: DataPlane) -> list[Any]:
        reqs = [req(rows(i)) for i in range(3)]
        return list(await asyncio.gather(*(dp.infer(r) for r in reqs), return_exceptions=True))

    results = serve([Bad()], scenario)
    assert all(isinstance(r, InferenceError) for r in results)
    assert "1 rows for output 'Y'" in str(results[0]) and "3 rows" in str(results[0])


def test_statistics_count_executions_batch_sizes_and_per_request_queue_time() -> None:
    m = Recorder()

    async def scenario(dp: DataPlane) -> dict[str, Any]:
        await asyncio.gather(*(dp.infer(req(rows(i))) for i in range(16)))
        await asyncio.gather(*(dp.infer(req(rows(i, 2))) for i in range(2)))
        stats: dict[str, Any] = dp.statistics("rec")["model_stats"][0]
        return stats

    stats = serve([m], scenario)
    assert m.batch_sizes == [16, 4]
    assert stats["execution_count"] == 2
    assert stats["inference_count"] == 20
    by_size = {b["batch_size"]: b for b in stats["batch_stats"]}
    assert sorted(by_size) == [4, 16]
    assert by_size[16]["compute_infer"]["count"] == 1
    assert by_size[4]["compute_infer"]["count"] == 1
    inf = stats["inference_stats"]
    assert inf["success"]["count"] == 18
    assert inf["queue"]["count"] == 18
    # the full batch of 16 left at once; the 2 others waited the 50 ms delay for company
    assert 2 * 45_000_000 <= inf["queue"]["ns"] < 18 * 200_000_000
    assert inf["compute_infer"]["count"] == 18
    assert inf["fail"]["count"] == 0


def test_statistics_fit_the_grpc_schema_and_config_shows_dynamic_batching() -> None:
    from nbinfer.protocol.grpc_json import config_json_to_proto, statistics_json_to_proto

    m = Recorder(
        dynamic_batching={
            "max_queue_delay_microseconds": 50_000,
            "preferred_batch_size": [4, 8],
            "priority_levels": 2,
            "default_queue_policy": {"max_queue_size": 10},
            "priority_queue_policy": {"1": {"max_queue_size": 3}},
        }
    )

    async def scenario(dp: DataPlane) -> tuple[dict[str, Any], dict[str, Any]]:
        await asyncio.gather(*(dp.infer(req(rows(i))) for i in range(3)))
        return dp.model_config("rec"), dp.statistics("rec")

    config, stats = serve([m], scenario)
    msg = config_json_to_proto(config)
    assert list(msg.dynamic_batching.preferred_batch_size) == [4, 8]
    assert msg.dynamic_batching.max_queue_delay_microseconds == 50_000
    assert msg.dynamic_batching.priority_queue_policy[1].max_queue_size == 3
    proto = statistics_json_to_proto(stats)
    assert proto.model_stats[0].execution_count == 1
    assert proto.model_stats[0].batch_stats[0].batch_size == 3


def test_instance_count_allows_that_many_concurrent_executions() -> None:
    m = Recorder(max_batch_size=1, sleep=0.15, max_concurrency=2)

    async def scenario(dp: DataPlane) -> float:
        start = time.perf_counter()
        results = await asyncio.gather(*(dp.infer(req(rows(i))) for i in range(4)))
        for i, r in enumerate(results):
            check(r, rows(i))
        return time.perf_counter() - start

    elapsed = serve([m], scenario)
    assert m.peak == 2  # two at a time, never more
    assert elapsed >= 0.28  # 4 executions of 150 ms


def test_config_pbtxt_dynamic_batching_and_instance_group(tmp_path: Path) -> None:
    model_dir = tmp_path / "mlp"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(
        """
name: "mlp"
max_batch_size: 8
input [{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }]
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 30000000 }
instance_group [{ count: 2 kind: KIND_CPU }]
"""
    )
    (model_dir / "1" / "model.py").write_text(
        """
import threading, time
from nbinfer.server.model import Model

class Mlp(Model):
    calls = []
    lock = threading.Lock()
    active = 0
    peak = 0

    def predict(self, inputs, context):
        with Mlp.lock:
            Mlp.calls.append(inputs["X"].shape[0])
            Mlp.active += 1
            Mlp.peak = max(Mlp.peak, Mlp.active)
        time.sleep(0.1)
        with Mlp.lock:
            Mlp.active -= 1
        return {"Y": inputs["X"] + 1}
"""
    )

    async def main() -> tuple[float, Model]:
        dp = DataPlane(ModelRepository(tmp_path))
        try:
            start = time.perf_counter()
            xs = [rows(i) for i in range(8)]
            results = await asyncio.gather(*(dp.infer(req(x, "mlp")) for x in xs))
            for r, x in zip(results, xs, strict=True):
                np.testing.assert_array_equal(r.outputs[0].data, x + 1)
            elapsed = time.perf_counter() - start
            assert dp.model_config("mlp")["dynamic_batching"]["preferred_batch_size"] == [4]
            model = dp.repository.resolve("mlp").model
            assert model is not None
            return elapsed, model
        finally:
            await dp.close()

    elapsed, model = asyncio.run(main())
    cls: Any = type(model)
    assert cls.calls == [4, 4]  # two preferred batches, dispatched at once ...
    assert cls.peak == 2  # ... and run side by side on the two instances
    assert elapsed < 10  # preferred batches do not wait for the 30 s delay


def test_config_pbtxt_queue_policies_and_priorities_are_served_in_triton_json(
    tmp_path: Path,
) -> None:
    from nbinfer.protocol.grpc_json import config_json_to_proto

    model_dir = tmp_path / "prio"
    (model_dir / "1").mkdir(parents=True)
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    (model_dir / "1" / "model.py").write_text(_SLOW_BATCHED.format(hold=str(hold), runs=str(runs)))
    (model_dir / "config.pbtxt").write_text(
        """
max_batch_size: 4
input [{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }]
dynamic_batching {
  preserve_ordering: true
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { max_queue_size: 8 timeout_action: REJECT }
  priority_queue_policy { key: 1 value: { max_queue_size: 2 default_timeout_microseconds: 5000 } }
}
"""
    )

    async def main() -> dict[str, Any]:
        dp = DataPlane(ModelRepository(tmp_path))
        try:
            return dp.model_config("prio")
        finally:
            await dp.close()

    config = asyncio.run(main())
    msg = config_json_to_proto(config)  # strict: the gRPC frontend serves it
    dyn = msg.dynamic_batching
    assert dyn.preserve_ordering and dyn.priority_levels == 2 and dyn.default_priority_level == 2
    assert dyn.default_queue_policy.max_queue_size == 8
    assert dyn.priority_queue_policy[1].max_queue_size == 2
    assert dyn.priority_queue_policy[1].default_timeout_microseconds == 5000


def test_full_queue_rejects_at_once_with_queue_full_error() -> None:
    gate = threading.Event()
    m = Recorder(
        max_batch_size=1, gate=gate, max_queue_size=2, dynamic_batching={}
    )  # 1 instance: one runs (held by the gate), two wait

    async def scenario(dp: DataPlane) -> list[Any]:
        tasks = [asyncio.ensure_future(dp.infer(req(rows(i)))) for i in range(3)]
        await asyncio.sleep(0)  # all three reached the scheduler
        with pytest.raises(QueueFullError) as info:  # at once: the queued ones cannot run yet
            await asyncio.wait_for(dp.infer(req(rows(3))), 10)
        gate.set()
        done = await asyncio.gather(*tasks)
        return [info.value, *done]

    error, *done = serve([m], scenario)
    assert "queue of model 'rec' is full" in str(error)
    assert isinstance(error, ServerUnavailableError)
    assert status_of(error) == 503 and grpc_code_of(error) == "RESOURCE_EXHAUSTED"
    for i, resp in enumerate(done):
        check(resp, rows(i))


def test_queue_limit_applies_to_unbatched_models_too() -> None:
    class Plain(Model):
        name = "plain"
        inputs = (("X", "FP32", [-1]),)
        outputs = (("Y", "FP32", [-1]),)
        max_queue_size = 1

        def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
            time.sleep(0.15)
            return inputs["X"]

    one = np.ones(1, np.float32)
    plain = InferRequest(inputs=[InferInput("X", "FP32", [1], one)], model_name="plain")

    async def scenario(dp: DataPlane) -> list[Any]:
        return list(
            await asyncio.gather(*(dp.infer(plain) for _ in range(3)), return_exceptions=True)
        )

    results = serve([Plain()], scenario)
    assert [type(r).__name__ for r in results].count("QueueFullError") == 1
    assert sum(isinstance(r, InferResponse) for r in results) == 2


def test_a_request_still_queued_after_its_timeout_fails_and_others_proceed() -> None:
    gate = threading.Event()
    m = Recorder(max_batch_size=1, gate=gate, dynamic_batching={})

    async def scenario(dp: DataPlane) -> tuple[Any, float, InferResponse, dict[str, Any]]:
        busy = asyncio.ensure_future(dp.infer(req(rows(0))))  # holds the instance
        await asyncio.sleep(0)
        start = time.perf_counter()
        with pytest.raises(ServerUnavailableError) as info:  # while the instance is still held
            await asyncio.wait_for(dp.infer(req(rows(1), timeout=50_000)), 10)
        failed_after = time.perf_counter() - start
        queued = asyncio.ensure_future(dp.infer(req(rows(2), timeout=5_000_000)))
        await asyncio.sleep(0)
        gate.set()  # the busy request ends; the one queued within its 5 s runs
        ok = await queued
        await busy
        return info.value, failed_after, ok, dp.statistics("rec")["model_stats"][0]

    error, failed_after, ok, stats = serve([m], scenario)
    assert failed_after >= 0.045  # its own 50 ms, no sooner
    assert not isinstance(error, QueueFullError)
    assert "'rec'" in str(error) and "50000" in str(error) and "timed out" in str(error)
    check(ok, rows(2))
    assert m.batch_sizes == [1, 1]  # the timed-out request never ran
    assert stats["inference_stats"]["fail"]["count"] == 1


def test_default_queue_timeout_and_override_policy() -> None:
    policy = scheduling_policy(
        "m",
        max_batch_size=4,
        config={
            "dynamic_batching": {
                "default_queue_policy": {
                    "default_timeout_microseconds": "1000",
                    "allow_timeout_override": True,
                }
            }
        },
    )
    assert policy is not None and policy.batching
    qp = policy.default_queue_policy
    assert qp.timeout_us(0) == 1000  # the default applies
    assert qp.timeout_us(500) == 500  # a shorter request timeout overrides it
    assert qp.timeout_us(5000) == 1000  # a longer one does not
    assert scheduling_policy("m", max_batch_size=4, config={}) is None


def test_sequence_batching_strategies_batch_sequences_up_to_their_limits() -> None:
    def policy(sequence_batching: dict[str, Any], max_batch_size: int = 8) -> Any:
        config = {"sequence_batching": sequence_batching}
        return scheduling_policy("m", max_batch_size=max_batch_size, config=config)

    direct = policy({"direct": {}})
    assert direct is not None and direct.batching and direct.max_batch_size == 8
    default = policy({})  # Triton's default strategy is direct
    assert default is not None and default.max_batch_size == 8
    oldest = policy(
        {
            "oldest": {
                "max_candidate_sequences": "3",
                "preferred_batch_size": [2],
                "max_queue_delay_microseconds": "500",
            }
        }
    )
    assert oldest is not None and oldest.max_batch_size == 3
    assert oldest.preferred_batch_sizes == (2,) and oldest.max_queue_delay_us == 500
    assert policy({"oldest": {"max_candidate_sequences": 0}}).max_batch_size == 8  # unset
    assert policy({"direct": {}}, max_batch_size=0) is None  # nothing to batch
    with pytest.raises(InvalidInputError, match=r"oldest\.max_candidate_sequences .*'x'"):
        policy({"oldest": {"max_candidate_sequences": "x"}})
    with pytest.raises(InvalidInputError, match="sequence_batching strategy must be a mapping"):
        policy({"direct": 3})


def test_priority_orders_the_queue_when_priority_levels_are_configured() -> None:
    gate = threading.Event()
    m = Recorder(
        max_batch_size=1,
        gate=gate,
        dynamic_batching={"priority_levels": 2, "default_priority_level": 2},
    )

    async def scenario(dp: DataPlane) -> None:
        first = asyncio.ensure_future(dp.infer(req(rows(0))))
        await asyncio.sleep(0)  # rows(0) holds the instance; the rest queue behind it
        low = [asyncio.ensure_future(dp.infer(req(rows(i), priority=2))) for i in (1, 2)]
        await asyncio.sleep(0)
        default = asyncio.ensure_future(dp.infer(req(rows(3))))  # default level 2
        await asyncio.sleep(0)
        high = asyncio.ensure_future(dp.infer(req(rows(4), priority=1)))
        await asyncio.sleep(0)
        gate.set()
        for i, task in zip((0, 1, 2, 3, 4), [first, *low, default, high], strict=True):
            check(await task, rows(i))

    serve([m], scenario)
    order = [int(c[0, 0]) // 100 for c in m.calls]
    assert order == [0, 4, 1, 2, 3]


def test_priority_is_accepted_and_fifo_without_priority_levels() -> None:
    m = Recorder(max_batch_size=1, sleep=0.05, dynamic_batching={})

    async def scenario(dp: DataPlane) -> None:
        tasks = [dp.infer(req(rows(i), priority=5 - i)) for i in range(4)]
        for i, r in enumerate(await asyncio.gather(*tasks)):
            check(r, rows(i))
        with pytest.raises(InvalidInputError, match="'priority' must be a non-negative"):
            await dp.infer(req(rows(0), priority="urgent"))
        with pytest.raises(InvalidInputError, match="'timeout' must be a non-negative"):
            await dp.infer(req(rows(0), timeout=-1))

    serve([m], scenario)
    assert [int(c[0, 0]) // 100 for c in m.calls] == [0, 1, 2, 3]


def test_unscheduled_models_accept_priority_and_timeout_parameters() -> None:
    m = Recorder(dynamic_batching=None)

    async def scenario(dp: DataPlane) -> InferResponse:
        # the timeout bounds the whole request (see test_cancellation.py for one that expires)
        return await dp.infer(req(rows(1), priority=1, timeout=10_000_000))

    check(serve([m], scenario), rows(1))


def test_dynamic_batching_without_max_batch_size_runs_requests_one_by_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class NoBatch(Model):
        name = "nobatch"
        inputs = (("X", "FP32", [-1]),)
        outputs = (("Y", "FP32", [-1]),)
        dynamic_batching: ClassVar[dict[str, int]] = {"max_queue_delay_microseconds": 1000}

        def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
            return inputs["X"] + 1

    one = np.ones(2, np.float32)
    r = InferRequest(inputs=[InferInput("X", "FP32", [2], one)], model_name="nobatch")

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        return list(await asyncio.gather(dp.infer(r), dp.infer(r)))

    with caplog.at_level("WARNING", logger="nbinfer"):
        results = serve([NoBatch()], scenario)
    assert all(res.outputs[0].data.tolist() == [2.0, 2.0] for res in results)
    assert "max_batch_size > 0" in caplog.text


def test_malformed_dynamic_batching_makes_the_model_unavailable_with_the_reason() -> None:
    bad = Recorder(dynamic_batching={"preferred_batch_size": [64]})

    async def scenario(dp: DataPlane) -> str:
        return dp.repository_index()[0].reason

    reason = serve([bad], scenario)
    assert "preferred_batch_size 64 is outside 1..16" in reason


def test_requests_with_different_custom_parameters_are_not_merged() -> None:
    m = Recorder()

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        reqs = [
            req(rows(0), tag="a", priority=1, timeout=10_000_000),
            req(rows(1), tag="b"),
            req(rows(2), tag="a", binary_data_output=True),
            req(rows(3), tag="b"),
        ]
        return list(await asyncio.gather(*(dp.infer(r) for r in reqs)))

    responses = serve([m], scenario)
    assert sorted(m.batch_sizes) == [2, 2]
    assert sorted(int(c[0, 0]) // 100 for c in m.calls) == [0, 1]  # a: rows 0+2, b: rows 1+3
    for i, resp in enumerate(responses):
        check(resp, rows(i))


def test_requested_output_subsets_and_classification_work_per_request_in_a_batch() -> None:
    m = Recorder()

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        a = req(rows(0))
        a.outputs = [RequestedOutput("Y")]
        b = req(rows(1))
        b.outputs = [RequestedOutput("S")]
        c = req(rows(2))
        c.outputs = [RequestedOutput("Y", class_count=1)]
        return list(await asyncio.gather(dp.infer(a), dp.infer(b), dp.infer(c)))

    a, b, c = serve([m], scenario)
    assert m.batch_sizes == [3]
    assert [o.name for o in a.outputs] == ["Y"]
    np.testing.assert_array_equal(a.outputs[0].data, rows(0) * 2)
    assert [o.name for o in b.outputs] == ["S"]
    np.testing.assert_array_equal(b.outputs[0].data, rows(2 - 1).sum(axis=1, keepdims=True))
    assert c.outputs[0].datatype == "BYTES"
    assert c.outputs[0].data.reshape(-1)[0].startswith(b"404")  # max of 2 * [200, 201, 202]


def test_unloading_waits_for_queued_requests_and_close_is_clean() -> None:
    m = Recorder(dynamic_batching={"max_queue_delay_microseconds": 100_000})

    async def scenario(dp: DataPlane) -> list[InferResponse]:
        tasks = [asyncio.ensure_future(dp.infer(req(rows(i)))) for i in range(3)]
        await asyncio.sleep(0.01)
        await dp.unload_model("rec")
        assert not dp.model_ready("rec")
        return list(await asyncio.gather(*tasks))

    for i, resp in enumerate(serve([m], scenario)):
        check(resp, rows(i))


def test_one_dataplane_serves_batches_on_successive_event_loops() -> None:
    m = Recorder()
    dp = DataPlane(ModelRepository(models=[m]))
    for loop_round in range(2):

        async def burst(base: int) -> list[InferResponse]:
            return list(await asyncio.gather(*(dp.infer(req(rows(base + i))) for i in range(4))))

        for i, resp in enumerate(asyncio.run(burst(10 * loop_round))):
            check(resp, rows(10 * loop_round + i))
    asyncio.run(dp.close())
    assert m.batch_sizes == [4, 4]


def test_merge_and_split_helpers() -> None:
    a = {"X": np.zeros((2, 3), np.float32), "T": np.array([[b"a"], [b"b"]], dtype=object)}
    b = {"X": np.ones((1, 3), np.float32), "T": np.array([[b"c"]], dtype=object)}
    assert batch_key(a) == batch_key(b)
    assert batch_key(a) != batch_key({"X": np.zeros((1, 4), np.float32), "T": b["T"]})
    merged = concat_inputs([a, b])
    assert merged["X"].shape == (3, 3) and merged["T"].tolist() == [[b"a"], [b"b"], [b"c"]]
    parts = split_rows(merged, [2, 1], model_name="m")
    np.testing.assert_array_equal(parts[0]["X"], a["X"])
    assert parts[1]["T"].tolist() == [[b"c"]]
    with pytest.raises(InferenceError, match="2 rows for output 'X'"):
        split_rows({"X": np.zeros((2, 1))}, [2, 1], model_name="m")


_SLOW_BATCHED = """
import time
from pathlib import Path

from nbinfer.server.model import Model

HOLD = Path({hold!r})
RUNS = Path({runs!r})


class Slow(Model):
    def predict(self, inputs, context):
        with RUNS.open("a") as runs:  # one line per batch begun: the test sees it running
            runs.write("run\\n")
        deadline = time.monotonic() + 60
        while HOLD.exists() and time.monotonic() < deadline:  # held until the test says
            time.sleep(0.005)
        time.sleep(0.3)
        return {{"Y": inputs["X"] * 2}}
"""


def _begun(runs: Path) -> int:
    """How many batches the slow model has begun (its ``runs`` file)."""
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _running_after(runs: Path, begun: int) -> None:
    """Wait until the slow model begins a batch after its first ``begun`` (held, if asked)."""
    deadline = time.monotonic() + 30
    while _begun(runs) <= begun:
        assert time.monotonic() < deadline, "the held batch never started"
        time.sleep(0.005)


def test_over_the_network_batches_merge_and_full_queues_map_to_503_and_resource_exhausted(
    tmp_path: Path,
) -> None:
    import httpx
    import tritonclient.grpc as tg
    from tritonclient.utils import InferenceServerException

    from nbinfer.server.launcher import LocalServer

    model_dir = tmp_path / "slow"
    (model_dir / "1").mkdir(parents=True)
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    (model_dir / "1" / "model.py").write_text(_SLOW_BATCHED.format(hold=str(hold), runs=str(runs)))
    (model_dir / "config.pbtxt").write_text(
        """
max_batch_size: 4
input [{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }]
dynamic_batching {
  max_queue_delay_microseconds: 100000
  default_queue_policy { max_queue_size: 4 }
}
"""
    )
    body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}]}
    with LocalServer(
        model_repository=tmp_path, demo=False, device="cpu", auth_token=None
    ) as server:
        url = f"{server.http_url}/v2/models/slow/infer"
        with httpx.Client(timeout=30) as http:
            results: list[Any] = [None] * 4

            def call(i: int) -> None:
                results[i] = http.post(url, json=body)

            threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert [r.status_code for r in results] == [200] * 4
            assert all(r.json()["outputs"][0]["data"] == [2.0, 4.0] for r in results)
            stats = http.get(f"{server.http_url}/v2/models/slow/stats").json()
            (row,) = stats["model_stats"]
            assert row["inference_count"] == 4 and row["execution_count"] < 4  # merged

            # one batch running (held until the checks are done, so that no batch ends and
            # drains the queue under them), 4 queued: the next request is rejected at once
            hold.touch()
            before = _begun(runs)
            threads = [threading.Thread(target=http.post, args=(url,), kwargs={"json": body})]
            threads[0].start()
            _running_after(runs, before)  # the first batch, of one, runs after its 100 ms delay
            fillers = [
                threading.Thread(target=http.post, args=(url,), kwargs={"json": body})
                for _ in range(4)
            ]
            for t in fillers:
                t.start()
            time.sleep(0.5)  # the fillers reach the queue (nothing leaves it while held)
            full = http.post(url, json=body)
            assert full.status_code == 503
            assert "queue of model 'slow' is full" in full.json()["error"]
            grpc_client = tg.InferenceServerClient(server.grpc_address)
            inp = tg.InferInput("X", [1, 2], "FP32")
            inp.set_data_from_numpy(np.ones((1, 2), np.float32))
            with pytest.raises(InferenceServerException) as info:
                grpc_client.infer("slow", [inp])
            assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
            hold.unlink()
            for t in [*threads, *fillers]:
                t.join()
            # a request whose queue timeout expires while a batch runs gets UNAVAILABLE
            hold.touch()
            before = _begun(runs)
            blocker = threading.Thread(target=http.post, args=(url,), kwargs={"json": body})
            blocker.start()
            _running_after(runs, before)
            with pytest.raises(InferenceServerException) as info:
                grpc_client.infer("slow", [inp], timeout=50_000)
            assert info.value.status() == "StatusCode.UNAVAILABLE"
            assert "timed out" in str(info.value)
            hold.unlink()
            blocker.join()
            grpc_client.close()
