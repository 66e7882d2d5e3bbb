"""Image classification over any v2 server: Pillow preprocessing from the model's metadata.

Layer: interop (imports ``nbinfer.errors``, ``protocol`` and its interop siblings only, plus
Pillow); never the client, transports, session, server or notebook. The answer, a
:class:`~nbinfer.interop.image_frame.ClassificationFrame`, lives in ``image_frame.py``.

:func:`classify_images` is the engine behind :meth:`nbinfer.Session.classify`. It turns paths,
globs, directories, PIL images, arrays and encoded bytes into the tensor a model expects, sends
them in batches and returns the top-k classes as a :class:`ClassificationFrame`::

    frame = session.classify("digits", "scans/*.png", top_k=3)
    frame[frame["rank"] == 1]           # best class per image: image, rank, label, score, class

How the tensor is built (:func:`plan_images`): the model's single image input (or ``input=``)
gives the size ``H x W``, the channels (1: grayscale ``L``, 3: ``RGB``, 4: ``RGBA``) and the
layout: the config's ``format`` (``FORMAT_NCHW`` / ``FORMAT_NHWC``) when the server sets one, else
guessed from the shape (``[C, H, W]`` when the first dim is 1 or 3, ``[H, W, C]`` when the last is,
``[H, W]`` for grayscale without a channel axis). Images are decoded (JPEG with Pillow's
``draft`` shortcut), converted, resized bilinearly, stacked, scaled in one vectorised step and
cast to the input's datatype. Scalings (as in Triton's image client): ``"none"`` (0..255),
``"unit"`` (``x / 255``), ``"inception"`` (``x / 127.5 - 1``), ``"vgg"`` (minus the ImageNet
channel means), or a function of the ``uint8`` batch ``[N, H, W, C]``; the default is the
model's config parameter ``nbinfer.image.scaling`` when it publishes one, else ``"none"``.
``preprocess=`` replaces all of this with a function of one PIL image.

Fitting (``fit=``, default: the model's config parameter ``nbinfer.image.fit``, else
``"resize"``): ``"resize"`` resizes the whole image to ``H x W`` (ImageNet-style models);
``"ink"``, for small grayscale glyph models like the demo ``digits``, prepares an image as
scikit-learn's digits were made (:func:`nbinfer.protocol.inkfit.fit_ink`: dark ink on paper
inverted, cropped to the ink, padded to the box keeping its aspect, area-averaged, stretched).
The pixels each image became (before scaling) come back with the frame
(:attr:`ClassificationFrame.inputs`) and show beside each image with ``show_input=True``.

Encoded images: a model whose input is BYTES (or ``encoded=True``, as OpenVINO Model Server
accepts for image models) gets the JPEG / PNG bytes themselves, one element per image, and
decodes on the server; files are then read, never decoded, on the client. They travel in
Triton's BYTES form (a 4-byte length before each element) unless ``encoded="ovms"`` asks for
OpenVINO Model Server's (:func:`ovms_input`): over HTTP the images back to back with their sizes
in ``binary_data_size`` (``"645,94"``), over gRPC one image as one unprefixed raw entry.

Batches follow the model's ``max_batch_size`` (64 images for a model whose leading dim is a
free ``-1``; one image per request for a model without a batch dim); the next batch decodes
while up to ``concurrency`` (2) requests are in flight. Top-k comes from the server's
classification extension when it offers one, else is computed locally.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import glob
import io
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from nbinfer.errors import InvalidInputError
from nbinfer.interop._inflight import arun, progress_bar, run
from nbinfer.interop.image_frame import ClassificationFrame, classification_frame
from nbinfer.protocol.classification import decode_classification, top_k
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.inkfit import FIT_PARAMETER, FITS, fit_ink_image
from nbinfer.protocol.tensors import Destination, conform
from nbinfer.protocol.types import InferInput, ModelMetadata, RequestedOutput

__all__ = [
    "FITS",
    "FIT_PARAMETER",
    "SCALINGS",
    "SCALING_PARAMETER",
    "ENCODED_FORMS",
    "ImagePlan",
    "aclassify_images",
    "classify_images",
    "config_fit",
    "config_scaling",
    "scaled_pixels",
    "encode_image",
    "encoded_batch",
    "expand_images",
    "image_sample",
    "load_image",
    "ovms_input",
    "pixels",
    "plan_images",
    "prepared_image",
    "read_file",
    "read_labels",
]

#: Config parameter in which a model can publish the scaling it was trained with.
SCALING_PARAMETER = "nbinfer.image.scaling"
#: Named scalings (Triton image client's NONE / INCEPTION / VGG plus ``unit`` = ``[0, 1]``).
SCALINGS = ("none", "unit", "inception", "vgg")
#: File suffixes taken from a directory.
IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)
#: Images per request for a model whose leading dim is a free ``-1`` (no max_batch_size).
DEFAULT_BATCH = 64
#: Decoding threads for big images (see :data:`THREADED_DECODE_FROM`).
DEFAULT_WORKERS = min(4, (os.cpu_count() or 2) + 1)
#: Seconds per image of the first batch above which later batches decode in threads.
THREADED_DECODE_FROM = 150e-6
_VGG_MEANS = {1: (128.0,), 3: (123.0, 117.0, 104.0)}
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
#: How encoded images travel: Triton's length-prefixed BYTES, or OpenVINO Model Server's form.
ENCODED_FORMS = ("triton", "ovms")
#: The model inputs kept with a frame (for its grid: the first 48 images), each at most this big.
SEEN_IMAGES = 48
SEEN_SIDE = 96

Scaling = str | Callable[[np.ndarray[Any, Any]], Any]
ImageSource = Any  # str | os.PathLike | bytes | PIL.Image.Image | np.ndarray


class _Result(Protocol):
    def as_numpy(self, name: str) -> np.ndarray[Any, Any]: ...


#: One request's inputs: ``{name: array}``, or a list of ready tensors (OVMS's encoded form).
Inputs = dict[str, np.ndarray[Any, Any]] | list[InferInput]
#: ``submit(inputs, outputs)`` -> a future of a result with ``as_numpy`` (``Client.async_infer``);
#: ``inputs`` is an :data:`Inputs`, which ``Client.infer`` takes in both shapes.
SubmitFn = Callable[[Any, list[RequestedOutput]], "concurrent.futures.Future[Any]"]
AsyncInferFn = Callable[[Any, list[RequestedOutput]], Awaitable[_Result]]


# -- sources ---------------------------------------------------------------------------------


def _expand_path(text: str) -> list[str]:
    if any(ch in text for ch in "*?["):
        found = sorted(glob.glob(os.path.expanduser(text), recursive=True))
        if not found:
            raise InvalidInputError(f"no image matches {text!r}")
        return found
    path = Path(text).expanduser()
    if path.is_dir():
        with os.scandir(path) as entries:
            found = sorted(
                e.path
                for e in entries
                if os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES and e.is_file()
            )
        if not found:
            raise InvalidInputError(f"directory {text!r} holds no image files")
        return found
    if not path.is_file():
        raise InvalidInputError(f"image file {text!r} does not exist")
    return [str(path)]


def expand_images(images: Any) -> list[tuple[Any, ImageSource]]:
    """Flatten what a user passes into ``(key, source)`` pairs, one per image.

    Paths, globs and directories expand to files (keys: the paths); bytes, PIL images and
    arrays keep their position as key. A 4-D array, or a 3-D array whose last dim is not 1, 3
    or 4, is a batch of images.

    Raises:
        InvalidInputError: A path does not exist, a glob matches nothing, an item is of an
            unknown type.
    """
    sources: list[ImageSource] = []

    def add(item: Any, top: bool) -> None:
        if isinstance(item, str | os.PathLike):
            sources.extend(_expand_path(os.fspath(item)))
        elif isinstance(item, bytes | bytearray | memoryview):
            sources.append(bytes(item))
        elif isinstance(item, Image.Image):
            sources.append(item)
        elif isinstance(item, np.ndarray):
            if item.ndim == 4 or (item.ndim == 3 and item.shape[-1] not in (1, 3, 4)):
                sources.extend(list(item))
            elif item.ndim in (2, 3):
                sources.append(item)
            else:
                raise InvalidInputError(f"an image array must be 2-D to 4-D, got {item.shape}")
        elif top and isinstance(item, Iterable):  # lists, tuples, generators, Series
            for sub in item:
                add(sub, False)
        else:
            raise InvalidInputError(
                f"cannot read an image from {type(item).__name__}; pass paths, globs, "
                "PIL images, arrays or encoded bytes"
            )

    add(images, True)
    if not sources:
        raise InvalidInputError("no images to classify")
    return [(s if isinstance(s, str) else i, s) for i, s in enumerate(sources)]


def _array_to_uint8(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype.kind == "f" and arr.size and float(np.nanmax(arr)) <= 1.0:
        arr = arr * 255.0
    out: np.ndarray[Any, Any] = np.clip(np.nan_to_num(arr), 0, 255).round().astype(np.uint8)
    return out


def read_file(path: str) -> bytes:
    """A file's bytes (one ``read`` of its size: cheaper than ``open().read()`` per image)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        chunks = [os.read(fd, max(size, 1))]
        while chunks[-1]:  # the file grew, or a pipe: read to the end
            chunks.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return b"".join(chunks)


def _format_of(data: bytes) -> tuple[str, ...] | None:
    """Pillow's format name from the magic bytes of PNG and JPEG (``None``: let Pillow probe)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return ("PNG",)
    if data.startswith(b"\xff\xd8\xff"):
        return ("JPEG",)
    return None


def load_image(source: ImageSource, *, draft: tuple[str, tuple[int, int]] | None = None) -> Any:
    """Open one image source as a PIL image (pixels loaded).

    Arrays in float are taken as ``0..1`` when their maximum is at most 1, else ``0..255``.
    ``draft=(mode, (w, h))`` lets a JPEG decode at a reduced scale (Pillow's ``draft``).

    Raises:
        InvalidInputError: The data is not an image Pillow can read.
    """
    if isinstance(source, Image.Image):
        return source
    if isinstance(source, np.ndarray):
        arr = _array_to_uint8(source)
        if arr.ndim == 3 and arr.shape[-1] == 1:
            arr = arr[..., 0]
        return Image.fromarray(np.ascontiguousarray(arr))
    try:
        data = read_file(source) if isinstance(source, str) else source
        im = Image.open(io.BytesIO(data), formats=_format_of(data))
        if draft is not None and im.format == "JPEG":
            im.draft(*draft)
        im.load()
    except (OSError, ValueError, SyntaxError) as exc:
        where = source if isinstance(source, str) else f"{len(source)} bytes"
        raise InvalidInputError(f"cannot decode image {where!r}: {exc}") from exc
    return im


def encode_image(source: ImageSource) -> bytes:
    """The encoded bytes of a source: a file's bytes as they are, else the image as PNG."""
    if isinstance(source, bytes):
        return source
    if isinstance(source, str):
        return read_file(source)
    buf = io.BytesIO()
    load_image(source).save(buf, format="PNG")
    return buf.getvalue()


# -- what the model wants --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImagePlan:
    """How images become a model's input tensor.

    Attributes:
        input: Input tensor name.
        datatype: Its v2 datatype (what is sent: ``BYTES`` when ``encoded``).
        output: The scores output.
        layout: ``"NCHW"``, ``"NHWC"`` or ``"NHW"`` (no channel axis), per image without N.
        channels: 1 (grayscale), 3 (RGB) or 4 (RGBA).
        height: Target height; 0 when encoded, and for pixels 0 keeps each image's own size
            (which the images of one batch must then share).
        width: Target width; 0 as for ``height``.
        batched: The input has a leading batch dim.
        max_batch: Largest batch the model takes (0: no limit).
        encoded: Send JPEG / PNG bytes (BYTES) instead of pixels.
        item_shape: Shape of one image's tensor (without the batch dim).
        form: How encoded bytes travel: ``"triton"`` (4-byte length prefixes) or ``"ovms"``
            (see :func:`ovms_input`).
    """

    input: str
    datatype: str
    output: str
    layout: str
    channels: int
    height: int
    width: int
    batched: bool
    max_batch: int
    encoded: bool
    item_shape: tuple[int, ...]
    form: str = "triton"


def _pick(specs: Sequence[Any], name: str | None, what: str, model: str) -> Any:
    known = ", ".join(s.name for s in specs) or "none"
    if name is not None:
        for spec in specs:
            if spec.name == name:
                return spec
        raise InvalidInputError(f"model {model!r} has no {what} {name!r}; {what}s: {known}")
    if len(specs) != 1:
        raise InvalidInputError(
            f"model {model!r} has {len(specs)} {what}s ({known}); say which with {what}="
        )
    return specs[0]


def _layout_of(dims: list[int], fmt: str, model: str) -> str:
    if len(dims) == 2:
        return "NHW"
    if len(dims) == 3:
        if fmt in ("FORMAT_NCHW", "NCHW"):
            return "NCHW"
        if fmt in ("FORMAT_NHWC", "NHWC"):
            return "NHWC"
        if dims[0] in (1, 3) and dims[-1] not in (1, 3):
            return "NCHW"
        if dims[-1] in (1, 3):
            return "NHWC"
    raise InvalidInputError(
        f"model {model!r}: cannot tell the image layout of input shape {dims}; pass "
        "layout='NCHW' or 'NHWC' (or preprocess=)"
    )


def plan_images(
    metadata: ModelMetadata,
    config: Mapping[str, Any] | None = None,
    *,
    input: str | None = None,
    output: str | None = None,
    size: tuple[int, int] | None = None,
    layout: str | None = None,
    encoded: bool | str | None = None,
) -> ImagePlan:
    """Work out the input tensor of an image model from its metadata (and config).

    Args:
        metadata: The model's metadata.
        config: The model's config (``max_batch_size``, the input's ``format``), if known.
        input: The image input (default: the only input).
        output: The scores output (default: the only output).
        size: ``(height, width)`` for inputs with variable spatial dims.
        layout: ``"NCHW"`` / ``"NHWC"``, overriding the config's format and the guess.
        encoded: Send encoded bytes (default: when the input is BYTES); ``"triton"`` or
            ``"ovms"`` send them in that server's form (``True``: Triton's).

    Raises:
        InvalidInputError: The model's inputs / outputs or shapes do not make an image model,
            or ``encoded`` names an unknown form.
    """
    form = "triton"
    if isinstance(encoded, str):
        form = encoded.lower()
        if form not in ENCODED_FORMS:
            raise InvalidInputError(
                f"unknown encoded form {encoded!r}; known: {', '.join(ENCODED_FORMS)} "
                "(or True / False)"
            )
        encoded = True
    config = config or {}
    model = metadata.name
    spec = _pick(metadata.inputs, input, "input", model)
    out = _pick(metadata.outputs, output, "output", model)
    mbs = int(config.get("max_batch_size", metadata.parameters.get("max_batch_size", 0)) or 0)
    shape = list(spec.shape)
    if encoded is None:
        encoded = spec.datatype == "BYTES"
    if encoded:
        batched = mbs > 0 or (bool(shape) and shape[0] == -1)
        # A BYTES input's own dims (e.g. [-1, 1]); a pixel input (OVMS) takes bytes as [N].
        own = shape[1:] if spec.datatype == "BYTES" else []
        item = tuple(d if d > 0 else 1 for d in own) if batched else ()
        return ImagePlan(spec.name, "BYTES", out.name, "", 0, 0, 0, batched, mbs, True, item, form)
    lead = shape[0] if shape else 0
    if mbs > 0:
        batched = True
    elif len(shape) == 4 and lead in (-1, 1):  # a batch dim without batching; 1: fixed (ONNX)
        batched, mbs = True, max(lead, 0)
    else:  # [-1, H, W]: the free dim is the batch, unless it looks like [-1, W, 3] (HWC)
        batched = len(shape) == 3 and lead == -1 and shape[-1] not in (1, 3)
        batched = batched and shape[1] not in (1, 3)
    dims = shape[1:] if batched else shape
    fmt = layout or ""
    if not fmt:
        for cfg_in in config.get("input") or []:
            if isinstance(cfg_in, Mapping) and cfg_in.get("name") == spec.name:
                fmt = str(cfg_in.get("format") or "")
    kind = _layout_of(dims, fmt, model)
    if kind == "NCHW":
        channels, height, width = dims
    elif kind == "NHWC":
        height, width, channels = dims
    else:
        (height, width), channels = dims, 1
    if size is not None:
        height, width = int(size[0]), int(size[1])
    if height <= 0 or width <= 0:
        raise InvalidInputError(
            f"model {model!r}: input {spec.name!r} {shape} has variable spatial dims; pass "
            "size=(height, width)"
        )
    if channels not in _MODES:
        raise InvalidInputError(
            f"model {model!r}: input {spec.name!r} {shape} has {channels} channels; images "
            "give 1 (grayscale), 3 (RGB) or 4 (RGBA); use preprocess= for anything else"
        )
    item = {"NCHW": (channels, height, width), "NHWC": (height, width, channels)}.get(
        kind, (height, width)
    )
    return ImagePlan(
        spec.name, spec.datatype, out.name, kind, channels, height, width, batched, mbs, False, item
    )


def _scaling_name(scaling: str) -> str:
    name = scaling.lower()
    if name not in SCALINGS:
        raise InvalidInputError(f"unknown scaling {scaling!r}; known: {', '.join(SCALINGS)}")
    return name


def _scaled(batch: np.ndarray[Any, Any], scaling: Scaling, dtype: np.dtype[Any]) -> Any:
    if callable(scaling):
        return scaling(batch)
    name = _scaling_name(scaling)
    if name == "none":
        return batch
    x = batch.astype(dtype if dtype.kind == "f" else np.float32)
    if name == "unit":
        return x / 255.0
    if name == "inception":
        return x / 127.5 - 1.0
    if batch.shape[-1] not in _VGG_MEANS:
        raise InvalidInputError("the vgg scaling has channel means for L and RGB images only")
    return x - np.asarray(_VGG_MEANS[batch.shape[-1]], dtype=x.dtype)


def _fit_name(fit: str) -> str:
    name = str(fit).lower()
    if name not in FITS:
        raise InvalidInputError(f"unknown fit {fit!r}; known: {', '.join(FITS)}")
    return name


def pixel_batch(
    sources: Sequence[ImageSource], plan: ImagePlan, *, fit: str = "resize"
) -> np.ndarray[Any, Any]:
    """The ``uint8`` batch ``[N, H, W, C]`` of images for ``plan``, before scaling and layout.

    ``fit="resize"`` converts and resizes each image bilinearly; ``fit="ink"`` (1 channel only)
    fits its ink into the box (:func:`nbinfer.protocol.inkfit.fit_ink`).

    Raises:
        InvalidInputError: An image cannot be decoded, an unknown ``fit``, ``"ink"`` for a model
            of more than one channel, or images kept at their own size differ in size.
    """
    fit = _fit_name(fit)
    mode = _MODES[plan.channels]
    size = (plan.width, plan.height) if plan.width > 0 and plan.height > 0 else None
    if fit == "ink" and not _inkable(plan):
        raise InvalidInputError(_not_inkable(plan))
    arrays = []
    for source in sources:
        if fit == "ink":
            arrays.append(fit_ink_image(load_image(source), (plan.height, plan.width)))
            continue
        im = load_image(source, draft=None if size is None else (mode, size))
        if im.mode != mode:
            im = im.convert(mode)
        if size is not None and im.size != size:
            im = im.resize(size, Image.Resampling.BILINEAR)
        arrays.append(np.asarray(im))
    if len({a.shape for a in arrays}) > 1:
        sizes = sorted({f"{a.shape[1]}x{a.shape[0]}" for a in arrays})
        raise InvalidInputError(
            f"input {plan.input!r} takes images at their own size, and these differ "
            f"({', '.join(sizes)}); give the plan a size, or pass one size of image"
        )
    batch = np.stack(arrays)
    if batch.ndim == 3:
        batch = batch[..., np.newaxis]
    return batch


def _laid_out(
    batch: np.ndarray[Any, Any], plan: ImagePlan, scaling: Scaling
) -> np.ndarray[Any, Any]:
    """A ``uint8`` ``[N, H, W, C]`` batch scaled, cast and laid out as ``plan``'s input."""
    dtype = numpy_dtype(plan.datatype)
    to = Destination(tensor=plan.input, data="pixels")  # the one conversion rule, named
    out = conform(np.asarray(_scaled(batch, scaling, dtype)), plan.datatype, to)
    if plan.layout == "NCHW":
        out = out.transpose(0, 3, 1, 2)
    elif plan.layout == "NHW":
        out = out[..., 0]
    return np.ascontiguousarray(out)


def _preprocessed(
    sources: Sequence[ImageSource], plan: ImagePlan, preprocess: Callable[[Any], Any]
) -> np.ndarray[Any, Any]:
    arrays = [np.asarray(preprocess(load_image(s))) for s in sources]
    to = Destination(tensor=plan.input, data="pixels")  # the one conversion rule, named
    batch = conform(np.stack(arrays), plan.datatype, to)
    if batch.shape[1:] != plan.item_shape:
        raise InvalidInputError(
            f"preprocess returned images of shape {list(batch.shape[1:])}; input "
            f"{plan.input!r} takes {list(plan.item_shape)}"
        )
    return batch


def pixels(
    sources: Sequence[ImageSource],
    plan: ImagePlan,
    *,
    scaling: Scaling = "none",
    preprocess: Callable[[Any], Any] | None = None,
    fit: str = "resize",
) -> np.ndarray[Any, Any]:
    """Decode, convert, fit, stack, scale and lay out a batch of images for ``plan``.

    Raises:
        InvalidInputError: An image cannot be decoded, ``preprocess`` returns the wrong shape,
            an unknown ``fit`` (see :func:`pixel_batch`), or images kept at their own size
            (``plan.height`` / ``width`` 0) differ in size.
    """
    if preprocess is not None:
        return _preprocessed(sources, plan, preprocess)
    return _laid_out(pixel_batch(sources, plan, fit=fit), plan, scaling)


def encoded_batch(sources: Sequence[ImageSource], plan: ImagePlan) -> np.ndarray[Any, Any]:
    """The encoded bytes of a batch as a BYTES (object) array shaped for ``plan``."""
    out = np.empty(len(sources), dtype=object)
    out[:] = [encode_image(s) for s in sources]
    return out.reshape((len(sources), *plan.item_shape))


def ovms_input(name: str, elements: np.ndarray[Any, Any]) -> InferInput:
    """Encoded images as OpenVINO Model Server reads them, as one BYTES input tensor.

    The element sizes ride in ``binary_data_size`` (``"645,94"``): over HTTP the images then go
    back to back without Triton's 4-byte length prefixes; over gRPC a single image is one
    unprefixed raw entry (several keep the prefixes, which OVMS reads in raw contents; older
    OVMS releases take one image per request there: ``batch_size=1``).
    """
    sizes = ",".join(str(len(e)) for e in elements.reshape(-1))
    return InferInput(name, "BYTES", list(elements.shape), elements, {"binary_data_size": sizes})


def _as_picture(item: np.ndarray[Any, Any], layout: str) -> np.ndarray[Any, Any] | None:
    """One image's tensor as a ``uint8`` ``H x W`` / ``H x W x C`` picture, for display.

    Channels-first tensors are turned round; values off ``0..255`` (a ``preprocess`` function's
    normalised floats) are stretched to it; pictures above :data:`SEEN_SIDE` shrink to it.
    ``None``: the tensor is not a picture (say a flat vector from ``preprocess``).
    """
    arr = np.asarray(item)
    if layout == "NCHW" and arr.ndim == 3 and arr.shape[0] in (1, 3, 4):
        arr = arr.transpose(1, 2, 0)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[-1] in (3, 4))) or arr.size == 0:
        return None
    if arr.dtype != np.uint8:
        values = np.nan_to_num(arr.astype(np.float32))
        lo, hi = float(values.min()), float(values.max())
        if lo >= 0.0 and hi <= 1.0:
            values = values * 255.0
        elif lo < 0.0 or hi > 255.0:
            values = (values - lo) * (255.0 / ((hi - lo) or 1.0))
        arr = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    if max(arr.shape[:2]) > SEEN_SIDE:
        im = Image.fromarray(np.ascontiguousarray(arr))
        im.thumbnail((SEEN_SIDE, SEEN_SIDE), Image.Resampling.BOX)
        arr = np.asarray(im)
    return arr


def _batch(
    sources: Sequence[ImageSource],
    plan: ImagePlan,
    scaling: Scaling,
    preprocess: Callable[[Any], Any] | None = None,
    fit: str = "resize",
) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any] | None] | None]:
    """The batch's input tensor, and what each image became (``None``: decoded on the server)."""
    if plan.encoded:
        return encoded_batch(sources, plan), None
    if preprocess is not None:
        tensor = _preprocessed(sources, plan, preprocess)
        return tensor, [_as_picture(t, plan.layout) for t in tensor]
    batch = pixel_batch(sources, plan, fit=fit)
    return _laid_out(batch, plan, scaling), [_as_picture(b, "NHWC") for b in batch]


def read_labels(labels: Sequence[str] | str | os.PathLike[str]) -> list[str]:
    """Class labels from a sequence or a labels file (one label per line, Triton's format).

    Raises:
        InvalidInputError: The labels file cannot be read as UTF-8 text.
    """
    if isinstance(labels, str | os.PathLike):
        try:
            text = Path(labels).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read the labels file {labels!r}: {exc}") from exc
        lines = [line.strip() for line in text.splitlines()]
        while lines and not lines[-1]:  # line i is class i: only trailing blanks go
            lines.pop()
        return lines
    return [str(label) for label in labels]


# -- the pipeline ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    """Every option of :func:`classify_images` with its default, declared once."""

    config: Mapping[str, Any] | None = None
    top_k: int = 5
    labels: Sequence[str] | str | os.PathLike[str] | None = None
    server_labels: Mapping[str, Sequence[str]] | None = None
    extensions: Sequence[str] = ()
    batch_size: int | None = None
    scaling: Scaling | None = None
    preprocess: Callable[[Any], Any] | None = None
    size: tuple[int, int] | None = None
    layout: str | None = None
    encoded: bool | str | None = None
    input: str | None = None
    output: str | None = None
    server_topk: bool | None = None
    concurrency: int = 2
    workers: int = DEFAULT_WORKERS
    progress: bool | None = None
    fit: str | None = None
    show_input: bool = False


@dataclass(slots=True)
class _Job:
    """One classify call: batches to prepare, how, and what came back."""

    options: _Options
    plan: ImagePlan
    items: list[tuple[Any, ImageSource]]
    batch_size: int
    server_topk: bool
    labels: list[str] | None
    scaling: Scaling
    fit: str = "resize"
    parts: dict[int, tuple[Any, Any, list[str | None]]] = field(default_factory=dict)
    #: What the first :data:`SEEN_IMAGES` images became (the model's input), by key.
    seen: dict[Any, np.ndarray[Any, Any]] = field(default_factory=dict)
    shown: frozenset[Any] = frozenset()

    def batches(self) -> list[list[tuple[Any, ImageSource]]]:
        step = self.batch_size
        return [self.items[i : i + step] for i in range(0, len(self.items), step)]

    def prepare(self, batch: list[tuple[Any, ImageSource]]) -> Inputs:
        sources = [s for _, s in batch]
        tensor, seen = _batch(sources, self.plan, self.scaling, self.options.preprocess, self.fit)
        if seen is not None:
            for (key, _), picture in zip(batch, seen, strict=True):
                if key in self.shown and picture is not None:
                    self.seen[key] = picture  # one key per store: safe from decoding threads
        if not self.plan.batched:
            tensor = tensor[0]
        if self.plan.encoded and self.plan.form == "ovms":
            return [ovms_input(self.plan.input, tensor)]
        return {self.plan.input: tensor}

    def prepared(self) -> Iterator[tuple[Inputs, int]]:
        """Each batch's inputs, in order.

        The first batch decodes in the caller's thread; when an image took longer than
        :data:`THREADED_DECODE_FROM` seconds, ``workers`` threads decode the rest ahead of the
        caller (Pillow releases the GIL while it inflates and resamples big images; for small
        ones a second thread only fights the caller for the GIL).
        """
        batches = iter(self.batches())
        first = next(batches, None)
        if first is None:
            return
        start = time.perf_counter()
        inputs = self.prepare(first)
        heavy = (time.perf_counter() - start) / len(first) >= THREADED_DECODE_FROM
        yield inputs, len(first)
        workers = self.options.workers
        if workers <= 0 or not heavy:
            for batch in batches:
                yield self.prepare(batch), len(batch)
            return
        with concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="nbinfer-images"
        ) as pool:
            ahead: deque[tuple[concurrent.futures.Future[Any], int]] = deque()
            try:
                for batch in batches:
                    ahead.append((pool.submit(self.prepare, batch), len(batch)))
                    if len(ahead) > workers:
                        fut, n = ahead.popleft()
                        yield fut.result(), n
                while ahead:
                    fut, n = ahead.popleft()
                    yield fut.result(), n
            finally:
                for fut, _ in ahead:
                    fut.cancel()

    def outputs(self) -> list[RequestedOutput]:
        count = self.options.top_k if self.server_topk else 0
        return [RequestedOutput(self.plan.output, class_count=count)]

    def top(self, result: _Result, n: int) -> tuple[Any, Any, list[str | None]]:
        """Class indices, scores and labels ``[n, k]`` of one batch's result."""
        arr = result.as_numpy(self.plan.output)
        if self.server_topk:
            rows = decode_classification(arr.reshape(n, -1))
            idx = np.array([[r.index for r in row] for row in rows], dtype=np.int64)
            score = np.array([[r.score for r in row] for row in rows], dtype=np.float32)
            names = [r.label for row in rows for r in row]
        else:
            idx, score = top_k(np.asarray(arr).reshape(n, -1), self.options.top_k)
            names = [None] * idx.size
        if self.labels is not None:
            own = self.labels
            names = [own[i] if i < len(own) else None for i in idx.reshape(-1).tolist()]
        return idx, score, names

    def take(self, sent: tuple[int, int], result: _Result) -> None:
        """File batch ``i`` (``n`` images) in its place: answers come in any order."""
        i, n = sent
        self.parts[i] = self.top(result, n)

    def bar(self) -> Any:
        show = self.options.progress
        if show is None:
            show = len(self.items) > self.batch_size
        return progress_bar(len(self.items), show=show, unit="img", desc="classify")

    def frame(self) -> ClassificationFrame:
        parts = [self.parts[i] for i in sorted(self.parts)]
        idx = np.concatenate([p[0] for p in parts])
        score = np.concatenate([p[1] for p in parts])
        names = [name for p in parts for name in p[2]]
        keys = [key for key, _ in self.items]
        return classification_frame(
            keys,
            idx,
            score,
            names,
            dict(self.items),
            inputs=self.seen,
            input_note=self.note(),
            show_input=bool(self.options.show_input),
        )

    def note(self) -> str:
        """How the model's input was made, in a few words (for the grid)."""
        plan = self.plan
        if plan.encoded:
            return "encoded bytes, decoded by the server"
        if self.options.preprocess is not None:
            return "your preprocess function"
        scaling = self.scaling if isinstance(self.scaling, str) else "your scaling function"
        kind = {1: "gray", 3: "RGB", 4: "RGBA"}[plan.channels]
        return f"{plan.height}x{plan.width} {kind}, fit {self.fit}, scaling {scaling}"


def _job(metadata: ModelMetadata, images: Any, options: Mapping[str, Any]) -> _Job:
    known = [f.name for f in fields(_Options)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InvalidInputError(f"unknown classify option(s) {unknown}; known: {', '.join(known)}")
    o = _Options(**options)
    if o.top_k < 1:
        raise InvalidInputError(f"top_k must be >= 1, got {o.top_k}")
    plan = plan_images(
        metadata,
        o.config,
        input=o.input,
        output=o.output,
        size=o.size,
        layout=o.layout,
        encoded=o.encoded,
    )
    items = expand_images(images)
    if not plan.batched:
        size = 1
    else:
        size = o.batch_size or plan.max_batch or DEFAULT_BATCH
        if plan.max_batch:
            size = min(size, plan.max_batch)
    scaling = config_scaling(o.config) if o.scaling is None else o.scaling
    if isinstance(scaling, str):
        _scaling_name(scaling)  # refused before any image is decoded
    fit = _job_fit(plan, o)
    own = read_labels(o.labels) if o.labels is not None else None
    if own is None and o.server_labels and plan.output in o.server_labels:
        own = list(o.server_labels[plan.output])
    use_server = "classification" in o.extensions if o.server_topk is None else o.server_topk
    shown = frozenset(key for key, _ in items[:SEEN_IMAGES])
    return _Job(o, plan, items, size, use_server, own, scaling, fit, shown=shown)


def _job_fit(plan: ImagePlan, o: _Options) -> str:
    """The fit of a classify call: ``fit=``, else the model's, checked before any decoding.

    Raises:
        InvalidInputError: An unknown fit, ``fit=`` with encoded images or with ``preprocess=``,
            or ``"ink"`` for a model that is not grayscale at a fixed size.
    """
    if o.fit is None:
        fit = config_fit(o.config)
        return fit if _inkable(plan) or plan.encoded else "resize"
    fit = _fit_name(o.fit)
    if plan.encoded:
        raise InvalidInputError(
            f"fit={o.fit!r} prepares pixels on the client, but input {plan.input!r} takes "
            "encoded images (decoded on the server); leave fit out"
        )
    if o.preprocess is not None:
        raise InvalidInputError("preprocess= replaces fit=; pass one of them")
    if fit == "ink" and not _inkable(plan):
        raise InvalidInputError(_not_inkable(plan))
    return fit


def _inkable(plan: ImagePlan) -> bool:
    return plan.channels == 1 and plan.height > 0 and plan.width > 0


def _not_inkable(plan: ImagePlan) -> str:
    return (
        f"fit='ink' is for small grayscale models of a fixed size; input {plan.input!r} "
        f"takes {plan.channels} channel(s) at {plan.height}x{plan.width} (use fit='resize')"
    )


def config_fit(config: Mapping[str, Any] | None) -> str:
    """How a model's config asks images to be fitted (``nbinfer.image.fit``; else resize).

    Raises:
        InvalidInputError: The config names an unknown fit.
    """
    params = (config or {}).get("parameters") or {}
    value = params.get(FIT_PARAMETER)
    return (
        _fit_name(str(value.get("string_value", "resize")))
        if isinstance(value, Mapping)
        else "resize"
    )


def config_scaling(config: Mapping[str, Any] | None) -> str:
    """The pixel scaling a model's config asks for (``nbinfer.image.scaling``; else none)."""
    params = (config or {}).get("parameters") or {}
    value = params.get(SCALING_PARAMETER)
    return str(value.get("string_value", "none")) if isinstance(value, Mapping) else "none"


def prepared_image(
    metadata: ModelMetadata,
    config: Mapping[str, Any] | None,
    image: Any,
    *,
    input: str | None = None,
    fit: str | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]:
    """One image as classify prepares it: the model's sample, and the picture it is.

    The one preprocessing of an image for a model (``session.classify``, ``session.infer``
    of a PIL image, the model browser's image form): fit (``fit=``, else the model's config
    parameter ``nbinfer.image.fit``, else ``"resize"``), scaling from the config, datatype and
    layout from the metadata.

    Args:
        metadata: The model's metadata.
        config: The model's config (``parameters``, ``max_batch_size``, formats), if known.
        image: A path, encoded bytes, a PIL image or an array.
        input: The image input (default: the only input).
        fit: ``"resize"`` or ``"ink"``; default: the model's.

    Returns:
        ``(sample, picture)``: the sample (no batch dim) to send, and what the model sees as an
        ``H x W`` / ``H x W x C`` array before scaling (``uint8``; ``None`` for encoded inputs,
        which the server decodes).

    Raises:
        InvalidInputError: The image cannot be read, the input does not take images, or the fit
            does not suit the model.
    """
    plan = plan_images(metadata, config, input=input)
    options = _Options(config=config, fit=fit, input=input)
    tensor, seen = _batch([image], plan, config_scaling(config), None, _job_fit(plan, options))
    sample = tensor[0] if plan.batched else tensor.reshape(plan.item_shape)
    return sample, (seen[0] if seen else None)


def scaled_pixels(
    pixels: np.ndarray[Any, Any], config: Mapping[str, Any] | None, datatype: str
) -> np.ndarray[Any, Any]:
    """``uint8`` pixels for a float input, scaled as the model's config declares (else as is).

    What ``session.infer(model, uint8_image)`` sends: the same numbers :meth:`Session.classify`
    would (``nbinfer.image.scaling``, e.g. ``"unit"``: ``/ 255``); without a declared scaling
    the pixels keep their values (the float cast is made by the one conversion rule).
    """
    scaling = config_scaling(config)
    if scaling.lower() == "none":
        return pixels
    target = numpy_dtype(datatype)
    return np.asarray(_scaled(pixels, scaling, target if target.kind == "f" else np.dtype("f4")))


def image_sample(
    metadata: ModelMetadata,
    config: Mapping[str, Any] | None,
    image: Any,
    *,
    input: str | None = None,
) -> np.ndarray[Any, Any]:
    """One image as one sample of an image input (no batch dim): classify's preprocessing.

    Raises:
        InvalidInputError: The image cannot be read, or the input does not take images.
    """
    return prepared_image(metadata, config, image, input=input)[0]


def classify_images(submit: SubmitFn, metadata: ModelMetadata, images: Any, **options: Any) -> Any:
    """Classify images with ``submit`` (a bound inference call); see :meth:`Session.classify`.

    Images are decoded in the calling thread while up to ``concurrency`` requests are in
    flight (``submit`` returns a future, e.g. ``Client.async_infer``).

    Args:
        submit: ``submit(inputs, outputs)`` returning a future of a result with ``as_numpy``.
        metadata: The model's metadata.
        images: Paths, globs, directories, PIL images, arrays, bytes, or a list of them.
        **options: ``config``, ``top_k``, ``labels``, ``server_labels``, ``extensions``,
            ``batch_size``, ``scaling``, ``preprocess``, ``size``, ``layout``, ``encoded``
            (``True`` / ``"triton"`` / ``"ovms"``), ``input``, ``output``, ``server_topk``,
            ``concurrency``, ``progress``, ``fit`` (``"resize"`` / ``"ink"``), ``show_input``
            (draw the model's input beside each image).

    Returns:
        A :class:`ClassificationFrame`.

    Raises:
        InvalidInputError: Unreadable images, a model that does not take images, bad options.
    """
    job = _job(metadata, images, options)
    outputs = job.outputs()
    batches = (((i, n), inputs, n) for i, (inputs, n) in enumerate(job.prepared()))
    run(
        batches,
        lambda inputs: submit(inputs, outputs),
        job.take,
        concurrency=job.options.concurrency,
        bar=job.bar(),
    )
    return job.frame()


async def aclassify_images(
    infer: AsyncInferFn, metadata: ModelMetadata, images: Any, **options: Any
) -> Any:
    """Like :func:`classify_images` with an ``async`` inference call (decoding stays threaded)."""
    job = _job(metadata, images, options)
    outputs = job.outputs()

    async def send(batch: list[tuple[Any, ImageSource]]) -> _Result:
        inputs = await asyncio.to_thread(job.prepare, batch)  # the loop keeps serving
        return await infer(inputs, outputs)

    batches = (((i, len(b)), b, len(b)) for i, b in enumerate(job.batches()))
    await arun(batches, send, job.take, concurrency=job.options.concurrency, bar=job.bar())
    return job.frame()
