"""KServe v1 ``:predict`` / ``:explain`` read instances by the v2 JSON rules: nothing is coerced.

Real requests to a real server process (the module's ``server`` fixture). Each refused request
was answered 200 before (strings and booleans coerced to numbers; ``1e39``, ``null`` and ``"nan"``
turned into non-finite floats that came back as ``null`` predictions).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest


@pytest.fixture()
def http(http_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=http_url, timeout=30) as c:
        yield c


def _refused(http: httpx.Client, model: str, instances: Any, verb: str = "predict") -> str:
    r = http.post(f"/v1/models/{model}:{verb}", json={"instances": instances})
    assert r.status_code == 400, r.text
    message: str = r.json()["error"]
    assert model in message
    return message


def _predict(http: httpx.Client, model: str, instances: Any) -> Any:
    r = http.post(f"/v1/models/{model}:predict", json={"instances": instances})
    assert r.status_code == 200, r.text
    return r.json()["predictions"]


@pytest.mark.parametrize(
    ("instances", "instance", "value"),
    [
        ([[1.0, 2.0], [3.0, "nan"]], 1, '"nan"'),
        ([["1.5", 2.0]], 0, '"1.5"'),
        ([[1.0, 2.0], [True, 0.0]], 1, "true"),
        ([[1.0, None]], 0, "null"),
    ],
)
def test_v1_refuses_values_that_are_not_numbers_for_a_float_input(
    http: httpx.Client, instances: Any, instance: int, value: str
) -> None:
    message = _refused(http, "identity_fp32", instances)
    assert f"instance {instance}" in message
    assert f"is {value}: wrong type" in message
    assert "FP32" in message and "'INPUT0'" in message


def test_v1_refuses_a_number_that_does_not_fit_fp32(http: httpx.Client) -> None:
    message = _refused(http, "identity_fp32", [[1.0], [1e39]])
    assert "instance 1" in message
    assert "1e+39: out of range, does not fit FP32" in message


def test_v1_refuses_booleans_and_strings_for_the_demo_iris(http: httpx.Client) -> None:
    message = _refused(http, "iris", [[5.1, 3.5, 1.4, 0.2], [False, 3.0, 5.2, 2.3]])
    assert "instance 1" in message and "is false: wrong type" in message
    assert "FP32" in message
    message = _refused(http, "iris", [["5.1", "3.5", "1.4", "0.2"]])
    assert "instance 0" in message and '"5.1"' in message


def test_v1_refuses_ragged_instances_naming_the_odd_one(http: httpx.Client) -> None:
    message = _refused(http, "identity_fp32", [[1.0, 2.0], [3.0, 4.0], [5.0]])
    assert "ragged" in message
    assert "instance 2 has shape [1], instance 0 has [2]" in message
    message = _refused(http, "identity_fp32", [[1.0, 2.0], 3.0])
    assert "ragged" in message and "instance 1" in message
    message = _refused(http, "identity_fp32", [[[1.0], [2.0, 3.0]]])
    assert "ragged" in message


def test_v1_applies_the_other_datatypes_rules_too(http: httpx.Client) -> None:
    message = _refused(http, "identity_bool", [[True, 1]])
    assert "is 1: wrong type, BOOL JSON data must be true or false" in message
    message = _refused(http, "identity_int8", [[1, 300]])
    assert "300: out of range, does not fit INT8" in message
    message = _refused(http, "identity_int32", [[1, 2.5]])
    assert "2.5: wrong type, INT32 JSON data must be whole numbers" in message
    message = _refused(http, "identity_bytes", [["a", 7]])
    assert "instance 0" in message and "BYTES" in message and "must be strings" in message


def test_v1_explain_refuses_the_same_values(http: httpx.Client) -> None:
    message = _refused(http, "explained", [[1.0, "2"]], verb="explain")
    assert "instance 0" in message and '"2"' in message


def test_v1_valid_requests_still_answer_and_the_server_keeps_serving(
    http: httpx.Client,
) -> None:
    _refused(http, "identity_fp32", [[1e39]])
    assert _predict(http, "identity_fp32", [[1.5, -2.0], [0.0, 3.25]]) == [
        [1.5, -2.0],
        [0.0, 3.25],
    ]
    assert _predict(http, "identity_int64", [[2**62, -1]]) == [[2**62, -1]]
    assert _predict(http, "identity_int32", [[1.0, 2]]) == [[1, 2]]  # whole floats are integers
    assert _predict(http, "identity_bool", [[True, False]]) == [[True, False]]
    assert _predict(http, "identity_bytes", [["a", "ü"]]) == [["a", "ü"]]
    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
    v1 = np.array(_predict(http, "iris", rows))
    r = http.post(
        "/v2/models/iris/infer",
        json={"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4], "data": rows}]},
    )
    assert r.status_code == 200, r.text
    v2 = np.array(r.json()["outputs"][0]["data"]).reshape(v1.shape)
    np.testing.assert_allclose(v1, v2)
    assert v1[0].argmax() == 0 and v1[1].argmax() == 2


def test_v1_reads_the_nan_and_infinity_tokens_as_v2_does(http: httpx.Client) -> None:
    body = b'{"instances": [[NaN, 1.0], [Infinity, -Infinity]]}'
    r = http.post(
        "/v1/models/identity_fp32:predict",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["predictions"] == [[None, 1.0], [None, None]]  # KServe writes null for them
    r = http.post("/v1/models/identity_fp32:predict", content=b'{"instances": [[1e400]]}')
    assert r.status_code == 400
    assert "malformed KServe v1 request body" in r.json()["error"]


def test_v1_names_the_instance_deep_in_a_large_request(http: httpx.Client) -> None:
    rows: list[list[Any]] = [[float(i), 1.0, 2.0] for i in range(5000)]
    rows[4321][2] = "2.0"
    message = _refused(http, "identity_fp32", rows)
    assert message.startswith("KServe v1 instance 4321 of model 'identity_fp32' is refused")
    assert 'element 2 is "2.0"' in message  # the element inside that instance
    message = _refused(http, "identity_bytes", [["a", "b"], ["c", "d"], ["e"]])
    assert "ragged" in message and "instance 2 has shape [1]" in message
