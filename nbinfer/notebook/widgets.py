"""ModelBrowser: an ipywidgets UI over a :class:`~nbinfer.Session`.

Layer: the notebook floor: ipywidgets is imported here; the session and its client are the only way
to the server (never transports or raw I/O).

``session.browse()`` returns a :class:`ModelBrowser`: the server's models with their state; for
the selected model its metadata, config, statistics, load / unload buttons and a "try it" form
built from the input specs (numbers or arrays, text for BYTES, an image upload for image-like
inputs) that runs inference and shows the result. An image classifier (one image input, labelled
scores) gets an upload and, for tiny inputs, a sketch pad (:mod:`~nbinfer.notebook.sketch`);
its Run goes through :meth:`~nbinfer.Session.classify` and shows the top classes.

It is a view over the session (every call goes through :class:`~nbinfer.Session` or its client,
never raw I/O) and it shows only what the server offers: without the ``model_repository``
extension, or with a restricted repository index, there are no load / unload buttons and the
model list holds what is known (``browse(models=[...])`` and the "open" box); without the
``statistics`` extension there is no statistics tab. Slow work (loading, inference) runs on one
background thread with a busy state, so the kernel stays free; an error in any callback is shown
in the widget.

Example::

    browser = session.browse()
    browser                      # displays the UI in a notebook
    browser.select("iris")       # the same as clicking it
"""

from __future__ import annotations

import ast
import base64
import concurrent.futures
import json
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets as W
import numpy as np

from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.notebook import display
from nbinfer.notebook.display import escape
from nbinfer.notebook.generate_try import generative_prompt, stream_into
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.tensors import Destination, as_array

if TYPE_CHECKING:
    from nbinfer.capabilities import Capabilities
    from nbinfer.client import InferResult
    from nbinfer.interop.images import ImagePlan
    from nbinfer.protocol.types import ModelMetadata, TensorSpec
    from nbinfer.session import Session

__all__ = ["ModelBrowser"]

logger = logging.getLogger("nbinfer")

#: Numeric inputs with at most this many elements get one number box per element.
SMALL_INPUT = 8
#: Array inputs up to this many elements start as a list of zeros; larger ones as the scalar 0.
LISTED_INPUT = 256
_IMAGE_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp")
#: Image classifiers whose input is at most this many pixels a side get a sketch pad (digits: 8).
SKETCH_MAX_SIDE = 32
#: Classes shown for an image classifier's result.
TOP_CLASSES = 5


# -- a copy that survives saving ---------------------------------------------------------------

#: Fields whose value the static copy shows as text.
_FIELDS = (W.Text, W.Textarea, W.FloatText, W.IntText, W.BoundedFloatText, W.BoundedIntText)


def static_bundle(widget: Any, text: str, **kwargs: Any) -> dict[str, Any]:
    """``widget``'s display bundle plus a static copy of what it shows now.

    JupyterLab draws the live widget (``application/vnd.jupyter.widget-view+json``); where the
    widget cannot be drawn (nbconvert, GitHub, nbviewer, docs pages of a notebook saved without
    widget state) the ``text/html`` copy (its HTML panes, lists, open tab, images and field
    values, with the widget's classes; no buttons) and the ``text/plain`` line ``text`` read
    instead.
    """

    def walk(w: Any) -> str:
        if getattr(w.layout, "display", None) == "none":
            return ""
        classes = escape(" ".join(getattr(w, "_dom_classes", ())))
        if isinstance(w, W.Tab):
            titles = [t or "" for t in w.titles]
            tabs = " &middot; ".join(
                f"<b>{escape(t)}</b>" if i == w.selected_index else escape(t)
                for i, t in enumerate(titles)
            )
            shown = w.children[w.selected_index] if w.selected_index is not None else None
            body = walk(shown) if shown is not None else ""
            tabs = f'<div style="opacity: 0.7; font-size: 12px">{tabs}</div>'
            return f'<div class="{classes}">{tabs}{body}</div>'
        if isinstance(w, W.Box):
            flex = "display: flex; gap: 6px; " if isinstance(w, W.HBox) else ""
            inner = "".join(walk(c) for c in w.children)
            return f'<div class="{classes}" style="{flex}">{inner}</div>' if inner else ""
        if isinstance(w, (W.HTML, W.HTMLMath)):
            return f'<div class="{classes}">{w.value}</div>' if w.value else ""
        if isinstance(w, (W.Select, W.SelectMultiple, W.Dropdown, W.RadioButtons)):
            chosen = w.value if isinstance(w.value, tuple) else (w.value,)
            items = "".join(
                f"<li><b>{escape(label)}</b></li>"
                if value in chosen
                else f"<li>{escape(label)}</li>"
                for label, value in zip(w._options_labels, w._options_values, strict=True)
            )
            return f'<ul class="{classes}" style="list-style: none; padding-left: 4px">{items}</ul>'
        if isinstance(w, W.Image) and w.value:
            data = base64.b64encode(w.value).decode()
            return f'<img class="{classes}" src="data:image/{escape(w.format)};base64,{data}">'
        if isinstance(w, _FIELDS):
            label = f"{escape(w.description)} " if w.description else ""
            return f'<span class="{classes}">{label}<code>{escape(w.value)}</code></span>'
        return ""

    bundle = dict(widget._repr_mimebundle_(**kwargs))
    note = "a live widget: run the cell in a kernel to use it"
    bundle["text/plain"] = f"{text} ({note})"
    bundle["text/html"] = (
        f'{walk(widget)}<div style="font-size: 11px; opacity: 0.7">{escape(text)}: '
        f"a static copy ({note}).</div>"
    )
    return bundle


# -- what the server offers -------------------------------------------------------------------


@dataclass
class _Row:
    name: str
    version: str = ""
    state: str = ""
    reason: str = ""

    @property
    def ready(self) -> bool:
        return self.state.upper() == "READY"


# -- the try-it form: one editor per input ----------------------------------------------------


def _concrete(shape: Sequence[int]) -> list[int]:
    """The shape with every variable dimension set to 1."""
    return [1 if d < 0 else int(d) for d in shape]


def _fit(name: str, shape: Sequence[int], size: int) -> list[int]:
    """A shape for ``size`` elements: the last variable dimension takes what is left."""
    dims = _concrete(shape)
    variable = [i for i, d in enumerate(shape) if d < 0]
    fixed = int(np.prod(dims)) if dims else 1
    if variable:
        fixed_part = int(np.prod([d for i, d in enumerate(dims) if i != variable[-1]] or [1]))
        if size % fixed_part == 0:
            dims[variable[-1]] = size // fixed_part
            return dims
    elif size == fixed:
        return dims
    raise InvalidInputError(
        f"input {name!r}: {size} values do not fit its shape {list(shape)}", tensor=name
    )


def _image_layout(spec: TensorSpec) -> tuple[str, int, int, int] | None:
    """``(layout, channels, height, width)`` when ``spec`` looks like an image (batch).

    Stricter than :func:`~nbinfer.interop.images.plan_images`: a form offers an upload only
    where the channel axis is unambiguous, and a plain array editor otherwise.
    """
    if spec.datatype not in ("UINT8", "FP32"):
        return None
    shape = list(spec.shape)
    if len(shape) == 4:
        body = shape[1:]
    elif len(shape) == 3 and all(d > 0 for d in shape):
        body = shape
    else:
        return None
    channels = (1, 3, 4)
    if body[-1] in channels and body[0] not in channels:
        return "NHWC", body[-1], body[0], body[1]
    if body[0] in channels and body[-1] not in channels:
        return "NCHW", body[0], body[1], body[2]
    return None


class _Editor:
    """One input of the try-it form: a widget and how to read a tensor from it."""

    def __init__(self, spec: TensorSpec, widget: Any) -> None:
        self.spec = spec
        self.widget = widget

    def value(self) -> np.ndarray[Any, Any]:
        raise NotImplementedError


class _NumbersEditor(_Editor):
    """One number box per element (small fixed-size numeric inputs)."""

    def __init__(self, spec: TensorSpec) -> None:
        self.shape = _concrete(spec.shape)
        self.dtype = numpy_dtype(spec.datatype)
        size = int(np.prod(self.shape)) if self.shape else 1
        if spec.datatype == "BOOL":
            boxes = [W.Checkbox(value=False, indent=False) for _ in range(size)]
        elif self.dtype.kind in "iu":
            boxes = [W.IntText(value=0) for _ in range(size)]
        else:
            boxes = [W.FloatText(value=0.0) for _ in range(size)]
        for i, box in enumerate(boxes):
            box.layout = W.Layout(width="92px")
            box.tooltip = f"{spec.name}[{i}]"
        self.boxes = boxes
        super().__init__(spec, W.HBox(boxes, layout=W.Layout(flex_flow="row wrap")))

    def value(self) -> np.ndarray[Any, Any]:
        values = [b.value for b in self.boxes]  # the one conversion rule: 1e39 is no FP32
        return as_array(values, self.spec.datatype, Destination(tensor=self.spec.name))[0].reshape(
            self.shape
        )


class _ArrayEditor(_Editor):
    """A text area holding a (nested) list or a scalar that fills the shape."""

    def __init__(self, spec: TensorSpec) -> None:
        self.shape = _concrete(spec.shape)
        self.dtype = numpy_dtype(spec.datatype)
        size = int(np.prod(self.shape)) if self.shape else 1
        start = json.dumps(np.zeros(self.shape).tolist()) if size <= LISTED_INPUT else "0"
        area = W.Textarea(
            value=start,
            placeholder=f"a nested list, or one number that fills {self.shape}",
            layout=W.Layout(width="100%", height="70px" if size > 16 else "34px"),
        )
        super().__init__(spec, area)

    def value(self) -> np.ndarray[Any, Any]:
        name, text = self.spec.name, self.widget.value.strip()
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError) as exc:
            raise InvalidInputError(
                f"input {name!r}: cannot read {text[:60]!r} as {self.spec.datatype} numbers "
                f"({exc})",
                tensor=name,
            ) from exc
        # the one conversion rule: 3.7 is no INT32, nan no integer, 1e39 no FP32
        array = as_array(parsed, self.spec.datatype, Destination(tensor=name))[0]
        if array.ndim == 0:
            return np.full(self.shape, array, dtype=self.dtype)
        if array.ndim != len(self.spec.shape):
            array = array.reshape(_fit(name, self.spec.shape, array.size))
        return array


class _TextEditor(_Editor):
    """BYTES input: one element per line."""

    def __init__(self, spec: TensorSpec) -> None:
        area = W.Textarea(
            value="hello nbinfer",
            placeholder="one element per line",
            layout=W.Layout(width="100%", height="52px"),
        )
        super().__init__(spec, area)

    def value(self) -> np.ndarray[Any, Any]:
        lines = self.widget.value.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        array = np.empty(len(lines), dtype=object)
        array[:] = [line.encode("utf-8") for line in lines]
        return array.reshape(_fit(self.spec.name, self.spec.shape, len(lines)))


class _ImageEditor(_Editor):
    """Image-like input: an upload preprocessed as ``session.classify`` does (interop.images)."""

    def __init__(self, spec: TensorSpec, layout: tuple[str, int, int, int]) -> None:
        self.layout = layout
        order, channels, height, width = layout
        self.upload = W.FileUpload(accept="image/*", multiple=False, description="Upload image")
        self.upload.layout = W.Layout(width="150px")
        size = f"{width}x{height}" if height > 0 and width > 0 else "its own size"
        self.preview = W.HTML(
            f'<span class="nbb-muted">resized to {size}, {channels} channel(s), {order}</span>'
        )
        self.upload.observe(self._show, names="value")
        super().__init__(spec, W.HBox([self.upload, self.preview]))

    def _show(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        entry = files[0]
        mime = entry.get("type") if entry.get("type") in _IMAGE_MIME else "image/png"
        data = base64.b64encode(bytes(entry["content"])).decode("ascii")
        self.preview.value = (
            f'<span class="nbb-thumb"><img src="data:{mime};base64,{data}" '
            f'alt="{escape(entry.get("name", ""))}"/></span> '
            f'<span class="nbb-muted">{escape(entry.get("name", ""))}</span>'
        )

    def value(self) -> np.ndarray[Any, Any]:
        from nbinfer.interop.images import ImagePlan, pixels

        name, shape = self.spec.name, self.spec.shape
        if not self.upload.value:
            raise InvalidInputError(f"input {name!r}: upload an image first", tensor=name)
        layout, channels, height, width = self.layout
        plan = ImagePlan(
            input=name,
            datatype=self.spec.datatype,
            output="",
            layout=layout,
            channels=channels,
            height=max(height, 0),  # a variable dim: the image keeps its own size
            width=max(width, 0),
            batched=len(shape) == 4,
            max_batch=0,
            encoded=False,
            item_shape=tuple(shape[1:] if len(shape) == 4 else shape),
        )
        scaling = "unit" if self.spec.datatype == "FP32" else "none"
        try:
            batch = pixels([bytes(self.upload.value[0]["content"])], plan, scaling=scaling)
        except InvalidInputError as exc:
            raise InvalidInputError(
                f"input {name!r}: cannot decode the uploaded file as an image ({exc})",
                tensor=name,
            ) from exc
        return batch if plan.batched else batch[0]


def _thumb(data: bytes, mime: str, name: str) -> str:
    """A small preview of an uploaded file with its name."""
    mime = mime if mime in _IMAGE_MIME else "image/png"
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return (
        f'<span class="nbb-thumb"><img src="{uri}" alt="{escape(name)}"/></span> '
        f'<span class="nbb-muted">{escape(name)}</span>'
    )


def _sketch_pad(plan: ImagePlan) -> Any | None:
    """A sketch pad for a tiny image input, or ``None`` (a bigger input; no anywidget)."""
    if plan.encoded or not 0 < max(plan.height, plan.width) <= SKETCH_MAX_SIDE:
        return None
    try:
        from nbinfer.notebook.sketch import SketchPad
    except ImportError as exc:  # anywidget missing: the upload alone
        logger.debug("no sketch pad: %s", exc)
        return None
    size = 160
    pen = int(min(26, max(10, round(size / max(plan.height, plan.width) * 1.3))))
    return SketchPad(size=size, pen=pen)


class _PictureEditor(_Editor):
    """An image classifier's input: an upload and, for tiny inputs, a sketch pad.

    Run sends the latest image (the upload or the drawing, whichever changed last) through
    :meth:`~nbinfer.Session.classify`, so it is prepared exactly as ``classify`` prepares it.
    """

    def __init__(self, spec: TensorSpec, plan: ImagePlan, prepare: Callable[[bytes], Any]) -> None:
        self.plan = plan
        self._prepare = prepare
        self.upload = W.FileUpload(accept="image/*", multiple=False, description="Upload image")
        self.upload.layout = W.Layout(width="auto", min_width="150px", flex="0 0 auto")
        self.pad = _sketch_pad(plan)
        self.source = W.HTML("")
        self.source.add_class("nbb-prose")
        #: Which image Run sends: "upload", "pad" or "" (none yet).
        self.latest = ""
        self.upload.observe(self._uploaded, names="value")
        side = W.VBox(
            [self.upload, self.source],
            layout=W.Layout(min_width="0", flex="1 1 200px", align_items="flex-start"),
        )
        parts: list[Any] = [side]
        if self.pad is not None:
            self.pad.observe(self._drawn, names="png")
            parts.insert(0, self.pad)
        self._describe()
        box = W.HBox(parts, layout=W.Layout(flex_flow="row wrap", align_items="flex-start"))
        box.add_class("nbb-picture")
        super().__init__(spec, box)

    def _uploaded(self, change: dict[str, Any]) -> None:
        self.latest = "upload" if change["new"] else ("pad" if self._drawing() else "")
        self._describe()

    def _drawn(self, change: dict[str, Any]) -> None:
        self.latest = "pad" if change["new"] else ("upload" if self.upload.value else "")
        self._describe()

    def _drawing(self) -> bool:
        return self.pad is not None and bool(self.pad.png)

    def _describe(self) -> None:
        plan = self.plan
        target = (
            "sent as the encoded file"
            if plan.encoded
            else f"classified at {plan.width}x{plan.height}, {plan.channels} channel(s)"
        )
        if self.latest == "upload":
            entry = self.upload.value[0]
            what = _thumb(bytes(entry["content"]), entry.get("type", ""), entry.get("name", ""))
        elif self.latest == "pad":
            what = '<span class="nbb-muted">the drawing on the pad</span>'
        else:
            ask = "Draw on the pad or upload" if self.pad is not None else "Upload"
            what = f'<span class="nbb-muted">{ask} an image, then Run.</span>'
        self.source.value = f'<div>{what}</div><div class="nbb-muted">{escape(target)}</div>'

    def image(self) -> bytes:
        """The image Run sends (encoded file bytes).

        Raises:
            InvalidInputError: Nothing uploaded or drawn yet.
        """
        if self.latest == "pad" and self.pad is not None:
            drawn = self.pad.image()
            if drawn is not None:
                return bytes(drawn)
        if self.upload.value:
            return bytes(self.upload.value[0]["content"])
        ask = "draw on the sketch pad or upload an image" if self.pad else "upload an image"
        raise InvalidInputError(f"input {self.spec.name!r}: {ask} first", tensor=self.spec.name)

    def value(self) -> np.ndarray[Any, Any]:
        sample = np.asarray(self._prepare(self.image()))
        return sample[np.newaxis] if self.plan.batched else sample


def _classifier_plan(
    meta: ModelMetadata, config: dict[str, Any], labels: dict[str, list[str]]
) -> ImagePlan | None:
    """The image plan of an image classifier (one image input, labelled scores), else None."""
    from nbinfer.interop.images import plan_images

    if len(meta.inputs) != 1:
        return None
    try:
        plan = plan_images(meta, config)
    except InvalidInputError:
        return None
    return plan if labels.get(plan.output) else None


def _editor(spec: TensorSpec) -> _Editor:
    layout = _image_layout(spec)
    if layout is not None:
        return _ImageEditor(spec, layout)
    if spec.datatype == "BYTES":
        return _TextEditor(spec)
    shape = _concrete(spec.shape)
    if shape and int(np.prod(shape)) <= SMALL_INPUT and len(shape) <= 2:
        return _NumbersEditor(spec)
    return _ArrayEditor(spec)


# -- HTML pieces (the notebook display layer's renderers inside the browser's frame) ----------


def _error_html(what: str, exc: BaseException) -> str:
    """A visible error: what failed, the server's message, what to try (and a bug's traceback)."""
    parts = [f'<div class="nbb-error"><b>{escape(what)} failed</b>', display.render_error(exc)]
    if not isinstance(exc, NbinferError):  # a bug, ours or the model's: show where
        trace = "".join(traceback.format_exception(exc))
        parts.append(
            f'<details><summary>traceback</summary><pre class="nbb-pre">{escape(trace)}</pre>'
            "</details>"
        )
    return "".join(parts) + "</div>"


def _top_classes(result: InferResult, labels: dict[str, list[str]], top: int = 5) -> str:
    """Top classes of each labelled score output (first row) as bars."""
    from nbinfer.protocol.classification import top_k
    from nbinfer.protocol.types import ClassificationResult

    parts = []
    for name, names in labels.items():
        if name not in result:
            continue
        scores = np.asarray(result[name])
        if scores.ndim == 0 or scores.shape[-1] != len(names) or scores.dtype.kind != "f":
            continue
        index, score = top_k(scores.reshape(-1, len(names))[0], top)
        best = [
            ClassificationResult(float(v), int(i), names[i])
            for i, v in zip(index.tolist(), score.tolist(), strict=True)
        ]
        text = ", ".join(f"{c.label} {c.score:.4f}" for c in best)
        parts.append(
            display.card("Top classes", name, display.render_classification(best), text=text)
        )
    return "".join(parts)


def _result_html(result: InferResult, labels: dict[str, list[str]], elapsed: float) -> str:
    head = (
        f'<div class="nbb-label"><span class="nbb-ok">&#10004;</span> '
        f"<b>{escape(result.model_name)}</b> answered in {elapsed * 1e3:.1f} ms</div>"
    )
    return head + _top_classes(result, labels) + display.render_result(result)


# -- the browser ------------------------------------------------------------------------------


class ModelBrowser:
    """An ipywidgets UI over a session's models; see the module docstring.

    Args:
        session: The session to browse.
        models: Model names to list when the server offers no repository index.
        background: Run server calls on a background thread (the kernel stays free). With
            ``False`` every callback completes before it returns.

    Attributes:
        widget: The root ipywidgets container (what displays).
        capabilities: What the server offers (``session.capabilities``).
    """

    def __init__(
        self, session: Session, *, models: Sequence[str] = (), background: bool = True
    ) -> None:
        self.session = session
        self._known = list(models)
        self._rows: dict[str, _Row] = {}
        self._editors: list[_Editor] = []
        self._prompt: str | None = None  # a generative model's prompt input
        self._current: str | None = None
        self._index_error: BaseException | None = None
        #: Why the list holds only known models (the session's note on a server with no listing).
        self._listing_note = ""
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nbinfer-browser")
            if background
            else None
        )
        self._pending: list[concurrent.futures.Future[None]] = []
        self._meta_error: BaseException | None = None
        #: Whether load / unload are offered (repository extension and a readable index).
        self.repository_enabled = False
        self._can_unload = True
        self.capabilities = self._read_capabilities()
        self._build()
        self._task("Listing models", self._refresh_list)

    # -- construction ----------------------------------------------------------------------

    def _read_capabilities(self) -> Capabilities:
        caps = self.session.capabilities
        self._meta_error = caps.error
        if caps.error is not None:
            logger.debug("server metadata unavailable: %s", caps.error)
        return caps

    def _build(self) -> None:
        caps = self.capabilities
        extensions = ", ".join(caps.extensions) or "none advertised"
        self.title = W.HTML(
            f'<div class="nbb-title"><b>Model browser</b> &nbsp;<span class="nbb-muted">'
            f"{escape(caps.name)} {escape(caps.version)} &middot; {escape(self.session.url)}</span>"
            f'</div><div class="nbb-ext">extensions: {escape(extensions)}</div>'
        )
        self.refresh_button = W.Button(
            description="Refresh", icon="refresh", tooltip="Reload the model list"
        )
        # Never narrower than its label: the title wraps instead (no "Re..." at 700 px).
        self.refresh_button.layout = W.Layout(
            width="auto", min_width="max-content", flex="0 0 auto", margin="0 0 0 auto"
        )
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.title.add_class("nbb-titlebox")
        top = W.HBox([self.title, self.refresh_button])
        top.add_class("nbb-top")

        self.model_list = W.Select(options=[], rows=12, layout=W.Layout(width="100%"))
        self.model_list.observe(self._on_pick, names="value")
        self.list_note = W.HTML("")
        self.open_name = W.Text(placeholder="model name", layout=W.Layout(width="130px"))
        self.open_button = W.Button(description="Open", layout=W.Layout(width="64px"))
        self.open_button.on_click(lambda _b: self.open(self.open_name.value))
        self.open_box = W.HBox([self.open_name, self.open_button])
        side = W.VBox(
            [
                W.HTML('<div class="nbb-label"><b>Models</b></div>'),
                self.model_list,
                self.list_note,
                self.open_box,
            ]
        )
        side.add_class("nbb-side")

        self.header = W.HTML("")
        self.header.add_class("nbb-prose")  # wrapped lines at text height, not a widget row's
        self.load_button = W.Button(
            description="Load", icon="upload", button_style="success", tooltip="Load / reload"
        )
        self.unload_button = W.Button(description="Unload", icon="eject", button_style="warning")
        self.load_button.on_click(lambda _b: self.load())
        self.unload_button.on_click(lambda _b: self.unload())
        for b in (self.load_button, self.unload_button):
            b.layout = W.Layout(width="96px")
        self.status = W.HTML("")
        self.actions = W.HBox([self.load_button, self.unload_button, self.status])
        self.error = W.HTML("")

        self.form = W.VBox([])
        self.run_button = W.Button(
            description="Run", icon="play", button_style="primary", tooltip="Run inference"
        )
        self.run_button.layout = W.Layout(width="96px", margin="8px 0")
        self.run_button.on_click(lambda _b: self.run())
        self.result = W.HTML("")
        self.try_it = W.VBox([self.form, self.run_button, self.result])
        self.metadata_view = W.HTML("")
        self.config_view = W.HTML("")
        self.stats_view = W.HTML("")
        pages: list[tuple[str, Any]] = [("Try it", self.try_it), ("Metadata", self.metadata_view)]
        if caps.configuration or not caps.extensions:
            pages.append(("Config", self.config_view))
        if caps.statistics:
            pages.append(("Statistics", self.stats_view))
        self.tabs = W.Tab(children=[p for _, p in pages])
        self.tabs.titles = tuple(t for t, _ in pages)
        self.detail = W.VBox([self.header, self.actions, self.tabs])
        self.detail.layout.display = "none"
        self._placeholder = W.HTML(
            '<div class="nbb-muted">Select a model on the left to see its metadata, config and '
            "statistics, and to try it.</div>"
        )
        main = W.VBox([self.error, self._placeholder, self.detail])
        main.add_class("nbb-main")

        body = W.HBox([side, main], layout=W.Layout(align_items="stretch"))
        body.add_class("nbb-body")  # browser.css: the side narrows, then stacks, in narrow outputs
        style = W.HTML(f"<style>{display.css()}{display.css('browser.css')}</style>")
        self.widget = W.VBox([style, top, body])
        self.widget.add_class("nbinfer-browser")
        if self._meta_error is not None:
            self.error.value = _error_html("Reading the server metadata", self._meta_error)

    # -- display ---------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        if self._pool is not None:  # the static copy shows the first listing when it is quick
            concurrent.futures.wait(self._pending, timeout=1.0)
        return static_bundle(self.widget, repr(self), **kwargs)

    def __repr__(self) -> str:
        return f"<ModelBrowser {self.session.url} ({len(self._rows)} models)>"

    # -- running callbacks -----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a server call is under way."""
        return any(not f.done() for f in self._pending)

    def wait(self, timeout: float | None = 60.0) -> None:
        """Block until every started callback has finished (its errors are in the widget)."""
        for future in list(self._pending):
            future.result(timeout)
        self._pending = [f for f in self._pending if not f.done()]

    def close(self) -> None:
        """Close the widgets and stop the background thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.widget.close()

    def _set_busy(self, label: str | None) -> None:
        for button in (
            self.load_button,
            self.unload_button,
            self.run_button,
            self.refresh_button,
            self.open_button,
        ):
            button.disabled = label is not None
        self.unload_button.disabled = label is not None or not self._can_unload
        if label is not None:
            self.status.value = (
                f'<span class="nbb-spin"></span> <span class="nbb-muted">{escape(label)}&hellip;'
                "</span>"
            )

    def _task(self, label: str, work: Callable[[], None], *, error_to: Any = None) -> None:
        """Run ``work`` with a busy state; any exception is shown in the widget."""
        target = self.error if error_to is None else error_to
        self._set_busy(label)
        self.error.value = ""

        def guarded() -> None:
            try:
                work()
                self.status.value = ""
            except Exception as exc:  # every failure is shown, none is swallowed
                logger.debug("%s failed", label, exc_info=True)
                target.value = _error_html(label, exc)
                self.status.value = ""
            finally:
                self._set_busy(None)

        if self._pool is None:
            guarded()
            return
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(guarded))

    # -- the model list --------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the model list (and the selected model)."""
        self._task("Listing models", self._refresh_list)

    def _index(self) -> list[_Row] | None:
        """The repository index, or ``None`` (with a note) when the server restricts it."""
        if not self.capabilities.repository:
            return None
        try:
            frame = self.session.models
        except NbinferError as exc:
            self._index_error = exc
            return None
        self._index_error = None
        if frame.attrs.get("complete") is False:  # no listing: the models the session met
            self._known = list(dict.fromkeys([*self._known, *map(str, frame["name"])]))
            self._listing_note = str(frame.attrs.get("note", ""))
            return None
        if "state" not in frame.columns:  # a name-only listing (KServe's /v2/models)
            return self._rows_of(list(frame["name"]))
        return [
            _Row(str(r["name"]), str(r["version"]), str(r["state"]), str(r["reason"]))
            for r in frame.to_dict("records")
        ]

    def _known_rows(self) -> list[_Row]:
        return self._rows_of(self._known)

    def _rows_of(self, names: Sequence[str]) -> list[_Row]:
        rows = []
        for name in dict.fromkeys(names):
            try:
                state = "READY" if self.session.client.is_model_ready(name) else "NOT READY"
            except NbinferError:
                state = "UNKNOWN"
            rows.append(_Row(name, state=state))
        return rows

    def _refresh_list(self) -> None:
        rows = self._index()
        indexed = rows is not None
        if rows is None:
            rows = self._known_rows()
        self._rows = {r.name: r for r in rows}
        self.repository_enabled = indexed
        self.load_button.layout.display = self.unload_button.layout.display = (
            None if indexed else "none"
        )
        self.open_box.layout.display = "none" if indexed else None
        if indexed:
            self.list_note.value = ""
        elif self._listing_note:
            self.list_note.value = f'<div class="nbb-note">{escape(self._listing_note)}</div>'
        elif self._index_error is not None:
            self.list_note.value = (
                '<div class="nbb-note">The server refused its model index '
                f"(<code>{escape(type(self._index_error).__name__)}</code>: "
                f"{escape(self._index_error)}). Open a model by name; for load / unload pass "
                "credentials to Session (token= / headers=).</div>"
            )
        else:
            self.list_note.value = (
                '<div class="nbb-note">This server offers no model repository: open a model by '
                "name (or pass models=[...] to browse()).</div>"
            )
        options = [(self._label(r), r.name) for r in rows]
        current = self._current
        self.model_list.unobserve(self._on_pick, names="value")
        try:
            self.model_list.options = options
            self.model_list.rows = max(6, min(len(options), 16))
            self.model_list.value = current if current in self._rows else None
        finally:
            self.model_list.observe(self._on_pick, names="value")
        if current in self._rows:
            self._show(current)

    @staticmethod
    def _label(row: _Row) -> str:
        mark = "\u25cf" if row.ready else "\u25cb"
        state = "" if row.ready or not row.state else f"  ({row.state.lower()})"
        return f"{mark} {row.name}{state}"

    @property
    def models(self) -> list[str]:
        """The names in the model list."""
        return list(self._rows)

    # -- selecting a model -----------------------------------------------------------------

    def _on_pick(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.select(change["new"])

    def select(self, name: str) -> None:
        """Show ``name``: header, metadata, config, statistics and its try-it form."""
        self._current = name
        if self.model_list.value != name and name in self._rows:
            self.model_list.value = name  # fires _on_pick, which calls back here
            return
        self._task(f"Reading {name}", lambda: self._show(name))

    def open(self, name: str) -> None:
        """Add ``name`` to the list (servers without a repository index) and select it."""
        name = name.strip()
        if not name:
            return

        def work() -> None:
            self.session.model(name)  # raises ModelNotFoundError for unknown names
            if name not in self._known:
                self._known.append(name)
            self._current = name
            self._refresh_list()

        self._task(f"Opening {name}", work)

    def _show(self, name: str) -> None:
        row = self._rows.get(name, _Row(name))
        self.detail.layout.display = None
        self._placeholder.layout.display = "none"
        self.result.value = ""
        self.form.children = []
        self.run_button.layout.display = "none"
        self.header.value = self._header_html(row, None)
        if self.repository_enabled:
            self.load_button.description = "Reload" if row.ready else "Load"
            self._can_unload = row.ready
        try:
            meta = self.session.client.get_model_metadata(name, row.version)
        except NbinferError as exc:
            self.metadata_view.value = _error_html("Reading the metadata", exc)
            self.config_view.value = ""
            self.form.children = [
                W.HTML('<div class="nbb-muted">No inputs to try: the model is not available.</div>')
            ]
            self._show_stats(name)
            return
        self.header.value = self._header_html(row, meta)
        self.metadata_view.value = display.render_metadata(meta)
        self._show_config(name, row.version)
        self._show_stats(name)
        self._editors = self._form_editors(name, row.version, meta)
        self._prompt = generative_prompt(self.session, name, row.version, meta)
        if self._prompt is not None:  # a generative model: the prompt alone, streamed
            self._editors = [ed for ed in self._editors if ed.spec.name == self._prompt]
        rows: list[Any] = []
        for ed in self._editors:
            rows.append(
                W.HTML(
                    f'<div class="nbb-label"><code><b>{escape(ed.spec.name)}</b></code> '
                    f'<span class="nbb-muted">{escape(ed.spec.datatype)} '
                    f"{escape(list(ed.spec.shape))}</span></div>"
                )
            )
            rows.append(ed.widget)
        if not self._editors:
            rows.append(W.HTML('<div class="nbb-muted">The model declares no inputs.</div>'))
        self.form.children = rows
        self.run_button.layout.display = None if self._editors else "none"

    def _header_html(self, row: _Row, meta: ModelMetadata | None) -> str:
        state = row.state or "UNKNOWN"
        cls = (
            "nbb-ready"
            if row.ready
            else ("nbb-bad" if state.upper() in ("UNAVAILABLE", "FAILED") else "")
        )
        reason = f' <span class="nbb-muted">{escape(row.reason)}</span>' if row.reason else ""
        extra = ""
        if meta is not None:
            specs = [f"{s.name} {s.datatype} {list(s.shape)}" for s in meta.inputs]
            facts = {
                "platform": meta.platform or "?",
                "versions": ", ".join(meta.versions) or "-",
                "inputs": "; ".join(specs) or "none declared",
            }
            extra = '<div class="nbb-muted">{}</div>'.format(
                " &middot; ".join(f"{k} <code>{escape(v)}</code>" for k, v in facts.items())
            )
        return (
            f'<div><span class="nbb-h">{escape(row.name)}</span>'
            f'<span class="nbb-badge {cls}">{escape(state)}</span>{reason}</div>{extra}'
        )

    def _show_config(self, name: str, version: str) -> None:
        try:
            config = self.session.client.get_model_config(name, version)
        except NbinferError as exc:
            self.config_view.value = (
                '<div class="nbb-muted">This server gives no configuration for the model '
                f"(<code>{escape(type(exc).__name__)}</code>: {escape(exc)}).</div>"
            )
            return
        text = json.dumps(config, indent=2, sort_keys=False, default=str)
        self.config_view.value = f'<pre class="nbb-pre">{escape(text)}</pre>'

    def _show_stats(self, name: str) -> None:
        if not self.capabilities.statistics:
            return
        try:
            frame = self.session.stats(name)
        except NbinferError as exc:
            self.stats_view.value = (
                '<div class="nbb-note">Statistics are not available from this server '
                f"(<code>{escape(type(exc).__name__)}</code>: {escape(exc)}).</div>"
            )
            return
        self.stats_view.value = display.render_stats(frame)

    def _form_editors(self, name: str, version: str, meta: ModelMetadata) -> list[_Editor]:
        """One editor per input; an image classifier gets the picture form instead."""
        from nbinfer.interop.images import image_sample

        try:
            config = self.session.client.get_model_config(name, version)
        except NbinferError:
            config = {}
        plan = _classifier_plan(meta, config, self.session.model(name).labels)
        if plan is None:
            return [_editor(spec) for spec in meta.inputs]

        def prepare(data: bytes) -> Any:
            return image_sample(meta, config, data, input=plan.input)

        return [_PictureEditor(meta.inputs[0], plan, prepare)]

    # -- actions ---------------------------------------------------------------------------

    def _selected(self) -> str:
        if self._current is None:
            raise InvalidInputError("select a model first")
        return self._current

    def _lifecycle(self, verb: str, call: Callable[[str], object]) -> None:
        name = self._current or ""

        def work() -> None:
            call(self._selected())
            self._refresh_list()

        self._task(f"{verb} {name}", work)

    def load(self) -> None:
        """Load (or reload) the selected model."""
        self._lifecycle("Loading", self.session.load)

    def unload(self) -> None:
        """Unload the selected model."""
        self._lifecycle("Unloading", self.session.unload)

    def inputs(self) -> dict[str, np.ndarray[Any, Any]]:
        """The tensors the try-it form holds now.

        Raises:
            InvalidInputError: A field cannot be read as its input's datatype and shape.
        """
        return {ed.spec.name: ed.value() for ed in self._editors}

    def run(self) -> None:
        """Run the selected model on the try-it form's values and show the result."""
        name = self._current or ""
        self.result.value = ""

        def work() -> None:
            model = self._selected()
            picture = self._picture()
            if picture is not None:
                self._classify(model, picture)
                return
            tensors = self.inputs()
            if self._prompt is not None:
                stream_into(self.session, model, tensors[self._prompt], self.result)
                self._show_stats(model)
                return
            started = time.perf_counter()
            result = self.session.infer(model, tensors)
            elapsed = time.perf_counter() - started
            labels = self.session.model(model).labels
            self.result.value = _result_html(result, labels, elapsed)
            self._show_stats(model)

        self._task(f"Running {name}", work, error_to=self.result)

    @property
    def sketch_pad(self) -> Any | None:
        """The selected image classifier's sketch pad (a ``SketchPad``), or ``None``."""
        pads = [ed.pad for ed in self._editors if isinstance(ed, _PictureEditor)]
        return pads[0] if pads else None

    def _picture(self) -> bytes | None:
        """The image of an image classifier's form (None for other forms)."""
        pictures = [ed for ed in self._editors if isinstance(ed, _PictureEditor)]
        return pictures[0].image() if pictures else None

    def _classify(self, model: str, image: bytes) -> None:
        """Classify ``image`` with ``session.classify`` and show the top classes."""
        from nbinfer.notebook.gallery import classification_html

        started = time.perf_counter()
        frame = self.session.classify(model, image, top_k=TOP_CLASSES)
        elapsed = time.perf_counter() - started
        head = (
            f'<div class="nbb-label"><span class="nbb-ok">&#10004;</span> '
            f"<b>{escape(model)}</b> answered in {elapsed * 1e3:.1f} ms</div>"
        )
        self.result.value = head + classification_html(frame)
        self._show_stats(model)
