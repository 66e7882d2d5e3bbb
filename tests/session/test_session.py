"""Session against the embedded server it starts (one server for the module)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.errors import InvalidInputError, ModelLoadError, ModelNotFoundError
from nbinfer.server.model import Model
from nbinfer.session import Session

IRIS_ROWS = pd.DataFrame(
    [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]],
    columns=["sepal_length", "sepal_width", "petal_length", "petal_width"],
    index=["a", "b"],
)


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


def test_session_without_url_starts_local_server_with_demo_models(session: Session) -> None:
    assert session.server is not None and session.server.running
    models = session.models
    assert list(models.columns) == ["name", "version", "state", "reason"]
    assert {"add_sub", "echo", "iris", "digits"} <= set(models["name"])
    assert set(models["state"]) == {"READY"}


def test_infer_dataframe_returns_labelled_dataframe_with_same_index(session: Session) -> None:
    frame = session.infer("iris", IRIS_ROWS)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == ["a", "b"]
    cols = ["probabilities[setosa]", "probabilities[versicolor]", "probabilities[virginica]"]
    assert list(frame.columns) == cols
    assert frame.loc["a"].idxmax() == "probabilities[setosa]"
    assert frame.loc["b"].idxmax() == "probabilities[virginica]"
    np.testing.assert_allclose(frame.sum(axis=1), 1.0, rtol=1e-5)


def test_infer_dict_returns_infer_result(session: Session) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    result = session.infer("add_sub", {"INPUT0": a, "INPUT1": a})
    assert isinstance(result, nbinfer.InferResult)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)


def test_model_handle_exposes_metadata_config_stats(session: Session) -> None:
    iris = session.model("iris")
    assert iris.metadata.inputs[0].shape == [-1, 4]
    assert iris.config["name"] == "iris"
    assert iris.labels == {"probabilities": ["setosa", "versicolor", "virginica"]}
    iris.infer(IRIS_ROWS)
    stats = iris.stats()
    assert stats.loc[0, "name"] == "iris" and stats.loc[0, "success"] >= 1


def test_unknown_model_raises_model_not_found(session: Session) -> None:
    with pytest.raises(ModelNotFoundError, match="nope"):
        session.model("nope")


def test_ainfer_inside_running_loop_and_sync_infer_from_same_cell(session: Session) -> None:
    async def cell() -> tuple[pd.DataFrame, pd.DataFrame]:
        # A Jupyter cell: a loop is running; both faces must work.
        sync_frame = session.infer("iris", IRIS_ROWS)
        async_frame = await session.ainfer("iris", IRIS_ROWS)
        return sync_frame, async_frame

    sync_frame, async_frame = asyncio.run(cell())
    pd.testing.assert_frame_equal(sync_frame, async_frame)


def test_serve_function_ships_it_to_the_server_process(session: Session) -> None:
    offset = 10.0  # captured by value: proves the closure travelled

    def shift(x):  # type: ignore[no-untyped-def]
        return x + offset

    handle = session.serve(shift, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
    assert handle.name == "shift"
    out = handle.infer({"x": np.array([1, 2], dtype=np.float32)}).as_numpy("y")
    np.testing.assert_array_equal(out, [11, 12])
    assert "shift" in set(session.models["name"])


class Scaler(Model):
    name = "scaler"
    inputs = (("x", "FP64", [-1, 2]),)
    outputs = (("y", "FP64", [-1, 2]),)

    def load(self) -> None:
        self.factor = 3.0

    def predict(self, inputs):  # type: ignore[no-untyped-def,override]
        return {"y": inputs["x"] * self.factor}


def test_serve_model_subclass_and_dataframe_roundtrip(session: Session) -> None:
    session.serve(Scaler())
    frame = session.infer("scaler", pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}))
    assert list(frame.columns) == ["y[0]", "y[1]"]
    np.testing.assert_array_equal(frame.to_numpy(), [[3, 9], [6, 12]])


class Broken(Model):
    name = "broken"
    inputs = (("x", "FP32", [-1]),)
    outputs = (("y", "FP32", [-1]),)

    def load(self) -> None:
        raise RuntimeError("weights missing")

    def predict(self, inputs):  # type: ignore[no-untyped-def,override]
        return inputs


def test_serve_reports_load_failure_and_server_keeps_serving(session: Session) -> None:
    with pytest.raises(ModelLoadError, match="RuntimeError: weights missing"):
        session.serve(Broken())
    assert session.client.is_server_ready()
    assert session.infer("iris", IRIS_ROWS).shape == (2, 3)


def test_remote_session_over_grpc_and_serve_refused(session: Session) -> None:
    assert session.server is not None
    with Session(session.server.grpc_url, token=session.token) as remote:
        assert remote.protocol == "grpc"
        frame = remote.infer("iris", IRIS_ROWS)
        assert frame.shape == (2, 3)
        with pytest.raises(InvalidInputError, match="local server"):
            remote.serve(lambda x: x, name="f")


def test_close_is_idempotent_and_stops_the_server() -> None:
    s = Session(keep_previous=True, device="cpu", demo=False)
    server = s.server
    assert server is not None and server.running
    s.close()
    s.close()
    assert not server.running


def test_local_session_with_auth_token_sends_it_and_others_are_refused() -> None:
    import httpx

    from nbinfer.client import Client
    from nbinfer.errors import UnauthenticatedError

    with Session.local(keep_previous=True, device="cpu", demo=True, auth_token="s3cret") as s:
        assert s.infer("iris", IRIS_ROWS).shape == (2, 3)
        assert s.server is not None
        # a client of this process without auth is handed the token; others are refused
        with Client(s.server.http_url) as handed:
            assert handed.get_model_metadata("iris").name == "iris"
        with (
            Client(s.server.http_url, auth="not-s3cret") as stranger,
            pytest.raises(UnauthenticatedError),
        ):
            stranger.get_model_metadata("iris")
        assert httpx.get(s.server.http_url + "/v2/models/iris").status_code == 401


def test_serve_torch_module(session: Session) -> None:
    torch = pytest.importorskip("torch")

    net = torch.nn.Linear(3, 2)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
        net.bias.zero_()
    session.serve(
        net,
        name="linear",
        inputs=[("x", "FP32", [-1, 3])],
        outputs=[("y", "FP32", [-1, 2])],
        device="cpu",
    )
    x = np.array([[1, 2, 3]], dtype=np.float32)
    np.testing.assert_allclose(session.infer("linear", {"x": x}).as_numpy("y"), [[1, 5]])


# -- nothing outside the error tree escapes the public API -----------------------------------


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"url": "http://127.0.0.1:9", "token": "a", "auth": "b"}, "token="),
        ({"url": "http://127.0.0.1:9", "model_repository": "repo"}, "local server"),
        ({"url": "http://127.0.0.1:9", "bogus": 1}, "bogus"),
        ({"url": "http://127.0.0.1:9", "timeout": "soon"}, "soon"),
    ],
    ids=["token-and-auth", "repository-for-remote", "unknown-option", "timeout-not-a-number"],
)
def test_session_options_that_do_not_fit_raise_invalid_input(
    options: dict[str, object], words: str
) -> None:
    with pytest.raises(InvalidInputError, match=words) as caught:
        Session(**options)  # type: ignore[arg-type]
    cause = caught.value.__cause__
    assert cause is None or isinstance(cause, TypeError | ValueError)  # raise ... from exc


def _ragged(session: Session) -> object:
    return session.infer("iris", [[1.0, 2.0], [3.0]])


def _bad_files(session: Session) -> object:
    return session.load("iris", files={"config.pbtxt": "text, not bytes"})  # type: ignore[dict-item]


BAD_CALLS = {
    "infer-classification-not-a-number": (
        lambda s: s.infer("iris", IRIS_ROWS, classification="top"),
        "classification=",
    ),
    "infer-batch-size-not-a-number": (
        lambda s: s.infer("iris", IRIS_ROWS, batch_size="x"),
        "batch_size=",
    ),
    "infer-concurrency-not-a-number": (
        lambda s: s.infer("iris", IRIS_ROWS, concurrency="x"),
        "concurrency=",
    ),
    "infer-columns-not-columns": (lambda s: s.infer("iris", IRIS_ROWS, columns=5), "infer"),
    "infer-outputs-not-names": (lambda s: s.infer("iris", IRIS_ROWS, outputs=5), "outputs="),
    "infer-unknown-option": (lambda s: s.infer("iris", IRIS_ROWS, bogus=1), "bogus"),
    "infer-ragged-list": (_ragged, "infer"),
    "ainfer-unknown-option": (
        lambda s: asyncio.run(s.ainfer("iris", IRIS_ROWS, bogus=1)),
        "bogus",
    ),
    "handle-infer-unknown-option": (lambda s: s.model("iris").infer(IRIS_ROWS, bogus=1), "bogus"),
    "model-name-not-text": (lambda s: s.model(5), "model"),
    "load-files-not-bytes": (_bad_files, "load"),
    "serve-unknown-option": (lambda s: s.serve(lambda x: x, bogus=1), "bogus"),
    "serve-inputs-not-specs": (lambda s: s.serve(lambda x: x, inputs=5), "serve"),
    "classify-top-k-not-a-number": (
        lambda s: s.classify("digits", np.zeros((8, 8), np.float32), top_k="x"),
        "top_k=",
    ),
    "profile-unknown-option": (lambda s: s.profile("add_sub", bogus=1), "bogus"),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_arguments_raise_invalid_input_with_the_cause(session: Session, case: str) -> None:
    call, words = BAD_CALLS[case]
    with pytest.raises(InvalidInputError, match=words) as caught:
        call(session)
    cause = caught.value.__cause__
    assert cause is None or isinstance(cause, TypeError | ValueError)
    assert not caught.value.__suppress_context__ or cause is not None  # never `from None`
    assert session.infer("iris", IRIS_ROWS).shape == (2, 3)  # the session still works


# -- a local server that died --------------------------------------------------------------


def _killed(session: Session) -> None:
    import os
    import signal
    import time

    assert session.server is not None and session.server.pid is not None
    os.kill(session.server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while session.server.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not session.server.running


def test_a_killed_local_server_is_named_and_restart_brings_it_back_with_served_models() -> None:
    from nbinfer.errors import ConnectError

    def double(x):  # type: ignore[no-untyped-def]
        return 2 * x

    with Session(keep_previous=True, device="cpu") as s:
        s.serve(double, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
        _killed(s)
        with pytest.raises(ConnectError, match=r"SIGKILL.*session\.restart\(\)"):
            s.infer("iris", IRIS_ROWS)
        with pytest.raises(ConnectError, match="is gone"):
            asyncio.run(s.ainfer("iris", IRIS_ROWS))
        with pytest.raises(ConnectError, match="is gone"):
            s.models  # noqa: B018
        s.restart()
        assert s.server is not None and s.server.running
        assert s.url == s.server.http_url  # new ports: the session follows
        assert s.infer("iris", IRIS_ROWS).shape == (2, 3)
        assert asyncio.run(s.ainfer("iris", IRIS_ROWS)).shape == (2, 3)
        x = np.array([1, 2], dtype=np.float32)
        np.testing.assert_array_equal(s.infer("double", {"x": x}).as_numpy("y"), [2, 4])


@pytest.mark.parametrize("face", ["infer", "ainfer"])
def test_a_server_that_dies_during_a_call_is_named_too(face: str) -> None:
    from nbinfer.errors import ConnectError

    with Session(keep_previous=True, device="cpu", demo=False) as s:
        s.serve(_sleep_then_echo, inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
        assert s.server is not None and s.server.pid is not None
        import os
        import signal
        import threading

        x = {"x": np.ones(2, np.float32)}
        threading.Timer(1.5, os.kill, (s.server.pid, signal.SIGKILL)).start()  # mid-call
        with pytest.raises(ConnectError, match="is gone") as caught:
            if face == "infer":
                s.infer("_sleep_then_echo", x)
            else:  # the async face awaits the dying server's grace instead of blocking on it
                asyncio.run(s.ainfer("_sleep_then_echo", x))
        assert "killed by SIGKILL" in str(caught.value)
        assert caught.value.__cause__ is not None  # the transport's own error


def _sleep_then_echo(x):  # type: ignore[no-untyped-def]
    import time

    time.sleep(30)  # killed long before
    return x


def test_restart_refuses_a_server_the_session_did_not_start(session: Session) -> None:
    from nbinfer.errors import UnsupportedError

    assert session.server is not None
    remote = Session(session.server.http_url, token=session.token)
    with remote, pytest.raises(UnsupportedError):
        remote.restart()
