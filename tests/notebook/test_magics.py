"""%nbinfer / %%infer in an IPython shell against the embedded server, and in a real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import nbinfer

IRIS_JSON = '{"input": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}'


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbinfer")
    ip.run_line_magic("nbinfer", "local --device cpu")
    yield ip
    ip.run_line_magic("nbinfer", "stop")


def magics(ip: InteractiveShell) -> Any:
    return ip.magics_manager.registry["NbinferMagics"]


def test_load_ext_registers_line_and_cell_magics(shell: InteractiveShell) -> None:
    assert shell.find_line_magic("nbinfer") is not None
    assert shell.find_cell_magic("infer") is not None


def test_help_lists_every_subcommand_and_the_cell_magic(shell: InteractiveShell) -> None:
    doc = shell.find_line_magic("nbinfer").__doc__ or ""
    for sub in ("local", "connect URL", "models", "status", "browse", "stop", "%%infer"):
        assert sub in doc
    for flag in ("--model-repository", "--device", "--grpc", "--token"):
        assert flag in doc  # magic_arguments appends the usage
    assert "-o NAME" in (shell.find_cell_magic("infer").__doc__ or "")


def test_local_status_and_models_use_the_session(shell: InteractiveShell) -> None:
    session = magics(shell).session
    assert isinstance(session, nbinfer.Session) and session.server is not None
    assert shell.run_line_magic("nbinfer", "status") is session
    models = shell.run_line_magic("nbinfer", "models")
    assert isinstance(models, pd.DataFrame) and "iris" in set(models["name"])


def test_infer_cell_json_displays_and_stores_result(shell: InteractiveShell) -> None:
    result = shell.run_cell_magic("infer", "iris -o probs", IRIS_JSON)
    assert shell.user_ns["probs"] is result
    assert isinstance(result, nbinfer.InferResult)
    assert result.as_numpy("probabilities").shape == (2, 3)
    assert "text/html" in shell.display_formatter.format(result)[0]


def test_infer_cell_python_expression_uses_user_namespace(shell: InteractiveShell) -> None:
    shell.user_ns["a"] = np.arange(16, dtype=np.float32).reshape(1, 16)
    result = shell.run_cell_magic("infer", "add_sub", '{"INPUT0": a, "INPUT1": a * 2}')
    np.testing.assert_array_equal(result["OUTPUT0"], 3 * shell.user_ns["a"])


def test_infer_cell_dataframe_expression_returns_dataframe(shell: InteractiveShell) -> None:
    shell.user_ns["frame"] = pd.DataFrame(json.loads(IRIS_JSON)["input"], index=["a", "b"])
    out = shell.run_cell_magic("infer", "iris -o table", "frame")
    assert isinstance(out, pd.DataFrame) and list(out.index) == ["a", "b"]
    assert shell.user_ns["table"] is out


def test_infer_cell_accepts_a_v2_json_request(shell: InteractiveShell) -> None:
    body = json.dumps(
        {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5, 3, 1, 0]}]}
    )
    result = shell.run_cell_magic("infer", "iris", body)
    assert result.as_numpy("probabilities").shape == (1, 3)


def test_infer_cell_over_grpc_reaches_the_same_server(shell: InteractiveShell) -> None:
    result = shell.run_cell_magic("infer", "iris --grpc -o g", IRIS_JSON)
    http = shell.run_cell_magic("infer", "iris", IRIS_JSON)
    np.testing.assert_allclose(result["probabilities"], http["probabilities"], rtol=1e-6)
    face = magics(shell)._faces[magics(shell).session]
    assert face.protocol == "grpc" and face.url.endswith(magics(shell).session.server.grpc_url)
    assert magics(shell).session is not face  # the gRPC face never becomes the current session


def test_infer_cell_rejects_empty_or_garbage_bodies(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="inputs in the cell body"):
        shell.run_cell_magic("infer", "iris", "  \n")
    with pytest.raises(UsageError, match="neither JSON nor a Python expression"):
        shell.run_cell_magic("infer", "iris", "x = = 1")


def test_subcommand_flags_are_checked(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="does not take --device"):
        shell.run_line_magic("nbinfer", "models --device cpu")
    with pytest.raises(UsageError, match="needs a URL"):
        shell.run_line_magic("nbinfer", "connect")


def test_connect_with_token_reaches_an_authenticated_server() -> None:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbinfer")
    own = type(magics(ip))(ip)  # a second magics object: leaves the module's session alone
    with nbinfer.LocalServer(demo=True, device="cpu", auth_token="s3cret") as server:
        session = own.nbinfer(f"connect {server.http_url} --token s3cret")
        assert session.server is None and "iris" in set(session.models["name"])
        grpc = own.nbinfer(f"connect {server.grpc_url} --grpc --token s3cret")
        assert grpc.protocol == "grpc" and session._closed  # connecting again closes the old one
        assert own.session is grpc
        own.nbinfer("stop")
        assert grpc._closed and own.session is not grpc


_TRIPLE = """
import nbinfer


class Triple(nbinfer.Model):
    name = "triple"
    inputs = (("x", "FP32", [-1]),)
    outputs = (("y", "FP32", [-1]),)

    def predict(self, inputs, context):
        return {"y": inputs["x"] * 3}
"""


def test_local_serves_a_model_repository_on_the_device_asked(
    shell: InteractiveShell, tmp_path: Any
) -> None:
    (tmp_path / "triple" / "1").mkdir(parents=True)
    (tmp_path / "triple" / "1" / "model.py").write_text(_TRIPLE)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbinfer")
    own = type(magics(ip))(ip)  # a second magics object: leaves the module's session alone
    before = magics(shell).session
    assert before is not None and before.server is not None
    try:
        # --keep-previous: the module's session stays open beside this one
        session = own.nbinfer(f"local --model-repository {tmp_path} --device cpu --keep-previous")
        assert session.server is not None and session.server.device == "cpu"
        assert session.server.model_repository == str(tmp_path)
        models = own.nbinfer("models")
        row = models[models["name"] == "triple"]
        assert row["state"].tolist() == ["READY"]
        assert "iris" in set(models["name"])  # the demo models beside it
        out = session.infer("triple", {"x": np.array([1.0, 2.0], dtype=np.float32)})
        np.testing.assert_array_equal(out.as_numpy("y"), [3.0, 6.0])
    finally:
        assert own.session is session and magics(shell).session is session  # the newest
        assert before.server.running  # kept
        own.nbinfer("stop")
    assert own.session is before and session._closed  # back to the module's session


def test_browse_returns_the_model_browser(shell: InteractiveShell) -> None:
    browser = shell.run_line_magic("nbinfer", "browse")
    try:
        assert isinstance(browser, nbinfer.ModelBrowser)
        assert browser.session is magics(shell).session  # the magics' session
    finally:
        browser.close()


def test_nbinfer_errors_show_traceback_then_a_what_to_try_card(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    result = shell.run_cell('%%infer nope\n{"x": [1]}\n')
    assert isinstance(result.error_in_exec, nbinfer.ModelNotFoundError)
    out = capsys.readouterr().out
    assert "ModelNotFoundError" in out and "Traceback" in out  # the usual traceback
    assert "What to try" in out and "%nbinfer models" in out  # then the card (text/plain here)


def test_magics_without_a_session_say_how_to_start_one() -> None:
    # a fresh process: this one has the module's session open
    script = """
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "nbinfer")
ip.run_line_magic("nbinfer", "")
for command in ("status", "models"):
    try:
        ip.run_line_magic("nbinfer", command)
    except UsageError as exc:
        print("UsageError:", exc)
"""
    out = _python(script)
    assert "The nbinfer magics have no session" in out
    assert out.count("UsageError: no open nbinfer session") == 2, out
    assert "`session = nbinfer.Session()`" in out and "`%nbinfer local`" in out


def _python(script: str) -> str:
    """Run ``script`` in a fresh interpreter (this worktree's nbinfer); its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=100,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


_NOTEBOOK_SESSION = """
import json
import nbinfer
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

ip = InteractiveShell.instance()
ran = ip.run_cell("import nbinfer\\nsession = nbinfer.Session(device='cpu')\\nsession",
                  store_history=True)
ran.raise_error()
ip.run_line_magic("load_ext", "nbinfer")
session = ip.user_ns["session"]
models = ip.run_line_magic("nbinfer", "models")
print("MODELS", {"iris", "digits"} <= set(models["name"]))
print("STATUS", ip.run_line_magic("nbinfer", "status") is session)
ip.run_line_magic("nbinfer", "")
print("---")
again = ip.run_line_magic("nbinfer", "local")
print("REUSED", again is session, [s.url for s in nbinfer.sessions()] == [session.url])
result = ip.run_cell_magic("infer", "iris -o probs", '{"input": [[5.1, 3.5, 1.4, 0.2]]}')
print("INFER", result.as_numpy("probabilities").shape)
grpc = ip.run_cell_magic("infer", "iris --grpc", '{"input": [[5.1, 3.5, 1.4, 0.2]]}')
print("GRPC", grpc.as_numpy("probabilities").shape)
remote = nbinfer.Session(session.url, token=session.token)
ip.user_ns["remote"] = remote
print("NEWEST", ip.run_line_magic("nbinfer", "status") is remote)
ip.run_line_magic("nbinfer", "")
print("---")
ip.run_line_magic("nbinfer", "use session")
print("USED", ip.run_line_magic("nbinfer", "status") is session)
ip.run_cell("import json")
for bad in ("use nothing_here", "use json", "use"):
    try:
        ip.run_line_magic("nbinfer", bad)
    except UsageError as exc:
        print("UsageError:", exc)
newer = nbinfer.Session(device="cpu", demo=False)  # replaces `session` (and its server)
print("NEWER", ip.run_line_magic("nbinfer", "status") is newer, session.server.running)
ip.run_line_magic("nbinfer", "stop")
print("STOPPED", newer.server.running, ip.run_line_magic("nbinfer", "status") is remote)
"""


def test_magics_use_the_session_the_notebook_created() -> None:
    """After `session = nbinfer.Session()` and `%load_ext nbinfer`, the magics use it."""
    out = _python(_NOTEBOOK_SESSION)
    lines = out.splitlines()
    assert "MODELS True" in lines, out
    assert "STATUS True" in lines, out
    first, second, _ = out.split("---\n")
    # `%nbinfer` says which session, where, how it speaks, which variable, and how to switch
    assert "The nbinfer magics use http://127.0.0.1:" in first
    assert "(local server, http) (the variable session)" in first
    assert "the most recently created open session" in first
    assert "`%nbinfer use NAME`" in first and "`%nbinfer connect URL`" in first
    # `%nbinfer local` reuses the open local session and says so: still one server
    assert "%nbinfer local: reusing the open local session http://127.0.0.1:" in second
    assert "no second server started" in second
    assert "REUSED True True" in lines, out
    assert "INFER (1, 3)" in lines and "GRPC (1, 3)" in lines, out
    # a newer session takes over; `%nbinfer` says so, `%nbinfer use NAME` switches back
    assert "NEWEST True" in lines, out
    assert "(remote server, http) (the variable remote)" in second
    assert "1 other open session: nbinfer.sessions() lists them" in second
    assert "The nbinfer magics now use http://127.0.0.1:" in out
    assert "USED True" in lines, out
    assert "UsageError: %nbinfer use: no variable 'nothing_here' in the notebook" in lines
    assert "UsageError: %nbinfer use: json is a module, not an nbinfer.Session" in lines
    assert "UsageError: %nbinfer use needs a variable name, e.g. %nbinfer use session" in lines
    assert "NEWER True False" in lines, out
    assert "%nbinfer stop: closed the session http://127.0.0.1:" in out
    assert "STOPPED False True" in lines, out


def test_a_real_kernel_loads_the_extension_and_gets_html(tmp_path: Any) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "%load_ext nbinfer",
        "%nbinfer local --device cpu",
        "%%infer iris -o probs\n" + IRIS_JSON,
        "probs.as_numpy('probabilities').shape",
        '%%infer nope\n{"x": [1]}',
        "%nbinfer stop",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = [cell.outputs for cell in nb.cells]
    assert not any(o.output_type == "error" for o in outputs[0]), outputs[0]
    session_html = outputs[1][0]["data"]["text/html"]
    assert "Session" in session_html and "iris" in session_html
    result_html = outputs[2][0]["data"]["text/html"]
    assert "InferResult" in result_html and "probabilities" in result_html
    assert outputs[3][0]["data"]["text/plain"] == "(2, 3)"
    kinds = [o.output_type for o in outputs[4]]
    assert "error" in kinds and "display_data" in kinds, kinds
    card = next(o for o in outputs[4] if o.output_type == "display_data")
    assert "What to try" in card["data"]["text/html"]
