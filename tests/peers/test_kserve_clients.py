"""KServe's own ``InferenceRESTClient`` against nbinfer's server (issue 17 item 1).

The client runs in the kserve peer's virtualenv (``kserve_clients.py``: kserve cannot be
imported beside tritonclient); the server is nbinfer's ``LocalServer`` on 127.0.0.1 (the
``nbinfer_peer`` fixture). v2: health, model readiness (an unknown model is not ready), model
metadata read with KServe's own response model, JSON FP32 and INT64 inference; v1: ``GET /``,
model readiness (404 for an unknown model), ``:predict``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from peer import Peer

SCRIPT = Path(__file__).with_name("kserve_clients.py")
RNG = np.random.default_rng(17)
A = RNG.standard_normal((2, 16)).astype(np.float32)
B = RNG.standard_normal((2, 16)).astype(np.float32)
# beyond float64's exact integers: JSON must carry INT64 as integers, not floats
N = np.array([2**53 + 1, -7, 0, 2**61 + 3], dtype=np.int64)


@pytest.fixture(scope="module")
def answers(kserve_python: Path, nbinfer_peer: Peer) -> dict[str, Any]:
    case = {
        "url": nbinfer_peer.http_url,
        "fp32_model": "add_sub",
        "fp32": {"INPUT0": A.tolist(), "INPUT1": B.tolist()},
        "int64_model": "times_two",
        "int64": {"INPUT0": N.tolist()},
        "v1_model": "times_two",
        "v1_instances": N.tolist(),
    }
    done = subprocess.run(
        [str(kserve_python), str(SCRIPT)],
        input=json.dumps(case),
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # the venv alone
    )
    assert done.returncode == 0, done.stderr[-4000:]
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


def _tensor(answer: dict[str, Any], name: str) -> np.ndarray[Any, Any]:
    out = answer["outputs"][name]
    return np.asarray(out["data"], dtype=out["dtype"]).reshape(out["shape"])


def test_v2_health_checks_read_nbinfers_answers(answers: dict[str, Any]) -> None:
    v2 = answers["v2"]
    assert (v2["live"], v2["ready"], v2["model_ready"]) == (True, True, True)
    assert v2["unknown_model_ready"] is False  # KServe's v2 client: any non-2xx is "not ready"


def test_v2_model_metadata_validates_as_kserves_response_model(answers: dict[str, Any]) -> None:
    meta = answers["v2"]["metadata"]
    assert meta["name"] == "add_sub"
    specs = {t["name"]: (t["datatype"], t["shape"]) for t in meta["inputs"]}
    assert specs == {"INPUT0": ("FP32", [-1, 16]), "INPUT1": ("FP32", [-1, 16])}
    assert sorted(t["name"] for t in meta["outputs"]) == ["OUTPUT0", "OUTPUT1"]


def test_v2_json_fp32_inference_is_exact(answers: dict[str, Any]) -> None:
    fp32 = answers["v2"]["fp32"]
    assert fp32["model_name"] == "add_sub"
    assert {o["datatype"] for o in fp32["outputs"].values()} == {"FP32"}
    np.testing.assert_array_equal(_tensor(fp32, "OUTPUT0"), A + B)
    np.testing.assert_array_equal(_tensor(fp32, "OUTPUT1"), A - B)


def test_v2_json_int64_inference_keeps_every_digit(answers: dict[str, Any]) -> None:
    int64 = answers["v2"]["int64"]
    assert int64["outputs"]["OUTPUT0"]["datatype"] == "INT64"
    assert _tensor(int64, "OUTPUT0").tolist() == [2 * int(v) for v in N]


def test_v1_health_readiness_and_predict(answers: dict[str, Any]) -> None:
    v1 = answers["v1"]
    assert (v1["live"], v1["model_ready"]) == (True, True)
    assert v1["unknown_model_status"] == 404
    assert v1["predict"] == {"predictions": [2 * int(v) for v in N]}
