"""The generate extension against nbinfer's server AND real tritonserver, the same checks.

Both serve ``generate_repo/`` (Triton Python-backend models of ours: ``gen_words`` is decoupled
and streams words, ``gen_echo`` echoes one input of every datatype Triton maps from JSON), and
both are driven by nbinfer's clients over HTTP (SSE) and gRPC (the decoupled stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from peer import Peer

import nbinfer
from nbinfer import AsyncClient, Client
from nbinfer.errors import InferenceError, InvalidInputError, ModelNotFoundError
from tests.waiting import wait_for_text

REPO = (Path(__file__).parent / "generate_repo").resolve()
MODELS = ("gen_words", "gen_echo")

#: One value per mapped datatype (arrays of 2: gen_echo's inputs are [-1]), and what comes back.
ECHO = {
    "in_bool": [True, False],
    "in_uint8": [0, 255],
    "in_uint16": [1, 65535],
    "in_uint32": [2, 4294967295],
    "in_uint64": [3, 18446744073709551615],
    "in_int8": [-128, 127],
    "in_int16": [-32768, 32767],
    "in_int32": [-2147483648, 2147483647],
    "in_int64": [-9223372036854775808, 9223372036854775807],
    "in_fp32": [1.5, -0.25],
    "in_fp64": [2.5, 1e300],
    "in_string": ["héllo", ""],
}


@pytest.fixture(scope="module", params=["nbinfer", "triton"])
def server(request: pytest.FixtureRequest) -> Iterator[Peer]:
    if request.param == "nbinfer":
        from nbinfer.server.launcher import LocalServer

        local = LocalServer(model_repository=REPO, demo=False, device="cpu", auth_token=None)
        local.start()
        http = int(local.http_url.rsplit(":", 1)[1])
        grpc = int(local.grpc_url.rsplit(":", 1)[1])
        yield Peer("nbinfer", http, grpc, models=MODELS, stop_fn=local.stop)
        local.stop()
        return
    launch: Callable[..., Peer] = request.getfixturevalue("triton_launcher")
    yield launch(REPO, models=MODELS, flags=("--model-control-mode=explicit", "--load-model=*"))


@pytest.fixture(params=["http", "grpc"])
def client(server: Peer, request: pytest.FixtureRequest) -> Iterator[Client]:
    url = server.http_url if request.param == "http" else server.grpc_url
    with Client(url) as c:
        yield c


def test_server_lists_the_generate_extension(server: Peer) -> None:
    with Client(server.http_url) as c:
        extensions = c.get_server_metadata().extensions
    # tritonserver 2.51 serves the routes without listing them
    assert ("generate" in extensions) is (server.name == "nbinfer")


def test_generate_stream_yields_one_object_per_response(client: Client) -> None:
    chunks = list(client.generate_stream("gen_words", text_input="the cat sat", max_tokens=5))
    assert [c["text_output"] for c in chunks] == ["the ", "cat ", "sat ", "the ", "cat "]
    assert [c["index"] for c in chunks] == [0, 1, 2, 3, 4]
    assert {(c["model_name"], c["model_version"]) for c in chunks} == {("gen_words", "1")}


def test_generate_stream_with_a_version_and_the_parameters_object(client: Client) -> None:
    chunks = list(
        client.generate_stream(
            "gen_words",
            {"text_input": "x y"},
            version="1",
            parameters={"delay_ms": 1},
            max_tokens=2,
        )
    )
    assert [c["text_output"] for c in chunks] == ["x ", "y "]


def test_generate_maps_every_json_datatype_both_ways(client: Client) -> None:
    out = client.generate("gen_echo", ECHO)
    for name, value in ECHO.items():
        assert out["out_" + name[3:]] == value, name
    one = client.generate("gen_echo", {k: v[0] for k, v in ECHO.items()})
    assert one["out_string"] == "héllo" and one["out_uint64"] == 3 and one["out_bool"] is True


def test_generate_of_a_streaming_model_is_refused(client: Client) -> None:
    with pytest.raises(nbinfer.NbinferError, match="exactly 1 response"):
        client.generate("gen_words", text_input="a b", max_tokens=3)


def test_an_error_event_mid_stream_raises_inference_error(client: Client) -> None:
    got: list[str] = []
    with pytest.raises(InferenceError, match="failed at token 2") as info:
        for chunk in client.generate_stream(
            "gen_words", text_input="a b c d", max_tokens=4, fail_at=2
        ):
            got.append(chunk["text_output"])
    assert got == ["a ", "b "]
    assert info.value.chunks_received == 2


def test_an_error_on_the_first_response_raises_inference_error(client: Client) -> None:
    with pytest.raises(InferenceError, match="failed at token 0") as info:
        list(client.generate_stream("gen_words", text_input="a", max_tokens=2, fail_at=0))
    assert info.value.chunks_received == 0


def test_a_missing_input_is_refused_before_streaming(client: Client) -> None:
    # HTTP: a 400 before any event; gRPC's stream carries errors without a status code
    expected = InvalidInputError if client.protocol == "http" else InferenceError
    with pytest.raises(expected, match="max_tokens") as info:
        list(client.generate_stream("gen_words", text_input="a"))
    assert info.value.chunks_received == 0


def test_an_unknown_model_is_model_not_found(client: Client) -> None:
    with pytest.raises(ModelNotFoundError):
        list(client.generate_stream("no_such_model", text_input="a"))


def test_closing_the_stream_early_cancels_the_generation(client: Client, tmp_path: Path) -> None:
    record = tmp_path / "cancelled.txt"
    stream = client.generate_stream(
        "gen_words",
        text_input="w",
        max_tokens=10_000,
        delay_ms=20,
        cancel_file=str(record),
    )
    first = [next(stream), next(stream)]
    assert [c["index"] for c in first] == [0, 1]
    stream.close()  # type: ignore[attr-defined]
    at = int(wait_for_text(record, 20, "the model's record of the cancellation"))
    assert 2 <= at < 10_000  # the model saw the cancel long before its 10 000 words


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_the_stop_button_cancels_the_generation_on_the_server(
    server: Peer, wire: str, tmp_path: Path
) -> None:
    # SIGINT in a notebook's token loop (a child process here): KeyboardInterrupt there, and the
    # model (Triton's Python backend too) sees the cancellation within ~1 s of its tokens
    from tests.client.test_generate_stop import stop_button_cancels_the_generation

    url = server.http_url if wire == "http" else server.grpc_url
    stop_button_cancels_the_generation(url, tmp_path / "cancelled.txt")


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_async_client_streams_and_aclose_cancels(server: Peer, wire: str, tmp_path: Path) -> None:
    url = server.http_url if wire == "http" else server.grpc_url
    record = tmp_path / "cancelled.txt"

    async def main() -> tuple[list[str], dict[str, object]]:
        async with AsyncClient(url) as c:
            words = [
                chunk["text_output"]
                async for chunk in c.generate_stream("gen_words", text_input="p q", max_tokens=3)
            ]
            one = await c.generate("gen_echo", ECHO)
            stream = c.generate_stream(
                "gen_words",
                text_input="z",
                max_tokens=10_000,
                delay_ms=20,
                cancel_file=str(record),
            )
            await anext(stream)
            await stream.aclose()
            return words, one

    words, one = asyncio.run(main())
    assert words == ["p ", "q ", "p "]
    assert one["out_int64"] == ECHO["in_int64"]
    assert int(wait_for_text(record, 20, "the model's record of the cancellation")) < 10_000


def test_generate_stream_of_an_ordinary_model_is_one_event(client: Client) -> None:
    chunks = list(client.generate_stream("gen_echo", ECHO))
    assert len(chunks) == 1
    assert chunks[0]["out_string"] == ECHO["in_string"]
