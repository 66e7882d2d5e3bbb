"""session.generate / agenerate / chat and the demo ``story`` model, against a real local server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbinfer import Generation, InferenceError, InvalidInputError, Model, Session
from nbinfer.server.demo.story import generate_words, load_story


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu", keep_previous=True) as s:
        s.serve(Flaky())
        yield s


class Flaky(Model):
    """Decoupled: streams the words of its prompt, and fails at the word ``boom``."""

    name = "flaky"
    inputs = (("text_input", "BYTES", [1]),)
    outputs = (("text_output", "BYTES", [1]),)
    decoupled = True

    def predict(self, inputs, context):  # type: ignore[no-untyped-def,override]
        words = inputs["text_input"].reshape(-1)[0].decode().split()
        for word in words:
            if word == "boom":
                raise RuntimeError("the model broke at 'boom'")
            yield {"text_output": np.array([(" " + word).encode()], dtype=object)}


def test_story_is_deterministic_under_a_seed_and_greedy_at_temperature_zero() -> None:
    weights = load_story()

    def words(seed: int | None, temperature: float = 1.0) -> str:
        gen = generate_words(weights, "Alice", max_tokens=30, temperature=temperature, seed=seed)
        return "".join(gen)

    assert words(1) == words(1)
    assert words(1) != words(2)
    assert words(1, 0.0) == words(2, 0.0)  # greedy: the seed plays no part


def test_the_served_story_model_repeats_itself_under_a_seed(session: Session) -> None:
    first = session.generate("story", "The Rabbit", max_tokens=15, seed=7, display=False)
    again = session.generate("story", "The Rabbit", max_tokens=15, seed=7, display=False)
    other = session.generate("story", "The Rabbit", max_tokens=15, seed=8, display=False)
    expected = "".join(
        generate_words(load_story(), "The Rabbit", max_tokens=15, temperature=1.0, seed=7)
    )
    assert first.text == again.text == expected
    assert other.text != first.text


def test_generation_reports_ttft_tokens_per_second_and_chunks(session: Session) -> None:
    gen = session.generate("story", "Alice", max_tokens=10, seed=0, display=False)
    assert isinstance(gen, Generation)
    assert str(gen) == gen.text and gen.text.startswith(" ")
    assert gen.chunks == gen.tokens == 10 == len(gen.responses)
    assert gen.responses[0]["model_name"] == "story"
    assert isinstance(gen.responses[0]["text_output"], str)
    assert gen.time_to_first_token is not None and gen.time_to_last_token is not None
    assert 0 < gen.time_to_first_token <= gen.time_to_last_token <= gen.duration
    assert gen.tokens_per_second == pytest.approx(10 / gen.duration)
    assert gen.inter_token_latency == pytest.approx(
        (gen.time_to_last_token - gen.time_to_first_token) / 9
    )
    stats = gen.stats()
    assert stats["tokens"] == "10" and stats["chunks"] == "10" and "TTFT" in stats
    html = gen._repr_mimebundle_()["text/html"]
    assert "story" in html and "TTFT" in html


def test_keywords_go_to_inputs_or_parameters_as_the_generate_extension_maps_them(
    session: Session,
) -> None:
    as_input = session.generate("story", "Alice", max_tokens=5, seed=3, display=False)
    as_parameter = session.generate(
        "story", "Alice", parameters={"max_tokens": 5, "seed": 3}, display=False
    )
    assert as_input.text == as_parameter.text and as_input.tokens == 5
    whole = session.generate("story", "Alice", max_tokens=5, seed=3, stream=False, display=False)
    assert whole.chunks == 1 and whole.text == as_input.text


def test_text_display_writes_tokens_without_a_newline_each(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = session.generate("story", "Alice", max_tokens=12, seed=2, display="text")
    out = capsys.readouterr().out
    assert out.startswith(gen.text + "\n")
    assert out.count("\n") == 2  # the text, then the stats line
    assert "tokens 12" in out


def test_a_mid_stream_error_keeps_the_text_so_far_and_raises(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InferenceError, match="broke at 'boom'") as caught:
        session.generate("flaky", "one two boom three", display="text")
    partial = caught.value.partial  # type: ignore[attr-defined]
    assert partial.text == " one two" and partial.chunks == 2 and partial.error
    assert caught.value.context["chunks_received"] == 2
    out = capsys.readouterr().out
    assert out.startswith(" one two\n") and "broke at 'boom'" in out


def test_a_model_without_a_text_input_is_refused_naming_its_inputs(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="INPUT0, INPUT1"):
        session.generate("add_sub", "hello", display=False)


def test_chat_keeps_history_and_sends_it_with_each_message(session: Session) -> None:
    chat = session.chat("story", system="Tell a story.", max_tokens=6, seed=4, display=False)
    first = chat.send("Who is late?")
    second = chat("Where did it go?")
    roles = [role for role, _ in chat.history]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert chat.history[2][1] == first.text.strip()
    assert chat.history[4][1] == second.text.strip()
    # the second prompt carries the whole conversation so far, oldest first
    assert second.prompt.index("Tell a story.") < second.prompt.index("Who is late?")
    assert first.text.strip() in second.prompt and second.prompt.endswith("Assistant:")
    html = chat._repr_mimebundle_()["text/html"]
    assert html.count('class="g-bubble"') == 5 and "Where did it go?" in html
    chat.reset()
    assert chat.history == [("system", "Tell a story.")]
    with pytest.raises(InvalidInputError, match="non-empty"):
        chat.send("  ")


def test_a_failed_chat_message_leaves_the_history_as_it_was(session: Session) -> None:
    chat = session.chat("flaky", display=False, template=lambda turns: turns[-1][1])
    chat.send("hello there")
    with pytest.raises(InferenceError):
        chat.send("boom")
    assert chat.history == [("user", "hello there"), ("assistant", "hello there")]


def test_a_prompt_column_becomes_a_completion_column_with_row_errors_kept(
    session: Session,
) -> None:
    frame = pd.DataFrame(
        {"id": [1, 2, 3, 4], "question": ["a b", "c boom d", None, "e f g"]},
        index=[10, 11, 12, 13],
    )
    out = session.generate("flaky", frame, prompt="question", concurrency=3, display=False)
    assert list(out.index) == [10, 11, 12, 13]
    assert list(out.columns) == ["id", "question", "completion", "completion_error"]
    assert out["completion"].tolist() == [" a b", None, None, " e f g"]
    errors = out["completion_error"].tolist()
    assert errors[0] is None and errors[3] is None
    assert "broke at 'boom'" in errors[1] and "no prompt" in errors[2]
    assert out.attrs["generate"]["rows"] == 4 and out.attrs["generate"]["errors"] == 2
    assert "completion" not in frame.columns  # the caller's frame is left alone


def test_a_missing_prompt_column_is_named(session: Session) -> None:
    with pytest.raises(InvalidInputError, match=r"no prompt column 'prompt'.*question"):
        session.generate("story", pd.DataFrame({"question": ["a"]}), display=False)


def test_agenerate_streams_the_same_text_and_frames_too(session: Session) -> None:
    async def main() -> tuple[Any, Any]:
        gen = await session.agenerate("story", "Alice", max_tokens=8, seed=5, display=False)
        frame = await session.agenerate(
            "flaky", pd.DataFrame({"prompt": ["x y", "boom"]}), display=False
        )
        return gen, frame

    gen, frame = asyncio.run(main())
    sync = session.generate("story", "Alice", max_tokens=8, seed=5, display=False)
    assert gen.text == sync.text and gen.tokens == 8
    assert frame["completion"].tolist() == [" x y", None]
    assert "boom" in frame["completion_error"][1]


def test_the_same_generation_over_http_and_over_grpc(session: Session) -> None:
    # generate_stream: Server-Sent Events over HTTP, the decoupled gRPC stream over gRPC.
    assert session.protocol == "http"
    over_http = session.generate("story", "Alice", max_tokens=6, seed=4, display=False)
    assert session.server is not None
    with Session(session.server.grpc_url) as grpc:
        assert grpc.protocol == "grpc"
        over_grpc = grpc.generate("story", "Alice", max_tokens=6, seed=4, display=False)
    assert over_grpc.text == over_http.text and over_grpc.tokens == over_http.tokens == 6


def test_chat_asend_keeps_history_like_send(session: Session) -> None:
    chat = session.chat("story", max_tokens=5, seed=6, display=False)
    reply = asyncio.run(chat.asend("Who is late?"))
    assert chat.history == [("user", "Who is late?"), ("assistant", reply.text.strip())]
    assert reply.tokens == 5


def test_bad_display_and_concurrency_options_are_named(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="display must be"):
        session.generate("story", "Alice", max_tokens=2, display="fancy")
    with pytest.raises(InvalidInputError, match="concurrency= takes a whole number >= 1, not 0"):
        session.generate("story", pd.DataFrame({"prompt": ["a"]}), concurrency=0, display=False)
    with pytest.raises(InvalidInputError, match="prompt must be a str or a DataFrame"):
        session.generate("story", 42, display=False)  # type: ignore[arg-type]


def test_a_display_callback_gets_each_drawing(session: Session) -> None:
    drawings: list[dict[str, str]] = []
    gen = session.generate(
        "story", "Alice", max_tokens=6, seed=1, token_delay_ms=60, display=drawings.append
    )
    assert len(drawings) >= 3  # the first (empty), some while streaming, the last
    assert 'class="g-cursor"' in drawings[0]["text/html"]
    assert (
        drawings[-1]["text/plain"].startswith(gen.text) and "tokens 6" in drawings[-1]["text/plain"]
    )


def test_generate_works_again_after_a_restart() -> None:
    with Session(device="cpu", keep_previous=True) as s:
        before = s.generate("story", "Alice", max_tokens=3, seed=1, display=False)
        s.restart()
        after = s.generate("story", "Alice", max_tokens=3, seed=1, display=False)
        assert after.text == before.text and after.tokens == 3
