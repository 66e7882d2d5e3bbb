"""What nbinfer leans on in third-party code, pinned as contracts that name the dependency.

A silent upgrade (cloudpickle 3.1.3 dropping ``co_filename``) once broke a promise with no test
pointing at the cause. Each behaviour below is one nbinfer feature relies on; a contract test
fails with ``<dependency> <version> no longer ...: <detail>`` so the failure says which release
changed what. ``test_every_leaned_on_dependency_has_a_contract`` keeps the list complete, and
``test_every_declared_dependency_is_either_leaned_on_or_exercised`` notices a new dependency.
"""

from __future__ import annotations

import functools
import io
import linecache
import re
import sys
import traceback
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, requires, version
from typing import Any

import pytest

#: dependency -> the contract tests that pin what nbinfer relies on from it.
CONTRACTS: dict[str, list[str]] = {}

#: The features that lean on third-party behaviour (issue 24): each needs a contract here.
LEANED_ON = {
    "cloudpickle": "serve() ships notebook code to the local server",
    "linecache": "a model traceback shows the notebook cell's source line",
    "tqdm": "progress bars of chunked DataFrame / image runs (a widget in notebooks)",
    "ipywidgets": "the model browser",
    "anywidget": "the model browser's sketch pad",
}

#: The other runtime dependencies: what nbinfer uses them for is its own behaviour, which the
#: suites exercise end to end (a broken release fails those tests, not a contract here).
EXERCISED = {
    "numpy": "every tensor (the whole suite)",
    "ml-dtypes": "BF16 tensors (tests/protocol, tests/server)",
    "protobuf": "the gRPC messages (tests/protocol/test_proto_compat.py, the gRPC suites)",
    "grpcio": "the gRPC client and server (tests/client, tests/server, tests/peers)",
    "uvicorn": "the HTTP server (tests/server)",
    "httptools": "the HTTP parser of the server and of the sync client's socket engine "
    "(tests/server/test_loop_and_caps.py, tests/transports/test_socket_engine.py)",
    "uvloop": "the server's event loop (tests/server)",
    "orjson": "JSON bodies (tests/protocol, tests/server/test_rest_conformance.py)",
    "pycurl": "the sync HTTP engine (tests/test_pycurl_range.py: oldest and newest allowed)",
    "aiohttp": "the async HTTP engine (tests/client, tests/transports)",
    "pandas": "DataFrames in and out (tests/interop, tests/session)",
    "pillow": "image preprocessing (tests/interop/test_images.py)",
    "matplotlib": "plots and the profile PNG (tests/notebook, tests/test_profiling.py)",
}


def _declared() -> set[str]:
    """The runtime dependencies nbinfer declares (pyproject.toml, as installed), normalised."""
    names = set()
    for requirement in requires("nbinfer") or []:
        if "extra ==" in requirement:
            continue  # an optional extra's
        name = re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]
        names.add(re.sub(r"[-_.]+", "-", name).lower())
    return names


def _version_of(dependency: str) -> str:
    if dependency == "linecache":
        return f"(Python {sys.version.split()[0]}, IPython {_version_of('ipython')})"
    try:
        return version(dependency)
    except PackageNotFoundError:
        return "(not installed)"


def contract(dependency: str, promise: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test as a contract on ``dependency``; its failure names the dependency."""

    def wrap(test: Callable[..., Any]) -> Callable[..., Any]:
        CONTRACTS.setdefault(dependency, []).append(test.__name__)

        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return test(*args, **kwargs)
            except AssertionError as exc:
                raise AssertionError(
                    f"{dependency} {_version_of(dependency)} no longer {promise}: {exc}"
                ) from exc

        return run

    return wrap


# -- cloudpickle ---------------------------------------------------------------------------------


@contract("cloudpickle", "lets a Pickler subclass wrap the reduction of code objects")
def test_code_objects_keep_their_origin_through_the_control_channel_pickler() -> None:
    import cloudpickle

    from nbinfer.server.pickling import dumps

    namespace: dict[str, Any] = {}
    filename = "<cell-for-contract-test>"
    source = "def f(x):\n    y = x + 1\n    return {}[y]\n"
    exec(compile(source, filename, "exec"), namespace)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    fn = namespace["f"]
    payload = dumps(fn)
    del linecache.cache[filename]  # the server process has never seen the cell
    loaded = cloudpickle.loads(payload)
    assert loaded.__code__.co_filename == filename, loaded.__code__.co_filename
    assert loaded.__code__.co_firstlineno == 1
    with pytest.raises(KeyError) as info:
        loaded(1)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert (frames[-1].filename, frames[-1].lineno, frames[-1].line) == (
        filename,
        3,
        "return {}[y]",
    ), frames[-1]


# -- linecache (as IPython fills it) ----------------------------------------------------------


@contract("linecache", "holds a notebook cell's source under the cell's code filename")
def test_ipython_registers_each_cell_in_linecache() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("def contract_fn():\n    return 1 + 1\n", store_history=True).raise_error()
    code = shell.user_ns["contract_fn"].__code__
    assert linecache.getline(code.co_filename, 2).strip() == "return 1 + 1", code.co_filename


# -- tqdm -----------------------------------------------------------------------------------------


@contract("tqdm", "builds a text bar from tqdm.auto and an ipywidgets bar from tqdm.notebook")
def test_tqdm_bars_take_our_arguments_in_both_faces() -> None:
    from tqdm.auto import tqdm as auto_bar
    from tqdm.notebook import tqdm as notebook_bar

    from nbinfer.interop._inflight import progress_bar

    bar = progress_bar(10, show=True, unit="row", desc="iris", unit_scale=True)
    assert bar is not None and isinstance(bar.bar, auto_bar), type(bar)
    bar.close()
    stream = io.StringIO()
    text = auto_bar(total=4, unit="row", desc="iris", leave=True, file=stream)
    text.update(4)
    text.close()
    assert "iris" in stream.getvalue() and "4/4" in stream.getvalue(), stream.getvalue()
    # display=False: we show the container ourselves, with a display id (replaced when done)
    widget = notebook_bar(
        total=4, unit="row", unit_scale=True, desc="iris", leave=False, mininterval=0, display=False
    )
    assert any(c.__module__ == "tqdm.notebook" for c in type(widget).__mro__)
    try:
        import ipywidgets

        assert isinstance(widget.container, ipywidgets.HBox), type(widget.container)
        progress = [c for c in widget.container.children if isinstance(c, ipywidgets.FloatProgress)]
        assert progress and progress[0].max == 4, widget.container.children
        widget.update(3)
        assert progress[0].value == 3
    finally:
        widget.close()


# -- ipywidgets -----------------------------------------------------------------------------------


@contract("ipywidgets", "draws a widget view with a text fallback and calls value observers")
def test_widgets_render_and_call_observers() -> None:
    import ipywidgets

    select = ipywidgets.Select(options=["iris", "digits"], value="iris")
    seen: list[Any] = []
    select.observe(lambda change: seen.append(change["new"]), names="value")
    select.value = "digits"
    assert seen == ["digits"], seen
    bundle = select._repr_mimebundle_()
    view = bundle.get("application/vnd.jupyter.widget-view+json", {})
    assert view.get("model_id") == select.model_id, bundle
    assert "text/plain" in bundle, bundle
    clicked: list[int] = []
    button = ipywidgets.Button(description="load")
    button.on_click(lambda _b: clicked.append(1))
    button.click()
    assert clicked == [1]


# -- anywidget ------------------------------------------------------------------------------------


@contract("anywidget", "sends our ESM module and syncs tagged traits to the front end")
def test_anywidget_sends_our_module_and_syncs_traits() -> None:
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install anywidget)")
    from nbinfer.notebook.sketch import SketchPad

    pad = SketchPad(size=96, pen=12)
    try:
        state = pad.get_state()
        assert "export default" in str(state.get("_esm")), sorted(state)
        assert (state.get("size"), state.get("pen"), state.get("png")) == (96, 12, ""), state
        bundle = pad._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle  # (data, metadata) from anywidget
        view = data.get("application/vnd.jupyter.widget-view+json", {})
        assert view.get("model_id") == pad.model_id, bundle
        pad.set_state({"png": "data:image/png;base64,AA=="})  # as a message from the front end
        assert pad.png == "data:image/png;base64,AA==", pad.png
    finally:
        pad.close()


# -- the list itself ------------------------------------------------------------------------------


def test_every_leaned_on_dependency_has_a_contract() -> None:
    missing = {dep: why for dep, why in LEANED_ON.items() if not CONTRACTS.get(dep)}
    assert not missing, f"features leaning on these dependencies have no contract: {missing}"


def test_every_declared_dependency_is_either_leaned_on_or_exercised() -> None:
    # a dependency added to pyproject.toml fails here until it is classified: a contract on the
    # behaviour we lean on (LEANED_ON), or what of ours exercises it (EXERCISED)
    known = set(EXERCISED) | (set(LEANED_ON) - {"linecache"})  # linecache: the stdlib
    declared = _declared()
    assert declared - known == set(), f"declared but not classified: {sorted(declared - known)}"
    assert known - declared == set(), f"classified but not declared: {sorted(known - declared)}"


def test_a_broken_contract_names_the_dependency_and_its_version() -> None:
    @contract("cloudpickle", "keeps something")
    def broken() -> None:
        raise AssertionError("detail")

    CONTRACTS["cloudpickle"].remove("broken")
    with pytest.raises(AssertionError) as info:
        broken()
    assert (
        str(info.value) == f"cloudpickle {version('cloudpickle')} no longer keeps something: detail"
    )
