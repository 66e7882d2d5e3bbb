"""``nbinfer serve`` / ``python -m nbinfer.server``: the ready line, fast startup, clean exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from nbinfer.cli import main
from nbinfer.server.launcher import parse_ready_line


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _wait_ready_line(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        urls = parse_ready_line(line)
        if urls is not None:
            return urls
    proc.kill()
    _, err = proc.communicate()
    raise AssertionError(f"no ready line; stderr:\n{err}")


def _time_to_ready(args: list[str]) -> tuple[float, subprocess.Popen[str], str]:
    t0 = time.perf_counter()
    proc = _spawn(args)
    http_url, _ = _wait_ready_line(proc)
    with httpx.Client() as client:
        while client.get(http_url + "/v2/health/ready").status_code != 200:
            time.sleep(0.01)
    return time.perf_counter() - t0, proc, http_url


def _close_pipes(proc: subprocess.Popen[str]) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    finally:
        _close_pipes(proc)


def test_nbinfer_serve_demo_is_ready_fast_and_exits_cleanly_on_sigint() -> None:
    elapsed, proc, http_url = _time_to_ready(
        [sys.executable, "-m", "nbinfer.cli", "serve", "--demo"]
    )
    try:
        print(f"\n[`nbinfer serve --demo` ready (HTTP /v2/health/ready = 200) in {elapsed:.2f} s]")
        assert elapsed < 5.0
        index = httpx.post(http_url + "/v2/repository/index", json={}).json()
        assert index, "the demo models are served"
    finally:
        code = _stop(proc)
    assert code == 0


def test_python_m_nbinfer_server_prints_ready_line_with_bound_ports() -> None:
    proc = _spawn([sys.executable, "-m", "nbinfer.server", "--log-level", "warning"])
    try:
        http_url, grpc_url = _wait_ready_line(proc)
        assert http_url.startswith("http://127.0.0.1:") and not http_url.endswith(":0")
        host, port = grpc_url.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert httpx.get(http_url + "/v2/health/live").status_code == 200
    finally:
        assert _stop(proc) == 0


def test_second_signal_forces_exit_even_if_shutdown_is_slow() -> None:
    proc = _spawn([sys.executable, "-m", "nbinfer.server"])
    try:
        _wait_ready_line(proc)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) in (0, 1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _close_pipes(proc)


def test_nbinfer_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert "nbinfer" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--model-repository", "--demo", "--http-port", "--grpc-port", "--device"):
        assert option in out
    for option in ("--grace-period", "--access-log", "--access-log-format", "--exception-handler"):
        assert option in out


def test_serve_takes_the_kserve_model_server_options() -> None:
    from nbinfer.server.__main__ import build_parser
    from nbinfer.server.app import SHUTDOWN_GRACE, ServerOptions
    from nbinfer.server.observability import DEFAULT_ACCESS_LOG_FORMAT

    defaults = ServerOptions.from_namespace(build_parser().parse_args([]))
    assert defaults.grace_period == SHUTDOWN_GRACE
    assert defaults.access_log is False
    assert defaults.access_log_format == DEFAULT_ACCESS_LOG_FORMAT
    assert defaults.exception_handlers == []
    args = build_parser().parse_args(
        [
            "--grace-period",
            "12.5",
            "--access-log",
            "--access-log-format",
            "%(m)s %(U)s",
            "--exception-handler",
            "a:E=a:h",
            "--exception-handler",
            "b:F=b:g",
        ]
    )
    options = ServerOptions.from_namespace(args)
    assert options.grace_period == 12.5
    assert options.access_log is True
    assert options.access_log_format == "%(m)s %(U)s"
    assert options.exception_handlers == ["a:E=a:h", "b:F=b:g"]


def test_nbinfer_serve_access_log_lines_go_to_stderr() -> None:
    serve = [sys.executable, "-m", "nbinfer.cli", "serve", "--http-port", "0", "--grpc-port", "0"]
    proc = _spawn([*serve, "--access-log", "--grace-period", "0.5"])
    try:
        http_url, _ = _wait_ready_line(proc)
        r = httpx.get(http_url + "/v2/health/live", headers={"x-request-id": "cli-1"})
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(10)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _close_pipes(proc)
    assert code == 0
    assert '"GET /v2/health/live HTTP/1.1" 200' in err and "request_id=cli-1" in err, err


def test_nbinfer_serve_fails_with_exit_code_1_on_bad_repository() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nbinfer.cli", "serve", "--model-repository", "/nonexistent/repo"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "/nonexistent/repo" in proc.stderr


@pytest.mark.skipif(bool(os.environ.get("CI")), reason="strict timing is checked locally only")
@pytest.mark.serial  # a start-up time bound: run alone, not beside the parallel run's load
def test_nbinfer_serve_demo_is_ready_within_two_seconds_locally() -> None:
    elapsed, proc, _ = _time_to_ready([sys.executable, "-m", "nbinfer.cli", "serve", "--demo"])
    _stop(proc)
    print(f"\n[`nbinfer serve --demo` ready in {elapsed:.2f} s]")
    assert elapsed < 2.0


def test_server_process_imports_no_heavy_notebook_libraries() -> None:
    code = (
        "import sys\n"
        "from nbinfer.server.app import ServerOptions, build_dataplane\n"
        "import nbinfer.server.rest, nbinfer.server.grpc, nbinfer.server.__main__, nbinfer.cli\n"
        "build_dataplane(ServerOptions(demo=True, device='cpu'))\n"
        "heavy = [m for m in ('pandas', 'matplotlib', 'IPython', 'ipywidgets', 'PIL', 'torch',\n"
        "                     'nbinfer.client', 'nbinfer.session', 'aiohttp', 'pycurl')\n"
        "         if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_nbinfer_export_writes_a_repository_our_server_loads_back(tmp_path: Path) -> None:
    import asyncio

    import numpy as np

    from nbinfer.cli import main
    from nbinfer.protocol.types import InferInput, InferRequest
    from nbinfer.server.dataplane import DataPlane
    from nbinfer.server.repository import ModelRepository

    src = tmp_path / "src" / "triple" / "1"
    src.mkdir(parents=True)
    (src / "model.py").write_text(
        "import nbinfer\n\n"
        "class Triple(nbinfer.Model):\n"
        "    name = 'triple'\n"
        "    inputs = [('x', 'FP32', [-1])]\n"
        "    outputs = [('y', 'FP32', [-1])]\n\n"
        "    def predict(self, inputs):\n"
        "        return {'y': inputs['x'] * 3}\n"
    )
    out = tmp_path / "exported"
    manifest = tmp_path / "isvc.yaml"
    code = main(
        [
            "export",
            "--model-repository",
            str(tmp_path / "src"),
            "--model",
            "triple",
            "--out",
            str(out),
            "--kserve-manifest",
            str(manifest),
            "--storage-uri",
            "s3://bucket/models",
        ]
    )
    assert code == 0
    assert (out / "triple" / "config.pbtxt").is_file()
    assert "InferenceService" in manifest.read_text()

    async def roundtrip() -> np.ndarray:
        dp = DataPlane(ModelRepository(str(out)))
        try:
            x = np.array([1, 2], dtype=np.float32)
            resp = await dp.infer(
                InferRequest([InferInput("x", "FP32", [2], x)], model_name="triple")
            )
            assert resp.outputs[0].data is not None
            return resp.outputs[0].data
        finally:
            await dp.close()

    np.testing.assert_array_equal(asyncio.run(roundtrip()), [3, 6])
