"""The model browser's "try it" form: one editor per model input, read back as tensors.

Layer: the notebook floor: ipywidgets is imported here. Numbers get one box per element (small
inputs) or a text area holding a nested list; BYTES inputs a text area (one element per line);
image-like inputs an upload preprocessed as ``session.classify`` does; an image classifier a
picture form (an upload and, for tiny inputs, a sketch pad, :mod:`~nbinfer.notebook.sketch`).
Every value passes the protocol's one conversion rule (:func:`~nbinfer.protocol.tensors.as_array`),
so a field that cannot be read names the input, what it holds and why.

Example::

    editor = editor_for(spec)            # a TensorSpec of the model's metadata
    editor.widget                        # what the form shows
    editor.value()                       # the tensor it holds now
"""

from __future__ import annotations

import ast
import base64
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as W
import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.tensors import Destination, as_array
from nbinfer.render.html import escape

if TYPE_CHECKING:
    from nbinfer.interop.images import ImagePlan
    from nbinfer.protocol.types import ModelMetadata, TensorSpec

__all__ = ["Editor", "PictureEditor", "classifier_plan", "editor_for"]

logger = logging.getLogger("nbinfer")

#: Numeric inputs with at most this many elements get one number box per element.
SMALL_INPUT = 8
#: Array inputs up to this many elements start as a list of zeros; larger ones as the scalar 0.
LISTED_INPUT = 256
_IMAGE_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp")
#: Image classifiers whose input is at most this many pixels a side get a sketch pad (digits: 8).
SKETCH_MAX_SIDE = 32


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


class Editor:
    """One input of the try-it form: a widget and how to read a tensor from it."""

    def __init__(self, spec: TensorSpec, widget: Any) -> None:
        self.spec = spec
        self.widget = widget

    def value(self) -> np.ndarray[Any, Any]:
        """The tensor the editor holds now (raises InvalidInputError when it cannot be read)."""
        raise NotImplementedError


class _NumbersEditor(Editor):
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


class _ArrayEditor(Editor):
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


class _TextEditor(Editor):
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


class _ImageEditor(Editor):
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


class PictureEditor(Editor):
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
        """The prepared image, as ``session.classify`` prepares it."""
        sample = np.asarray(self._prepare(self.image()))
        return sample[np.newaxis] if self.plan.batched else sample


def classifier_plan(
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


def editor_for(spec: TensorSpec) -> Editor:
    """The editor of one input: an upload, text lines, number boxes or a list, by its spec."""
    layout = _image_layout(spec)
    if layout is not None:
        return _ImageEditor(spec, layout)
    if spec.datatype == "BYTES":
        return _TextEditor(spec)
    shape = _concrete(spec.shape)
    if shape and int(np.prod(shape)) <= SMALL_INPUT and len(shape) <= 2:
        return _NumbersEditor(spec)
    return _ArrayEditor(spec)
