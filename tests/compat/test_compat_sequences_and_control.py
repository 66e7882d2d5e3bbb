"""Sequences, model control and the model config through ``nbinfer.compat`` (tritonclient's faces).

Triton's ``simple_*_sequence_*`` and ``*_explicit_*`` examples call these; the same calls with
real tritonclient against nbinfer and against tritonserver are in tests/peers. Here the compat
layer itself carries them: interleaved sequences over HTTP, gRPC and the gRPC stream, a repository
model unloaded and loaded again, and the config as JSON and as ``model_config_pb2``.
"""

from __future__ import annotations

import queue
from typing import Any

import numpy as np
import pytest

from nbinfer.compat.tritonclient import grpc as compat_grpc
from nbinfer.compat.tritonclient import http as compat_http
from nbinfer.compat.tritonclient.grpc import model_config_pb2
from nbinfer.compat.tritonclient.utils import InferenceServerException


def _protocol(module: Any) -> str:
    return "http" if module is compat_http else "grpc"


def _value(module: Any, v: int) -> list[Any]:
    x = module.InferInput("INPUT", [1], "INT32")
    x.set_data_from_numpy(np.array([v], np.int32))
    return [x]


@pytest.mark.parametrize("module", [compat_http, compat_grpc], ids=["http", "grpc"])
def test_two_interleaved_sequences_keep_their_own_totals(
    addresses: dict[str, str], module: Any
) -> None:
    with module.InferenceServerClient(addresses[_protocol(module)]) as client:
        totals: dict[int, list[int]] = {1001: [], 1002: []}
        steps = [(1001, 1), (1002, 10), (1001, 2), (1002, 20), (1001, 3), (1002, 30)]
        for i, (seq, v) in enumerate(steps):
            result = client.infer(
                "accumulate",
                _value(module, v),
                sequence_id=seq,
                sequence_start=i < 2,
                sequence_end=i >= len(steps) - 2,
            )
            totals[seq].append(int(result.as_numpy("OUTPUT")[0]))
    assert totals == {1001: [1, 3, 6], 1002: [10, 30, 60]}


def test_sequences_over_the_grpc_stream_with_string_ids(addresses: dict[str, str]) -> None:
    replies: queue.Queue[tuple[Any, Any]] = queue.Queue()
    with compat_grpc.InferenceServerClient(addresses["grpc"]) as client:
        client.start_stream(callback=lambda result, error: replies.put((result, error)))
        for i, (seq, v) in enumerate([("a", 5), ("b", 7), ("a", 5), ("b", 7)]):
            client.async_stream_infer(
                "accumulate",
                _value(compat_grpc, v),
                sequence_id=seq,
                sequence_start=i < 2,
                sequence_end=i >= 2,
            )
        got = [replies.get(timeout=30) for _ in range(4)]
        client.stop_stream()
    assert [error for _, error in got] == [None] * 4
    assert sorted(int(r.as_numpy("OUTPUT")[0]) for r, _ in got) == [5, 7, 10, 14]


@pytest.mark.parametrize("module", [compat_http, compat_grpc], ids=["http", "grpc"])
def test_a_repository_model_unloads_and_loads_again(addresses: dict[str, str], module: Any) -> None:
    with module.InferenceServerClient(addresses[_protocol(module)]) as client:
        assert client.is_model_ready("doubler")
        try:
            client.unload_model("doubler")
            assert not client.is_model_ready("doubler")
            with pytest.raises(InferenceServerException):
                x = module.InferInput("X", [1, 2], "FP32")
                x.set_data_from_numpy(np.ones((1, 2), np.float32))
                client.infer("doubler", [x])
            index = {m["name"] if isinstance(m, dict) else m.name: m for m in _index(client)}
            assert "doubler" in index  # still in the repository, not loaded
        finally:
            client.load_model("doubler")
        assert client.is_model_ready("doubler")
        # a demo model (in memory, no repository copy) cannot be unloaded over the network
        with pytest.raises(InferenceServerException, match="accumulate"):
            client.unload_model("accumulate")
        assert client.is_model_ready("accumulate")


def _index(client: Any) -> list[Any]:
    index = client.get_model_repository_index()
    return list(index.models) if hasattr(index, "models") else list(index)


def test_the_config_as_json_and_as_model_config_pb2(addresses: dict[str, str]) -> None:
    with compat_http.InferenceServerClient(addresses["http"]) as client:
        as_json = client.get_model_config("simple")
    with compat_grpc.InferenceServerClient(addresses["grpc"]) as client:
        reply = client.get_model_config("simple")
        as_dict = client.get_model_config("simple", as_json=True)
    config = reply.config
    assert isinstance(config, model_config_pb2.ModelConfig)
    assert [i.name for i in config.input] == [i["name"] for i in as_json["input"]]
    assert config.input[0].data_type == model_config_pb2.TYPE_INT32
    assert list(config.input[0].dims) == [int(d) for d in as_json["input"][0]["dims"]]
    assert as_dict["config"]["name"] == as_json["name"] == "simple"
