"""``Session(url)`` on servers nbinfer did not start: the table of issue 15, cell by cell.

The same ``add_sub`` (FP32 ``INPUT0`` / ``INPUT1`` [-1, 16]) on a Triton whose repository and
statistics APIs are restricted (``admin-key``), a KServe whose models declare no inputs (its
default) and an MLServer, over HTTP and gRPC; a DataFrame with ``INPUT0`` / ``INPUT1`` columns
holding 16-element arrays. Every cell is a correct result or a typed error naming the server, the
missing capability and what to do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer import (
    InvalidInputError,
    ModelNotFoundError,
    Session,
    TensorSpec,
    UnauthenticatedError,
    UnsupportedError,
)
from tests.waiting import wait_until

if TYPE_CHECKING:
    from peer import Peer

RNG = np.random.default_rng(15)
A = RNG.standard_normal((3, 16)).astype(np.float32)
B = RNG.standard_normal((3, 16)).astype(np.float32)
FRAME = pd.DataFrame({"INPUT0": list(A), "INPUT1": list(B)})
PROTOCOLS = ["http", "grpc"]


def _url(peer: Peer, protocol: str) -> str:
    return peer.grpc_url if protocol == "grpc" else peer.http_url


def _check_add_sub(out: pd.DataFrame) -> None:
    assert len(out) == len(FRAME)
    got0 = out[[f"OUTPUT0[{i}]" for i in range(16)]].to_numpy()
    got1 = out[[f"OUTPUT1[{i}]" for i in range(16)]].to_numpy()
    np.testing.assert_allclose(got0, A + B, rtol=1e-6)
    np.testing.assert_allclose(got1, A - B, rtol=1e-6)


# -- Triton, repository and statistics restricted ---------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_restricted_triton_says_which_header_to_pass(
    triton_restricted: Peer, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert triton_restricted.access is not None
    header = triton_restricted.access[0]
    if protocol == "grpc":
        header = "triton-grpc-protocol-" + header
    with Session(_url(triton_restricted, protocol)) as session:
        caps = session.capabilities
        assert (caps.name, caps.version) == ("triton", "2.51.0")
        assert caps.repository and caps.statistics  # advertised, but behind the header
        with pytest.raises(UnauthenticatedError) as info:
            session.stats()
        message = str(info.value)
        assert "server 'triton' 2.51.0 restricts its" in message
        assert f"headers={{{header!r}: '<value>'}}" in message
        assert info.value.context["header"] == header
        assert info.value.__cause__ is not None  # the server's own answer is kept
        # The listing is a DataFrame all the same: the models met, and the header in its note.
        session.model("add_sub")
        with caplog.at_level(logging.WARNING, logger="nbinfer"):
            listed = session.models
            again = session.models
        assert listed.to_dict("list") == {"name": ["add_sub"], "state": ["READY"]}
        assert again.equals(listed)
        assert (listed.attrs["source"], listed.attrs["complete"]) == ("session", False)
        note = listed.attrs["note"]
        assert "restricts its model repository index API" in note
        assert f"headers={{{header!r}: '<value>'}}" in note
        assert [r.getMessage() for r in caplog.records] == [note]  # said once
        with pytest.raises(UnauthenticatedError, match=f"header {header!r}"):
            session.unload("negate")
        _check_add_sub(session.infer("add_sub", FRAME))  # inference is not restricted


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_restricted_triton_with_the_header_lists_and_counts(
    triton_restricted: Peer, protocol: str
) -> None:
    assert triton_restricted.access is not None
    key, value = triton_restricted.access
    if protocol == "grpc":
        key = "triton-grpc-protocol-" + key
    with Session(_url(triton_restricted, protocol), headers={key: value}) as session:
        models = session.models
        assert list(models.columns) == ["name", "version", "state", "reason"]
        assert {"add_sub", "times_two", "upper"} <= set(models["name"])
        assert set(models["state"]) == {"READY"}
        _check_add_sub(session.infer("add_sub", FRAME))

        def counted() -> bool:  # Triton records an execution after sending its responses
            stats = session.stats("add_sub")
            return bool(stats.loc[stats["name"] == "add_sub", "success"].iloc[0] >= 1)

        wait_until(counted, 10.0, "Triton counting the inference")


# -- KServe, models declaring no inputs ---------------------------------------------------------


def test_kserve_http_lists_models_from_its_own_list(kserve_undeclared: Peer) -> None:
    with Session(kserve_undeclared.http_url) as session:
        models = session.models
        assert list(models.columns) == ["name"]  # the columns it could fill
        assert set(models["name"]) == {"add_sub", "times_two", "upper"}
        assert session.capabilities.probed["repository_index"] is False  # asked once
        assert session.models["name"].tolist() == models["name"].tolist()


def test_kserve_grpc_lists_the_models_the_session_met_and_says_how_to_list_all(
    kserve_undeclared: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    with Session(kserve_undeclared.grpc_url) as session:
        with caplog.at_level(logging.WARNING, logger="nbinfer"):
            empty = session.models  # nothing met yet: an empty frame, not an error
            assert list(empty.columns) == ["name", "state"] and empty.empty
            _check_add_sub(session.infer("add_sub", FRAME))
            assert session.model("times_two").name == "times_two"
            with pytest.raises(ModelNotFoundError):
                session.model("nope")
            with pytest.raises(ModelNotFoundError):
                session.infer("gone", {"INPUT0": A})  # met, but the server does not know it
            models = session.models
        assert list(models.columns) == ["name", "state"]  # the columns it could fill
        assert models["name"].tolist() == ["add_sub", "times_two"]  # met, known, in order
        assert set(models["state"]) == {"READY"}  # each asked with ModelReady
        assert models.attrs["source"] == "session" and models.attrs["complete"] is False
        note = models.attrs["note"]
        assert "server 'kserve' 0.21.0 offers no model listing over gRPC" in note
        assert "GET /v2/models" in note and "Session('http://127.0.0.1:<http port>')" in note
        said = [r for r in caplog.records if "offers no model listing" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING  # once per session
        assert session.capabilities.probed["repository_index"] is False  # asked once
        with Session(kserve_undeclared.http_url) as over_http:  # what the note says to do
            assert set(over_http.models["name"]) == {"add_sub", "times_two", "upper"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_kserve_frames_map_by_column_name_without_declared_inputs(
    kserve_undeclared: Peer, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    with Session(_url(kserve_undeclared, protocol)) as session:
        assert session.model("add_sub").metadata.inputs == []
        with caplog.at_level(logging.DEBUG, logger="nbinfer"):
            _check_add_sub(session.infer("add_sub", FRAME))  # arrays in cells: FP32 [3, 16]
            _check_add_sub(session.infer("add_sub", FRAME))
        said = [r for r in caplog.records if "declares no inputs" in r.getMessage()]
        assert len(said) == 1  # once, at debug level
        assert said[0].levelno == logging.DEBUG

        ints = session.infer("times_two", pd.DataFrame({"INPUT0": [3, -4, 2**40]}))
        assert ints["OUTPUT0"].tolist() == [6, -8, 2**41]  # INT64 from the column dtype
        text = session.infer("upper", pd.DataFrame({"INPUT0": ["ab", "Cd e"]}))
        assert [bytes(v) if not isinstance(v, str) else v.encode() for v in text["OUTPUT0"]] == [
            b"AB",
            b"CD E",
        ]  # strings -> BYTES


def test_kserve_explicit_inputs_override_the_frame_dtypes(kserve_undeclared: Peer) -> None:
    wide = pd.DataFrame(
        {"INPUT0": list(A.astype(np.float64)), "INPUT1": list(B.astype(np.float64))}
    )
    with Session(kserve_undeclared.http_url) as session:
        out = session.infer(
            "add_sub", wide, inputs={"INPUT0": "FP32", "INPUT1": ("FP32", [-1, 16])}
        )
        _check_add_sub(out)
        specs = [TensorSpec("INPUT0", "FP32", [-1, 16]), TensorSpec("INPUT1", "FP32", [-1, 16])]
        _check_add_sub(session.infer("add_sub", wide, inputs=specs, expand=True))


def test_kserve_http_takes_binary_tensors_it_does_not_list(kserve_undeclared: Peer) -> None:
    with Session(kserve_undeclared.http_url) as session:
        caps = session.capabilities
        assert not caps.advertises("binary_tensor_data")
        assert caps.binary_tensor_data is None  # unknown until the first request
        _check_add_sub(session.infer("add_sub", FRAME))
        assert caps.binary_tensor_data is True and caps.probed["binary_tensor_data"] is True
        result = session.infer("add_sub", {"INPUT0": A, "INPUT1": B})  # binary from now on
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), A + B, rtol=1e-6)


def test_kserve_async_frames_probe_and_map_too(kserve_undeclared: Peer) -> None:
    async def main() -> pd.DataFrame:
        with Session(kserve_undeclared.http_url) as session:
            out = await session.ainfer("add_sub", FRAME, batch_size=1)
            assert session.capabilities.probed["binary_tensor_data"] is True
            return out

    _check_add_sub(asyncio.run(main()))


# -- MLServer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_mlserver_lists_models_it_does_not_advertise(mlserver: Peer, protocol: str) -> None:
    with Session(_url(mlserver, protocol)) as session:
        assert session.capabilities.extensions == ()
        models = session.models
        assert {"add_sub", "times_two", "upper"} <= set(models["name"])
        assert set(models["state"]) == {"READY"}  # not gRPC's "State.READY"
        _check_add_sub(session.infer("add_sub", FRAME))


def test_mlserver_http_refuses_binary_tensors_once_then_json(mlserver: Peer) -> None:
    with Session(mlserver.http_url) as session:
        _check_add_sub(session.infer("add_sub", FRAME))
        assert session.capabilities.probed["binary_tensor_data"] is False
        _check_add_sub(session.infer("add_sub", FRAME))


def test_frame_that_disagrees_with_declared_inputs_names_both_sides(mlserver: Peer) -> None:
    with Session(mlserver.http_url) as session:
        frame = pd.DataFrame({"a": [1.0], "b": [2.0], "c": [3.0]})
        with pytest.raises(InvalidInputError) as info:
            session.infer("add_sub", frame)
        message = str(info.value)
        assert "['a', 'b', 'c']" in message  # the frame's side
        assert "INPUT0 FP32 [-1, 16]" in message and "INPUT1 FP32 [-1, 16]" in message
        text = pd.DataFrame({"INPUT0": ["x"], "INPUT1": ["y"]})
        with pytest.raises(InvalidInputError, match=r"'INPUT0' \(object\).*FP32 for input"):
            session.infer("add_sub", text)


# -- statistics on servers without them -------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("peer", ["kserve_undeclared", "mlserver"])
def test_stats_without_the_extension_is_a_typed_error(
    request: pytest.FixtureRequest, peer: str, protocol: str
) -> None:
    server: Peer = request.getfixturevalue(peer)
    version = {"kserve": "0.21.0", "mlserver": "1.7.1"}[server.name]
    with Session(_url(server, protocol)) as session:
        for call in (session.stats, lambda: session.stats("add_sub")):
            with pytest.raises(UnsupportedError) as info:
                call()
            message = str(info.value)
            assert f"server {server.name!r} {version} does not offer the statistics" in message
            assert "metrics" in message
            assert (info.value.server, info.value.extension) == (server.name, "statistics")
        assert not session.capabilities.statistics


# -- headers and tokens on every call ---------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_token_goes_with_every_call_metadata_and_statistics_included(protocol: str) -> None:
    with Session(token="s3cret", protocol=protocol, demo=True) as owner:
        assert owner.server is not None
        url = owner.url
        with Session(url) as handed:  # this process started the server: handed its token
            assert handed.capabilities.error is None and "add_sub" in set(handed.models["name"])
        with Session(url, token="not-s3cret") as stranger:
            assert isinstance(stranger.capabilities.error, UnauthenticatedError)
            with pytest.raises(UnauthenticatedError, match=r"token=.*headers="):
                _ = stranger.models
        with Session(url, token="s3cret") as friend:
            caps = friend.capabilities
            assert caps.error is None and caps.name == "nbinfer" and caps.statistics
            assert "add_sub" in set(friend.models["name"])
            _check_add_sub(friend.infer("add_sub", FRAME))
            assert friend.stats("add_sub")["success"].iloc[0] >= 1
            assert friend.model("add_sub").config["name"] == "add_sub"
        with Session(url, headers={"authorization": "Bearer s3cret"}) as by_header:
            assert by_header.capabilities.error is None
            assert "add_sub" in set(by_header.models["name"])


def test_token_and_auth_together_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="token="):
        Session("http://127.0.0.1:9", token="a", auth="b")


def test_session_display_uses_the_capability_record(kserve_undeclared: Peer) -> None:
    with Session(kserve_undeclared.http_url) as session:
        card = session._repr_mimebundle_()["text/html"]
        assert "session.refresh()" in card  # nothing read yet
        html = session.refresh()._repr_mimebundle_()["text/html"]
        assert "kserve 0.21.0" in html and "model_repository_extension" in html
        assert "times_two" in html  # from KServe's own list


def test_model_browser_lists_kserve_models_from_the_same_record(kserve_undeclared: Peer) -> None:
    pytest.importorskip("ipywidgets")
    with Session(kserve_undeclared.http_url) as session:
        browser = nbinfer.browse(session)
        browser.wait()
        assert browser.capabilities is session.capabilities
        assert browser.models == ["add_sub", "times_two", "upper"]
        assert "Statistics" not in browser.tabs.titles  # no statistics extension
        assert "\u25cf add_sub" in [label for label, _ in browser.model_list.options]  # ready
        browser.close()


def test_model_browser_over_kserve_grpc_shows_the_met_models_and_the_note(
    kserve_undeclared: Peer,
) -> None:
    pytest.importorskip("ipywidgets")
    with Session(kserve_undeclared.grpc_url) as session:
        _check_add_sub(session.infer("add_sub", FRAME))
        browser = nbinfer.browse(session, models=["upper"])
        browser.wait()
        assert browser.models == ["upper", "add_sub"]  # browse(models=) and what the session met
        assert browser.load_button.layout.display == "none"  # no repository: no load / unload
        assert browser.open_box.layout.display is None  # open others by name
        assert "offers no model listing over gRPC" in browser.list_note.value
        assert "\u25cf add_sub" in [label for label, _ in browser.model_list.options]  # ready
        browser.close()
