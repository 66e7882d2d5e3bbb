"""session.profile() on a streaming model: TTFT, inter-token latency, tokens/s per concurrency."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from nbinfer import InvalidInputError, Session
from nbinfer.profiling.streaming import STREAM_COLUMNS, StreamProfileFrame, is_streaming


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu", keep_previous=True) as s:
        yield s


def test_profile_of_a_streaming_model_reports_genai_perf_figures(session: Session) -> None:
    frame = session.profile(
        "story", "Alice", concurrency=[1, 3], duration=0.5, max_tokens=8, token_delay_ms=4
    )
    assert isinstance(frame, StreamProfileFrame)
    assert list(frame.columns) == list(STREAM_COLUMNS)
    assert frame["concurrency"].tolist() == [1, 3]
    assert (frame["errors"] == 0).all() and (frame["requests"] > 0).all()
    assert (frame["tokens_per_request"] == 8).all()  # max_tokens reached the model as its input
    # the paced model: its tokens come about 4 ms apart (each waits 4 ms before it is sent)
    assert (frame["itl_avg_ms"] >= 2).all()
    assert (frame["ttft_p50_ms"] < frame["latency_p50_ms"]).all()
    for p in ("p50", "p90", "p99"):
        assert (frame[f"latency_{p}_ms"] <= frame["latency_p99_ms"] + 1e-9).all()
    assert (frame["output_tokens_per_s"] > 0).all()
    np.testing.assert_allclose(
        frame["output_tokens_per_s"], frame["requests_per_s"] * frame["tokens_per_request"]
    )
    html = frame._repr_html_()
    assert html.count("<svg") == 3 and "time to first token" in html and "ttft_p99_ms" in html


def test_an_ordinary_model_is_not_profiled_as_a_stream(session: Session) -> None:
    assert is_streaming(session.client, "story")
    assert not is_streaming(session.client, "add_sub")
    assert not is_streaming(session.client, "no_such_model")


def test_bad_stream_profile_settings_are_named(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="concurrency"):
        session.profile("story", concurrency=[0])
    with pytest.raises(InvalidInputError, match="duration"):
        session.profile("story", duration=0)
