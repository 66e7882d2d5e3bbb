"""The transport-neutral DataPlane, called in-process with asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import (
    InferenceError,
    InvalidInputError,
    ModelNotFoundError,
    ModelNotReadyError,
)
from nbinfer.protocol.types import InferInput, InferRequest, InferResponse, RequestedOutput
from nbinfer.server import DataPlane, FunctionModel, Model, ModelRepository, demo_models
from nbinfer.server.kserve_v1 import KServeV1
from nbinfer.server.model import InferContext


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def f32(*shape: int, value: float = 1.0) -> np.ndarray:
    return np.full(shape, value, np.float32)


def add_sub_request(a: np.ndarray, b: np.ndarray, **kw: Any) -> InferRequest:
    return InferRequest(
        inputs=[
            InferInput("INPUT0", "FP32", list(a.shape), a),
            InferInput("INPUT1", "FP32", list(b.shape), b),
        ],
        model_name="add_sub",
        **kw,
    )


class Batched(Model):
    """Batching model (max_batch_size 4): doubles X; raises when asked to."""

    name = "batched"
    max_batch_size = 4
    inputs = (("X", "FP32", [3]),)
    outputs = (
        ("Y", "FP32", [3]),
        ("Z", "FP32", [3]),
    )

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        if context.parameters.get("explode"):
            raise ValueError("asked to explode")
        context.response_parameters["seen_tag"] = str(context.parameters.get("tag", ""))
        return {"Y": inputs["X"] * 2, "Z": inputs["X"] * 3}


class Sleepy(Model):
    """Blocks its thread (like CPU-heavy numpy) for `seconds`."""

    name = "sleepy"
    inputs = (("X", "FP32", [-1]),)
    outputs = (("X", "FP32", [-1]),)
    seconds = 0.3

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        time.sleep(self.seconds)
        return inputs["X"]


class AsyncModel(Model):
    name = "async_model"
    inputs = (("X", "INT64", [-1]),)
    outputs = (("Y", "INT64", [-1]),)

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def preprocess(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"X": inputs["X"] + 1}

    async def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        self.calls += 1
        await asyncio.sleep(0.01)
        return inputs["X"] * 10

    def postprocess(self, outputs: Any, context: InferContext) -> Any:
        return {"Y": outputs + 1}


class Explained(Model):
    name = "explained"
    inputs = (("X", "FP32", [-1, 2]),)
    outputs = (("Y", "FP32", [-1]),)

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        return inputs["X"].sum(axis=1)

    def explain(self, inputs: dict[str, Any], context: InferContext) -> Any:
        return {"explanations": inputs["X"] / inputs["X"].sum(axis=1, keepdims=True)}


class WrongShape(Model):
    name = "wrong_shape"
    inputs = (("X", "FP32", [2]),)
    outputs = (("Y", "FP32", [2]),)

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        return np.zeros(5, np.float32)


class Hooks(Model):
    name = "hooks"
    inputs = (("X", "INT32", [-1]),)
    outputs = (("Y", "INT32", [-1]),)

    def preprocess(self, inputs: dict[str, Any], context: InferContext) -> dict[str, Any]:
        return {"X": inputs["X"] * 100}

    def predict(self, inputs: dict[str, Any]) -> Any:  # no context argument
        return inputs["X"] + 1

    def postprocess(self, outputs: Any, context: InferContext) -> Any:
        return {"Y": -outputs}


@pytest.fixture
def dp() -> Iterator[DataPlane]:
    models = [*demo_models(), Batched(), Sleepy(), AsyncModel(), Explained(), WrongShape(), Hooks()]
    plane = DataPlane(ModelRepository(models=models))
    yield plane
    run(plane.close())


# -- health / metadata -------------------------------------------------------------------------


def test_server_metadata_lists_exactly_the_implemented_extensions(dp: DataPlane) -> None:
    meta = dp.server_metadata()
    assert meta.name == "nbinfer"
    assert meta.version
    assert sorted(meta.extensions) == [
        "binary_tensor_data",
        "classification",
        "generate",
        "model_configuration",
        "model_repository",
        "parameters",
        "sequence",
        "statistics",
        "system_shared_memory",
    ]


def test_live_and_ready_until_closed() -> None:
    plane = DataPlane(ModelRepository(models=demo_models()))
    assert plane.live() and plane.ready()
    run(plane.close())
    assert not plane.live() and not plane.ready()
    run(plane.close())  # idempotent


def test_model_metadata_of_demo_models(dp: DataPlane) -> None:
    meta = dp.model_metadata("add_sub")
    assert meta.versions == ["1"]
    assert [(t.name, t.datatype, t.shape) for t in meta.inputs] == [
        ("INPUT0", "FP32", [-1, 16]),
        ("INPUT1", "FP32", [-1, 16]),
    ]
    assert [t.name for t in meta.outputs] == ["OUTPUT0", "OUTPUT1"]
    echo = dp.model_metadata("echo")
    assert (echo.inputs[0].datatype, echo.inputs[0].shape) == ("BYTES", [-1, -1])
    assert dp.model_metadata("iris").outputs[0].shape == [-1, 3]
    assert dp.model_metadata("digits").inputs[0].shape == [-1, 8, 8]
    batched = dp.model_spec("batched")
    assert batched.inputs[0].shape == [-1, 3]
    assert batched.parameters["max_batch_size"] == 4
    with pytest.raises(
        ModelNotFoundError,
        match=r"^Request for unknown model: 'nope' is not found; known models: accumulate, add_sub",
    ):
        dp.model_metadata("nope")


def test_model_config_is_triton_shaped(dp: DataPlane) -> None:
    cfg = dp.model_config("batched")
    assert cfg["name"] == "batched"
    assert cfg["max_batch_size"] == 4
    assert cfg["input"][0] == {
        "name": "X",
        "data_type": "TYPE_FP32",
        "dims": [3],
        "format": "FORMAT_NONE",
        "optional": False,
        "allow_ragged_batch": False,
        "is_shape_tensor": False,
        "is_non_linear_format_io": False,
    }
    assert [o["name"] for o in cfg["output"]] == ["Y", "Z"]
    assert cfg["instance_group"][0]["kind"] == "KIND_CPU"
    assert cfg["parameters"]["device"] == {"string_value": "cpu"}
    assert dp.model_config("echo")["input"][0]["data_type"] == "TYPE_STRING"


# -- inference ---------------------------------------------------------------------------------


def test_add_sub_computes_sum_and_difference_and_echoes_the_id(dp: DataPlane) -> None:
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    b = np.ones((2, 16), np.float32)
    resp: InferResponse = run(dp.infer(add_sub_request(a, b, id="req-42")))
    assert resp.id == "req-42"
    assert (resp.model_name, resp.model_version) == ("add_sub", "1")
    out = {o.name: o for o in resp.outputs}
    np.testing.assert_array_equal(out["OUTPUT0"].data, a + b)
    np.testing.assert_array_equal(out["OUTPUT1"].data, a - b)
    assert out["OUTPUT0"].datatype == "FP32" and out["OUTPUT0"].shape == [2, 16]


def test_only_requested_outputs_are_returned(dp: DataPlane) -> None:
    req = add_sub_request(f32(1, 16), f32(1, 16), outputs=[RequestedOutput("OUTPUT1")])
    resp = run(dp.infer(req))
    assert [o.name for o in resp.outputs] == ["OUTPUT1"]
    bad = add_sub_request(f32(1, 16), f32(1, 16), outputs=[RequestedOutput("OUTPUT9")])
    with pytest.raises(InvalidInputError, match="no output 'OUTPUT9'; outputs: OUTPUT0, OUTPUT1"):
        run(dp.infer(bad))


def test_bytes_echo_round_trips(dp: DataPlane) -> None:
    data = np.array([[b"hello", b""], [b"\x00\xff", "h\u00e9".encode()]], dtype=object)
    req = InferRequest(inputs=[InferInput("INPUT0", "BYTES", [2, 2], data)], model_name="echo")
    out = run(dp.infer(req)).outputs[0]
    assert (out.name, out.datatype, out.shape) == ("OUTPUT0", "BYTES", [2, 2])
    assert out.data.tolist() == data.tolist()


def test_iris_and_digits_predict_probabilities(dp: DataPlane) -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], np.float32)
    req = InferRequest(inputs=[InferInput("input", "FP32", [2, 4], x)], model_name="iris")
    probs = run(dp.infer(req)).outputs[0].data
    assert probs.shape == (2, 3)
    assert probs.argmax(axis=1).tolist() == [0, 2]
    img = np.zeros((1, 8, 8), np.float32)
    req = InferRequest(inputs=[InferInput("input", "FP32", [1, 8, 8], img)], model_name="digits")
    out = run(dp.infer(req)).outputs[0]
    assert out.name == "probabilities" and out.shape == [1, 10]
    np.testing.assert_allclose(out.data.sum(), 1.0, rtol=1e-5)


def test_classification_returns_top_k_with_labels(dp: DataPlane) -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], np.float32)
    req = InferRequest(
        inputs=[InferInput("input", "FP32", [2, 4], x)],
        outputs=[RequestedOutput("probabilities", class_count=2)],
        model_name="iris",
    )
    out = run(dp.infer(req)).outputs[0]
    assert (out.datatype, out.shape) == ("BYTES", [2, 2])
    first = out.data[0, 0].decode().split(":")
    assert first[1:] == ["0", "setosa"] and float(first[0]) > 0.9
    assert out.data[1, 0].decode().endswith(":2:virginica")
    # without labels: value:index
    req = InferRequest(
        inputs=[InferInput("X", "FP32", [1, 3], np.array([[1, 5, 3]], np.float32))],
        outputs=[RequestedOutput("Y", class_count=5)],
        model_name="batched",
    )
    out = run(dp.infer(req)).outputs[0]
    assert out.shape == [1, 3]  # k is capped at the number of classes
    entries = [s.decode().split(":") for s in out.data[0]]
    assert [(float(v), int(i)) for v, i in entries] == [(10.0, 1), (6.0, 2), (2.0, 0)]


def test_request_parameters_reach_the_model_and_response_parameters_return(dp: DataPlane) -> None:
    req = InferRequest(
        inputs=[InferInput("X", "FP32", [1, 3], f32(1, 3))],
        parameters={"tag": "abc"},
        model_name="batched",
    )
    resp = run(dp.infer(req))
    assert resp.parameters == {"seen_tag": "abc"}


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            [("INPUT0", "FP32", [1, 16]), ("INPUT1", "FP32", [1, 16]), ("EXTRA", "FP32", [1, 16])],
            r"model 'add_sub' has no input 'EXTRA'; inputs: INPUT0, INPUT1",
        ),
        ([("INPUT0", "FP32", [1, 16])], r"expects input\(s\) 'INPUT1' \(missing\); got: INPUT0"),
        (
            [("INPUT0", "FP64", [1, 16]), ("INPUT1", "FP32", [1, 16])],
            r"input 'INPUT0' of model 'add_sub': datatype FP64 does not match the expected FP32",
        ),
        (
            [("INPUT0", "FP32", [1, 15]), ("INPUT1", "FP32", [1, 16])],
            r"input 'INPUT0' of model 'add_sub': shape \[1,15\] does not match the expected "
            r"\[-1,16\]",
        ),
        (
            [("INPUT0", "FP32", [16]), ("INPUT1", "FP32", [1, 16])],
            r"shape \[16\] does not match the expected \[-1,16\]",
        ),
    ],
)
def test_invalid_inputs_are_rejected_with_precise_messages(
    dp: DataPlane, inputs: list[tuple[str, str, list[int]]], message: str
) -> None:
    req = InferRequest(
        inputs=[
            InferInput(n, dt, shape, np.zeros(shape, np.float64 if dt == "FP64" else np.float32))
            for n, dt, shape in inputs
        ],
        model_name="add_sub",
    )
    with pytest.raises(InvalidInputError, match=message):
        run(dp.infer(req))


def test_element_count_must_match_the_shape(dp: DataPlane) -> None:
    req = InferRequest(
        inputs=[
            InferInput("INPUT0", "FP32", [2, 16], np.zeros(31, np.float32)),
            InferInput("INPUT1", "FP32", [2, 16], np.zeros(32, np.float32)),
        ],
        model_name="add_sub",
    )
    with pytest.raises(InvalidInputError, match=r"'INPUT0'.*\[2,16\] needs 32 elements but 31"):
        run(dp.infer(req))


def test_batch_dimension_is_bounded_by_max_batch_size(dp: DataPlane) -> None:
    req = InferRequest(inputs=[InferInput("X", "FP32", [5, 3], f32(5, 3))], model_name="batched")
    with pytest.raises(InvalidInputError, match=r"batch size 5 is outside 1..4"):
        run(dp.infer(req))
    req = InferRequest(inputs=[InferInput("X", "FP32", [3], f32(3))], model_name="batched")
    with pytest.raises(
        InvalidInputError, match=r"shape \[3\] does not match the expected \[-1,3\]"
    ):
        run(dp.infer(req))


def test_unknown_model_and_version(dp: DataPlane) -> None:
    req = add_sub_request(f32(1, 16), f32(1, 16), model_version="7")
    with pytest.raises(
        ModelNotFoundError,
        match=r"^Request for unknown model: 'add_sub' version 7 is not found; versions: 1",
    ):
        run(dp.infer(req))
    req.model_name, req.model_version = "ghost", ""
    with pytest.raises(
        ModelNotFoundError, match=r"^Request for unknown model: 'ghost' is not found"
    ):
        run(dp.infer(req))
    with pytest.raises(ModelNotFoundError):
        dp.model_ready("ghost")


def test_model_exception_becomes_inference_error_with_its_message(dp: DataPlane) -> None:
    req = InferRequest(
        inputs=[InferInput("X", "FP32", [1, 3], f32(1, 3))],
        parameters={"explode": True},
        model_name="batched",
    )
    with pytest.raises(
        InferenceError, match="model 'batched' failed: ValueError: asked to explode"
    ):
        run(dp.infer(req))


def test_model_returning_a_wrong_shape_is_an_inference_error(dp: DataPlane) -> None:
    req = InferRequest(inputs=[InferInput("X", "FP32", [2], f32(2))], model_name="wrong_shape")
    with pytest.raises(
        InferenceError, match=r"output 'Y'.*returned shape \[5\] but declares \[2\]"
    ):
        run(dp.infer(req))


def test_sync_hooks_with_and_without_context(dp: DataPlane) -> None:
    x = np.array([1, 2], np.int32)
    req = InferRequest(inputs=[InferInput("X", "INT32", [2], x)], model_name="hooks")
    assert run(dp.infer(req)).outputs[0].data.tolist() == [-101, -201]


def test_async_hooks_run_on_the_loop(dp: DataPlane) -> None:
    x = np.array([1, 2], np.int64)
    req = InferRequest(inputs=[InferInput("X", "INT64", [2], x)], model_name="async_model")
    assert run(dp.infer(req)).outputs[0].data.tolist() == [21, 31]


def test_blocking_sync_predict_does_not_block_the_event_loop() -> None:
    """Two sync predicts block their threads at once while the loop keeps ticking.

    Each predict waits for the other (they meet only when both run at once, each on a thread),
    then until the loop's ticker has ticked 10 times with both inside: a predict run on the loop
    blocks the ticker and the other call, so neither ever comes (guards, not timings).
    """
    met = threading.Barrier(2)
    inside: list[int] = []
    ticked = threading.Event()

    class Blocking(Sleepy):
        name = "blocking"

        def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
            met.wait(timeout=60)
            inside.append(1)
            if not ticked.wait(timeout=60):
                raise RuntimeError("the event loop never ticked while predict blocked its thread")
            return inputs["X"]

    plane = DataPlane(ModelRepository(models=[Blocking()]))
    req = InferRequest(inputs=[InferInput("X", "FP32", [1], f32(1))], model_name="blocking")

    async def scenario() -> list[InferResponse]:
        async def ticker() -> None:
            ticks = 0
            while ticks < 10:
                await asyncio.sleep(0.01)
                ticks += len(inside) == 2
            ticked.set()

        tick_task = asyncio.create_task(ticker())
        responses = await asyncio.gather(plane.infer(req), plane.infer(req))
        await tick_task
        return list(responses)

    try:
        responses = run(scenario())
    finally:
        run(plane.close())
    assert [r.outputs[0].data.tolist() for r in responses] == [[1.0], [1.0]]
    assert len(inside) == 2


# -- statistics --------------------------------------------------------------------------------


def test_statistics_match_the_requests_made(dp: DataPlane) -> None:
    async def scenario() -> None:
        for batch in (1, 1, 3):
            req = InferRequest(
                inputs=[InferInput("X", "FP32", [batch, 3], f32(batch, 3))], model_name="batched"
            )
            await dp.infer(req)
        bad = InferRequest(
            inputs=[InferInput("X", "FP32", [1, 3], f32(1, 3))],
            parameters={"explode": True},
            model_name="batched",
        )
        with pytest.raises(InferenceError):
            await dp.infer(bad)

    before = time.time_ns() // 1_000_000
    run(scenario())
    (stats,) = dp.statistics("batched")["model_stats"]
    assert (stats["name"], stats["version"]) == ("batched", "1")
    assert stats["inference_count"] == 5
    assert stats["execution_count"] == 3
    assert stats["last_inference"] >= before
    inf = stats["inference_stats"]
    assert inf["success"]["count"] == 3 and inf["success"]["ns"] > 0
    assert inf["fail"]["count"] == 1
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[key]["count"] == 3, key
    assert inf["compute_infer"]["ns"] > 0
    assert inf["success"]["ns"] >= inf["compute_infer"]["ns"]
    sizes = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}
    assert sizes == {1: 2, 3: 1}
    # all ready models are listed; untouched ones are zero
    every = {s["name"]: s for s in dp.statistics()["model_stats"]}
    assert every["echo"]["inference_count"] == 0 and "add_sub" in every
    assert dp.statistics("batched", "1")["model_stats"][0]["execution_count"] == 3
    with pytest.raises(ModelNotFoundError):
        dp.statistics("ghost")


def test_non_batching_model_counts_one_inference_per_request(dp: DataPlane) -> None:
    run(dp.infer(add_sub_request(f32(4, 16), f32(4, 16))))
    (stats,) = dp.statistics("add_sub")["model_stats"]
    assert (stats["inference_count"], stats["execution_count"]) == (1, 1)


# -- repository --------------------------------------------------------------------------------


def test_unload_waits_for_in_flight_requests_and_others_keep_serving(dp: DataPlane) -> None:
    async def scenario() -> None:
        slow = InferRequest(inputs=[InferInput("X", "FP32", [1], f32(1))], model_name="sleepy")
        in_flight = asyncio.create_task(dp.infer(slow))
        await asyncio.sleep(0.05)
        unload = asyncio.create_task(dp.unload_model("sleepy"))
        await asyncio.sleep(0.05)
        # while sleepy drains, it takes no new work; add_sub serves normally
        with pytest.raises(ModelNotReadyError, match="UNLOADING"):
            await dp.infer(slow)
        resp = await dp.infer(add_sub_request(f32(1, 16), f32(1, 16)))
        assert resp.outputs[0].data is not None
        assert not unload.done()
        assert (await in_flight).outputs[0].data.tolist() == [1.0]
        await unload
        rows = {r.name: r for r in dp.repository_index()}
        assert (rows["sleepy"].state, rows["sleepy"].reason) == ("UNAVAILABLE", "unloaded")
        assert not dp.model_ready("sleepy")
        assert [r.name for r in dp.repository_index(ready_only=True)].count("sleepy") == 0
        await dp.load_model("sleepy")
        assert dp.model_ready("sleepy")

    run(scenario())


def test_in_memory_model_whose_load_fails_is_unavailable_with_reason() -> None:
    class Broken(Model):
        name = "broken"
        inputs = (("X", "FP32", [1]),)
        outputs = (("Y", "FP32", [1]),)

        def load(self) -> None:
            raise OSError("no such weights")

    plane = DataPlane(ModelRepository(models=[Broken(), *demo_models()]))
    rows = {r.name: r for r in plane.repository_index()}
    assert rows["broken"].state == "UNAVAILABLE"
    assert rows["broken"].reason == "load() raised OSError: no such weights"
    assert rows["iris"].state == "READY"
    with pytest.raises(ModelNotReadyError, match="no such weights"):
        run(plane.infer(InferRequest(inputs=[], model_name="broken")))


# -- KServe v1 ---------------------------------------------------------------------------------


def test_v1_model_status(dp: DataPlane) -> None:
    assert run(KServeV1(dp).model("iris")) == {"name": "iris", "ready": True}
    with pytest.raises(ModelNotFoundError):
        run(KServeV1(dp).model("ghost"))


def test_v1_predict_feeds_the_first_input_and_returns_the_first_output(dp: DataPlane) -> None:
    result = run(KServeV1(dp).predict("iris", {"instances": [[5.1, 3.5, 1.4, 0.2]]}))
    (row,) = result["predictions"]
    assert len(row) == 3 and row[0] > 0.9
    echo = run(KServeV1(dp).predict("echo", {"instances": [["a", "b"]]}))
    assert echo == {"predictions": [["a", "b"]]}
    with pytest.raises(InvalidInputError, match="'instances'"):
        run(KServeV1(dp).predict("iris", {"data": []}))
    with pytest.raises(InvalidInputError, match=r"shape \[1,3\] does not match the expected"):
        run(KServeV1(dp).predict("iris", {"instances": [[1, 2, 3]]}))


def test_v1_explain_only_for_models_that_explain(dp: DataPlane) -> None:
    result = run(KServeV1(dp).explain("explained", {"instances": [[1.0, 3.0]]}))
    assert result == {"explanations": [[0.25, 0.75]]}
    with pytest.raises(ModelNotFoundError, match="'iris' has no explainer"):
        run(KServeV1(dp).explain("iris", {"instances": [[5.1, 3.5, 1.4, 0.2]]}))


def test_function_model_serves_through_the_dataplane() -> None:
    fm = FunctionModel(
        lambda x: np.sqrt(x),
        name="sqrt",
        inputs=[("x", "FP64", [-1])],
        outputs=[("y", "FP64", [-1])],
    )
    plane = DataPlane(ModelRepository(models=[fm]))
    x = np.array([4.0, 9.0])
    resp = run(
        plane.infer(InferRequest(inputs=[InferInput("x", "FP64", [2], x)], model_name="sqrt"))
    )
    assert resp.outputs[0].data.tolist() == [2.0, 3.0]


def test_unload_and_reload_of_an_in_memory_model_calls_its_hooks() -> None:
    class Counting(Model):
        name = "counting"
        inputs = (("X", "INT8", [-1]),)
        outputs = (("Y", "INT8", [-1]),)

        def __init__(self) -> None:
            super().__init__()
            self.loads = 0
            self.unloads = 0

        def load(self) -> None:
            self.loads += 1

        def unload(self) -> None:
            self.unloads += 1

        def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
            return inputs["X"]

    m = Counting()
    plane = DataPlane(ModelRepository(models=[m]))
    req = InferRequest(
        inputs=[InferInput("X", "INT8", [1], np.ones(1, np.int8))], model_name="counting"
    )

    async def scenario() -> None:
        assert (m.loads, m.unloads, m.ready) == (1, 0, True)
        await plane.unload_model("counting")
        assert (m.loads, m.unloads, m.ready) == (1, 1, False)
        await plane.load_model("counting")
        assert (m.loads, m.unloads, m.ready) == (2, 1, True)
        assert (await plane.infer(req)).outputs[0].data.tolist() == [1]
        await plane.load_model("counting")  # already loaded: nothing to do
        assert (m.loads, m.unloads) == (2, 1)
        await plane.close()
        assert m.unloads == 2

    run(scenario())


def test_config_and_statistics_json_fit_the_grpc_schema(dp: DataPlane) -> None:
    from nbinfer.protocol.grpc_json import config_json_to_proto, statistics_json_to_proto

    run(dp.infer(add_sub_request(f32(1, 16), f32(1, 16))))
    for row in dp.repository_index(ready_only=True):
        msg = config_json_to_proto(dp.model_config(row.name))  # strict: unknown fields raise
        assert msg.name == row.name
    stats = statistics_json_to_proto(dp.statistics())
    by_name = {s.name: s for s in stats.model_stats}
    assert by_name["add_sub"].inference_stats.success.count == 1


def test_max_concurrency_serialises_requests_and_counts_queue_time() -> None:
    one_at_a_time = Sleepy(name="serial", max_concurrency=1)
    one_at_a_time.seconds = 0.1
    plane = DataPlane(ModelRepository(models=[one_at_a_time]))
    req = InferRequest(inputs=[InferInput("X", "FP32", [1], f32(1))], model_name="serial")

    async def scenario() -> float:
        start = time.perf_counter()
        await asyncio.gather(plane.infer(req), plane.infer(req))
        return time.perf_counter() - start

    assert run(scenario()) >= 0.19
    (stats,) = plane.statistics("serial")["model_stats"]
    assert stats["inference_stats"]["queue"]["ns"] >= 90_000_000  # the second one waited
    assert plane.model_config("serial")["instance_group"][0]["count"] == 1


def test_demo_iris_computes_two_requests_at_once() -> None:
    """Two instances on threads, so a DataFrame's chunks compute two at a time.

    Each request waits inside ``predict`` for the other one: they meet only when both run at
    once (inline on the loop, or one instance, the first would wait alone until the guard).
    """
    from nbinfer.server.demo import Iris

    both = threading.Barrier(2)

    class Meeting(Iris):
        def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
            both.wait(timeout=60)  # a deadlock guard, not a timing: serialised, none meet
            return super().predict(inputs, context)

    plane = DataPlane(ModelRepository(models=[Meeting()]))
    rows = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], np.float32)
    req = InferRequest(inputs=[InferInput("input", "FP32", [2, 4], rows)], model_name="iris")

    async def scenario() -> list[InferResponse]:
        return list(await asyncio.gather(plane.infer(req), plane.infer(req)))

    first, second = run(scenario())
    assert first.outputs[0].data is not None and second.outputs[0].data is not None
    assert first.outputs[0].data.argmax(axis=1).tolist() == [0, 2]  # setosa, virginica
    np.testing.assert_array_equal(first.outputs[0].data, second.outputs[0].data)
    assert plane.model_config("iris")["instance_group"][0]["count"] == 2


def test_add_model_registers_and_replaces_on_a_running_loop(dp: DataPlane) -> None:
    def make(offset: int) -> FunctionModel:
        return FunctionModel(
            lambda x: x + offset,
            name="plus",
            inputs=[("x", "INT32", [-1])],
            outputs=[("y", "INT32", [-1])],
        )

    req = InferRequest(
        inputs=[InferInput("x", "INT32", [1], np.zeros(1, np.int32))], model_name="plus"
    )

    async def scenario() -> list[int]:
        await dp.add_model(make(1))
        first = (await dp.infer(req)).outputs[0].data.tolist()
        await dp.add_model(make(2))
        return [*first, *(await dp.infer(req)).outputs[0].data.tolist()]

    assert run(scenario()) == [1, 2]
    assert dp.model_ready("add_sub")
