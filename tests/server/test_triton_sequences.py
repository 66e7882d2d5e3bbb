"""Triton's sequence batcher on nbinfer: control tensors, implicit state, idle timeout.

One server per module serving ``triton_examples/`` (Python-backend stand-ins of Triton's example
models), driven by tritonclient over HTTP and gRPC, sync and on the gRPC stream, with the calls
Triton's sequence client examples make. The same calls against a real tritonserver are in
``tests/peers/test_triton_fidelity.py``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from nbinfer.errors import InvalidInputError
from nbinfer.server.pbtxt import parse_pbtxt
from nbinfer.server.sequence_controls import SequenceControls
from tests.server.triton_calls import (
    VALUES,
    batch_sizes,
    client,
    infer_one,
    probe,
    run_concurrent_sequences,
    run_sequence,
    run_stream,
    serving,
)

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with serving() as found:
        yield found


# -- the examples' own checks ------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_simple_sequence_gets_start_and_ready_on_both_transports(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    first = run_sequence(protocol, url, "simple_sequence", 1000, [0, *VALUES])
    second = run_sequence(protocol, url, "simple_sequence", 1001, [100, *(-v for v in VALUES)])
    # START is 1 on the first request only (OUTPUT = INPUT + START), READY on every one
    assert first == [1, *VALUES]
    assert second == [101, *(-v for v in VALUES)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dyna_sequence_gets_the_uint64_corrid_and_end(urls: dict[str, str], protocol: str) -> None:
    got = run_sequence(protocol, urls[protocol], "simple_dyna_sequence", 1000, [0, *VALUES])
    assert got == [1, *VALUES[:-1], VALUES[-1] + 1000]


def test_interleaved_sequences_on_one_grpc_stream(urls: dict[str, str]) -> None:
    negated = [-v for v in VALUES]
    got = run_stream(
        urls["grpc"],
        [
            ("simple_dyna_sequence", 1000, [0, *VALUES]),
            ("simple_dyna_sequence", 1001, [100, *negated]),
            ("simple_string_dyna_sequence", "1002", [20, *negated]),
        ],
    )
    assert got[1000] == [1, *VALUES[:-1], VALUES[-1] + 1000]
    assert got[1001] == [101, *negated[:-1], negated[-1] + 1001]
    running = list(np.cumsum([20, *negated]))
    assert got["1002"] == [*running[:-1], running[-1] + 1002]


# -- control tensors: datatype, shape and values as declared ----------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batched_controls_are_batch_by_1_in_their_declared_types(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    start = probe(protocol, url, "probe_batched", 77, start=True, batched=True)
    middle = probe(protocol, url, "probe_batched", 77, batched=True)
    end = probe(protocol, url, "probe_batched", 77, end=True, batched=True)
    assert start == {
        "INPUT": ["int32", [1, 1], [1]],
        "START": ["int32", [1, 1], [1]],
        "READY": ["float32", [1, 1], [1.0]],
        "END": ["bool", [1, 1], [False]],
        "CORRID": ["uint64", [1, 1], [77]],
    }
    assert (middle["START"][2], middle["END"][2]) == ([0], [False])
    assert (end["START"][2], end["END"][2], end["READY"][2]) == ([0], [True], [1.0])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unbatched_controls_are_shape_1_with_the_declared_false_true_values(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    start = probe(protocol, url, "probe_oldest", 9, start=True)
    end = probe(protocol, url, "probe_oldest", 9, end=True)
    # START int32 [5, 7], END fp32 [0.5, 2.5], READY bool, CORRID INT64
    assert start == {
        "INPUT": ["int32", [1], [1]],
        "START": ["int32", [1], [7]],
        "END": ["float32", [1], [0.5]],
        "READY": ["bool", [1], [True]],
        "CORRID": ["int64", [1], [9]],
    }
    assert (end["START"][2], end["END"][2]) == ([5], [2.5])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_string_corrid_carries_string_and_integer_ids_as_bytes(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    by_string = probe(protocol, url, "probe_string", "user-7", start=True, end=True)
    by_number = probe(protocol, url, "probe_string", 44, start=True, end=True)
    assert by_string["CORRID"] == ["object", [1], ["user-7"]]
    assert by_number["CORRID"] == ["object", [1], ["44"]]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_integer_corrid_refuses_a_string_sequence_id(
    urls: dict[str, str], protocol: str
) -> None:
    with pytest.raises(InferenceServerException, match=r"CORRID.*must be an integer.*'abc'"):
        probe(protocol, urls[protocol], "probe_oldest", "abc", start=True)


# -- implicit state ------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_implicit_state_carries_the_output_and_resets_at_start(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    c = client(protocol, url)
    try:

        def send(sid: int, value: int, **flags: Any) -> int:
            out = infer_one(
                c, protocol, "simple_state", value, batched=False, sequence_id=sid, **flags
            )
            return int(out)

        # two sequences interleaved keep their own state; the initial state is zeros
        assert send(5, 3, sequence_start=True) == 3
        assert send(6, 10, sequence_start=True) == 10
        assert send(5, 4) == 7
        assert send(6, 1) == 11
        # a new start resets the state of the same id
        assert send(5, 2, sequence_start=True) == 2
        assert send(5, 1, sequence_end=True) == 3
        assert send(6, 1, sequence_end=True) == 12
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_implicit_state_starts_from_the_declared_data_file(
    urls: dict[str, str], protocol: str
) -> None:
    got = run_sequence(protocol, urls[protocol], "simple_state_init", 8, [3, 4, 5], batched=False)
    assert got == [103, 107, 112]


def test_the_state_output_is_not_an_output_of_the_model(urls: dict[str, str]) -> None:
    c = client("http", urls["http"])
    try:
        meta = c.get_model_metadata("simple_state")
        with pytest.raises(InferenceServerException, match="no output 'ACC_OUT'"):
            infer_one(
                c,
                "http",
                "simple_state",
                1,
                batched=False,
                output="ACC_OUT",
                sequence_id=3,
                sequence_start=True,
            )
    finally:
        c.close()
    assert [o["name"] for o in meta["outputs"]] == ["OUTPUT"]
    assert [i["name"] for i in meta["inputs"]] == ["INPUT"]


# -- sequence lifetime ----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_idle_sequence_is_freed_after_max_sequence_idle_microseconds(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    assert probe(protocol, url, "probe_idle", 31, start=True)["START"][2] == [1]
    time.sleep(1.2)  # the model's max_sequence_idle_microseconds is 0.4 s
    with pytest.raises(InferenceServerException) as info:
        probe(protocol, url, "probe_idle", 31)
    assert str(info.value.message()).startswith(
        "inference request for sequence 31 to model 'probe_idle' must specify the START flag"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_sequence_request_without_id_has_tritons_wording(
    urls: dict[str, str], protocol: str
) -> None:
    c = client(protocol, urls[protocol])
    try:
        with pytest.raises(InferenceServerException) as info:
            infer_one(c, protocol, "simple_sequence", 1)
    finally:
        c.close()
    assert str(info.value.message()).startswith(
        "inference request to model 'simple_sequence' must specify a non-zero or non-empty "
        "correlation ID"
    )


# -- config checks (no server) -------------------------------------------------------------------


def _controls(text: str, model_dir: Path | None = None) -> SequenceControls | None:
    return SequenceControls.from_config(parse_pbtxt(text), model_dir)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'sequence_batching { control_input [ { name: "S" control [ { kind: '
            "CONTROL_SEQUENCE_START } ] } ] }",
            "'S': CONTROL_SEQUENCE_START needs exactly one of int32_false_true",
        ),
        (
            'sequence_batching { control_input [ { name: "S" control [ { kind: '
            "CONTROL_SEQUENCE_START int32_false_true: [ 1 ] } ] } ] }",
            "two values",
        ),
        (
            'sequence_batching { control_input [ { name: "C" control [ { kind: '
            "CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ] }",
            "'C': CONTROL_SEQUENCE_CORRID needs data_type TYPE_UINT64, TYPE_INT64 or TYPE_STRING",
        ),
        (
            'sequence_batching { control_input [ { name: "X" control [ { kind: '
            "CONTROL_SEQUENCE_SOON int32_false_true: [ 0, 1 ] } ] } ] }",
            "'X': unknown kind 'CONTROL_SEQUENCE_SOON'",
        ),
        (
            'sequence_batching { state [ { input_name: "A" data_type: TYPE_INT32 dims: [1] } ] }',
            "state 'A': needs input_name and output_name",
        ),
        (
            'sequence_batching { state [ { input_name: "A" output_name: "B" '
            "data_type: TYPE_NOPE dims: [1] } ] }",
            "state 'A': unknown data_type 'TYPE_NOPE'",
        ),
    ],
)
def test_malformed_controls_and_states_are_named(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        _controls(text)


def test_initial_state_file_must_be_inside_initial_state_and_of_the_right_size(
    tmp_path: Path,
) -> None:
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "short.bin").write_bytes(b"\x01\x00")
    state = (
        'sequence_batching { state [ { input_name: "A" output_name: "B" data_type: TYPE_INT32 '
        'dims: [ 1 ] initial_state: { data_type: TYPE_INT32 dims: [ 1 ] data_file: "%s" } } ] }'
    )
    with pytest.raises(InvalidInputError, match="holds 2 bytes, the state needs 4"):
        _controls(state % "short.bin", tmp_path)
    with pytest.raises(InvalidInputError, match=r"'missing\.bin' not found"):
        _controls(state % "missing.bin", tmp_path)
    with pytest.raises(InvalidInputError, match="initial_state data_file"):
        _controls(state % "../../etc/passwd", tmp_path)


def test_a_config_without_controls_or_state_needs_no_feeding() -> None:
    assert _controls("sequence_batching { max_sequence_idle_microseconds: 5 }") is None
    assert _controls("max_batch_size: 4") is None


# -- an ONNX model: its graph takes the controls and the state, its config lists neither ---------


_ONNX_CONFIG = """
name: "onnx_state"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
  state [ { input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
}
"""


def test_an_onnx_graph_gets_controls_and_implicit_state(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from nbinfer.protocol.types import InferInput, InferRequest
    from nbinfer.server.dataplane import DataPlane
    from nbinfer.server.repository import ModelRepository

    def tensor(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT32, [1])

    # OUTPUT = ACC_IN + INPUT + START, ACC_OUT = ACC_IN + INPUT
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["ACC_IN", "INPUT"], ["ACC_OUT"]),
            helper.make_node("Add", ["ACC_OUT", "START"], ["OUTPUT"]),
        ],
        "onnx_state",
        [tensor("INPUT"), tensor("START"), tensor("ACC_IN")],
        [tensor("OUTPUT"), tensor("ACC_OUT")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (tmp_path / "onnx_state" / "1").mkdir(parents=True)
    onnx.save(model, str(tmp_path / "onnx_state" / "1" / "model.onnx"))
    (tmp_path / "onnx_state" / "config.pbtxt").write_text(_ONNX_CONFIG)

    dp = DataPlane(ModelRepository(tmp_path, device="cpu"))

    async def run() -> list[int]:
        got = []
        for i, value in enumerate([3, 4, 5]):
            params = {"sequence_id": 9, "sequence_start": i == 0, "sequence_end": i == 2}
            x = np.array([value], dtype=np.int32)
            request = InferRequest(
                inputs=[InferInput("INPUT", "INT32", [1], x)],
                model_name="onnx_state",
                parameters=params,
            )
            response = await dp.infer(request)
            assert [o.name for o in response.outputs] == ["OUTPUT"]
            got.append(int(response.outputs[0].data[0]))  # type: ignore[index]
        await dp.close()
        return got

    assert [i.name for i in dp.model_metadata("onnx_state").inputs] == ["INPUT"]
    assert [o.name for o in dp.model_metadata("onnx_state").outputs] == ["OUTPUT"]
    assert asyncio.run(run()) == [4, 7, 12]


# -- sequences sharing executions: direct / oldest sequence batching --------------------------


@pytest.mark.parametrize(("model", "cap"), [("batch_direct", 4), ("batch_oldest", 3)])
def test_requests_of_different_sequences_share_executions(
    urls: dict[str, str], model: str, cap: int
) -> None:
    # four sequences at once; the model pauses per execution, so the others' requests queue
    outputs, seen, stats = run_concurrent_sequences(urls["grpc"], model, 4, [10, 20, 30])
    assert outputs == [[11 + i, 20 + i, 30 + i] for i in range(4)]  # START adds 1 at the start
    # the model's execute() got one request per sequence, each with its own correlation id
    assert all(corrid == 7000 + i for i, run in enumerate(seen) for _, corrid in run)
    assert 1 < max(count for run in seen for count, _ in run) <= cap
    sizes = batch_sizes(stats)
    assert sum(size * count for size, count in sizes.items()) == 12
    assert max(sizes) > 1, sizes  # rows of several sequences in one execution
    assert max(sizes) <= cap, sizes  # oldest: max_candidate_sequences; direct: max_batch_size
    assert int(stats["execution_count"]) < int(stats["inference_count"]) == 12
