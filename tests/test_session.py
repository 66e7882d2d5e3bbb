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
    with Session(f"grpc://{session.server.grpc_url}") as remote:
        assert remote.protocol == "grpc"
        frame = remote.infer("iris", IRIS_ROWS)
        assert frame.shape == (2, 3)
        with pytest.raises(InvalidInputError, match="local server"):
            remote.serve(lambda x: x, name="f")


def test_close_is_idempotent_and_stops_the_server() -> None:
    s = Session(device="cpu", demo=False)
    server = s.server
    assert server is not None and server.running
    s.close()
    s.close()
    assert not server.running


def test_local_session_with_auth_token_sends_it_and_others_are_refused() -> None:
    from nbinfer.client import Client
    from nbinfer.errors import UnauthenticatedError

    with Session.local(device="cpu", demo=True, auth_token="s3cret") as s:
        assert s.infer("iris", IRIS_ROWS).shape == (2, 3)
        assert s.server is not None
        with Client(s.server.http_url) as stranger, pytest.raises(UnauthenticatedError):
            stranger.get_model_metadata("iris")


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
