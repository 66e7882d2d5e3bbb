"""Notebook habits: re-run cells, single samples, one array for one input, model tracebacks."""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest

import nbinfer
from nbinfer.errors import InvalidInputError
from nbinfer.session import Session
from tests.ports import free_port

RERUN = textwrap.dedent(
    """
    from IPython.core.interactiveshell import InteractiveShell
    from tests.session.test_session_replace import server_children

    shell = InteractiveShell.instance()
    for _ in range(5):
        result = shell.run_cell(%r, store_history=True)
        result.raise_error()
    print(len(server_children()), len(shell.user_ns["nbinfer"].sessions()))
    """
)


@pytest.mark.parametrize(
    "cell",
    [
        "import nbinfer\\nsession = nbinfer.Session(demo=False)",
        # displayed (IPython's Out history keeps every one alive): the shared session is reused;
        # a displayed plain Session() is tests/session/test_session_replace.py's
        "import nbinfer\\nsession = nbinfer.Session.shared(demo=False)\\nsession",
    ],
    ids=["unreferenced-session-stops-its-server", "shared-session-reused"],
)
def test_rerunning_a_session_cell_five_times_leaves_one_server(cell: str) -> None:
    code = RERUN % cell.replace("\\n", "\n")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.splitlines()[-1].split() == ["1", "1"], out.stderr


def test_sessions_lists_open_sessions_and_forgets_closed_ones() -> None:
    with Session(keep_previous=True, demo=False) as first:
        second = Session(first.url, token=first.token)
        listed = nbinfer.sessions()
        assert listed.index(first) < listed.index(second)
        second.close()
        assert second not in nbinfer.sessions()
    assert first not in nbinfer.sessions()
    assert first.server is not None and not first.server.running


def test_shared_session_is_one_per_options_and_restarts_after_close() -> None:
    shared = Session.shared(demo=False)
    try:
        assert Session.shared(demo=False) is shared
        other = Session.shared(demo=False, protocol="grpc")
        assert other is not shared and other.protocol == "grpc"
        other.close()
    finally:
        shared.close()
    again = Session.shared(demo=False)
    try:
        assert again is not shared and again.server is not None and again.server.running
    finally:
        again.close()


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(device="cpu") as s:
        yield s


DIGIT = np.random.default_rng(0).random((8, 8), dtype=np.float32)
FLOWER = [5.1, 3.5, 1.4, 0.2]


def test_one_8x8_image_for_a_batch_input_is_one_sample_and_the_result_one_row(
    session: Session,
) -> None:
    one = session.infer("digits", {"input": DIGIT})["probabilities"]
    batch = session.infer("digits", {"input": DIGIT[np.newaxis]})["probabilities"]
    assert one.shape == (10,) and batch.shape == (1, 10)
    np.testing.assert_allclose(one, batch[0])


def test_a_single_array_is_the_input_of_a_one_input_model(session: Session) -> None:
    as_dict = session.infer("iris", {"input": np.array([FLOWER] * 3, dtype=np.float32)})
    as_array = session.infer("iris", np.array([FLOWER] * 3, dtype=np.float32))
    np.testing.assert_array_equal(as_dict["probabilities"], as_array["probabilities"])


def test_a_vector_for_a_minus_one_k_input_is_one_row(session: Session) -> None:
    probabilities = session.infer("iris", FLOWER)["probabilities"]
    assert probabilities.shape == (3,) and probabilities.argmax() == 0  # setosa
    frame = session.infer("iris", FLOWER, as_frame=True)
    assert len(frame) == 1 and frame.iloc[0].idxmax() == "probabilities[setosa]"


def test_a_pil_image_is_prepared_like_classify_does(session: Session) -> None:
    from PIL import Image

    image = Image.fromarray((DIGIT * 255).astype(np.uint8))
    scores = session.infer("digits", image)["probabilities"]
    top = session.classify("digits", image, top_k=1)
    assert scores.shape == (10,)
    assert top["class"].iloc[0] == scores.argmax()


def test_one_sample_rule_says_which_shape_was_expected(session: Session) -> None:
    a = np.arange(16, dtype=np.float32)
    with pytest.raises(InvalidInputError, match=r"has 2 inputs \(INPUT0, INPUT1\)"):
        session.infer("add_sub", a)
    with pytest.raises(InvalidInputError, match=r"iris needs 4 values per sample, got 3.*\[-1, 4"):
        session.infer("iris", [1.0, 2.0, 3.0])
    with pytest.raises(InvalidInputError, match="single samples but"):
        session.infer("add_sub", {"INPUT0": a, "INPUT1": a[np.newaxis]})
    both = session.infer("add_sub", {"INPUT0": a, "INPUT1": a})
    np.testing.assert_array_equal(both["OUTPUT0"], 2 * a)


def test_ainfer_follows_the_same_one_sample_rule(session: Session) -> None:
    result = asyncio.run(session.ainfer("iris", FLOWER))
    assert result["probabilities"].shape == (3,)


def test_serve_takes_the_conventional_ports_when_free_and_says_when_it_falls_back() -> None:
    from nbinfer.server.__main__ import choose_ports

    http, grpc = free_port(), free_port()
    args = argparse.Namespace(host="127.0.0.1", http_port=None, grpc_port=None)
    assert choose_ports(args, (http, grpc)) == []
    assert (args.http_port, args.grpc_port) == (http, grpc)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", http))
        taken.listen()
        args = argparse.Namespace(host="127.0.0.1", http_port=None, grpc_port=None)
        (notice,) = choose_ports(args, (http, grpc))
    assert (args.http_port, args.grpc_port) == (0, grpc)
    assert f"HTTP port {http} is in use; serving HTTP on a free port instead" in notice
    explicit = argparse.Namespace(host="127.0.0.1", http_port=0, grpc_port=1234)
    assert choose_ports(explicit, (http, grpc)) == [] and explicit.grpc_port == 1234


def test_session_keeps_free_ports(session: Session) -> None:
    assert session.server is not None
    assert not session.server.http_url.endswith(":8000")


def _fails_on_purpose(x: np.ndarray) -> np.ndarray:
    doubled = x * 2
    raise ValueError(f"cannot handle {doubled.shape}")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_failing_served_function_raises_with_its_own_traceback(
    session: Session, protocol: str
) -> None:
    session.serve(
        _fails_on_purpose,
        name="fails",
        inputs=[("x", "FP32", [-1])],
        outputs=[("y", "FP32", [-1])],
    )
    assert session.server is not None
    url = session.server.http_url if protocol == "http" else session.server.grpc_url
    client = nbinfer.Client(url, auth=session.token)
    with client, pytest.raises(nbinfer.InferenceError) as info:
        client.infer("fails", {"x": np.ones(3, dtype=np.float32)})
    error = info.value
    assert error.message == "model 'fails' failed: ValueError: cannot handle (3,)"
    tb = error.model_traceback
    assert tb is not None and tb.startswith("Model traceback (most recent call last):")
    line = _fails_on_purpose.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}, in _fails_on_purpose' in tb
    assert 'raise ValueError(f"cannot handle {doubled.shape}")' in tb
    assert tb.endswith("ValueError: cannot handle (3,)")
    assert "dataplane.py" not in tb and "concurrent/futures" not in tb  # only the model's frames
    assert str(error) == f"{error.message}\n\n{tb}"


NOTEBOOK_TRACEBACK = textwrap.dedent(
    """
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cells = [
        "import numpy as np, nbinfer\\nsession = nbinfer.Session(demo=False)",
        "def bad(x: np.ndarray) -> np.ndarray:\\n    scale = 3\\n"
        "    return x / (scale - 3) + {}['k']",
        "session.serve(bad, inputs=[('x', 'FP32', [-1])], outputs=[('y', 'FP32', [-1])]);",
        "try:\\n    session.infer('bad', np.ones(2, np.float32))\\n"
        "except nbinfer.InferenceError as exc:\\n    error = exc",
    ]
    for cell in cells:
        shell.run_cell(cell, store_history=True).raise_error()
    print(shell.user_ns["error"].model_traceback)
    shell.user_ns["session"].close()
    """
)


def test_code_defined_in_a_notebook_cell_shows_its_source_line_in_the_traceback() -> None:
    out = subprocess.run(
        [sys.executable, "-c", NOTEBOOK_TRACEBACK],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "Model traceback (most recent call last):"
    assert lines[1].endswith(", line 3, in bad")  # the cell's own file name and line
    assert lines[2] == "    return x / (scale - 3) + {}['k']"  # from the kernel's linecache
    assert lines[-1] == "KeyError: 'k'"


def test_error_card_shows_the_model_traceback_first_and_other_servers_messages_stay() -> None:
    from nbinfer.errors import MODEL_TRACEBACK_MARKER, error_for_grpc_code, error_for_status
    from nbinfer.render.error_card import error_text, render_error

    tb = 'Model traceback (most recent call last):\n  File "f.py", line 1, in f\nKeyError: 1'
    error = error_for_status(500, f"model 'f' failed: KeyError: 1{MODEL_TRACEBACK_MARKER}{tb}")
    assert isinstance(error, nbinfer.InferenceError) and error.model_traceback == tb
    html = render_error(error)
    assert html.index("Model traceback (your code)") < html.index('class="nbi-message"')
    assert error_text(error).startswith(tb + "\n\nInferenceError: model 'f' failed: KeyError: 1")
    plain = error_for_grpc_code("INTERNAL", "Traceback (most recent call last): from Triton")
    assert plain.model_traceback is None
    assert str(plain) == "Traceback (most recent call last): from Triton"


def _scale(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x * w


def test_serve_reads_specs_off_an_example_call_and_the_error_names_the_option(
    session: Session,
) -> None:
    with pytest.raises(
        InvalidInputError, match=r"cannot infer the datatype of input 'x'.*example="
    ):
        session.serve(_scale)
    example = {"x": np.ones((2, 4), np.float32), "w": np.ones((2, 4), np.float32)}
    handle = session.serve(_scale, example=example)
    meta = handle.metadata
    assert [(s.name, s.datatype, s.shape) for s in meta.inputs] == [
        ("x", "FP32", [-1, 4]),
        ("w", "FP32", [-1, 4]),
    ]
    assert [(s.name, s.datatype, s.shape) for s in meta.outputs] == [("output", "FP32", [-1, 4])]
    out = session.infer("_scale", {"x": np.ones(4, np.float32), "w": np.full(4, 3, np.float32)})
    np.testing.assert_array_equal(out["output"], np.full(4, 3, np.float32))
