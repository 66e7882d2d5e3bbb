"""nbinfer's answers to the calls Triton's explicit-contents and model-control examples make.

One server per module serving ``triton_examples/``: Triton's texts first (what the examples
match), nbinfer's detail after, and readiness of unknown models as Triton answers. The same
calls against a real tritonserver are in ``tests/peers/test_triton_fidelity.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nbinfer import Client
from nbinfer.errors import ModelNotFoundError
from tests.server.triton_calls import (
    control_error,
    is_ready,
    mixed_contents_request,
    model_config,
    serving,
    stub_error,
    versioned_request,
)

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with serving() as found:
        yield found


def test_mixed_raw_and_typed_contents(urls: dict[str, str]) -> None:
    code, text = stub_error(urls["grpc"], mixed_contents_request())
    assert code == "INVALID_ARGUMENT"
    assert text.startswith(
        "contents field must not be specified when using raw_input_contents for 'INPUT0' "
        "for model 'simple': "
    )


@pytest.mark.parametrize(
    ("version", "code", "head"),
    [
        (
            "wrong_specification",
            "INVALID_ARGUMENT",
            "failed to get model version from specified "
            "version string 'wrong_specification', version should be an integral value > 0",
        ),
        ("-1", "INVALID_ARGUMENT", "invalid model version specified '-1' , version should be"),
        ("7", "NOT_FOUND", "Request for unknown model: 'simple' version 7 is not found"),
    ],
)
def test_versions_that_name_nothing(
    urls: dict[str, str], version: str, code: str, head: str
) -> None:
    got_code, text = stub_error(urls["grpc"], versioned_request(version))
    assert (got_code, text[: len(head)]) == (code, head)
    assert text.endswith("versions: 1")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_failed_loads(urls: dict[str, str], protocol: str) -> None:
    url = urls[protocol]
    unknown = control_error(protocol, url, "load_model", "no_such_model")
    assert unknown.startswith(
        "failed to load 'no_such_model', failed to poll from model repository"
    )
    assert "known models: batch_direct" in unknown
    bad = control_error(protocol, url, "load_model", "simple", config='"max_batch_size": 1}')
    assert bad.startswith("failed to load 'simple': the load 'config' parameter is not valid JSON")
    assert model_config(protocol, url, "simple")["max_batch_size"] == 8  # still serving as was


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_readiness_of_unknown_models_is_false_for_tritonclient(
    urls: dict[str, str], protocol: str
) -> None:
    url = urls[protocol]
    assert is_ready(protocol, url, "simple")
    assert not is_ready(protocol, url, "no_such_model")
    assert not is_ready(protocol, url, "simple", "7")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_nbinfer_client_still_tells_unknown_from_not_ready(
    urls: dict[str, str], protocol: str
) -> None:
    url = f"{'http' if protocol == 'http' else 'grpc'}://{urls[protocol]}"
    with Client(url) as c:
        assert c.is_model_ready("simple")
        with pytest.raises(ModelNotFoundError, match="Request for unknown model: 'no_such_model'"):
            c.is_model_ready("no_such_model")
        with pytest.raises(ModelNotFoundError, match="version 7 is not found; versions: 1"):
            c.is_model_ready("simple", "7")
