"""Images -> a model's input tensor: sources read, the plan from metadata, pixels laid out.

The preprocessing half of :mod:`nbinfer.interop.images` (which re-exports its public names and
runs the classify pipeline): :func:`expand_images` turns paths, globs, directories, PIL images,
arrays and encoded bytes into sources; :func:`plan_images` reads the model's single image input
(size, channels, layout, datatype, batching, encoded or not) off its metadata and config;
:func:`pixels` decodes, converts, fits, stacks, scales and lays out a batch for that plan, and
:func:`encoded_batch` / :func:`ovms_input` carry encoded images as BYTES.

Layer: interop (imports ``nbinfer.errors`` and ``protocol`` only, plus Pillow); never the
client, transports, session, server or notebook.
"""

from __future__ import annotations

import glob
import io
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.inkfit import FITS, fit_ink_image
from nbinfer.protocol.tensors import Destination, conform
from nbinfer.protocol.types import InferInput, ModelMetadata

__all__ = [
    "ENCODED_FORMS",
    "IMAGE_SUFFIXES",
    "SCALINGS",
    "SEEN_SIDE",
    "ImagePlan",
    "ImageSource",
    "Scaling",
    "checked_fit",
    "checked_scaling",
    "encode_image",
    "encoded_batch",
    "expand_images",
    "inkable",
    "load_image",
    "not_inkable",
    "ovms_input",
    "pixel_batch",
    "pixels",
    "plan_images",
    "prepared_batch",
    "read_file",
    "scaled",
]

#: Named scalings (Triton image client's NONE / INCEPTION / VGG plus ``unit`` = ``[0, 1]``).
SCALINGS = ("none", "unit", "inception", "vgg")
#: File suffixes taken from a directory.
IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)
_VGG_MEANS = {1: (128.0,), 3: (123.0, 117.0, 104.0)}
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
#: How encoded images travel: Triton's length-prefixed BYTES, or OpenVINO Model Server's form.
ENCODED_FORMS = ("triton", "ovms")
SEEN_SIDE = 96
Scaling = str | Callable[[np.ndarray[Any, Any]], Any]
ImageSource = Any  # str | os.PathLike | bytes | PIL.Image.Image | np.ndarray


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


def checked_scaling(scaling: str) -> str:
    """A named scaling, lowercased; refused when unknown (before any image is decoded)."""
    name = scaling.lower()
    if name not in SCALINGS:
        raise InvalidInputError(f"unknown scaling {scaling!r}; known: {', '.join(SCALINGS)}")
    return name


def scaled(batch: np.ndarray[Any, Any], scaling: Scaling, dtype: np.dtype[Any]) -> Any:
    """A ``uint8`` ``[N, H, W, C]`` batch scaled (floats of ``dtype`` unless ``"none"``)."""
    if callable(scaling):
        return scaling(batch)
    name = checked_scaling(scaling)
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


def checked_fit(fit: str) -> str:
    """A fit name (:data:`~nbinfer.protocol.inkfit.FITS`), lowercased; refused when unknown."""
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
    fit = checked_fit(fit)
    mode = _MODES[plan.channels]
    size = (plan.width, plan.height) if plan.width > 0 and plan.height > 0 else None
    if fit == "ink" and not inkable(plan):
        raise InvalidInputError(not_inkable(plan))
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
    out = conform(np.asarray(scaled(batch, scaling, dtype)), plan.datatype, to)
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


def prepared_batch(
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


def inkable(plan: ImagePlan) -> bool:
    """Whether ``fit="ink"`` suits the plan: one channel at a fixed size."""
    return plan.channels == 1 and plan.height > 0 and plan.width > 0


def not_inkable(plan: ImagePlan) -> str:
    """Why ``fit="ink"`` does not suit the plan (the message of the refusal)."""
    return (
        f"fit='ink' is for small grayscale models of a fixed size; input {plan.input!r} "
        f"takes {plan.channels} channel(s) at {plan.height}x{plan.width} (use fit='resize')"
    )
