"""nbinfer and a real tritonserver 2.51 serving the SAME Triton-layout repository answer alike.

``tests/server/triton_examples/`` (our Python-backend stand-ins of Triton's example models, see
its README) is served by nbinfer's ``LocalServer`` and by the real Triton; the calls Triton's
sequence client examples make (tritonclient, HTTP and gRPC, sync and on the stream) and the
config / metadata / error answers are compared. Where the two differ on purpose, the test pins
both answers (and docs/compat.md explains why):

* STRING ``CONTROL_SEQUENCE_CORRID``: Triton 2.51's Python backend refuses every request
  ("unexpected number of string elements 2 ..."); nbinfer gives the model the id as bytes.
* an integer CORRID for a string ``sequence_id``: Triton gives the model the string's bytes
  read as a number; nbinfer refuses the request (400 naming the control).
* implicit state on a Python-backend model: Triton 2.51's Python backend never updates the state
  (it does not call ``TRITONBACKEND_StateUpdate``), so every request sees the initial state;
  nbinfer carries ``output_name`` into ``input_name`` as Triton's ONNX Runtime / TensorRT
  backends do.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from tritonclient.utils import InferenceServerException

from tests.server.triton_calls import (
    MODELS,
    VALUES,
    addresses,
    batch_sizes,
    client,
    client_view,
    control_error,
    examples_repository,
    infer_one,
    is_ready,
    mixed_contents_request,
    model_config,
    probe,
    run_concurrent_sequences,
    run_sequence,
    run_stream,
    serving,
    stub_error,
    versioned_request,
)

if TYPE_CHECKING:
    from peer import Peer

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def servers(
    triton_launcher: Callable[..., Peer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, dict[str, str]]]:
    repository = examples_repository(tmp_path_factory.mktemp("triton-examples") / "models")
    # explicit model control, every model loaded at start: the model-control calls work
    flags = ("--model-control-mode=explicit", "--load-model=*")
    triton = triton_launcher(repository, models=MODELS, flags=flags)
    with serving(repository) as ours:
        yield {"nbinfer": ours, "triton": addresses(triton)}


def _both(servers: dict[str, dict[str, str]], call: Callable[[dict[str, str]], Any]) -> Any:
    """``call`` on both servers; asserts the answers are equal and returns it."""
    ours, theirs = call(servers["nbinfer"]), call(servers["triton"])
    assert ours == theirs
    return ours


# -- sequences: the examples' calls ----------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["simple_sequence", "simple_dyna_sequence"])
def test_sync_sequences_answer_alike(
    servers: dict[str, dict[str, str]], protocol: str, model: str
) -> None:
    got = _both(
        servers,
        lambda urls: [
            run_sequence(protocol, urls[protocol], model, 1000, [0, *VALUES]),
            run_sequence(protocol, urls[protocol], model, 1001, [100, *(-v for v in VALUES)]),
        ],
    )
    tail = 1000 if model == "simple_dyna_sequence" else 0
    assert got[0] == [1, *VALUES[:-1], VALUES[-1] + tail]


def test_interleaved_stream_sequences_answer_alike(servers: dict[str, dict[str, str]]) -> None:
    negated = [-v for v in VALUES]
    sequences = [
        ("simple_dyna_sequence", 2000, [0, *VALUES]),
        ("simple_dyna_sequence", 2001, [100, *negated]),
        ("simple_string_dyna_sequence", "2002", [20, *negated]),
    ]
    got = _both(servers, lambda urls: run_stream(urls["grpc"], sequences))
    assert got[2001] == [101, *negated[:-1], negated[-1] + 2001]
    assert got["2002"][0] == 20


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["probe_batched", "probe_oldest"])
def test_control_tensors_are_identical(
    servers: dict[str, dict[str, str]], protocol: str, model: str
) -> None:
    batched = model == "probe_batched"

    def controls(urls: dict[str, str]) -> list[dict[str, Any]]:
        url = urls[protocol]
        return [
            probe(protocol, url, model, 4242, start=True, batched=batched),
            probe(protocol, url, model, 4242, batched=batched),
            probe(protocol, url, model, 4242, end=True, batched=batched),
        ]

    start, _, end = _both(servers, controls)
    assert set(start) == {"INPUT", "START", "END", "READY", "CORRID"}
    assert start["CORRID"][2] == end["CORRID"][2] == [4242]


def test_string_corrid_differs_on_purpose(servers: dict[str, dict[str, str]]) -> None:
    ours = probe("grpc", servers["nbinfer"]["grpc"], "probe_string", "s-1", start=True, end=True)
    assert ours["CORRID"] == ["object", [1], ["s-1"]]
    with pytest.raises(InferenceServerException, match="unexpected number of string elements"):
        probe("grpc", servers["triton"]["grpc"], "probe_string", "s-1", start=True, end=True)


def test_an_integer_corrid_for_a_string_id_differs_on_purpose(
    servers: dict[str, dict[str, str]],
) -> None:
    # Triton hands the model the string's bytes read as an integer; nbinfer refuses
    with pytest.raises(InferenceServerException, match="must be an integer"):
        probe("grpc", servers["nbinfer"]["grpc"], "probe_oldest", "abc", start=True, end=True)
    theirs = probe("grpc", servers["triton"]["grpc"], "probe_oldest", "abc", start=True, end=True)
    assert theirs["CORRID"][0] == "int64"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_implicit_state_initial_value_alike_carried_by_nbinfer_only(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    def run(urls: dict[str, str], model: str) -> list[Any]:
        got = run_sequence(protocol, urls[protocol], model, 55, [3, 4, 5], batched=False)
        return [int(v) for v in got]

    for model, initial in (("simple_state", 0), ("simple_state_init", 100)):
        ours, theirs = run(servers["nbinfer"], model), run(servers["triton"], model)
        assert ours[0] == theirs[0] == initial + 3
        assert ours == [initial + 3, initial + 7, initial + 12]
        assert theirs == [initial + 3, initial + 4, initial + 5]  # Triton's Python backend


# -- sequence errors: Triton's wording --------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequence_errors_start_with_the_same_text(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    def errors(urls: dict[str, str]) -> list[str]:
        texts = []
        c = client(protocol, urls[protocol])
        try:
            for flags in ({}, {"sequence_id": 987654}):
                with pytest.raises(InferenceServerException) as info:
                    infer_one(c, protocol, "simple_sequence", 1, **flags)
                texts.append(str(info.value.message()))
        finally:
            c.close()
        return texts

    ours, theirs = errors(servers["nbinfer"]), errors(servers["triton"])
    for mine, triton in zip(ours, theirs, strict=True):
        assert mine.startswith(triton), (mine, triton)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_idle_sequence_is_freed_alike(servers: dict[str, dict[str, str]], protocol: str) -> None:
    def idle(urls: dict[str, str]) -> str:
        url = urls[protocol]
        assert probe(protocol, url, "probe_idle", 32, start=True)["START"][2] == [1]
        time.sleep(1.2)  # the model's max_sequence_idle_microseconds is 0.4 s
        with pytest.raises(InferenceServerException) as info:
            probe(protocol, url, "probe_idle", 32)
        return str(info.value.message())

    triton = idle(servers["triton"])
    assert triton.endswith("must specify the START flag on the first request of the sequence")
    assert idle(servers["nbinfer"]).startswith(triton)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_model_text_starts_as_tritons(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    def error(urls: dict[str, str]) -> str:
        c = client(protocol, urls[protocol])
        try:
            with pytest.raises(InferenceServerException) as info:
                c.get_model_metadata("not_here")
        finally:
            c.close()
        return str(info.value.message())

    triton = error(servers["triton"])
    assert triton == "Request for unknown model: 'not_here' is not found"
    assert error(servers["nbinfer"]).startswith(triton)


# -- config and metadata ----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "model", ["config_full", "config_sequence", "simple_sequence", "simple_dyna_sequence"]
)
def test_model_config_matches_field_by_field(
    servers: dict[str, dict[str, str]], protocol: str, model: str
) -> None:
    ours = client_view(model_config(protocol, servers["nbinfer"][protocol], model))
    theirs = client_view(model_config(protocol, servers["triton"][protocol], model))
    for field in sorted(set(ours) | set(theirs)):
        assert ours.get(field) == theirs.get(field), field


@pytest.mark.parametrize("model", ["config_full", "simple_state", "probe_batched"])
def test_model_metadata_matches(servers: dict[str, dict[str, str]], model: str) -> None:
    def metadata(urls: dict[str, str]) -> dict[str, Any]:
        c = client("http", urls["http"])
        try:
            meta = dict(c.get_model_metadata(model))
        finally:
            c.close()
        meta.pop("parameters", None)  # nbinfer's device / max_batch_size extras
        return meta

    assert _both(servers, metadata)["platform"] == "python"


# -- the explicit-contents and model-control examples: Triton's wording --------------------


def _starts_alike(servers: dict[str, dict[str, str]], call: Callable[[dict[str, str]], Any]) -> Any:
    """``call`` on both servers; nbinfer's answer starts with Triton's. Triton's answer."""
    ours, theirs = call(servers["nbinfer"]), call(servers["triton"])
    assert str(ours).startswith(str(theirs)), (ours, theirs)
    return theirs


def test_mixing_raw_and_typed_contents_is_refused_in_tritons_words(
    servers: dict[str, dict[str, str]],
) -> None:
    ours = stub_error(servers["nbinfer"]["grpc"], mixed_contents_request())
    theirs = stub_error(servers["triton"]["grpc"], mixed_contents_request())
    assert ours[0] == theirs[0] == "INVALID_ARGUMENT"
    assert theirs[1] == (
        "contents field must not be specified when using raw_input_contents "
        "for 'INPUT0' for model 'simple'"
    )
    assert ours[1].startswith(theirs[1])


@pytest.mark.parametrize("version", ["wrong_specification", "-1"])
def test_a_version_that_is_not_a_number_is_refused_in_tritons_words(
    servers: dict[str, dict[str, str]], version: str
) -> None:
    def refusal(urls: dict[str, str]) -> tuple[str, str]:
        return stub_error(urls["grpc"], versioned_request(version))

    ours, theirs = refusal(servers["nbinfer"]), refusal(servers["triton"])
    assert ours[0] == theirs[0] == "INVALID_ARGUMENT"
    # Triton adds its parser's name, "(details: stol)", after the version string
    head = theirs[1].split(" (details")[0].split(" , ")[0]
    assert ours[1].startswith(head), (ours, theirs)
    assert version in head


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_loading_an_unknown_model_fails_in_tritons_words(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    theirs = _starts_alike(
        servers, lambda urls: control_error(protocol, urls[protocol], "load_model", "no_such_model")
    )
    assert theirs == "failed to load 'no_such_model', failed to poll from model repository"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_malformed_config_override_fails_to_load_alike(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    bad = '"parameters": {"config": {{"max_batch_size": "16"}}}'  # what the example sends

    def error(urls: dict[str, str]) -> str:
        return control_error(protocol, urls[protocol], "load_model", "config_full", config=bad)

    for text in (error(servers["nbinfer"]), error(servers["triton"])):
        assert text.startswith("failed to load 'config_full'"), text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_readiness_of_an_unknown_model_or_version_is_false_alike(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    def readiness(urls: dict[str, str]) -> list[bool]:
        url = urls[protocol]
        return [
            is_ready(protocol, url, "simple"),
            is_ready(protocol, url, "no_such_model"),
            is_ready(protocol, url, "simple", "7"),
        ]

    assert _both(servers, readiness) == [True, False, False]


# -- sequences sharing executions: direct / oldest sequence batching --------------------------


@pytest.mark.parametrize(("model", "cap"), [("batch_direct", 4), ("batch_oldest", 3)])
def test_sequences_share_executions_on_both(
    servers: dict[str, dict[str, str]], model: str, cap: int
) -> None:
    for name, urls in servers.items():
        outputs, seen, stats = run_concurrent_sequences(urls["grpc"], model, 4, [10, 20, 30])
        assert outputs == [[11 + i, 20 + i, 30 + i] for i in range(4)], name
        # execute() got several requests at once, each with its own sequence's correlation id
        assert all(corrid == 7000 + i for i, run in enumerate(seen) for _, corrid in run), name
        assert 1 < max(count for run in seen for count, _ in run) <= cap, (name, seen)
        sizes = batch_sizes(stats)
        # fewer executions than requests: rows of several sequences ran together
        assert int(stats["execution_count"]) < int(stats["inference_count"]) == 12, (name, stats)
        assert 1 < max(sizes) <= cap, (name, sizes)
        if name == "nbinfer" or model == "batch_oldest":
            assert sum(size * count for size, count in sizes.items()) == 12, (name, sizes)
        # Triton's direct strategy runs its slots in one batch, idle ones padded (READY 0),
        # and counts the padding in batch_stats; nbinfer runs the waiting rows only


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_load_with_a_config_override_applies_it_alike(
    servers: dict[str, dict[str, str]], protocol: str
) -> None:
    """What simple_*_model_control.py do: override max_batch_size; the tensors come from the
    model's auto_complete_config. A plain load afterwards differs on purpose: nbinfer goes
    back to the repository's config, Triton 2.51 keeps the override."""

    def run(urls: dict[str, str]) -> tuple[int, list[str], int]:
        url = urls[protocol]
        c = client(protocol, url)
        try:
            c.load_model("simple", config='{"max_batch_size":"16"}')
            changed = model_config(protocol, url, "simple")
            c.load_model("simple")
            restored = model_config(protocol, url, "simple")
        finally:
            c.close()
        names = [str(i["name"]) for i in changed["input"]]
        return int(changed["max_batch_size"]), names, int(restored["max_batch_size"])

    ours, theirs = run(servers["nbinfer"]), run(servers["triton"])
    assert ours[:2] == theirs[:2] == (16, ["INPUT0", "INPUT1"])
    assert (ours[2], theirs[2]) == (8, 16)


# -- HTTP statuses and shapes Triton answers -------------------------------------------------


def _http(url: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """``(status, JSON answer)`` of a GET (or a POST of ``body``) to ``http://url/path``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{url}{path}", data=data, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    return status, json.loads(text) if text else None


def test_http_readiness_statuses_are_tritons(servers: dict[str, dict[str, str]]) -> None:
    def statuses(urls: dict[str, str]) -> list[int]:
        paths = ["simple/ready", "no_such_model/ready", "simple/versions/7/ready"]
        return [_http(urls["http"], f"/v2/models/{p}")[0] for p in paths]

    assert _both(servers, statuses)[0] == 200
