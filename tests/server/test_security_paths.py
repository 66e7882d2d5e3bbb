"""The path policy of the embedded server (issue 19, items 1-3, 8 and the NUL upload key).

Every request-named file or directory (model names, ``file:`` keys, ``default_model_filename``,
``label_filename``) is attacked over HTTP and gRPC, on a server without and with a token. Each
attack must be a 400 / INVALID_ARGUMENT, write nothing outside the repository, leave no temporary
copy behind, and answer the same whether an outside path exists or not.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import io
import json
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import grpc
import numpy as np
import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.grpc import pb
from nbinfer.server import DataPlane, ModelRepository, scratch
from nbinfer.server.launcher import LocalServer
from nbinfer.server.paths import ModelFiles, check_model_name, code_kind

TOKEN = "path-policy-token"

_ADD = """
from nbinfer.server import Model


class Add(Model):
    name = "{name}"
    inputs = [("X", "INT32", [-1])]
    outputs = [("Y", "INT32", [-1])]
    run_in_thread = False

    def predict(self, inputs, context):
        return {{"Y": inputs["X"] + 1}}
"""


@dataclass
class Env:
    """One running server and the directories the attacks must leave alone."""

    server: LocalServer
    token: str | None
    repo: Path
    outside: Path  # a directory outside the repository (targets of absolute paths)
    temp: Path  # the server's TMPDIR (where uploaded copies live)
    secret: Path  # an existing readable file outside the repository

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def http_load(self, raw_name: str, params: dict[str, str]) -> tuple[int, str]:
        """POST a load with ``raw_name`` placed in the URL as given (no normalisation)."""
        host, port = self.server.http_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            body = json.dumps({"parameters": params}).encode()
            conn.request(
                "POST",
                f"/v2/repository/models/{raw_name}/load",
                body=body,
                headers={"Content-Type": "application/json", **self.headers()},
            )
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def grpc_load(
        self, name: str, files: dict[str, bytes], config: str | None = None
    ) -> tuple[grpc.StatusCode, str]:
        req = pb.RepositoryModelLoadRequest(model_name=name)
        for key, content in files.items():
            req.parameters[key].bytes_param = content
        if config is not None:
            req.parameters["config"].string_param = config
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            call = channel.unary_unary(
                "/inference.GRPCInferenceService/RepositoryModelLoad",
                request_serializer=pb.RepositoryModelLoadRequest.SerializeToString,
                response_deserializer=pb.RepositoryModelLoadResponse.FromString,
            )
            try:
                call(req, timeout=30, metadata=self.metadata())
            except grpc.RpcError as exc:
                return exc.code(), exc.details() or ""
        return grpc.StatusCode.OK, ""

    def infer_add(self, name: str = "add") -> list[int]:
        import httpx

        body = {"inputs": [{"name": "X", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
        r = httpx.post(
            f"{self.server.http_url}/v2/models/{name}/infer",
            json=body,
            headers=self.headers(),
            timeout=30,
        )
        assert r.status_code == 200, r.text
        return list(r.json()["outputs"][0]["data"])

    @contextlib.contextmanager
    def untouched(self) -> Iterator[None]:
        """Nothing written outside the repository; no new copy left in the server's TMPDIR (its
        scratch root, server/scratch.py, stays for the server's life: its copies are counted)."""

        def left() -> set[str]:
            names = set()
            for path in self.temp.iterdir():
                if path.name.startswith(scratch.PREFIX):
                    names |= {f"copy {p.name}" for p in path.iterdir() if p.name != scratch.OWNER}
                else:
                    names.add(path.name)
            return names

        before = left()
        yield
        assert sorted(p.name for p in self.outside.iterdir()) == ["secret.onnx"]
        assert left() == before

    def index_names(self) -> set[str]:
        import httpx

        r = httpx.post(
            f"{self.server.http_url}/v2/repository/index", headers=self.headers(), timeout=30
        )
        return {row["name"] for row in r.json()}


def _write_repository(root: Path, outside: Path) -> Path:
    repo = root / "repo"
    for name in ("add", "linked"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(textwrap.dedent(_ADD.format(name=name)))
    # the operator's own symlinks: a directory and a model file pointing out of the repository
    (repo / "linked" / "ext").symlink_to(outside, target_is_directory=True)
    (repo / "linked" / "1" / "link.onnx").symlink_to(outside / "secret.onnx")
    (repo / "linked" / "1" / "dangling.onnx").symlink_to(outside / "missing.onnx")
    return repo


@pytest.fixture(scope="module", params=[None, TOKEN], ids=["no-token", "token"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("paths")
    outside = root / "outside"
    outside.mkdir()
    secret = outside / "secret.onnx"
    secret.write_bytes(b"not for the server's callers")
    temp = root / "servertmp"
    temp.mkdir()
    repo = _write_repository(root, outside)
    server = LocalServer(
        model_repository=repo,
        demo=False,
        device="cpu",
        auth_token=request.param,
        env={"TMPDIR": str(temp)},
        # the path policy must hold even where loads may overlay the operator's models
        allow_model_replace=True,
    ).start()
    try:
        yield Env(server, request.param, repo, outside, temp, secret)
    finally:
        server.stop()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


BAD_NAMES = ["..", ".", "../escaped", "a/../../escaped", "name\x00x", "-x", ".hidden"]


@pytest.mark.parametrize("name", [*BAD_NAMES, "<abs>"])
def test_grpc_load_with_a_bad_model_name_is_invalid_argument_and_writes_nothing(
    env: Env, name: str
) -> None:
    if name == "<abs>":
        name = str(env.outside / "evil")
    with env.untouched():
        for files in ({"file:config.json": b"{}", "file:labels.txt": b"a\n"}, {}):
            code, details = env.grpc_load(name, files)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
            assert "invalid model name" in details


@pytest.mark.parametrize("raw_name", ["..", "%2E%2E", "..%2Fescaped", "%2Fabs", "name%00x"])
def test_http_load_with_a_bad_model_name_is_4xx_and_writes_nothing(env: Env, raw_name: str) -> None:
    with env.untouched():
        for params in ({"file:labels.txt": _b64(b"a\n")}, {}):
            status, text = env.http_load(raw_name, params)
            assert 400 <= status < 500, text
            if raw_name in ("..", "%2E%2E", "name%00x"):
                assert status == 400
                assert "invalid model name" in text


def test_http_load_with_an_absolute_model_name_writes_nothing(env: Env) -> None:
    with env.untouched():
        status, text = env.http_load(
            quote(str(env.outside / "evil"), safe=""), {"file:labels.txt": _b64(b"a\n")}
        )
        assert 400 <= status < 500, text


BAD_KEYS = [
    "file:../escaped.json",
    "file:1/../../escaped.json",
    "file:<abs>",
    "file:a\x00b.json",
    "file:a\\..\\b.json",
    "file:",
    "file:.ipython/profile_default/ipython_config.json",
    "file:1//labels.txt",
]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_file_keys_are_refused_before_anything_is_written(env: Env, key: str) -> None:
    key = key.replace("<abs>", str(env.outside / "evil.json"))
    with env.untouched():
        code, details = env.grpc_load("fresh", {key: b"{}"})
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        status, text = env.http_load("fresh", {key: _b64(b"{}")})
        assert status == 400, text
        assert "file override" in text
    assert "fresh" not in env.index_names()


def test_a_file_key_through_an_operator_symlink_is_refused_and_writes_nothing_outside(
    env: Env,
) -> None:
    # the copy keeps the operator's link as a link (never followed), so the key leaves it
    with env.untouched():
        status, text = env.http_load("linked", {"file:ext/evil.json": _b64(b"{}")})
    assert status == 400, text
    assert "symbolic link" in text and str(env.outside) not in text
    assert env.infer_add("linked") == [2, 3]


def _same_answer(answers: list[tuple[object, str]], paths: list[str]) -> None:
    """The answers are equal once each one's own path is blanked out."""
    blanked = {
        (code, text.replace(p, "<P>")) for (code, text), p in zip(answers, paths, strict=True)
    }
    assert len(blanked) == 1, blanked


def _onnx_config(filename: str) -> str:
    return json.dumps({"platform": "onnxruntime_onnx", "default_model_filename": filename})


def test_default_model_filename_outside_the_model_is_refused_the_same_whether_it_exists(
    env: Env,
) -> None:
    existing, missing = str(env.secret), str(env.outside / "missing.onnx")
    with env.untouched():
        for pair in ([existing, missing], ["../../outside/secret.onnx", "../../outside/no.onnx"]):
            grpc_answers = [env.grpc_load("add", {}, _onnx_config(p)) for p in pair]
            assert all(code == grpc.StatusCode.INVALID_ARGUMENT for code, _ in grpc_answers)
            assert all("default_model_filename" in text for _, text in grpc_answers)
            _same_answer(grpc_answers, pair)  # type: ignore[arg-type]
            http_answers = [env.http_load("add", {"config": _onnx_config(p)}) for p in pair]
            assert all(status == 400 for status, _ in http_answers)
            _same_answer(http_answers, pair)  # type: ignore[arg-type]
    assert env.infer_add() == [2, 3]  # the failed reloads kept the model serving


def test_default_model_filename_through_a_symlink_out_is_refused_the_same_dangling_or_not(
    env: Env,
) -> None:
    pair = ["link.onnx", "dangling.onnx"]
    answers = [env.grpc_load("linked", {}, _onnx_config(p)) for p in pair]
    assert all(code == grpc.StatusCode.INVALID_ARGUMENT for code, _ in answers)
    assert all("symbolic link" in text for _, text in answers)
    _same_answer(answers, pair)  # type: ignore[arg-type]


def test_default_model_filename_in_an_uploaded_config_is_confined_too(env: Env) -> None:
    pbtxt = f'platform: "onnxruntime_onnx"\ndefault_model_filename: "{env.secret}"\n'
    with env.untouched():
        status, text = env.http_load(
            "fresh",
            {"file:config.pbtxt": _b64(pbtxt.encode()), "file:1/labels.txt": _b64(b"a\n")},
        )
        assert status == 400, text
        assert "default_model_filename" in text
    assert "fresh" not in env.index_names()  # a failed first load leaves no entry either


def _labels_config(label_file: str) -> str:
    output = {"name": "Y", "data_type": "TYPE_INT32", "dims": [-1], "label_filename": label_file}
    return json.dumps(
        {"input": [{"name": "X", "data_type": "TYPE_INT32", "dims": [-1]}], "output": [output]}
    )


def test_label_filename_outside_the_model_is_refused_the_same_whether_it_exists(
    env: Env,
) -> None:
    with env.untouched():
        for pair in ([str(env.secret), str(env.outside / "no")], ["../linked/1/model.py", "../x"]):
            answers = [env.grpc_load("add", {}, _labels_config(p)) for p in pair]
            assert all(code == grpc.StatusCode.INVALID_ARGUMENT for code, _ in answers), answers
            assert all("label_filename" in text for _, text in answers)
            _same_answer(answers, pair)  # type: ignore[arg-type]
    assert env.infer_add() == [2, 3]


def _torchscript_bytes() -> bytes:
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Identity()), buf)
    return buf.getvalue()


def _torch_config(filename: str) -> str:
    return json.dumps(
        {
            "platform": "pytorch_libtorch",
            "default_model_filename": filename,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [2]}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [2]}],
        }
    )


def test_torchscript_under_a_data_name_is_refused_without_allow_code_upload(env: Env) -> None:
    script = _torchscript_bytes()
    with env.untouched():
        for name in ("1/weights.onnx", "1/model.json", "1/labels.txt"):
            config = _torch_config(name.split("/", 1)[1])
            code, details = env.grpc_load("ts", {f"file:{name}": script}, config)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
            assert "--allow-code-upload" in details and "zip archive" in details
            status, text = env.http_load("ts", {f"file:{name}": _b64(script), "config": config})
            assert status == 400 and "--allow-code-upload" in text
    assert "ts" not in env.index_names()


def test_pickles_and_python_source_under_data_names_are_refused(env: Env) -> None:
    import pickle

    with env.untouched():
        for content in (pickle.dumps({"a": 1}), b"import os\nos.system('id')\n"):
            code, details = env.grpc_load("add", {"file:labels.txt": content})
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "--allow-code-upload" in details


def test_failed_first_load_of_uploaded_files_leaves_no_directory_and_no_entry(env: Env) -> None:
    with env.untouched():
        code, details = env.grpc_load("broken", {"file:config.pbtxt": b"this is { not pbtxt"})
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "broken" not in env.index_names()


def test_valid_uploads_still_load_and_serve(env: Env) -> None:
    status, text = env.http_load("add", {"file:labels.txt": _b64(b"a\nb\n")})
    assert status == 200, text
    code, details = env.grpc_load("add", {"file:1/extra/data.npy": _npy()})
    assert code == grpc.StatusCode.OK, details
    assert env.infer_add() == [2, 3]
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.onnx"]


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(3))
    return buf.getvalue()


# -- the policy itself (no server) ------------------------------------------------------------


def test_model_names_follow_the_strict_pattern() -> None:
    for good in ("add", "add_sub", "resnet-50.v2", "_private", "A1"):
        assert check_model_name(good) == good
    for bad in ("", ".", "..", "a/b", "/abs", "a\x00b", "-x", "a b", "é", "x" * 129):
        with pytest.raises(InvalidInputError, match="invalid model name"):
            check_model_name(bad)


def test_code_kind_looks_at_the_bytes_not_the_name() -> None:
    import pickle

    npz = io.BytesIO()
    np.savez(npz, a=np.arange(3))
    assert code_kind(npz.getvalue()) is None
    assert code_kind(_npy()) is None
    assert code_kind(b"cat\ndog\n") is None
    assert code_kind(b'{"name": "m"}') is None
    assert code_kind(pickle.dumps([1])) == "a pickle"
    assert code_kind(b"\x7fELF\x02\x01\x01") == "a native executable or library"
    assert code_kind(b"from os import system\n") == "Python source"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02")
    assert "zip archive" in (code_kind(archive.getvalue()) or "")


def test_code_files_uploaded_with_the_load_obey_the_gate(tmp_path: Path) -> None:
    from pathlib import PurePosixPath

    (tmp_path / "1").mkdir()
    uploaded = frozenset({PurePosixPath("1/model.pt")})
    gated = ModelFiles(tmp_path, strict=True, uploaded=uploaded)
    with pytest.raises(InvalidInputError, match="--allow-code-upload"):
        gated.code_file("model.pt", base="1", what="default_model_filename")
    assert gated.code_file("other.pt", base="1", what="x") == tmp_path / "1" / "other.pt"
    opened = ModelFiles(tmp_path, strict=True, uploaded=uploaded, allow_code=True)
    assert opened.code_file("model.pt", base="1", what="x") == tmp_path / "1" / "model.pt"


def test_allow_code_upload_accepts_torchscript_named_by_default_model_filename(
    tmp_path: Path,
) -> None:
    script = _torchscript_bytes()
    config = _torch_config("weights.bin")
    for allow in (False, True):
        dp = DataPlane(ModelRepository(tmp_path, allow_code_upload=allow))
        files = {"file:1/weights.bin": script}
        try:
            if not allow:
                with pytest.raises(InvalidInputError, match="--allow-code-upload"):
                    asyncio.run(dp.load_model("ts", config=config, files=files))
            else:
                asyncio.run(dp.load_model("ts", config=config, files=files))
                assert dp.repository.resolve("ts").state == "READY"
        finally:
            dp.repository.close()
    assert list(tmp_path.iterdir()) == []


def test_operator_symlinks_named_by_the_repository_config_are_honoured(tmp_path: Path) -> None:
    # the operator's own config is trusted with symlinks; it still names files relatively
    outside = tmp_path / "weights"
    outside.mkdir()
    (outside / "real.txt").write_text("a\nb\n")
    model = tmp_path / "repo" / "m"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(textwrap.dedent(_ADD.format(name="m")))
    (model / "labels.txt").symlink_to(outside / "real.txt")
    (model / "config.json").write_text(_labels_config("labels.txt"))
    repo = ModelRepository(tmp_path / "repo")
    try:
        assert repo.resolve("m").model is not None
        assert repo.resolve("m").model.output_defs()[0].labels == ["a", "b"]  # type: ignore[union-attr]
    finally:
        repo.close()
