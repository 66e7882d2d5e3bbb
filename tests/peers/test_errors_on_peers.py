"""Not-ready and failed-load answers of a real Triton reach the caller as nbinfer's error classes.

Triton 2.51 answers inference on an unloaded model with 404 / NOT_FOUND ("has no available
versions"), or 503 / UNAVAILABLE for a named version ("is not at ready state"), and a failed load
with 400 / INVALID_ARGUMENT ("load failed for model"): the client maps them onto
``ModelNotReadyError`` / ``ModelLoadError`` by status and message.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from nbinfer import Client
from nbinfer.errors import ModelLoadError, ModelNotFoundError, ModelNotReadyError

if TYPE_CHECKING:
    from peer import Peer

PROTOCOLS = ("http", "grpc")

_BROKEN_CONFIG = """name: "broken"
backend: "python"
max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_INT64 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT64 dims: [-1] }]
"""

_BROKEN_MODEL = """class TritonPythonModel:
    def initialize(self, args):
        raise OSError("weights.bin is truncated at byte 42")

    def execute(self, requests):
        return []
"""


@pytest.fixture(scope="module")
def explicit_triton(
    triton_launcher: Callable[..., Peer],
    triton_repository: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Peer:
    """Triton in explicit model-control mode: ``negate`` loaded, ``broken`` (raises) not."""
    repo = tmp_path_factory.mktemp("explicit-repo")
    shutil.copytree(triton_repository / "negate", repo / "negate")
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text(_BROKEN_CONFIG)
    (repo / "broken" / "1" / "model.py").write_text(_BROKEN_MODEL)
    return triton_launcher(
        repo, models=("negate",), flags=("--model-control-mode=explicit", "--load-model=negate")
    )


def _url(peer: Peer, protocol: str) -> str:
    return peer.http_url if protocol == "http" else peer.grpc_url


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_triton_unloaded_model_is_model_not_ready(explicit_triton: Peer, protocol: str) -> None:
    with Client(_url(explicit_triton, protocol)) as client:
        client.unload_model("negate")
        try:
            for version in ("", "1"):
                with pytest.raises(ModelNotReadyError, match="negate"):
                    client.infer("negate", {"INPUT0": np.ones(2, np.int64)}, model_version=version)
            with pytest.raises(ModelNotFoundError) as info:
                client.infer("no_such_model", {"INPUT0": np.ones(2, np.int64)})
            assert not isinstance(info.value, ModelNotReadyError)
        finally:
            client.load_model("negate")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_triton_failed_load_is_a_load_error_with_the_models_text(
    explicit_triton: Peer, protocol: str
) -> None:
    message = r"OSError: weights\.bin is truncated at byte 42"
    with (
        Client(_url(explicit_triton, protocol)) as client,
        pytest.raises(ModelLoadError, match=message),
    ):
        client.load_model("broken")
