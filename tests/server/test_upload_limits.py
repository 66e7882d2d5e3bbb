"""Caps on the state a stranger creates through the repository API (issue 25, item 8).

Before, 200 uploaded models made 200 temporary copies, 1,863 metric series and 211 threads, and a
load could carry any number of files. Now each load is refused beyond ``--max-upload-files`` /
``--max-upload-bytes`` (413 / RESOURCE_EXHAUSTED) and a new model beyond ``--max-models``
(429 / RESOURCE_EXHAUSTED), with a message naming the limit and its option; nothing is written,
and the server keeps serving.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from nbinfer import Client, LimitExceededError, PayloadTooLargeError
from nbinfer.server.__main__ import build_parser
from nbinfer.server.app import ServerOptions
from nbinfer.server.demo import demo_models
from nbinfer.server.launcher import LocalServer
from tests.server.repo_calls import (
    ONNX_CONFIG,
    answers_add_sub,
    grpc_load,
    http,
    http_load,
    swapped_add_sub_onnx,
)

DEMO_MODELS = len(demo_models())  # the cap counts what --demo loads
MAX_MODELS = DEMO_MODELS + 2


@pytest.fixture(scope="module")
def temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servertmp")


@pytest.fixture(scope="module")
def server(temp: Path) -> Iterator[LocalServer]:
    limits = {"max_models": MAX_MODELS, "max_upload_files": 3, "max_upload_bytes": 4096}
    with LocalServer(
        demo=True, device="cpu", model_limits=limits, env={"TMPDIR": str(temp)}, auth_token=None
    ) as s:
        yield s


def _copies(temp: Path) -> list[Path]:
    return list(temp.glob("nbinfer-scratch-*/nbinfer-model-*"))  # server/scratch.py


def test_too_many_files_in_one_load_is_413_naming_the_limit(
    server: LocalServer, temp: Path
) -> None:
    files = {f"{i}.txt": b"x" for i in range(4)}
    status, text = http_load(server, "many", files)
    assert status == 413, text
    assert "'many'" in text and "4 uploaded files" in text and "--max-upload-files" in text
    code, details = grpc_load(server, "many", files)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
    assert "--max-upload-files" in details
    client = Client(server.grpc_url)
    with client, pytest.raises(PayloadTooLargeError, match="--max-upload-files"):
        client.load_model("many", files=files)
    assert _copies(temp) == []
    assert answers_add_sub(server) == []


def test_too_many_bytes_in_one_load_is_413_naming_the_limit(
    server: LocalServer, temp: Path
) -> None:
    files = {"1/model.onnx": b"\0" * 5000}
    status, text = http_load(server, "big", files, ONNX_CONFIG)
    assert status == 413, text
    assert "5000 uploaded bytes" in text and "--max-upload-bytes" in text and "4096" in text
    code, details = grpc_load(server, "big", files, ONNX_CONFIG)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
    assert _copies(temp) == []
    assert http(server, "/v2/health/ready", method="GET")[0] == 200


def test_one_model_more_than_the_cap_is_429_and_changes_nothing(
    server: LocalServer, temp: Path
) -> None:
    files = {"1/model.onnx": swapped_add_sub_onnx()}
    assert len(files["1/model.onnx"]) < 4096
    for name in ("extra1", "extra2"):
        status, text = http_load(server, name, files, ONNX_CONFIG)
        assert status == 200, text
    copies = len(_copies(temp))
    status, text = http_load(server, "extra3", files, ONNX_CONFIG)
    assert status == 429, text
    assert "'extra3'" in text and f"limit of {MAX_MODELS} models is reached (--max-models)" in text
    code, details = grpc_load(server, "extra3", files, ONNX_CONFIG)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
    with Client(server.http_url) as client, pytest.raises(LimitExceededError, match="max-models"):
        client.load_model("extra3", config=ONNX_CONFIG, files=files)
    grpc_client = Client(server.grpc_url)
    with grpc_client, pytest.raises(LimitExceededError, match="max-models"):
        grpc_client.load_model("extra3", config=ONNX_CONFIG, files=files)
    assert len(_copies(temp)) == copies
    index = http(server, "/v2/repository/index", {})[1]
    assert "extra3" not in index
    assert http_load(server, "extra1")[0] == 200  # a known name still reloads
    assert answers_add_sub(server) == []


def test_the_caps_have_safe_defaults_and_flags() -> None:
    options = ServerOptions.from_namespace(build_parser().parse_args([]))
    assert (options.max_models, options.max_upload_files) == (100, 100)
    assert options.max_upload_bytes == 128 * 1024 * 1024 < options.max_request_bytes
    args = ["--max-models", "5", "--max-upload-files", "2", "--max-upload-bytes", "10"]
    options = ServerOptions.from_namespace(build_parser().parse_args(args))
    assert (options.max_models, options.max_upload_files, options.max_upload_bytes) == (5, 2, 10)
    cmd = LocalServer(model_limits={"max_models": 5}).command()
    assert cmd[cmd.index("--max-models") + 1] == "5"
    from nbinfer.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unknown model limit"):
        LocalServer(model_limits={"max_modles": 5}).command()


def test_uploaded_files_are_written_off_the_event_loop(tmp_path: Path) -> None:
    """The copy and the uploads of a load are written on a worker thread (issue 25, item 6).

    Structural, not timed: a coroutine ticking on the same loop sees the load while it is still
    writing its files (the name held as "preparing"), which it could not if the writing ran on
    the loop. 100 files of 1 MiB (the upload caps' defaults) keep the writing going long
    enough for many ticks.
    """
    import asyncio

    from nbinfer.server.repository import ModelRepository

    repo = ModelRepository(tmp_path)
    files = {f"file:data/{i}.npy": bytes(1 << 20) for i in range(100)}
    files["file:1/model.onnx"] = swapped_add_sub_onnx()
    seen_writing = 0

    async def tick(task: asyncio.Task[None]) -> None:
        nonlocal seen_writing
        while not task.done():
            seen_writing += "copy" in repo._preparing
            await asyncio.sleep(0)

    async def main() -> None:
        load = asyncio.ensure_future(repo.load("copy", config=ONNX_CONFIG, files=files))
        await asyncio.gather(load, tick(load))

    asyncio.run(main())
    assert seen_writing > 0, "the loop did not run while the uploaded files were written"
    assert [(row.name, row.state) for row in repo.index()] == [("copy", "READY")]
    repo.close()
