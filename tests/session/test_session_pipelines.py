"""Session pipelines observed from the server's side: requests in flight, top-k, decode overlap.

The server runs in this process (nbinfer's HTTP + gRPC frontends over a ``DataPlane`` on a
thread), so its models can write what they see into lists the tests read: how many requests
are inside a model at once, which outputs a request asked top-k for, and the order in which
images were decoded (a user ``preprocess``) and batches inferred. Assertions are about counts
and the order of events, never about durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbinfer import Session
from nbinfer.protocol.types import InferRequest, InferResponse
from nbinfer.server.dataplane import DEFAULT_EXTENSIONS, DataPlane
from nbinfer.server.demo.models import Digits
from nbinfer.server.model import Model
from nbinfer.server.repository import ModelRepository
from tests.inprocess import serving

PIL = pytest.importorskip("PIL.Image")


class Gate(Model):
    """Identity that counts the requests inside it at once (its peak is the concurrency seen)."""

    name = "gate"
    inputs = (("x", "FP32", [-1, 1]),)
    outputs = (("y", "FP32", [-1, 1]),)

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0
        self.peak = 0
        self.calls = 0
        #: The first request waits (up to 10 s) until this many are inside: a pipelining client
        #: gets there whatever the machine's load, a serial one never does.
        self.meet = 1
        self.met: asyncio.Event | None = None

    async def predict(self, inputs: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        self.inside += 1  # one event loop runs every call: no lock needed
        self.calls += 1
        self.peak = max(self.peak, self.inside)
        try:
            if self.met is None:
                self.met = asyncio.Event()
            if self.inside >= self.meet:
                self.met.set()
            with contextlib.suppress(asyncio.TimeoutError):  # 3.10: not the builtin
                await asyncio.wait_for(self.met.wait(), 10)
            await asyncio.sleep(0.05)  # long enough for the client to send what it may
        finally:
            self.inside -= 1
        return {"y": inputs["x"]}

    def reset(self, meet: int = 1) -> None:
        self.peak = self.calls = 0
        self.meet, self.met = meet, None


#: What the slow model and the user preprocess function saw, in the order they saw it.
EVENTS: list[tuple[str, Any]] = []


class SlowDigits(Digits):
    """``digits``' interface; answers class ``id % 10`` for an image whose pixels are its id."""

    name = "slow_digits"
    run_in_thread = True  # its sleep must not hold the server's event loop

    def load(self) -> None:
        return None

    def predict(self, inputs: dict[str, Any], context: Any) -> Any:  # type: ignore[override]
        ids = tuple(int(v) for v in inputs["input"][:, 0, 0])
        EVENTS.append(("infer-start", ids))
        time.sleep(0.15)
        EVENTS.append(("infer-end", ids))
        return {"probabilities": np.eye(10, dtype=np.float32)[[i % 10 for i in ids]]}


class RecordingPlane(DataPlane):
    """A DataPlane that keeps the outputs (and top-k counts) each request asked for."""

    def __init__(self, repository: ModelRepository, extensions: Sequence[str]) -> None:
        super().__init__(repository, extensions=extensions)
        self.asked: list[tuple[tuple[str, int], ...]] = []

    async def infer(self, request: InferRequest, **kwargs: Any) -> InferResponse:
        self.asked.append(tuple((o.name, o.class_count) for o in request.outputs))
        return await super().infer(request, **kwargs)


GATE = Gate()


def _plane(extensions: Sequence[str]) -> RecordingPlane:
    return RecordingPlane(ModelRepository(models=[GATE, Digits(), SlowDigits()]), extensions)


@pytest.fixture(scope="module")
def full() -> Iterator[tuple[RecordingPlane, tuple[str, str]]]:
    """nbinfer's server with every extension, the classification one included."""
    plane = _plane(DEFAULT_EXTENSIONS)
    with serving(plane) as urls:
        yield plane, urls


@pytest.fixture(scope="module")
def plain() -> Iterator[tuple[RecordingPlane, tuple[str, str]]]:
    """The same server advertising no classification extension (as KServe and MLServer)."""
    plane = _plane([e for e in DEFAULT_EXTENSIONS if e != "classification"])
    with serving(plane) as urls:
        yield plane, urls


def _images(n: int) -> list[Any]:
    """``n`` 8x8 grayscale PIL images; image ``i`` has every pixel ``i`` (its id)."""
    return [PIL.new("L", (8, 8), i) for i in range(n)]


# -- DataFrames: concurrency= bounds the requests in flight -------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("concurrency", [1, 3])
def test_infer_frame_never_has_more_than_concurrency_requests_in_flight(
    full: tuple[RecordingPlane, tuple[str, str]], protocol: str, concurrency: int
) -> None:
    _, (http, grpc) = full
    frame = pd.DataFrame({"x": np.arange(24, dtype=np.float32)})
    with Session(grpc if protocol == "grpc" else http) as session:
        GATE.reset(meet=min(concurrency, 2))
        out = session.infer("gate", frame, batch_size=2, concurrency=concurrency, progress=False)
        assert GATE.calls == 12
        assert GATE.peak <= concurrency
        if concurrency > 1:
            assert GATE.peak > 1  # pipelined: more than one was in flight at some point
        np.testing.assert_array_equal(out["y"].to_numpy(), frame["x"].to_numpy())

        GATE.reset()
        coro = session.ainfer("gate", frame, batch_size=2, concurrency=concurrency, progress=False)
        asyncio.run(coro)
        assert GATE.calls == 12 and GATE.peak <= concurrency


# -- classify: the server's top-k when offered, local top-k otherwise ---------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_classify_picks_the_classification_extension_only_where_the_server_offers_it(
    full: tuple[RecordingPlane, tuple[str, str]],
    plain: tuple[RecordingPlane, tuple[str, str]],
    protocol: str,
) -> None:
    images = _images(12)
    frames = {}
    for which, (plane, (http, grpc)) in {"full": full, "plain": plain}.items():
        plane.asked.clear()
        with Session(grpc if protocol == "grpc" else http) as session:
            frames[which] = session.classify(
                "slow_digits", images, top_k=3, batch_size=6, scaling="none", progress=False
            )
        assert plane.asked, "no inference request reached the server"
        counts = {count for asked in plane.asked for _, count in asked}
        assert counts == ({3} if which == "full" else {0})  # top-k asked of the server, or not
    for column in ("image", "rank", "class", "label"):
        assert frames["full"][column].tolist() == frames["plain"][column].tolist()
    top = frames["plain"][frames["plain"]["rank"] == 1]
    assert top["class"].tolist() == [i % 10 for i in range(12)]


def test_classify_shows_a_progress_bar_on_a_large_set(
    full: tuple[RecordingPlane, tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, (http, _) = full
    images = np.random.default_rng(8).integers(0, 256, (256, 8, 8), dtype=np.uint8)
    with Session(http) as session:
        session.classify("digits", images, top_k=1, batch_size=32, progress=False)
        assert "img" not in capsys.readouterr().err
        # the default: on for more than one batch; a slow model lets tqdm draw its steps
        frame = session.classify("slow_digits", images, top_k=1, batch_size=32, scaling="none")
        err = capsys.readouterr().err
    assert frame["class"].tolist() == [int(v) % 10 for v in images[:, 0, 0]]
    assert "classify" in err and "img/s" in err
    done = [int(n) for n in re.findall(r"(\d+)/256", err)]
    assert done[0] == 0 and max(done) >= 32 and all(n % 32 == 0 for n in done)  # whole batches


@pytest.mark.parametrize("workers", [0, 2])
def test_classify_decodes_the_next_images_while_a_batch_is_inferred(
    full: tuple[RecordingPlane, tuple[str, str]], workers: int
) -> None:
    _, (http, _) = full

    def preprocess(image: Any) -> np.ndarray:
        EVENTS.append(("decode", image.getpixel((0, 0))))
        time.sleep(0.01)
        return np.full((8, 8), image.getpixel((0, 0)), dtype=np.float32)

    EVENTS.clear()
    with Session(http) as session:
        frame = session.classify(
            "slow_digits",
            _images(40),
            top_k=1,
            batch_size=8,
            scaling="none",
            preprocess=preprocess,
            workers=workers,
            progress=False,
        )
    assert frame["class"].tolist() == [i % 10 for i in range(40)]
    overlapped = []
    for start, (kind, batch) in enumerate(EVENTS):
        if kind != "infer-start":
            continue
        end = EVENTS.index(("infer-end", batch), start)
        decoded = [i for k, i in EVENTS[start:end] if k == "decode"]
        overlapped += [i for i in decoded if i not in batch]
    # images of other batches were decoded while this one was inside the model
    assert overlapped, EVENTS
