"""What ``config.pbtxt`` says comes back from ``GET .../config`` and gRPC ModelConfig as Triton
echoes it; version 0 means the latest (OpenVINO Model Server); Triton's wording and platform.

One nbinfer server per module serving ``triton_examples/``; the comparison with a real
tritonserver serving the same repository is in ``tests/peers/test_triton_fidelity.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tritonclient.utils import InferenceServerException

from tests.server.triton_calls import (
    client,
    client_view,
    infer_one,
    model_config,
    serving,
)

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with serving() as found:
        yield found


@pytest.fixture(scope="module")
def full(urls: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {p: client_view(model_config(p, urls[p], "config_full")) for p in PROTOCOLS}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_input_formats_reshape_optional_and_ragged_round_trip(
    full: dict[str, dict[str, Any]], protocol: str
) -> None:
    image, pixels, flat = full[protocol]["input"]
    assert (image["name"], image["format"], image["dims"]) == ("IMAGE", "FORMAT_NCHW", [3, 4, 4])
    assert (pixels["format"], pixels["optional"], pixels["data_type"]) == (
        "FORMAT_NHWC",
        True,
        "TYPE_UINT8",
    )
    assert flat["format"] == "FORMAT_NONE"
    assert flat["reshape"] == {"shape": [4, 4]}
    assert (flat["allow_ragged_batch"], flat["optional"]) == (True, True)
    assert image["allow_ragged_batch"] is False and image["is_shape_tensor"] is False


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_outputs_labels_parameters_instances_batching_and_versions_round_trip(
    full: dict[str, dict[str, Any]], protocol: str
) -> None:
    cfg = full[protocol]
    scores, extra = cfg["output"]
    assert (scores["label_filename"], scores["dims"]) == ("labels.txt", [4])
    assert (extra["reshape"], extra["label_filename"]) == ({"shape": [4]}, "")
    assert cfg["parameters"] == {
        "threshold": {"string_value": "0.5"},
        "mode": {"string_value": "fast"},
    }
    (group,) = cfg["instance_group"]
    assert (group["name"], group["kind"], group["count"]) == ("config_full_0", "KIND_CPU", 2)
    dyn = cfg["dynamic_batching"]
    assert dyn["preferred_batch_size"] == [2, 4]
    assert dyn["max_queue_delay_microseconds"] == 100
    assert (dyn["priority_levels"], dyn["default_priority_level"]) == (2, 1)
    assert dyn["preserve_ordering"] is False
    assert cfg["version_policy"] == {"specific": {"versions": [1, 2]}}
    assert (cfg["backend"], cfg["platform"], cfg["max_batch_size"]) == ("python", "", 8)
    assert cfg["default_model_filename"] == "model.py"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequence_batching_controls_state_and_named_groups_round_trip(
    urls: dict[str, str], protocol: str
) -> None:
    cfg = client_view(model_config(protocol, urls[protocol], "config_sequence"))
    sb = cfg["sequence_batching"]
    assert sb["max_sequence_idle_microseconds"] == 2000000
    assert sb["direct"] == {"max_queue_delay_microseconds": 10, "minimum_slot_utilization": 0.5}
    start, corrid = sb["control_input"]
    assert start["name"] == "START"
    assert start["control"] == [
        {
            "kind": "CONTROL_SEQUENCE_START",
            "int32_false_true": [0, 1],
            "fp32_false_true": [],
            "bool_false_true": [],
            "data_type": "TYPE_INVALID",
        }
    ]
    assert corrid["control"][0]["data_type"] == "TYPE_UINT64"
    (state,) = sb["state"]
    assert (state["input_name"], state["output_name"], state["dims"]) == ("S_IN", "S_OUT", [2])
    assert state["initial_state"] == [
        {"data_type": "TYPE_FP32", "dims": [2], "zero_data": True, "name": "zeros"}
    ]
    assert [g["name"] for g in cfg["instance_group"]] == ["first", "config_sequence_1"]
    assert cfg["input"][0]["format"] == "FORMAT_NCHW"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_model_without_instance_groups_gets_one_named_after_it(
    urls: dict[str, str], protocol: str
) -> None:
    cfg = model_config(protocol, urls[protocol], "simple_sequence")
    assert [g["name"] for g in cfg["instance_group"]] == ["simple_sequence"]
    # nbinfer's effective idle timeout and Triton's defaults in the section
    assert int(cfg["sequence_batching"]["max_sequence_idle_microseconds"]) == 5000000
    assert cfg["sequence_batching"]["state"] == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_python_backend_metadata_says_platform_python(urls: dict[str, str], protocol: str) -> None:
    c = client(protocol, urls[protocol])
    try:
        meta = c.get_model_metadata("config_full")
    finally:
        c.close()
    platform = meta["platform"] if protocol == "http" else meta.platform
    assert platform == "python"


# -- version 0 = the latest (OpenVINO Model Server's convention) ------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_version_0_addresses_the_latest_version(urls: dict[str, str], protocol: str) -> None:
    c = client(protocol, urls[protocol])
    try:
        assert c.is_model_ready("config_full", "0")
        meta = c.get_model_metadata("config_full", "0")
        versions = meta["versions"] if protocol == "http" else list(meta.versions)
        assert versions == ["1", "2"]
        cfg = model_config(protocol, urls[protocol], "config_full", "0")
        assert cfg["name"] == "config_full"
        got = infer_one(
            c, protocol, "simple_sequence", 4, version="0", sequence_id=12, sequence_start=True
        )
        assert got == 5
    finally:
        c.close()


def test_version_0_infer_over_plain_http_answers_the_real_version(urls: dict[str, str]) -> None:
    body = {
        "inputs": [
            {"name": "IMAGE", "datatype": "FP32", "shape": [1, 3, 4, 4], "data": [1.0] * 48}
        ],
        "outputs": [{"name": "SCORES"}],
    }
    r = httpx.post(f"http://{urls['http']}/v2/models/config_full/versions/0/infer", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["model_version"] == "2"
    assert r.json()["outputs"][0]["data"] == [1.0] * 4
    missing = httpx.get(f"http://{urls['http']}/v2/models/config_full/versions/7")
    assert missing.status_code == 404
    assert missing.json()["error"].startswith(
        "Request for unknown model: 'config_full' version 7 is not found"
    )


# -- Triton's wording first ---------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unknown_model_is_worded_as_triton_then_lists_the_known_ones(
    urls: dict[str, str], protocol: str
) -> None:
    c = client(protocol, urls[protocol])
    try:
        with pytest.raises(InferenceServerException) as info:
            c.get_model_metadata("nope")
    finally:
        c.close()
    message = str(info.value.message())
    assert message.startswith("Request for unknown model: 'nope' is not found")
    assert "known models: batch_direct, batch_oldest, config_full" in message
