"""Stateful sequences and decoupled (0..N responses) models on the embedded server.

Driven by tritonclient (HTTP, gRPC and its ModelStreamInfer stream) against one server per module
serving the demo models plus a few test-only stateful / decoupled models.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

from nbinfer.server.launcher import LocalServer

_SHORT_LIVED = """
import numpy as np
from nbinfer.server.model import Model


class ShortLived(Model):
    name = "short_lived"
    inputs = [("INPUT", "INT32", [-1])]
    outputs = [("OUTPUT", "INT32", [1])]
    run_in_thread = False
    stateful = True
    max_sequence_idle_microseconds = 300_000

    def predict(self, inputs, context):
        context.state["n"] = context.state.get("n", 0) + 1
        return {"OUTPUT": np.array([context.state["n"]], np.int32)}
"""

_BY_CONFIG = """
import numpy as np
from nbinfer.server.model import Model


class Counter(Model):
    name = "by_config"
    inputs = [("INPUT", "INT32", [-1])]
    outputs = [("OUTPUT", "INT32", [1])]

    def predict(self, inputs, context):
        seen = context.state.setdefault("calls", [])
        seen.append(int(context.sequence_start))
        return {"OUTPUT": np.array([len(seen)], np.int32)}
"""

_CONFIG = """
name: "by_config"
sequence_batching { max_sequence_idle_microseconds: 5000000 }
"""

_TICKER = """
import asyncio
import numpy as np
from nbinfer.server.model import Model


class Ticker(Model):
    name = "ticker"
    inputs = [("N", "INT32", [1])]
    outputs = [("T", "INT32", [1])]

    async def predict(self, inputs, context):
        for i in range(int(inputs["N"][0])):
            await asyncio.sleep(0)
            if i == 2 and context.parameters.get("fail"):
                raise RuntimeError("ticker failed at 2 on purpose")
            yield {"T": np.array([i], np.int32)}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    repo: Path = tmp_path_factory.mktemp("seqrepo")
    for name, source, config in (
        ("short_lived", _SHORT_LIVED, None),
        ("by_config", _BY_CONFIG, _CONFIG),
        ("ticker", _TICKER, None),
    ):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(source)
        if config:
            (repo / name / "config.pbtxt").write_text(config)
    srv = LocalServer(demo=True, device="cpu", model_repository=repo, auth_token=None).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: LocalServer) -> Iterator[Any]:
    if request.param == "http":
        c: Any = th.InferenceServerClient(server.http_url.removeprefix("http://"))
    else:
        c = tg.InferenceServerClient(server.grpc_address)
    yield c
    c.close()


@pytest.fixture
def grpc_client(server: LocalServer) -> Iterator[tg.InferenceServerClient]:
    c = tg.InferenceServerClient(server.grpc_address)
    yield c
    c.close()


def _ints(client: Any, name: str, values: list[int]) -> Any:
    mod = th if isinstance(client, th.InferenceServerClient) else tg
    inp = mod.InferInput(name, [len(values)], "INT32")
    inp.set_data_from_numpy(np.array(values, dtype=np.int32))
    return inp


def _accumulate(client: Any, values: list[int], model: str = "accumulate", **seq: Any) -> int:
    result = client.infer(model, [_ints(client, "INPUT", values)], **seq)
    return int(result.as_numpy("OUTPUT")[0])


def _status(exc: InferenceServerException) -> str:
    return str(exc.status())


# -- sequences ----------------------------------------------------------------------------------


def test_accumulate_carries_state_across_calls_of_one_sequence(client: Any) -> None:
    assert _accumulate(client, [1, 2], sequence_id=11, sequence_start=True) == 3
    assert _accumulate(client, [10], sequence_id=11) == 13
    assert _accumulate(client, [100], sequence_id=11, sequence_end=True) == 113


def test_string_sequence_ids_are_separate_sequences(client: Any) -> None:
    assert _accumulate(client, [5], sequence_id="alpha", sequence_start=True) == 5
    assert _accumulate(client, [7], sequence_id="beta", sequence_start=True) == 7
    assert _accumulate(client, [1], sequence_id="alpha") == 6
    assert _accumulate(client, [1], sequence_id="beta", sequence_end=True) == 8
    assert _accumulate(client, [1], sequence_id="alpha", sequence_end=True) == 7


def test_sequence_start_resets_the_state(client: Any) -> None:
    assert _accumulate(client, [4], sequence_id=21, sequence_start=True) == 4
    assert _accumulate(client, [4], sequence_id=21, sequence_start=True) == 4
    assert _accumulate(client, [4], sequence_id=21, sequence_end=True) == 8


def test_stateful_model_without_sequence_id_is_rejected(client: Any) -> None:
    with pytest.raises(InferenceServerException) as info:
        _accumulate(client, [1])
    assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")
    assert "sequence_id" in str(info.value) and "accumulate" in str(info.value)


def test_continuing_an_unknown_or_ended_sequence_is_rejected(client: Any) -> None:
    with pytest.raises(InferenceServerException, match=r"sequence 987 .* not active"):
        _accumulate(client, [1], sequence_id=987)
    _accumulate(client, [1], sequence_id=31, sequence_start=True, sequence_end=True)
    with pytest.raises(InferenceServerException, match="not active") as info:
        _accumulate(client, [1], sequence_id=31)
    assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")


def test_idle_sequences_are_dropped_after_the_model_timeout(client: Any) -> None:
    assert _accumulate(client, [0], "short_lived", sequence_id=41, sequence_start=True) == 1
    assert _accumulate(client, [0], "short_lived", sequence_id=41) == 2
    time.sleep(0.5)
    with pytest.raises(InferenceServerException, match=r"idle for longer than 0\.3 s"):
        _accumulate(client, [0], "short_lived", sequence_id=41)


def test_sequence_batching_in_the_config_makes_a_model_stateful(client: Any) -> None:
    assert _accumulate(client, [0], "by_config", sequence_id=51, sequence_start=True) == 1
    assert _accumulate(client, [0], "by_config", sequence_id=51, sequence_end=True) == 2
    with pytest.raises(InferenceServerException, match="sequence_id"):
        _accumulate(client, [0], "by_config")


def test_model_config_reports_sequence_batching_and_decoupled(server: LocalServer) -> None:
    c = th.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        acc = c.get_model_config("accumulate")
        assert acc["sequence_batching"]["max_sequence_idle_microseconds"] == 60_000_000
        assert c.get_model_config("repeat")["model_transaction_policy"] == {"decoupled": True}
        ext = c.get_server_metadata()["extensions"]
        assert "sequence" in ext
    finally:
        c.close()


def test_stateless_models_ignore_sequence_parameters(client: Any) -> None:
    mod = th if isinstance(client, th.InferenceServerClient) else tg
    a = np.ones((1, 16), np.float32)
    inputs = [mod.InferInput("INPUT0", [1, 16], "FP32"), mod.InferInput("INPUT1", [1, 16], "FP32")]
    for inp in inputs:
        inp.set_data_from_numpy(a)
    result = client.infer("add_sub", inputs, sequence_id=5, sequence_end=True)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)


# -- the stream: sequences and decoupled models -------------------------------------------------


class _Collector:
    def __init__(self) -> None:
        self.items: queue.Queue[tuple[Any, Any]] = queue.Queue()

    def __call__(self, result: Any, error: Any) -> None:
        self.items.put((result, error))

    def take(self, n: int) -> list[tuple[Any, Any]]:
        return [self.items.get(timeout=10) for _ in range(n)]


def _repeat_inputs(values: list[int], count: int) -> list[Any]:
    inp = tg.InferInput("INPUT", [len(values)], "INT32")
    inp.set_data_from_numpy(np.array(values, np.int32))
    cnt = tg.InferInput("COUNT", [1], "INT32")
    cnt.set_data_from_numpy(np.array([count], np.int32))
    return [inp, cnt]


def _final(result: Any) -> bool | None:
    params = result.get_response().parameters
    return params["triton_final_response"].bool_param if "triton_final_response" in params else None


def test_sequence_over_the_stream_carries_state(grpc_client: tg.InferenceServerClient) -> None:
    got = _Collector()
    grpc_client.start_stream(callback=got)
    try:
        for i, (value, flags) in enumerate(
            [(1, {"sequence_start": True}), (2, {}), (3, {"sequence_end": True})]
        ):
            grpc_client.async_stream_infer(
                "accumulate",
                [_ints(grpc_client, "INPUT", [value])],
                request_id=f"s{i}",
                sequence_id=61,
                **flags,
            )
        replies = got.take(3)
    finally:
        grpc_client.stop_stream()
    assert [e for _, e in replies] == [None, None, None]
    assert [(r.get_response().id, int(r.as_numpy("OUTPUT")[0])) for r, _ in replies] == [
        ("s0", 1),
        ("s1", 3),
        ("s2", 6),
    ]


def test_decoupled_model_streams_count_responses_matched_to_request_ids(
    grpc_client: tg.InferenceServerClient,
) -> None:
    got = _Collector()
    grpc_client.start_stream(callback=got)
    try:
        grpc_client.async_stream_infer("repeat", _repeat_inputs([7, 8], 3), request_id="a")
        grpc_client.async_stream_infer("repeat", _repeat_inputs([9], 2), request_id="b")
        replies = got.take(5)
    finally:
        grpc_client.stop_stream()
    assert all(e is None for _, e in replies)
    seen = [
        (r.get_response().id, int(r.as_numpy("INDEX")[0]), r.as_numpy("OUTPUT").tolist())
        for r, _ in replies
    ]
    assert seen == [
        ("a", 0, [7, 8]),
        ("a", 1, [7, 8]),
        ("a", 2, [7, 8]),
        ("b", 0, [9]),
        ("b", 1, [9]),
    ]
    assert got.items.empty()


def test_empty_final_response_marks_the_end_of_each_request(
    grpc_client: tg.InferenceServerClient,
) -> None:
    got = _Collector()
    grpc_client.start_stream(callback=got)
    try:
        grpc_client.async_stream_infer(
            "repeat", _repeat_inputs([1], 2), request_id="x", enable_empty_final_response=True
        )
        grpc_client.async_stream_infer(
            "repeat", _repeat_inputs([1], 0), request_id="none", enable_empty_final_response=True
        )
        grpc_client.async_stream_infer(
            "accumulate",
            [_ints(grpc_client, "INPUT", [5])],
            request_id="plain",
            sequence_id=71,
            sequence_start=True,
            sequence_end=True,
            enable_empty_final_response=True,
        )
        replies = got.take(5)
    finally:
        grpc_client.stop_stream()
    rows = [(r.get_response().id, len(r.get_response().outputs), _final(r)) for r, _ in replies]
    assert rows == [
        ("x", 2, False),
        ("x", 2, False),
        ("x", 0, True),
        ("none", 0, True),
        ("plain", 1, True),  # a non-decoupled model: its one response is the final one
    ]


def test_decoupled_errors_are_inline_and_the_stream_goes_on(
    grpc_client: tg.InferenceServerClient,
) -> None:
    got = _Collector()
    grpc_client.start_stream(callback=got)
    try:
        n = tg.InferInput("N", [1], "INT32")
        n.set_data_from_numpy(np.array([5], np.int32))
        grpc_client.async_stream_infer("ticker", [n], request_id="t", parameters={"fail": True})
        grpc_client.async_stream_infer("repeat", _repeat_inputs([1], 1), request_id="after")
        replies = got.take(4)
    finally:
        grpc_client.stop_stream()
    assert [int(r.as_numpy("T")[0]) for r, _ in replies[:2]] == [0, 1]
    assert replies[2][0] is None
    assert "ticker failed at 2 on purpose" in str(replies[2][1])
    assert replies[3][1] is None and replies[3][0].get_response().id == "after"


def test_async_generator_model_streams_all_its_items(
    grpc_client: tg.InferenceServerClient,
) -> None:
    got = _Collector()
    grpc_client.start_stream(callback=got)
    try:
        n = tg.InferInput("N", [1], "INT32")
        n.set_data_from_numpy(np.array([4], np.int32))
        grpc_client.async_stream_infer("ticker", [n], request_id="t")
        replies = got.take(4)
    finally:
        grpc_client.stop_stream()
    assert [int(r.as_numpy("T")[0]) for r, _ in replies] == [0, 1, 2, 3]


def test_decoupled_model_over_unary_infer_says_to_use_the_stream(client: Any) -> None:
    mod = th if isinstance(client, th.InferenceServerClient) else tg
    inp = mod.InferInput("INPUT", [1], "INT32")
    inp.set_data_from_numpy(np.array([1], np.int32))
    cnt = mod.InferInput("COUNT", [1], "INT32")
    cnt.set_data_from_numpy(np.array([2], np.int32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("repeat", [inp, cnt])
    assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")
    assert "'repeat' is decoupled" in str(info.value) and "stream" in str(info.value)


# -- in-process: the sweeper and thread-run generators --------------------------------------------


def test_the_background_sweep_drops_idle_sequences() -> None:
    from nbinfer.server.sequence import SequenceManager

    async def scenario() -> tuple[int, int]:
        manager = SequenceManager(sweep_interval_s=0.01)
        slot = manager.acquire("m", "1", 5, start=True, idle_us=20_000)
        manager.release(slot, end=False)
        before = len(manager)
        await asyncio.sleep(0.1)
        after = len(manager)
        await manager.close()
        return before, after

    assert asyncio.run(scenario()) == (1, 0)


def test_a_generator_function_model_is_decoupled_and_runs_in_threads() -> None:
    import threading

    from nbinfer.protocol.types import InferInput, InferRequest
    from nbinfer.server import DataPlane, FunctionModel, ModelRepository

    threads: list[str] = []

    def countdown(n: Any) -> Iterator[Any]:
        for i in range(int(n[0]), 0, -1):
            threads.append(threading.current_thread().name)
            yield np.array([i], np.int32)

    m = FunctionModel(countdown, inputs=[("n", "INT32", [1])], outputs=[("left", "INT32", [1])])
    assert m.is_decoupled

    async def scenario() -> list[int]:
        dp = DataPlane(ModelRepository(models=[m]))
        req = InferRequest(
            [InferInput("n", "INT32", [1], np.array([3], np.int32))], model_name="countdown"
        )
        try:
            return [int(r.outputs[0].data[0]) async for r in dp.infer_stream(req)]  # type: ignore[index]
        finally:
            await dp.close()

    assert asyncio.run(scenario()) == [3, 2, 1]
    assert threads and all(name.startswith("nbinfer-model") for name in threads)
