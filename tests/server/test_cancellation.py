"""Abandoned requests (issue 19, item 5): dropped when queued, cancelled when running.

A client that disconnects (HTTP), whose gRPC deadline passes, or whose ``timeout`` parameter
elapses frees its worker within a second, also when a synchronous ``predict`` cannot be
interrupted (its thread finishes in the background); slow models never starve the others or
load / unload; abandoned requests count as cancelled, neither as successes nor as failures.
Every model has one worker (``model_workers=1``), and the module runs without and with a token.
"""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.utils import InferenceServerException

import nbinfer
from nbinfer.protocol.types import InferInput, InferRequest
from nbinfer.server import DataPlane, Model, ModelRepository
from nbinfer.server.launcher import LocalServer

_MODELS = {
    # sleeps X seconds and cannot be interrupted
    "sleepy": """
        import time
        from nbinfer.server.model import Model

        class Sleepy(Model):
            name = "sleepy"
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP32", [1])]

            def predict(self, inputs, context):
                time.sleep(float(inputs["X"][0]))
                return {"Y": inputs["X"]}
    """,
    # records when each call started: X seconds of uninterruptible sleep; answers
    # [its own start (time.time()), calls started so far]
    "stamp": """
        import time
        import numpy as np
        from nbinfer.server.model import Model

        class Stamp(Model):
            name = "stamp"
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP64", [2])]
            started = 0

            def predict(self, inputs, context):
                start = time.time()
                type(self).started += 1
                count = type(self).started
                time.sleep(float(inputs["X"][0]))
                return {"Y": np.array([start, count], np.float64)}
    """,
    # the unrelated model: same code, its own workers
    "other": """
        import time
        from nbinfer.server.model import Model

        class Other(Model):
            name = "other"
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP32", [1])]

            def predict(self, inputs, context):
                time.sleep(float(inputs["X"][0]))
                return {"Y": inputs["X"]}
    """,
    # checks context.cancelled; X == 0 answers how many times it gave up
    "polite": """
        import time
        import numpy as np
        from nbinfer.server.model import Model

        class Polite(Model):
            name = "polite"
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP32", [1])]
            gave_up = 0

            def predict(self, inputs, context):
                end = time.monotonic() + float(inputs["X"][0])
                while time.monotonic() < end:
                    if context.cancelled:
                        type(self).gave_up += 1
                        raise RuntimeError("cancelled")
                    time.sleep(0.01)
                return {"Y": np.array([type(self).gave_up], np.float32)}
    """,
    # an async model: cancelled outright; X == 0 answers how many times it was
    "waiter": """
        import asyncio
        import numpy as np
        from nbinfer.server.model import Model

        class Waiter(Model):
            name = "waiter"
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP32", [1])]
            cancelled = 0

            async def predict(self, inputs, context):
                try:
                    await asyncio.sleep(float(inputs["X"][0]))
                except asyncio.CancelledError:
                    type(self).cancelled += 1
                    raise
                return {"Y": np.array([type(self).cancelled], np.float32)}
    """,
    # one instance with a queue: requests wait behind the running one
    "single": """
        import time
        from nbinfer.server.model import Model

        class Single(Model):
            name = "single"
            inputs = [("X", "FP32", [1])]
            outputs = [("Y", "FP32", [1])]
            max_queue_size = 16

            def predict(self, inputs, context):
                time.sleep(float(inputs["X"][0]))
                return {"Y": inputs["X"]}
    """,
}

#: How long the uninterruptible sleepers sleep (threads cannot be pre-empted).
LONG = 20.0
TOKEN = "cancellation-token"


@pytest.fixture(scope="module", params=[None, TOKEN], ids=["no-token", "token"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    repo: Path = tmp_path_factory.mktemp("cancel_repo")
    for name, source in _MODELS.items():
        vdir = repo / name / "1"
        vdir.mkdir(parents=True)
        (vdir / "model.py").write_text(textwrap.dedent(source))
    srv = LocalServer(
        model_repository=repo,
        demo=False,
        device="cpu",
        auth_token=request.param,
        limits={"model_workers": 1},
    )
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace=1.0)


def _headers(server: LocalServer) -> dict[str, str]:
    """The token's header (HTTP and tritonclient's gRPC metadata alike), if the server has one."""
    return {"authorization": f"Bearer {server.auth_token}"} if server.auth_token else {}


def _body(seconds: float, **parameters: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [seconds]}]
    }
    if parameters:
        body["parameters"] = parameters
    return body


def _http_infer(server: LocalServer, model: str, seconds: float, timeout: float = 30.0) -> Any:
    with httpx.Client(timeout=timeout, headers=_headers(server)) as c:
        return c.post(f"{server.http_url}/v2/models/{model}/infer", json=_body(seconds))


def _abandon_http(server: LocalServer, model: str, seconds: float, n: int, after: float) -> None:
    """``n`` concurrent requests whose clients give up (disconnect) after ``after`` seconds."""

    def one() -> None:
        with pytest.raises(httpx.TimeoutException):
            _http_infer(server, model, seconds, timeout=after)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _grpc_infer(
    server: LocalServer, model: str, seconds: float, timeout: float | None = None
) -> Any:
    client = tg.InferenceServerClient(server.grpc_address)
    try:
        x = tg.InferInput("X", [1], "FP32")
        x.set_data_from_numpy(np.array([seconds], np.float32))
        return client.infer(model, [x], client_timeout=timeout, headers=_headers(server))
    finally:
        client.close()


def _abandon_grpc(server: LocalServer, model: str, seconds: float, n: int, after: float) -> None:
    def one() -> None:
        with pytest.raises(InferenceServerException) as info:
            _grpc_infer(server, model, seconds, timeout=after)
        assert info.value.status() == "StatusCode.DEADLINE_EXCEEDED"

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _stats(server: LocalServer, model: str) -> dict[str, Any]:
    r = httpx.get(f"{server.http_url}/v2/models/{model}/stats", headers=_headers(server))
    stats: dict[str, Any] = r.json()["model_stats"][0]
    return stats


def _counts(server: LocalServer, model: str) -> tuple[int, int, int]:
    """Requests of ``model`` that succeeded, failed and were cancelled (HTTP statistics)."""
    entry = _stats(server, model)
    s = entry["inference_stats"]
    cancel = entry["response_stats"].get("0", {}).get("cancel", {}).get("count", 0)
    return s["success"]["count"], s["fail"]["count"], cancel


def _wait_for(predicate: Any, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.05)


def test_abandoned_sleeping_requests_do_not_starve_another_model_http(server: LocalServer) -> None:
    success, fail, cancel = _counts(server, "sleepy")
    _abandon_http(server, "sleepy", LONG, n=6, after=0.5)
    t0 = time.monotonic()
    r = _http_infer(server, "other", 1.0)
    assert r.status_code == 200, r.text
    assert time.monotonic() - t0 < 3.0
    # abandoned requests are cancelled: neither successes nor failures
    _wait_for(lambda: _counts(server, "sleepy") == (success, fail, cancel + 6))


def test_abandoned_sleeping_requests_do_not_starve_another_model_grpc(server: LocalServer) -> None:
    success, fail, cancel = _counts(server, "other")
    _abandon_grpc(server, "other", LONG, n=6, after=0.5)
    t0 = time.monotonic()
    result = _grpc_infer(server, "polite", 1.0)
    assert result.as_numpy("Y") is not None
    assert time.monotonic() - t0 < 3.0
    _wait_for(lambda: _counts(server, "other") == (success, fail, cancel + 6))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_sync_model_that_cannot_be_interrupted_frees_its_worker_within_a_second(
    server: LocalServer, protocol: str
) -> None:
    # one worker, an uninterruptible 20 s sleep: the next request must not wait for it
    started = float(_http_infer(server, "stamp", 0.0).json()["outputs"][0]["data"][1])
    success, fail, cancel = _counts(server, "stamp")
    abandon = _abandon_http if protocol == "http" else _abandon_grpc
    abandon(server, "stamp", LONG, n=1, after=0.5)
    gave_up = time.time()
    if protocol == "http":
        start, count = _http_infer(server, "stamp", 0.0).json()["outputs"][0]["data"]
    else:
        start, count = _grpc_infer(server, "stamp", 0.0).as_numpy("Y")
    # the model's own clock: the abandoned call had started, and the next one started at
    # once although the abandoned thread still sleeps
    assert count == started + 2
    assert start - gave_up < 1.0
    # counted once, as cancelled (the second request is the one success)
    assert _counts(server, "stamp") == (success + 1, fail, cancel + 1)
    grpc_stats = _grpc_stats(server, "stamp")
    assert grpc_stats.response_stats["0"].cancel.count == cancel + 1
    assert grpc_stats.inference_stats.fail.count == fail
    # the Session's statistics (and their notebook table) show the cancelled column
    url = server.http_url if protocol == "http" else server.grpc_url
    with nbinfer.Session(url, token=server.auth_token) as session:
        frame = session.model("stamp").stats()
        assert frame.loc[0, "cancel"] == cancel + 1
        assert "<th>cancelled</th>" in frame._repr_mimebundle_()["text/html"]


def _grpc_stats(server: LocalServer, model: str) -> Any:
    """The model's statistics as gRPC sends them (Triton's schema: response_stats["0"].cancel)."""
    client = tg.InferenceServerClient(server.grpc_address)
    try:
        return client.get_inference_statistics(model, headers=_headers(server)).model_stats[0]
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_cooperative_model_frees_its_workers_within_a_second(
    server: LocalServer, protocol: str
) -> None:
    before = _http_infer(server, "polite", 0.0).json()["outputs"][0]["data"][0]
    # more abandoned requests than the model's workers: all of them must be given up
    abandon = _abandon_http if protocol == "http" else _abandon_grpc
    abandon(server, "polite", 60.0, n=6, after=0.5)
    gave_up = time.monotonic()
    if protocol == "http":
        assert _http_infer(server, "polite", 0.0).status_code == 200
    else:
        assert _grpc_infer(server, "polite", 0.0).as_numpy("Y") is not None
    assert time.monotonic() - gave_up < 1.0
    # the one that had started saw context.cancelled and returned (the others never ran)
    _wait_for(lambda: _http_infer(server, "polite", 0.0).json()["outputs"][0]["data"][0] > before)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_async_model_is_cancelled_when_its_client_gives_up(
    server: LocalServer, protocol: str
) -> None:
    before = _http_infer(server, "waiter", 0.0).json()["outputs"][0]["data"][0]
    success, fail, cancel = _counts(server, "waiter")
    abandon = _abandon_http if protocol == "http" else _abandon_grpc
    abandon(server, "waiter", 60.0, n=3, after=0.3)
    _wait_for(lambda: _counts(server, "waiter") == (success, fail, cancel + 3), timeout=1.0)
    after = _http_infer(server, "waiter", 0.0).json()["outputs"][0]["data"][0]
    assert after == before + 3
    assert _counts(server, "waiter") == (success + 1, fail, cancel + 3)


def test_timeout_parameter_cancels_a_running_request(server: LocalServer) -> None:
    before = _http_infer(server, "polite", 0.0).json()["outputs"][0]["data"][0]
    success, fail, cancel = _counts(server, "polite")
    t0 = time.monotonic()
    with httpx.Client(timeout=30, headers=_headers(server)) as c:
        r = c.post(f"{server.http_url}/v2/models/polite/infer", json=_body(60.0, timeout=200_000))
    assert r.status_code == 503
    assert "timed out" in r.json()["error"]
    assert time.monotonic() - t0 < 1.5
    assert _counts(server, "polite") == (success, fail, cancel + 1)
    _wait_for(lambda: _http_infer(server, "polite", 0.0).json()["outputs"][0]["data"][0] > before)


def test_queued_requests_whose_clients_gave_up_never_run(server: LocalServer) -> None:
    execs = _stats(server, "single")["execution_count"]
    success, fail, cancel = _counts(server, "single")
    first: list[Any] = []
    running = threading.Thread(target=lambda: first.append(_http_infer(server, "single", 2.0)))
    running.start()
    time.sleep(0.3)
    _abandon_http(server, "single", 2.0, n=3, after=0.3)  # queued behind the first
    running.join()
    assert first[0].status_code == 200
    time.sleep(0.5)
    assert _stats(server, "single")["execution_count"] == execs + 1
    assert _counts(server, "single") == (success + 1, fail, cancel + 3)


def test_unload_and_reload_work_with_abandoned_requests_pending(server: LocalServer) -> None:
    _abandon_http(server, "sleepy", LONG, n=6, after=0.3)
    with httpx.Client(timeout=10, headers=_headers(server)) as c:
        t0 = time.monotonic()
        assert c.post(f"{server.http_url}/v2/repository/models/sleepy/unload").status_code == 200
        assert c.post(f"{server.http_url}/v2/repository/models/sleepy/load").status_code == 200
        assert time.monotonic() - t0 < 5.0
    r = _http_infer(server, "sleepy", 0.0)
    assert r.status_code == 200, r.text


# -- a stateful model: the sequence waits for its abandoned call, other sequences do not --------
class _Steps(Model):
    """A stateful sync model: sleeps X seconds, records (sequence, start, end) in its state."""

    name = "steps"
    inputs = (("X", "FP32", [1]),)
    outputs = (("Y", "FP32", [1]),)
    stateful = True

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[float]] = []  # [sequence, start, end] in the order they started

    def predict(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        call = [float(context.sequence_id), time.monotonic(), 0.0]
        self.calls.append(call)
        time.sleep(float(inputs["X"][0]))
        context.state["n"] = context.state.get("n", 0) + 1
        call[2] = time.monotonic()
        return {"Y": np.array([context.state["n"]], np.float32)}


def _step(seq: int, seconds: float, *, start: bool = False) -> InferRequest:
    x = InferInput("X", "FP32", [1], np.array([seconds], np.float32))
    params: dict[str, Any] = {"sequence_id": seq, "sequence_start": start}
    return InferRequest(model_name="steps", inputs=[x], parameters=params)


def test_a_given_up_sequence_step_frees_the_worker_but_keeps_its_sequence_until_it_returns() -> (
    None
):
    model = _Steps()

    async def scenario() -> tuple[float, float, dict[str, Any]]:
        dp = DataPlane(ModelRepository(models=[model]), model_workers=1)
        try:
            first = asyncio.ensure_future(dp.infer(_step(1, 0.6, start=True)))
            await asyncio.sleep(0.1)
            first.cancel()  # its client gave up; the thread sleeps on
            gave_up = time.monotonic()
            # the same sequence waits for the abandoned step (its state is still in use) ...
            same = asyncio.ensure_future(dp.infer(_step(1, 0.0)))
            # ... another sequence takes the freed worker at once
            other = await dp.infer(_step(2, 0.0, start=True))
            assert np.asarray(other.outputs[0].data).tolist() == [1]
            # after the abandoned step
            assert np.asarray((await same).outputs[0].data).tolist() == [2]
            return gave_up, time.monotonic(), dp.statistics("steps")["model_stats"][0]
        finally:
            await dp.close()

    gave_up, _, stats = asyncio.run(scenario())
    (s1, _, end1), (s2, start2, _), (s3, start3, _) = model.calls
    assert (s1, s2, s3) == (1, 2, 1)
    assert start2 - gave_up < 0.3 < end1 - gave_up  # sequence 2 did not wait for the sleep
    assert start3 >= end1  # sequence 1's next step did
    inference = stats["inference_stats"]
    assert (inference["success"]["count"], inference["fail"]["count"]) == (2, 0)
    assert stats["response_stats"]["0"]["cancel"]["count"] == 1
