"""Image classification over any v2 server: Pillow preprocessing from the model's metadata.

Layer: interop (imports ``nbinfer.errors``, ``protocol`` and its interop siblings only, plus
Pillow); never the client, transports, session, server or notebook. The answer, a
:class:`~nbinfer.interop.image_frame.ClassificationFrame`, lives in ``image_frame.py``; reading
sources, the plan and the pixels live in ``image_tensors.py`` (re-exported here). This module
runs the pipeline: options, batches, decoding threads, requests in flight, top-k.

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
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nbinfer.errors import InvalidInputError, count_option
from nbinfer.interop._inflight import arun, progress_bar, run
from nbinfer.interop.image_frame import ClassificationFrame, classification_frame
from nbinfer.interop.image_tensors import (
    ENCODED_FORMS,
    SCALINGS,
    ImagePlan,
    ImageSource,
    Scaling,
    checked_fit,
    checked_scaling,
    encode_image,
    encoded_batch,
    expand_images,
    inkable,
    load_image,
    not_inkable,
    ovms_input,
    pixels,
    plan_images,
    prepared_batch,
    read_file,
    scaled,
)
from nbinfer.protocol.classification import decode_classification, top_k
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.inkfit import FIT_PARAMETER, FITS
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
#: Images per request for a model whose leading dim is a free ``-1`` (no max_batch_size).
DEFAULT_BATCH = 64
#: Decoding threads for big images (see :data:`THREADED_DECODE_FROM`).
DEFAULT_WORKERS = min(4, (os.cpu_count() or 2) + 1)
#: Seconds per image of the first batch above which later batches decode in threads.
THREADED_DECODE_FROM = 150e-6
#: The model inputs kept with a frame (for its grid: the first 48 images), each at most
#: :data:`~nbinfer.interop.image_tensors.SEEN_SIDE` big.
SEEN_IMAGES = 48


class _Result(Protocol):
    def as_numpy(self, name: str) -> np.ndarray[Any, Any]: ...


#: One request's inputs: ``{name: array}``, or a list of ready tensors (OVMS's encoded form).
Inputs = dict[str, np.ndarray[Any, Any]] | list[InferInput]
#: ``submit(inputs, outputs)`` -> a future of a result with ``as_numpy`` (``Client.async_infer``);
#: ``inputs`` is an :data:`Inputs`, which ``Client.infer`` takes in both shapes.
SubmitFn = Callable[[Any, list[RequestedOutput]], "concurrent.futures.Future[Any]"]
AsyncInferFn = Callable[[Any, list[RequestedOutput]], Awaitable[_Result]]


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
        tensor, seen = prepared_batch(
            sources, self.plan, self.scaling, self.options.preprocess, self.fit
        )
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
    for name, least in (("top_k", 1), ("concurrency", 1), ("workers", 0), ("batch_size", 1)):
        value = getattr(o, name)
        if value is not None:  # batch_size None: the model's max_batch_size
            count_option(name, value, minimum=least)  # workers=0: decode on the caller's thread
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
        checked_scaling(scaling)  # refused before any image is decoded
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
        return fit if inkable(plan) or plan.encoded else "resize"
    fit = checked_fit(o.fit)
    if plan.encoded:
        raise InvalidInputError(
            f"fit={o.fit!r} prepares pixels on the client, but input {plan.input!r} takes "
            "encoded images (decoded on the server); leave fit out"
        )
    if o.preprocess is not None:
        raise InvalidInputError("preprocess= replaces fit=; pass one of them")
    if fit == "ink" and not inkable(plan):
        raise InvalidInputError(not_inkable(plan))
    return fit


def config_fit(config: Mapping[str, Any] | None) -> str:
    """How a model's config asks images to be fitted (``nbinfer.image.fit``; else resize).

    Raises:
        InvalidInputError: The config names an unknown fit.
    """
    params = (config or {}).get("parameters") or {}
    value = params.get(FIT_PARAMETER)
    return (
        checked_fit(str(value.get("string_value", "resize")))
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
    tensor, seen = prepared_batch(
        [image], plan, config_scaling(config), None, _job_fit(plan, options)
    )
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
    return np.asarray(scaled(pixels, scaling, target if target.kind == "f" else np.dtype("f4")))


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
