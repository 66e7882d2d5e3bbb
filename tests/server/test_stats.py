"""Statistics of cancelled requests: Triton's schema, over JSON and the gRPC wire (issue 19).

Triton's ``InferStatistics`` has no cancel count; the one standard field is the per-response
``InferResponseStatistics.cancel``, so a given-up request is counted in
``response_stats["0"].cancel`` and nowhere else (the server side is tested in
test_cancellation.py).
"""

from __future__ import annotations

import pytest

from nbinfer.protocol.grpc_json import statistics_json_to_proto, statistics_proto_to_json
from nbinfer.server.stats import ModelStats

tc_service = pytest.importorskip("tritonclient.grpc.service_pb2")


def _counted() -> ModelStats:
    stats = ModelStats()
    stats.record_success(1, 1_000, 10, 20, 30, 40)
    stats.record_failure(2_000)
    stats.record_cancel(3_000)
    stats.record_cancel(4_000)
    return stats


def test_cancelled_requests_are_neither_successes_nor_failures() -> None:
    entry = _counted().to_json("m", "1")
    inference = entry["inference_stats"]
    assert inference["success"] == {"count": 1, "ns": 1_000}
    assert inference["fail"] == {"count": 1, "ns": 2_000}
    assert entry["response_stats"] == {"0": {"cancel": {"count": 2, "ns": 7_000}}}
    assert entry["execution_count"] == 1 and entry["inference_count"] == 1


def test_nothing_cancelled_leaves_response_stats_empty() -> None:
    assert ModelStats().to_json("m", "1")["response_stats"] == {}


def test_the_cancel_count_fits_tritons_schema_and_reaches_tritonclient_over_the_wire() -> None:
    doc = {"model_stats": [_counted().to_json("m", "1")]}
    proto = statistics_json_to_proto(doc)  # strict: an unknown field would raise
    assert proto.model_stats[0].response_stats["0"].cancel.count == 2
    theirs = tc_service.ModelStatisticsResponse.FromString(proto.SerializeToString())
    assert theirs.model_stats[0].response_stats["0"].cancel.count == 2
    assert theirs.model_stats[0].inference_stats.fail.count == 1
    back = statistics_proto_to_json(proto)["model_stats"][0]
    assert back["response_stats"]["0"]["cancel"] == {"count": 2, "ns": 7_000}
