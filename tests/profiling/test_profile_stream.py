"""session.profile() on a streaming model: TTFT, inter-token latency, tokens/s per concurrency.

The load goes through ``generate_stream`` over either transport (HTTP Server-Sent Events, the
gRPC decoupled stream), by default the one the session speaks.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from nbinfer import InvalidInputError, Session
from nbinfer.profiling.streaming import (
    STREAM_COLUMNS,
    StreamProfileFrame,
    is_streaming,
    profile_stream,
)


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu", keep_previous=True) as s:
        yield s


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_profile_of_a_streaming_model_reports_genai_perf_figures(
    session: Session, protocol: str
) -> None:
    frame = session.profile(
        "story",
        "Alice",
        protocol=protocol,
        concurrency=[1, 3],
        duration=0.5,
        max_tokens=8,
        token_delay_ms=4,
    )
    _check_frame(frame)
    html = frame._repr_html_()
    assert html.count("<svg") == 3 and "time to first token" in html and "ttft_p99_ms" in html


def _check_frame(frame: StreamProfileFrame, levels: tuple[int, ...] = (1, 3)) -> None:
    assert isinstance(frame, StreamProfileFrame)
    assert list(frame.columns) == list(STREAM_COLUMNS)
    assert frame["concurrency"].tolist() == list(levels)
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


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_remote_session_profiles_a_stream_over_the_protocol_it_speaks(
    session: Session, protocol: str
) -> None:
    """A session on a server's one URL has no other transport: the profile must use its own."""
    url = session.url if protocol == "http" else session._local_url("grpc")
    with Session(url, protocol=protocol, token=session.token) as remote:
        assert remote.protocol == protocol
        frame = remote.profile("story", "Bob", concurrency=1, duration=0.3, max_tokens=8)
    _check_frame(frame, levels=(1,))


def test_profile_stream_reads_the_protocol_from_the_url_or_takes_it(session: Session) -> None:
    auth = {"auth": session.token}
    http_default = profile_stream(
        session.url, "story", "Eve", concurrency=2, duration=0.3, max_tokens=8, client_options=auth
    )
    _check_frame(http_default, levels=(2,))
    # an address without a scheme is HTTP to a client: protocol= makes it gRPC
    grpc_address = session._local_url("grpc").split("://")[-1]
    grpc_named = profile_stream(
        grpc_address,
        "story",
        "Eve",
        protocol="grpc",
        concurrency=2,
        duration=0.3,
        max_tokens=8,
        client_options=auth,
    )
    _check_frame(grpc_named, levels=(2,))
    with pytest.raises(InvalidInputError, match="protocol must be 'http' or 'grpc'"):
        profile_stream(session.url, "story", protocol="ws")  # type: ignore[arg-type]


def test_an_ordinary_model_is_not_profiled_as_a_stream(session: Session) -> None:
    assert is_streaming(session.client, "story")
    assert not is_streaming(session.client, "add_sub")
    assert not is_streaming(session.client, "no_such_model")


def test_bad_stream_profile_settings_are_named(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="concurrency"):
        session.profile("story", concurrency=[0])
    with pytest.raises(InvalidInputError, match="duration"):
        session.profile("story", duration=0)
