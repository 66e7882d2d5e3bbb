"""Outputs that survive saving: a progress bar leaves a summary line, widgets a static copy.

A notebook runs in a real kernel (nbclient): the chunked ``session.infer`` leaves one output, the
summary line in text and HTML, and no widget view for its bar; a failed and an interrupted run
say how far they got; the model browser's output carries a static copy. ``nbconvert`` of the
saved notebook shows all of it and never a bar stuck at ``0%|``. In a terminal (plain Python and
terminal IPython) the bar's line is replaced by the summary on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbinfer import Session
from nbinfer.interop._inflight import progress_bar, summary_line
from nbinfer.notebook.widgets import ModelBrowser, static_bundle

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SUMMARY = re.compile(r"iris: 300,000 rows in [\d.]+ s \([\d.]+ [kMG]? ?rows/s\)")

CELLS = [
    'import numpy as np, pandas as pd\nimport nbinfer\nsession = nbinfer.Session(device="cpu")',
    # 1: a chunked run: a bar while it runs, the summary after
    "rng = np.random.default_rng(0)\n"
    'frame = pd.DataFrame(rng.random((300_000, 4), dtype=np.float32), columns=list("abcd"))\n'
    'out = session.infer("iris", frame)',
    # 2: a run whose fourth request fails
    textwrap.dedent(
        """\
        import concurrent.futures
        from nbinfer.interop._inflight import progress_bar, run

        def submit(key):
            done = concurrent.futures.Future()
            if key == 3:
                done.set_exception(RuntimeError("request 3 failed"))
            else:
                done.set_result(key)
            return done

        bar = progress_bar(600, show=True, unit="rows", desc="demo")
        try:
            run(((i, i, 100) for i in range(6)), submit, lambda k, r: None, concurrency=1, bar=bar)
        except RuntimeError as exc:
            print("caught:", exc)
        """
    ),
    # 3: the stop button (SIGINT to the kernel) in the middle of a slow run
    textwrap.dedent(
        """\
        import os, pathlib, signal, threading, time
        from nbinfer.server.model import Model

        started = pathlib.Path("started").resolve()  # in the notebook's folder (the test's tmp)

        class Pause(Model):
            name = "pause"
            inputs = (("x", "FP32", [-1]),)
            outputs = (("y", "FP32", [-1]),)

            def predict(self, inputs, context, started=str(started)):
                pathlib.Path(started).touch()  # the first request is in: the bar is showing
                end = time.monotonic() + 30
                while time.monotonic() < end and not context.cancelled:
                    time.sleep(0.01)
                return {"y": inputs["x"]}

        def stop_button():
            while not started.exists():
                time.sleep(0.02)
            os.kill(os.getpid(), signal.SIGINT)

        session.serve(Pause())
        threading.Thread(target=stop_button, daemon=True).start()
        try:
            session.infer("pause", pd.DataFrame({"x": np.zeros(4, np.float32)}), batch_size=1)
        except KeyboardInterrupt:
            print("stopped")
        """
    ),
    "browser = nbinfer.browse(session)\nbrowser.wait()\nbrowser",
]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The notebook of :data:`CELLS` run by nbclient in a kernel of this interpreter, as saved."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    folder = tmp_path_factory.mktemp("saved")
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    path = folder / "saved.ipynb"
    nbformat.write(nb, path)
    return json.loads(path.read_text())


def _outputs(nb: dict[str, Any], cell: int) -> list[dict[str, Any]]:
    return list(nb["cells"][cell]["outputs"])


def test_a_chunked_infer_saves_its_summary_line_and_no_widget(executed: dict[str, Any]) -> None:
    (out,) = _outputs(executed, 1)  # one output: the bar's, replaced; no stream, no error
    state = executed["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    bars = [m["state"] for m in state.values() if m["model_name"] == "FloatProgressModel"]
    assert any(bar["value"] == 300_000 for bar in bars), bars  # a widget ran, then was replaced
    assert out["output_type"] == "display_data" and WIDGET_VIEW not in out["data"], out
    line = _text(out["data"]["text/plain"])
    assert SUMMARY.fullmatch(line), line
    assert SUMMARY.search(_text(out["data"]["text/html"])), out["data"]["text/html"]


def test_a_failed_run_says_how_far_it_got(executed: dict[str, Any]) -> None:
    outs = _outputs(executed, 2)
    shown = [o for o in outs if o["output_type"] == "display_data"]
    assert len(shown) == 1 and WIDGET_VIEW not in shown[0]["data"], outs
    line = _text(shown[0]["data"]["text/plain"])
    assert re.fullmatch(r"demo: failed \(RuntimeError\) after 300 of 600 rows, .*", line), line
    assert "caught: request 3 failed" in "".join(_text(o.get("text", "")) for o in outs)


def test_an_interrupted_run_says_so(executed: dict[str, Any]) -> None:
    outs = _outputs(executed, 3)
    shown = [o for o in outs if o["output_type"] == "display_data"]
    assert len(shown) == 1 and WIDGET_VIEW not in shown[0]["data"], outs
    line = _text(shown[0]["data"]["text/plain"])
    assert re.fullmatch(r"pause: interrupted after 0 of 4 rows, .*", line), line
    assert "stopped" in "".join(_text(o.get("text", "")) for o in outs)


def test_the_browser_output_carries_a_static_copy(executed: dict[str, Any]) -> None:
    (out,) = _outputs(executed, 4)
    data = out["data"]
    assert WIDGET_VIEW in data  # live in JupyterLab
    assert _text(data["text/plain"]).startswith("<ModelBrowser http://127.0.0.1:")
    html = _text(data["text/html"])
    assert "Model browser" in html and "iris" in html and "digits" in html, html[-2000:]
    assert "<script" not in html


@pytest.fixture(scope="module")
def converted(executed: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each file's HTML from ``jupyter nbconvert --to html`` (the real command, one run for both)
    of the saved notebook: ``"state"`` as nbclient stores it, with widget state; ``"plain"``
    without, as JupyterLab saves by default and as GitHub shows it."""
    folder = tmp_path_factory.mktemp("converted")
    plain = json.loads(json.dumps(executed))
    plain["metadata"].pop("widgets", None)
    for name, nb in (("state", executed), ("plain", plain)):
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(folder)]
        + [str(folder / f"{name}.ipynb") for name in ("state", "plain")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return {name: (folder / f"{name}.html").read_text() for name in ("state", "plain")}


def test_nbconvert_shows_the_summaries_and_the_browser_copy_without_widget_state(
    converted: dict[str, str],
) -> None:
    html = converted["plain"]  # no widget state: as JupyterLab saves by default
    assert SUMMARY.search(html) and "demo: failed (RuntimeError) after 300 of 600 rows" in html
    assert "pause: interrupted after 0 of 4 rows" in html
    assert "0%|" not in html and "widget-hprogress" not in html
    assert "Model browser" in html and "a static copy" in html and WIDGET_VIEW not in html


def test_nbconvert_with_widget_state_shows_the_summary_and_draws_only_the_browser(
    executed: dict[str, Any], converted: dict[str, str]
) -> None:
    assert "widgets" in executed["metadata"]  # nbclient (and so the docs build) stores state
    html = converted["state"]
    assert SUMMARY.search(html) and "0%|" not in html
    views = re.findall(r'"model_id": "(\w+)"', html.split("</style>")[-1])
    assert views == [executed["cells"][4]["outputs"][0]["data"][WIDGET_VIEW]["model_id"]]


# -- terminals ------------------------------------------------------------------------------------


def test_a_text_bar_is_replaced_by_its_summary_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bar = progress_bar(2_000, show=True, unit="rows", desc="iris", unit_scale=True)
    assert bar is not None
    bar.update(2_000)
    bar.close()
    err = capsys.readouterr().err
    last = re.split(r"[\r\n]", err.rstrip("\n"))[-1]  # after the bar's line was cleared (\r)
    assert re.fullmatch(r"iris: 2,000 rows in [\d.]+ s \([\d.]+ [kMG]? ?rows/s\)", last), err
    assert bar.summary == last
    bar.close()  # idempotent: nothing more is written
    assert capsys.readouterr().err == ""


def test_close_names_the_exception_that_stopped_a_run_and_only_that(
    capsys: pytest.CaptureFixture[str],
) -> None:
    done = progress_bar(4, show=True, unit="setting", desc="profile iris")
    assert done is not None
    try:
        raise LookupError("the user's own, handled")
    except LookupError:
        done.update(4)
        done.close()  # complete: a success, whatever the caller is handling
    assert done.summary is not None and done.summary.startswith("profile iris: 4 settings in")
    stopped = progress_bar(4, show=True, unit="setting", desc="profile iris")
    assert stopped is not None
    with pytest.raises(TimeoutError):
        try:
            stopped.update(1)
            raise TimeoutError("setting 2")
        finally:
            stopped.close()  # as profile() does: the propagating exception is why
    assert stopped.summary is not None
    assert stopped.summary.startswith("profile iris: failed (TimeoutError) after 1 of 4 settings")
    capsys.readouterr()


def test_terminal_ipython_prints_the_summary(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    code = (
        "import numpy as np, pandas as pd, nbinfer\n"
        "with nbinfer.Session() as session:\n"
        "    frame = pd.DataFrame(np.zeros((3_000, 4), np.float32), columns=list('abcd'))\n"
        "    session.infer('iris', frame, batch_size=1_000)\n"
    )
    script = tmp_path / "run.ipy"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TERM": "dumb"},
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^iris: 3,000 rows in [\d.]+ s \(.+rows/s\)$", done.stderr, re.M), done.stderr


# -- the summary line -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("iris", 1_000_000, 1_000_000, "rows", 0.47),
            "iris: 1,000,000 rows in 0.47 s (2.1 M rows/s)",
        ),
        (("classify", 64, 64, "img", 0.5), "classify: 64 img in 0.50 s (128 img/s)"),
        (("classify", 3, 3, "img", 0.5), "classify: 3 img in 0.50 s (6.0 img/s)"),
        (
            ("profile iris", 4, 4, "setting", 30.1),
            "profile iris: 4 settings in 30.1 s (7.5 s/setting)",
        ),
        (("iris", 5, 5, "rows", 83.0), "iris: 5 rows in 1 min 23 s (16.6 s/row)"),
        (("iris", 0, 10, "rows", 0.1), "iris: stopped after 0 of 10 rows, 0.10 s"),
    ],
)
def test_summary_line_reads_like_a_sentence(args: tuple[Any, ...], line: str) -> None:
    assert summary_line(*args) == line


def test_summary_line_names_why_a_run_stopped() -> None:
    assert summary_line("iris", 300_000, 1_000_000, "rows", 0.2, KeyboardInterrupt()) == (
        "iris: interrupted after 300,000 of 1,000,000 rows, 0.20 s (1.5 M rows/s)"
    )
    assert summary_line("iris", 3, 9, "rows", 2.0, ValueError("x")).startswith(
        "iris: failed (ValueError) after 3 of 9 rows, 2.00 s"
    )
    assert summary_line("iris", 3, 9, "rows", 2.0, asyncio.CancelledError()).startswith(
        "iris: cancelled after 3 of 9 rows"
    )


# -- the static copy of a widget ------------------------------------------------------------------


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


def test_the_static_copy_follows_what_the_browser_shows(session: Session) -> None:
    browser = ModelBrowser(session, background=False)
    try:
        before = browser._repr_mimebundle_()
        assert WIDGET_VIEW in before and "iris" in before["text/html"]
        assert "Select a model on the left" in before["text/html"]
        browser.select("iris")
        after = browser._repr_mimebundle_()["text/html"]
        assert "<b>\u25cf iris</b>" in after  # the selected model, in the list
        assert "Try it" in after and "FP32" in after  # the tabs and the model's inputs
        assert "Select a model on the left" not in after  # hidden panes stay out
        assert "<button" not in after
        browser.run()  # the form's values and the answer are in the copy too
        done = browser._repr_mimebundle_()["text/html"]
        assert "answered in" in done and "<code>" in done
    finally:
        browser.close()


def test_static_bundle_keeps_the_widget_view_and_escapes_labels() -> None:
    widgets = pytest.importorskip("ipywidgets")
    box = widgets.VBox(
        [
            widgets.HTML("<b>hello</b>"),
            widgets.Select(options=["<x>", "y"], value="y"),
            widgets.FloatText(value=5.1, description="sepal"),
            widgets.Button(description="Run"),
            widgets.HTML("hidden", layout=widgets.Layout(display="none")),
        ]
    )
    try:
        bundle = static_bundle(box, "<Box>")
        assert bundle[WIDGET_VIEW]["model_id"] == box.model_id
        assert "<b>hello</b>" in bundle["text/html"] and "<li>&lt;x&gt;</li>" in bundle["text/html"]
        assert "<li><b>y</b></li>" in bundle["text/html"]
        assert "sepal <code>5.1</code>" in bundle["text/html"]
        assert "Run" not in bundle["text/html"] and "hidden" not in bundle["text/html"]
        assert bundle["text/plain"].startswith("<Box> (a live widget")
    finally:
        box.close()
