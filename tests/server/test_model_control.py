"""Model control as Triton has it (issue 25, items 3 and 9).

The attack: a load with an uploaded ONNX file under the name of the in-memory demo ``add_sub``
made every client get wrong numbers; unloading ``iris`` broke other clients; a stranger could
turn logging off. Each attack is run over HTTP and gRPC: refused with 403 / PERMISSION_DENIED,
the clients (tritonclient and nbinfer, both transports) still get the right numbers. The same
upload on a server started with ``allow_model_replace`` does replace ``add_sub``, so the attack
is real and the tests can fail.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

from nbinfer import Client, PermissionDeniedError, Session
from nbinfer.protocol.grpc import pb
from nbinfer.server.__main__ import build_parser
from nbinfer.server.app import ServerOptions
from nbinfer.server.launcher import LocalServer, parse_ready_line
from tests.server.repo_calls import (
    ONNX_CONFIG,
    answers_add_sub,
    grpc_call,
    grpc_load,
    grpc_unload,
    http,
    http_load,
    http_unload,
    swapped_add_sub_onnx,
)
from tests.waiting import wait_until

APPLIED = "the repository change applied"

_PLUS = """
from nbinfer.server import Model


class Plus(Model):
    name = "{name}"
    inputs = [("X", "INT32", [-1])]
    outputs = [("Y", "INT32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {{"Y": inputs["X"] + {offset}}}
"""


def _write_plus(repo: Path, name: str, offset: int) -> None:
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "1" / "model.py").write_text(
        textwrap.dedent(_PLUS.format(name=name, offset=offset))
    )


def _plus(server: LocalServer, name: str) -> list[int]:
    with Client(server.http_url) as client:
        return client.infer(name, {"X": np.array([1, 2], np.int32)}).as_numpy("Y").tolist()


def _state(server: LocalServer, name: str) -> str:
    status, _ = http(server, f"/v2/models/{name}/ready", method="GET")
    return "READY" if status == 200 else "NOT READY"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("control") / "repo"
    _write_plus(root, "plain", 1)
    return root


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[LocalServer]:
    """LocalServer's model-control defaults: explicit, no replacing (token opted out: raw HTTP)."""
    with LocalServer(model_repository=repo, demo=True, device="cpu", auth_token=None) as srv:
        yield srv


ATTACK = {"1/model.onnx": swapped_add_sub_onnx()}


def test_replacing_add_sub_with_an_upload_is_refused_and_every_client_stays_right(
    server: LocalServer,
) -> None:
    assert answers_add_sub(server) == []
    status, text = http_load(server, "add_sub", ATTACK, ONNX_CONFIG)
    assert status == 403, text
    assert "'add_sub'" in text and "--allow-model-replace" in text and "memory" in text
    code, details = grpc_load(server, "add_sub", ATTACK, ONNX_CONFIG)
    assert code == grpc.StatusCode.PERMISSION_DENIED, details
    assert "'add_sub'" in details and "--allow-model-replace" in details
    for config_only in (http_load(server, "add_sub", config=ONNX_CONFIG),):
        assert config_only[0] == 403, config_only
    assert answers_add_sub(server) == []
    for url in (server.http_url, server.grpc_url):  # typed on both transports
        with Client(url) as client, pytest.raises(PermissionDeniedError, match="add_sub"):
            client.load_model("add_sub", config=ONNX_CONFIG, files=ATTACK)


def test_with_allow_model_replace_the_same_upload_does_replace_add_sub() -> None:
    with LocalServer(demo=True, device="cpu", allow_model_replace=True, auth_token=None) as srv:
        assert answers_add_sub(srv) == []
        status, text = http_load(srv, "add_sub", ATTACK, ONNX_CONFIG)
        assert status == 200, text
        assert len(answers_add_sub(srv)) == 4  # every client now gets wrong numbers


def test_unloading_a_demo_model_over_the_network_is_refused_and_it_keeps_serving(
    server: LocalServer,
) -> None:
    status, text = http_unload(server, "iris")
    assert status == 403, text
    assert "'iris'" in text and "--allow-model-replace" in text
    code, details = grpc_unload(server, "iris")
    assert code == grpc.StatusCode.PERMISSION_DENIED, details
    assert _state(server, "iris") == "READY"
    with Client(server.http_url) as client:
        out = client.infer("iris", {"input": np.ones((1, 4), np.float32)})
        assert out.as_numpy("probabilities").shape == (1, 3)


def test_explicit_mode_uploads_a_new_model_but_never_over_a_serving_one(
    server: LocalServer,
) -> None:
    files = {"1/model.onnx": swapped_add_sub_onnx()}
    status, text = http_load(server, "fresh", files, ONNX_CONFIG)
    assert status == 200, text
    code, details = grpc_load(server, "fresh", files, ONNX_CONFIG)
    assert code == grpc.StatusCode.PERMISSION_DENIED, details
    assert "is serving" in details and "'fresh'" in details
    assert http_load(server, "fresh")[0] == 200  # a plain reload is no replacement
    assert http_unload(server, "fresh")[0] == 200
    status, text = http_load(server, "fresh", files, ONNX_CONFIG)  # notebook 04's flow
    assert status == 200, text
    assert http_unload(server, "fresh")[0] == 200


def test_an_operator_model_unloads_and_reloads_but_is_never_overlaid(
    server: LocalServer,
) -> None:
    assert _plus(server, "plain") == [2, 3]
    assert grpc_unload(server, "plain")[0] == grpc.StatusCode.OK  # explicit: Triton's unload
    overlay = {"1/labels.txt": b"x\n"}
    status, text = http_load(server, "plain", overlay)  # unloaded, still the operator's
    assert status == 403, text
    assert "operator's model repository" in text and "'plain'" in text
    assert str(server.model_repository) not in text
    assert grpc_load(server, "plain")[0] == grpc.StatusCode.OK  # a plain load restores it
    assert _plus(server, "plain") == [2, 3]


def test_log_and_trace_updates_follow_the_mode_and_reading_stays_allowed(
    server: LocalServer,
) -> None:
    with LocalServer(demo=True, device="cpu", model_control_mode="none", auth_token=None) as locked:
        status, before = http(locked, "/v2/logging", method="GET")
        assert status == 200
        status, text = http(locked, "/v2/logging", {"log_verbose_level": 1})
        assert status == 403, text
        assert "log" in text and "--model-control-mode none" in text
        assert http(locked, "/v2/logging", method="GET") == (200, before)
        assert http(locked, "/v2/logging", {})[0] == 200  # empty: a read
        status, text = http(locked, "/v2/trace/setting", {"trace_level": ["OFF"]})
        assert status == 403, text
        assert http(locked, "/v2/models/add_sub/trace/setting", {"trace_rate": "1"})[0] == 403
        assert http(locked, "/v2/trace/setting", method="GET")[0] == 200
        update = pb.LogSettingsRequest()
        update.settings["log_verbose_level"].uint32_param = 1
        code, details = grpc_call(locked, "LogSettings", update)
        assert code == grpc.StatusCode.PERMISSION_DENIED, details
        assert grpc_call(locked, "LogSettings", pb.LogSettingsRequest())[0] == grpc.StatusCode.OK
        trace = pb.TraceSettingRequest()
        trace.settings["trace_level"].value.append("OFF")
        assert grpc_call(locked, "TraceSetting", trace)[0] == grpc.StatusCode.PERMISSION_DENIED
        assert grpc_call(locked, "TraceSetting", pb.TraceSettingRequest())[0] == grpc.StatusCode.OK
    # explicit (LocalServer's default): the operator's tools may change them
    assert http(server, "/v2/logging", {"log_verbose_level": 0})[0] == 200


def test_none_mode_refuses_every_load_and_unload_naming_model_mode_and_flag() -> None:
    with LocalServer(demo=True, device="cpu", model_control_mode="none", auth_token=None) as locked:
        status, text = http_load(locked, "add_sub")
        assert status == 403, text
        assert "'add_sub'" in text and "--model-control-mode none" in text and "explicit" in text
        assert "explicit model load / unload is not allowed" in text  # Triton's words
        status, text = http_load(locked, "brand_new", {"1/model.onnx": swapped_add_sub_onnx()})
        assert status == 403, text
        many = {f"{i}.txt": b"x" for i in range(200)}  # the mode answers before any cap
        assert http_load(locked, "brand_new", many, config="not json")[0] == 403
        assert grpc_unload(locked, "iris")[0] == grpc.StatusCode.PERMISSION_DENIED
        assert http_unload(locked, "iris")[0] == 403
        assert http_unload(locked, "no_such_model")[0] == 403  # nothing learnt about names
        assert answers_add_sub(locked) == []
        assert _state(locked, "iris") == "READY"
        client = Client(locked.grpc_url)
        with client, pytest.raises(PermissionDeniedError, match="--model-control-mode none"):
            client.unload_model("iris")


def test_a_real_nbinfer_serve_refuses_unload_by_default() -> None:
    cmd = [sys.executable, "-m", "nbinfer.cli", "serve", "--demo", "--device", "cpu"]
    cmd += ["--http-port", "0", "--grpc-port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        urls = None
        for line in proc.stdout:
            urls = parse_ready_line(line)
            if urls is not None:
                break
        assert urls is not None, "nbinfer serve did not start"
        r = httpx.post(urls[0] + "/v2/repository/models/iris/unload", json={}, timeout=30)
        assert r.status_code == 403, r.text
        assert "--model-control-mode none" in r.text
        assert httpx.get(urls[0] + "/v2/models/iris/ready", timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_nbinfer_serve_defaults_to_none_and_local_server_to_explicit() -> None:
    ns: argparse.Namespace = build_parser().parse_args([])
    options = ServerOptions.from_namespace(ns)
    assert options.model_control_mode == "none" and not options.allow_model_replace
    cmd = LocalServer().command()
    assert cmd[cmd.index("--model-control-mode") + 1] == "explicit"
    assert "--allow-model-replace" not in cmd
    explicit = ServerOptions.from_namespace(
        build_parser().parse_args(["--model-control-mode", "explicit", "--allow-model-replace"])
    )
    assert explicit.model_control_mode == "explicit" and explicit.allow_model_replace


def test_poll_mode_follows_the_repository_directory_and_refuses_the_api(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    _write_plus(repo, "first", 1)
    srv = LocalServer(
        model_repository=repo,
        demo=False,
        device="cpu",
        model_control_mode="poll",
        model_limits={"repository_poll_secs": 0.2},
        auth_token=None,
    )
    with srv:
        status, text = http_load(srv, "first")
        assert status == 403 and "polled" in text, text
        assert grpc_unload(srv, "first")[0] == grpc.StatusCode.PERMISSION_DENIED
        _write_plus(repo, "second", 10)  # a new directory is loaded
        wait_until(lambda: _state(srv, "second") == "READY", 15, APPLIED)
        assert _plus(srv, "second") == [11, 12]
        time.sleep(0.05)
        _write_plus(repo, "second", 100)  # a changed one is reloaded
        wait_until(lambda: _plus(srv, "second") == [101, 102], 15, APPLIED)
        import shutil

        shutil.rmtree(repo / "first")  # a removed one is unloaded
        wait_until(lambda: _state(srv, "first") != "READY", 15, APPLIED)
        assert _plus(srv, "second") == [101, 102]


def test_a_session_is_its_servers_operator_but_its_network_port_cannot_replace() -> None:
    with Session(device="cpu") as session:
        session.unload("iris")  # the private channel: demo models too
        assert "iris" not in set(session.models.query("state == 'READY'")["name"])
        session.load("iris")
        assert "iris" in set(session.models.query("state == 'READY'")["name"])
        files = {"1/model.onnx": swapped_add_sub_onnx()}
        session.load("linear", config=ONNX_CONFIG, files=files)
        session.unload("linear")
        session.load("linear", config=ONNX_CONFIG, files=files)
        with pytest.raises(PermissionDeniedError, match="add_sub"):  # over the port
            session.client.load_model("add_sub", config=ONNX_CONFIG, files=files)
        a = np.ones((1, 16), np.float32)
        out = session.client.infer("add_sub", {"INPUT0": a, "INPUT1": a})
        np.testing.assert_allclose(out.as_numpy("OUTPUT0"), a + a)
