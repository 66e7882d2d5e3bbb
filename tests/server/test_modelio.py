"""The model-I/O core on its own: a Model and its TensorDefs, no repository, no server."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from nbinfer.errors import InferenceError, InvalidInputError
from nbinfer.protocol.types import InferInput, InferRequest, RequestedOutput
from nbinfer.server.model import InferContext, Model, TensorDef
from nbinfer.server.modelio import ModelIO, Timings
from nbinfer.server.shm import SharedMemoryManager


class Scores(Model):
    """Batching (max 4): X [3] FP32 scores, optional SCALE; SCORES with labels, TEXT BYTES."""

    name = "scores"
    max_batch_size = 4
    inputs = (
        TensorDef("X", "FP32", [3]),
        TensorDef("SCALE", "FP32", [1], optional=True),
    )
    outputs = (
        TensorDef("SCORES", "FP32", [3], labels=["cat", "dog", "eel"]),
        TensorDef("TEXT", "BYTES", [1]),
    )

    def predict(self, inputs: dict[str, Any], context: InferContext) -> Any:
        x = inputs["X"] * inputs.get("SCALE", 1.0)
        return {"SCORES": x, "TEXT": np.array([[b"ok"]] * len(x), dtype=object)}


class Pair(Model):
    """No max_batch_size, both inputs lead with -1: the first dimension is still a batch."""

    name = "pair"
    inputs = (TensorDef("A", "INT32", [-1, 2]), TensorDef("B", "INT32", [-1, 2]))
    outputs = (TensorDef("C", "INT32", [-1, 2]),)

    def predict(self, inputs: dict[str, Any]) -> Any:  # type: ignore[override]  # no context
        return inputs["A"] + inputs["B"]


def io_of(model: Model) -> ModelIO:
    model.finalize()
    return ModelIO(model)


def x(rows: int = 2, value: float = 1.0) -> InferInput:
    return InferInput("X", "FP32", [rows, 3], np.full((rows, 3), value, np.float32))


def request(*inputs: InferInput, outputs: list[RequestedOutput] | None = None) -> InferRequest:
    return InferRequest(inputs=list(inputs), model_name="scores", outputs=outputs or [])


def test_good_inputs_come_back_typed_with_their_batch_size() -> None:
    io = io_of(Scores())
    as_list = [[1, 2, 3], [4, 5, 6]]  # not an array: converted
    as_f64 = InferInput("X", "FP32", [2, 3], as_list)  # type: ignore[arg-type]
    arrays, batch = io.check_inputs(request(as_f64))
    assert batch == 2
    assert arrays["X"].dtype == np.float32 and arrays["X"].shape == (2, 3)
    assert "SCALE" not in arrays  # optional and absent


@pytest.mark.parametrize(
    ("inp", "message"),
    [
        (InferInput("X", "FP32", [2, 4], np.zeros((2, 4), np.float32)), r"shape \[2,4\]"),
        (InferInput("X", "INT32", [2, 3], np.zeros((2, 3), np.int32)), "datatype INT32"),
        (InferInput("X", "FP32", [2, 3], np.zeros(5, np.float32)), "needs 6 elements but 5"),
        (InferInput("X", "FP32", [5, 3], np.zeros((5, 3), np.float32)), r"outside 1\.\.4"),
        (InferInput("X", "FP32", [-1, 3], np.zeros(0, np.float32)), r"shape \[-1,3\]"),
        (InferInput("X", "FP32", [2, 3], None), "has no data"),
    ],
    ids=["shape", "datatype", "size", "batch-above-max", "negative-dim", "no-data"],
)
def test_bad_input_is_refused_naming_the_input(inp: InferInput, message: str) -> None:
    io = io_of(Scores())
    with pytest.raises(InvalidInputError, match=message) as info:
        io.check_inputs(request(inp))
    assert "'X'" in str(info.value) and info.value.context["model"] == "scores"


def test_missing_extra_and_repeated_inputs_are_refused() -> None:
    io = io_of(Scores())
    scale = InferInput("SCALE", "FP32", [2, 1], np.ones((2, 1), np.float32))
    with pytest.raises(InvalidInputError, match=r"expects input\(s\) 'X' \(missing\); got: SCALE"):
        io.check_inputs(request(scale))
    extra = InferInput("Y", "FP32", [2, 3], np.zeros((2, 3), np.float32))
    with pytest.raises(InvalidInputError, match="has no input 'Y'; inputs: X, SCALE"):
        io.check_inputs(request(x(), extra))
    with pytest.raises(InvalidInputError, match="given more than once"):
        io.check_inputs(request(x(), x()))


def test_inputs_must_agree_on_the_batch_dimension() -> None:
    io = io_of(Pair())
    a = InferInput("A", "INT32", [2, 2], np.zeros((2, 2), np.int32))
    b = InferInput("B", "INT32", [3, 2], np.zeros((3, 2), np.int32))
    with pytest.raises(InvalidInputError, match="input 'A' has 2, input 'B' has 3"):
        io.check_inputs(InferRequest(inputs=[a, b], model_name="pair"))


def test_requested_outputs_default_to_all_and_unknown_ones_are_refused() -> None:
    io = io_of(Scores())
    assert io.requested(request(x())) == ["SCORES", "TEXT"]
    assert io.requested(request(x(), outputs=[RequestedOutput("TEXT")])) == ["TEXT"]
    with pytest.raises(InvalidInputError, match="has no output 'NOPE'; outputs: SCORES, TEXT"):
        io.requested(request(x(), outputs=[RequestedOutput("NOPE")]))
    with pytest.raises(InvalidInputError, match="classification count must be >= 0"):
        io.requested(request(x(), outputs=[RequestedOutput("SCORES", class_count=-1)]))


def run_model(io: ModelIO, req: InferRequest) -> list[Any]:
    inputs, batch = io.check_inputs(req)
    wanted = io.requested(req)
    result = io.run_sync(inputs, InferContext(model_name=io.name), Timings(), 0)
    return io.outputs(result, wanted, req, batch)


def test_outputs_are_shaped_and_typed_as_declared() -> None:
    outputs = run_model(io_of(Scores()), request(x(2, 2.0)))
    by_name = {o.name: o for o in outputs}
    assert by_name["SCORES"].datatype == "FP32" and by_name["SCORES"].shape == [2, 3]
    assert by_name["TEXT"].datatype == "BYTES" and by_name["TEXT"].data.tolist() == [[b"ok"]] * 2


def test_classification_answers_top_k_with_labels() -> None:
    io = io_of(Scores())
    scores = InferInput("X", "FP32", [1, 3], np.array([[0.1, 0.7, 0.2]], np.float32))
    req = request(scores, outputs=[RequestedOutput("SCORES", class_count=2)])
    (out,) = run_model(io, req)
    assert out.datatype == "BYTES"
    top = [v.decode() for v in out.data.reshape(-1)]
    assert [t.split(":", 2)[1:] for t in top] == [["1", "dog"], ["2", "eel"]]


def test_classification_of_a_non_numeric_output_is_refused() -> None:
    io = io_of(Scores())
    req = request(x(1), outputs=[RequestedOutput("TEXT", class_count=1)])
    with pytest.raises(InvalidInputError, match="classification needs a numeric output"):
        run_model(io, req)


def test_a_wrong_output_shape_or_missing_output_is_the_models_error() -> None:
    io = io_of(Scores())
    with pytest.raises(InferenceError, match=r"returned shape \[2,2\] but declares \[2,3\]"):
        io.outputs({"SCORES": np.zeros((2, 2), np.float32)}, ["SCORES"], request(x()), 2)
    with pytest.raises(InferenceError, match="did not produce output 'TEXT'"):
        io.outputs({"SCORES": np.zeros((2, 3), np.float32)}, ["TEXT"], request(x()), 2)


def test_unknown_shared_memory_region_is_refused() -> None:
    io = ModelIO(Scores(), SharedMemoryManager())
    inp = InferInput(
        "X",
        "FP32",
        [1, 3],
        None,
        {"shared_memory_region": "nowhere", "shared_memory_byte_size": 12},
    )
    with pytest.raises(InvalidInputError, match="nowhere"):
        io.check_inputs(request(inp))


def test_one_hook_runner_runs_sync_and_async_pipelines() -> None:
    class Mixed(Model):
        name = "mixed"
        inputs = (TensorDef("X", "INT64", [-1]),)
        outputs = (TensorDef("Y", "INT64", [-1]),)

        async def preprocess(self, inputs: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
            return {"X": inputs["X"] + 1}

        def predict(self, inputs: dict[str, Any]) -> Any:  # type: ignore[override]
            return inputs["X"] * 10

    io = io_of(Mixed())
    assert io.any_async
    calls: list[str] = []

    async def offload(fn: Any, *args: Any) -> Any:
        calls.append(getattr(fn, "__name__", "?"))
        return fn(*args)

    t = Timings()
    result = asyncio.run(io.run({"X": np.array([1, 2])}, InferContext(), t, 0, offload))
    assert result.tolist() == [20, 30]
    assert calls == ["predict"]  # the async preprocess ran on the loop, predict on a thread
    assert t.infer > 0


def test_declarations_replaced_make_the_io_stale() -> None:
    model = Scores()
    io = io_of(model)
    assert not io.stale()
    model.set_defs([TensorDef("X", "FP32", [4])], model.output_defs())
    assert io.stale()
