"""Uploads never follow the operator's links out of a model, and errors show no server path.

Issue 25 item 7: a config override whose label file sits behind the operator's symlink to an
outside directory was refused alone, but with one dummy uploaded file the server copied the
model directory THROUGH the link and served the outside file's lines in the model config. The
copy now keeps links as links, so the same load is refused and the secret never shows.

Item 11: load, repository and path errors named absolute server paths (the temporary copy,
the operator's repository). They now name the model and the file relative to its directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from nbinfer.server.launcher import LocalServer
from tests.server.repo_calls import (
    ONNX_CONFIG,
    SECRET,
    grpc_load,
    http,
    http_load,
    linked_repository,
)


@dataclass
class Env:
    server: LocalServer
    repo: Path
    outside: Path
    temp: Path


def _override(label_file: str) -> str:
    config = dict(ONNX_CONFIG)
    config["output"] = [
        {
            "name": "OUTPUT0",
            "data_type": "TYPE_FP32",
            "dims": [-1, 16],
            "label_filename": label_file,
        }
    ]
    return json.dumps(config)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("uploads")
    repo, outside = linked_repository(root)
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"this is not an onnx file")
    (repo / "broken" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\n')
    temp = root / "servertmp"
    temp.mkdir()
    server = LocalServer(
        model_repository=repo,
        demo=False,
        device="cpu",
        env={"TMPDIR": str(temp)},
        allow_model_replace=True,  # the overlay must be refused by the path policy alone
        auth_token=None,
    ).start()
    try:
        yield Env(server, repo, outside, temp)
    finally:
        server.stop()


def _config_text(env: Env, name: str) -> str:
    return http(env.server, f"/v2/models/{name}/config", method="GET")[1]


def test_a_label_file_behind_the_operators_link_is_refused_alone(env: Env) -> None:
    status, text = http_load(env.server, "labeled", config=_override("ext/secret.txt"))
    assert status == 400, text
    assert SECRET not in text


def test_one_dummy_upload_does_not_copy_through_the_link_and_the_secret_never_shows(
    env: Env,
) -> None:
    dummy = {"dummy.txt": b"x\n"}
    status, text = http_load(env.server, "labeled", dummy, _override("ext/secret.txt"))
    assert status == 400, text
    assert "symbolic link" in text and SECRET not in text
    code, details = grpc_load(env.server, "labeled", dummy, _override("ext/secret.txt"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert SECRET not in details
    assert SECRET not in _config_text(env, "labeled")
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.txt"]
    assert list(env.temp.glob("nbinfer-scratch-*/nbinfer-model-*")) == []  # no copy left behind
    assert http(env.server, "/v2/models/labeled/ready", method="GET")[0] == 200


def test_a_link_inside_the_model_still_works_for_an_upload(env: Env, tmp_path: Path) -> None:
    # a relative link that stays inside the model directory is copied as a link and kept
    (env.repo / "labeled" / "names.txt").write_text("a\nb\n")
    link = env.repo / "labeled" / "alias.txt"
    if not link.exists():
        link.symlink_to("names.txt")
    status, text = http_load(env.server, "labeled", {"dummy.txt": b"x\n"}, _override("alias.txt"))
    assert status == 200, text
    assert '"a"' in _config_text(env, "labeled") or '\\"a\\"' in _config_text(env, "labeled")


def test_a_failing_load_names_the_model_and_its_file_never_a_server_path(env: Env) -> None:
    status, text = http_load(env.server, "broken")
    assert status == 400, text
    assert "broken" in text
    assert str(env.repo) not in text and str(env.repo.resolve()) not in text
    # the same through an upload: the temporary copy's path never shows either
    status, text = http_load(env.server, "fresh", {"1/model.onnx": b"not onnx either"}, ONNX_CONFIG)
    assert status == 400, text
    assert "fresh" in text and "nbinfer-model-" not in text and str(env.temp) not in text
    index = http(env.server, "/v2/repository/index", {})[1]
    assert str(env.repo) not in index and "nbinfer-model-" not in index


def test_a_missing_version_directory_names_the_model_relative(env: Env) -> None:
    status, text = http_load(
        env.server, "noversion", {"config.pbtxt": b'platform: "onnxruntime_onnx"\n'}
    )
    assert status == 400, text
    assert "noversion/1" in text and "nbinfer-model-" not in text and str(env.temp) not in text
