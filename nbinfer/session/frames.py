"""The DataFrame / inference front of a Session: infer, ainfer, classify, aclassify.

Owns how what people pass becomes requests: DataFrames planned onto the model's inputs
(``interop.pandas``) and cut into chunks (``interop.chunks``), the "one array, one sample" rule,
``classification=``, images (``interop.images``), and results back as DataFrames; it builds on
``binary`` (whether requests go as binary tensors). Each sync / async pair is declared once: a
private method holds the parameters, the docstring and the argument handling (``_infer_call``,
``_classify_call``) as an I/O-free op (``session.ops``): the metadata, config and capability
reads it needs are lookups it yields. ``_blocking`` / ``_awaiting`` derive both public faces
from it: the sync one performs the lookups on the sync client, the asyncio one awaits them on
the async client, so an ``await session.ainfer(...)`` never blocks its loop; a new option is
added in one place.

May import ``client``, ``errors``, ``protocol``, ``interop`` and the session's core, ops and
binary probe; never the server or the notebook layer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from nbinfer.client import Client, InferResult
from nbinfer.errors import InvalidInputError, count_option
from nbinfer.interop.dask import is_dask_frame as _is_dask_frame
from nbinfer.protocol.dtypes import DATATYPES
from nbinfer.protocol.tensors import Destination, conform
from nbinfer.protocol.types import (
    InferInput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RequestedOutput,
    TensorSpec,
)
from nbinfer.session.binary import BinaryProbe
from nbinfer.session.boundary import public
from nbinfer.session.ops import SessionOp, _awaiting, _blocking, imported
from nbinfer.session.workers import dask_frame

if TYPE_CHECKING:
    import pandas as pd

    from nbinfer.interop.chunks import FrameJob
    from nbinfer.interop.pandas import ColumnSelection, InputSpecs

__all__ = ["FrameFront"]

logger = logging.getLogger("nbinfer")


@dataclasses.dataclass
class _Call:
    """One ``infer`` / ``ainfer`` call after its arguments are read (the two faces share it).

    ``job`` is the chunked plan of a DataFrame; otherwise ``data`` is what one request sends
    and ``single`` says that a batch dim of one was added (and comes off the result again).
    """

    model: str
    version: str
    requested: Any
    explicit_binary: bool | None
    probe: bool
    options: dict[str, Any]
    as_frame: bool | None
    expand: bool
    concurrency: int | None = None
    progress: bool | None = None
    job: FrameJob | None = None
    index: Any = None
    like: Any = None  # the input frame: the result is a frame of its library
    data: Any = None
    single: bool = False
    nan: str = ""  # "2 of 5 rows had NaN inputs ('input')": said with the result
    lazy: Any = None  # a Dask frame's lazy result (interop.dask): the answer as it is

    def send_options(self, binary: bool | None) -> dict[str, Any]:
        """Keyword arguments of ``Client.infer`` / ``async_infer`` / ``AsyncClient.infer``."""
        return dict(self.options, outputs=self.requested, model_version=self.version, binary=binary)


@dataclasses.dataclass
class _Classify:
    """One ``classify`` / ``aclassify`` call after its arguments are read."""

    model: str
    version: str
    images: Any
    options: dict[str, Any]


class FrameFront(BinaryProbe):
    """The inference half of :class:`~nbinfer.Session` (see there)."""

    def _binary_now(self, call: _Call) -> bool | None:
        """``binary=`` for a request of ``call`` that is not the probe."""
        return self._binary_choice(call.explicit_binary)

    def _probing(self, call: _Call) -> bool:
        return call.probe and self._binary_found is None

    def _finish(self, call: _Call, result: InferResult) -> Any:
        """The answer of a call: the result, or a DataFrame (labelled columns, the index).

        NaN in the inputs is said: in the result's card (``result.notes``), or for a
        DataFrame in ``frame.attrs["note"]`` and a warning on the ``nbinfer`` logger.
        """
        if call.job is not None:
            as_frame = call.as_frame is not False
        else:
            as_frame = bool(call.as_frame)
            if call.single and not as_frame:
                result = _one_sample(result)
        if not as_frame:
            if call.nan:
                result.notes = (*result.notes, call.nan)
            result.labels = self._labels_cache.get((call.model, call.version), {})  # the card
            return result
        from nbinfer.interop.pandas import outputs_to_frame

        classified = [
            r.name for r in call.requested or () if isinstance(r, RequestedOutput) and r.class_count
        ]
        frame = outputs_to_frame(
            call.like,
            result.outputs,
            labels=self._labels_cache.get((call.model, call.version), {}),  # read by the op
            index=call.index,
            expand=call.expand,
            classified=classified,
            note=call.nan,
        )
        if call.nan:
            logger.warning("%s: %s", call.model, call.nan)
        return frame

    def _frame_result(self, call: _Call, outs: Any) -> Any:
        if call.job is not None:  # NaN rows are counted as the chunks are built
            call.nan = _nan_text(call.job.nan_inputs, call.job.nan_rows, call.job.plan.rows)
        return self._finish(call, InferResult(InferResponse(call.model, outs, call.version)))

    def _frame_job(
        self,
        model: str,
        version: str,
        data: Any,
        columns: ColumnSelection | None,
        batch_size: int | None,
        inputs: InputSpecs | None = None,
    ) -> SessionOp[FrameJob]:
        """The chunked plan of a DataFrame: columns mapped onto the model's inputs, row ranges."""
        from nbinfer.interop.chunks import FrameJob, chunk_rows
        from nbinfer.interop.pandas import plan_frame

        meta = yield from self._metadata_op(model, version)
        plan = plan_frame(data, meta, columns=columns, inputs=inputs, said=self._inferred_specs)
        yield from self._labels_op(model, version)  # also reads max_batch_size from the config
        rows = chunk_rows(
            plan,
            meta,
            batch_size=batch_size,
            max_batch_size=self._max_batch.get((model, version), 0),
        )
        return FrameJob(plan, rows)

    def _requested(
        self,
        model: str,
        version: str,
        outputs: Sequence[str | RequestedOutput] | str | None,
        classification: int | None,
    ) -> SessionOp[Any]:
        """``outputs`` as sent: with ``classification=k``, every (named) output asks for top-k."""
        if not classification:
            return outputs if outputs is None else _output_list(outputs)
        try:
            count = int(classification)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"classification= takes the number of top classes, not {classification!r}",
                model=model,
            ) from exc
        if outputs is None:
            meta = yield from self._metadata_op(model, version)
            names = [o.name for o in meta.outputs]
        else:
            names = [o if isinstance(o, str) else o.name for o in _output_list(outputs)]
        return [RequestedOutput(name, class_count=count) for name in names]

    # -- infer / ainfer: one declaration (parameters, docstring, argument handling), two faces --

    def _infer_call(
        self,
        /,
        model: str,
        data: Any,
        *,
        outputs: Sequence[str | RequestedOutput] | str | None = None,
        model_version: str = "",
        as_frame: bool | None = None,
        columns: ColumnSelection | None = None,
        batch_size: int | None = None,
        concurrency: int | None = None,
        progress: bool | None = None,
        expand: bool = True,
        classification: int | None = None,
        inputs: InputSpecs | None = None,
        **kwargs: Any,
    ) -> SessionOp[_Call]:
        """Run inference on ``model``; a DataFrame of any size is split, pipelined and reassembled.

        Args:
            model: The model name.
            data: A DataFrame (pandas, ``pyarrow.Table`` / ``RecordBatch`` or
                ``polars.DataFrame``, one rule for all: columns named after the inputs, the
                feature columns of a single ``[-1, k]`` input, one column per input in the
                model's declared order, or as mapped by ``columns=``), a dict
                ``{input: array}``, a list of :class:`~nbinfer.InferInput` or an
                :class:`~nbinfer.InferRequest`.
            outputs: Output names or :class:`~nbinfer.RequestedOutput`; default all.
            model_version: A specific version.
            as_frame: Return a DataFrame (default: when ``data`` is a DataFrame).
            columns: DataFrame only: ``{input: column or [columns]}`` (or a list of columns for
                a single-input model).
            batch_size: DataFrame only: rows per request (default: the model's
                ``max_batch_size``, else about 1 MiB of tensor data per request).
            concurrency: DataFrame only: requests in flight (default 8; the sync client runs
                at most its ``max_workers`` at once).
            progress: DataFrame only: a progress bar (``tqdm.auto``: a widget in notebooks);
                default on when the frame takes more than one request.
            expand: ``[n, k]`` outputs as ``k`` columns (default) or one column of arrays.
            classification: Ask the server for the top-k classes of each output (v2
                classification extension); the frame gets ``label`` / ``score`` columns.
            inputs: DataFrame only: the input specs to map the frame onto, overriding the
                server's metadata: ``{input: datatype}``, ``{input: (datatype, shape)}`` or a
                list of :class:`~nbinfer.TensorSpec`. Without it, a model whose metadata
                declares no inputs (or no datatypes / shapes, common on KServe) gets one input
                per column, named after it, its datatype from the column's dtype (arrays in
                cells: stacked tensors of their dtype; text: BYTES).
            **kwargs: Passed to :meth:`nbinfer.Client.infer` (request_id, parameters,
                timeout, priority, ...).

        Returns:
            A frame of the input's library (pandas: one row per input row, the input's index;
            Arrow: a Table / RecordBatch; Polars: a DataFrame; a pandas DataFrame for other
            data with ``as_frame=True``) or an :class:`~nbinfer.InferResult`.

        Numbers are sent as each input declares them when no value changes (float64 -> FP32
        within range, integers that fit exactly; ``uint8`` pixels for a float input get the
        scaling the model's config declares); NaN in a float input is sent and noted on the
        result (``result.notes``, a DataFrame's ``attrs["note"]``). See docs/session.md,
        "Datatypes: value-safe conversion".

        Raises:
            InvalidInputError: The data does not fit the model's inputs (a column that cannot be
                coerced is named, with the model, input and dtypes; a frame or array of the
                wrong width says how many columns / values the model needs).
            DataTypeError: A value would change on conversion (out of range, NaN or a fraction
                into an integer); the message names the value and the cast to write.
            ModelNotFoundError: Unknown model or version.
            ConnectError: The server cannot be reached; for the session's own local server
                that died, the message says so and how to go on (``session.restart()``).

        Example::

            frame = session.infer("iris", df)                     # any number of rows
            top = session.infer("iris", df, classification=1)     # label / score columns
        """
        unknown = sorted(set(kwargs) - _client_options())
        if unknown:  # said here, before a chunk is sent (a worker thread would wrap it)
            raise InvalidInputError(
                f"unknown option(s) {unknown}; besides its own, inference takes those of "
                f"Client.infer: {sorted(_client_options() - {'outputs', 'model_version'})}",
                model=model,
            )
        self._meet(model)
        explicit = kwargs.pop("binary", None)
        call = _Call(
            model,
            model_version,
            (yield from self._requested(model, model_version, outputs, classification)),
            explicit,
            (yield from self._binary_unknown(explicit)),
            kwargs,
            as_frame,
            expand,
            _count("concurrency", concurrency),
            progress,
        )
        rows = _count("batch_size", batch_size)  # DataFrame only, but never a bad value
        if _is_dask_frame(data):  # lazy: each partition inferred on its worker (interop.dask)
            call.lazy = yield from dask_frame(self, model, data, locals(), kwargs)
        elif _is_frame(data):
            call.job = yield from self._frame_job(model, model_version, data, columns, rows, inputs)
            call.like = data  # pandas, Arrow or Polars: the result follows it
            call.index = data.index if _is_frame(data, "pandas") else None
        else:
            call.data, call.single = yield from self._samples(model, model_version, data)
            if isinstance(call.data, Mapping):
                call.nan = _data_nan_note(call.data)
            yield from self._labels_op(model, model_version)  # the result's card names classes
        return call

    def _send(self, call: _Call) -> Any:
        """Run a read ``infer`` call on the sync client (chunks on its worker threads)."""

        def send(payload: Any, binary: bool | None) -> concurrent.futures.Future[InferResult]:
            return self.client.async_infer(call.model, payload, **call.send_options(binary))

        if call.lazy is not None:
            return call.lazy
        if call.job is None:
            if call.probe:
                result = self._probe_binary(lambda b: send(call.data, b)).result()
            else:  # the sync client's own path: no worker thread for one request
                options = call.send_options(self._binary_now(call))
                result = self.client.infer(call.model, call.data, **options)
            return self._finish(call, result)
        from nbinfer.interop.chunks import DEFAULT_CONCURRENCY, infer_frame

        def submit(payload: Any) -> concurrent.futures.Future[InferResult]:
            if self._probing(call):
                return self._probe_binary(lambda b: send(payload, b))
            return send(payload, self._binary_now(call))

        try:
            outs = infer_frame(
                call.job,
                submit,
                concurrency=call.concurrency or DEFAULT_CONCURRENCY,
                progress=call.progress,
            )
        except KeyboardInterrupt:
            self.client._abort_in_flight()  # the chunks in flight on the worker threads
            raise
        return self._frame_result(call, outs)

    async def _asend(self, call: _Call) -> Any:
        """Run a read ``ainfer`` call on the session's async client."""
        aclient = self._aclient()
        lock = asyncio.Lock()  # one probe per call

        def send(payload: Any) -> Callable[[bool | None], Awaitable[InferResult]]:
            def with_binary(binary: bool | None) -> Awaitable[InferResult]:
                return aclient.infer(call.model, payload, **call.send_options(binary))

            return with_binary

        def submit(payload: Any) -> Awaitable[InferResult]:
            if self._probing(call):
                return self._aprobe_binary(send(payload), lock)
            return send(payload)(self._binary_now(call))

        if call.lazy is not None:
            return call.lazy
        if call.job is None:
            return self._finish(call, await submit(call.data))
        await imported("nbinfer.interop.chunks")
        from nbinfer.interop.chunks import DEFAULT_CONCURRENCY, ainfer_frame

        outs = await ainfer_frame(
            call.job,
            submit,
            concurrency=call.concurrency or DEFAULT_CONCURRENCY,
            progress=call.progress,
        )
        return self._frame_result(call, outs)

    infer = public(_blocking("infer", _infer_call, _send))
    ainfer = public(
        _awaiting(
            "ainfer",
            _infer_call,
            _asend,
            doc="Like :meth:`infer`, from a coroutine (``await session.ainfer(...)``).",
        )
    )

    # -- one array, one sample --------------------------------------------------------------

    def _samples(self, model: str, version: str, data: Any) -> SessionOp[tuple[Any, bool]]:
        """``data`` as sent: one array for a one-input model, single samples batched.

        The rule (docs/session.md, "One array, one sample"): a value that is not a mapping is
        the input of a model with exactly one input; a PIL image becomes that input's pixels
        as :meth:`classify` prepares them; a value with exactly one dim fewer than an input
        declared ``[-1, ...]`` (the batch dim) is one sample: it is sent as a batch of one and
        the result's batch dim is taken off again. Returns the data and whether that happened.

        Raises:
            InvalidInputError: Several inputs for one value, a sample whose dims do not match
                the declared ones, or single samples mixed with batches.
        """
        if isinstance(data, InferRequest) or _is_input_list(data):
            return data, False
        meta = yield from self._optional_metadata_op(model, version)
        if meta is None or not meta.inputs:
            return data, False
        if not isinstance(data, Mapping):
            if len(meta.inputs) != 1:
                names = ", ".join(s.name for s in meta.inputs)
                raise InvalidInputError(
                    f"model {model!r} has {len(meta.inputs)} inputs ({names}): pass "
                    "{name: data}; a single array is the input of a one-input model",
                    model=model,
                )
            data = {meta.inputs[0].name: data}
        specs = {s.name: s for s in meta.inputs}
        sent: dict[str, Any] = {}
        single: list[str] = []
        batched: list[str] = []
        for name, value in data.items():
            spec = specs.get(name)
            if _is_image(value):
                value = yield from self._image_sample(meta, version, name, value)
            elif _is_pixels(value, spec):
                value = yield from self._pixels(meta, version, value, spec)
            if spec is not None and _is_numeric(
                value, spec
            ):  # as declared when no value changes (else refused)
                value = conform(value, spec.datatype, Destination(model, name))
            if spec is None or len(spec.shape) < 2 or spec.shape[0] != -1:
                sent[name] = value
                continue
            if isinstance(value, InferInput) or np.ndim(value) != len(spec.shape) - 1:
                if not isinstance(value, InferInput) and np.ndim(value) == len(spec.shape):
                    _check_sample(model, spec, list(np.shape(value))[1:], batch=True)
                sent[name] = value
                batched.append(name)
                continue
            _check_sample(model, spec, list(np.shape(value)), batch=False)
            sent[name] = value[np.newaxis] if isinstance(value, np.ndarray) else [value]
            single.append(name)
        if single and batched:
            raise InvalidInputError(
                f"model {model!r}: {single} are single samples but {batched} are batches; "
                "pass every input as a batch ([n, ...]) or every input as one sample",
                model=model,
            )
        return sent, bool(single)

    def _pixels(self, meta: ModelMetadata, version: str, pixels: Any, spec: Any) -> SessionOp[Any]:
        """A ``uint8`` array for a float input: scaled as the model's config declares."""
        from nbinfer.interop.images import scaled_pixels

        config = yield from self._config_op(meta.name, version)
        return scaled_pixels(pixels, config, spec.datatype)

    def _image_sample(
        self, meta: ModelMetadata, version: str, name: str, image: Any
    ) -> SessionOp[Any]:
        from nbinfer.interop.images import image_sample

        config = yield from self._config_op(meta.name, version)
        return image_sample(meta, config, image, input=name)

    # -- images ----------------------------------------------------------------------------

    def _image_options(
        self, model: str, version: str, options: dict[str, Any]
    ) -> SessionOp[dict[str, Any]]:
        if "config" not in options:
            options["config"] = yield from self._config_op(model, version)
        if "server_labels" not in options:
            options["server_labels"] = yield from self._labels_op(model, version)
        if "extensions" not in options:
            caps = yield from self._capabilities_op()  # metadata read once
            options["extensions"] = caps.extensions
        return options

    # -- classify / aclassify: one declaration, two faces ------------------------------------

    def _classify_call(
        self, /, model: str, images: Any, *, top_k: int = 5, model_version: str = "", **options: Any
    ) -> SessionOp[_Classify]:
        """Classify images: top-k classes per image as a DataFrame that displays as a grid.

        Preprocessing comes from the model's metadata (size, channels, layout, datatype); see
        :mod:`nbinfer.interop.images`. Batches follow ``max_batch_size``; the next batches
        decode while one is in flight; a progress bar shows for more than one batch.

        Args:
            model: An image classification model.
            images: Paths, globs (``"scans/*.png"``), directories, PIL images, arrays, encoded
                bytes, or a list of them.
            top_k: Classes per image.
            model_version: A specific version.
            **options: ``labels`` (list or labels file), ``scaling`` (``"none"``, ``"unit"``,
                ``"inception"``, ``"vgg"`` or a function of the ``uint8`` NHWC batch),
                ``preprocess`` (a function of one PIL image), ``size``, ``layout``,
                ``encoded`` (send JPEG / PNG bytes as BYTES; ``"ovms"``: in OpenVINO Model
                Server's form), ``input``, ``output``,
                ``batch_size``, ``server_topk``, ``concurrency`` (requests in flight),
                ``workers`` (decoding threads for big images), ``progress``, ``fit``
                (``"resize"``, or ``"ink"``: crop to the ink, polarity, pad, area resize, as
                small grayscale models like ``digits`` were trained; default: the model's
                config parameter ``nbinfer.image.fit``), ``show_input`` (draw the input the
                model received beside each image; every card offers it in its details).

        Returns:
            A DataFrame with columns ``image`` (path or position), ``rank``, ``label``,
            ``score``, ``class``; one row per image and rank.

        Raises:
            InvalidInputError: Unreadable images or a model that does not take images.
            ModelNotFoundError: Unknown model or version.

        Example::

            top = session.classify("digits", "digits/*.png", top_k=3)
            top[top["rank"] == 1]
        """
        self._meet(model)
        options = yield from self._image_options(model, model_version, dict(options, top_k=top_k))
        return _Classify(model, model_version, images, options)

    def _classify_now(self, call: _Classify) -> pd.DataFrame:
        """Run a read ``classify`` call on the sync client (batches on its worker threads)."""
        from nbinfer.interop.images import classify_images

        def submit(inputs: dict[str, Any], outputs: list[RequestedOutput]) -> Any:
            return self.client.async_infer(
                call.model,
                inputs,
                outputs=outputs,
                model_version=call.version,
                binary=self._binary_choice(None),
            )

        metadata = self.client.get_model_metadata(call.model, call.version)
        try:
            frame: pd.DataFrame = classify_images(submit, metadata, call.images, **call.options)
        except KeyboardInterrupt:
            self.client._abort_in_flight()  # the batches in flight on the worker threads
            raise
        return frame

    async def _aclassify_now(self, call: _Classify) -> pd.DataFrame:
        """Run a read ``aclassify`` call on the session's async client."""
        await imported("nbinfer.interop.images")  # Pillow's first import: off the loop
        from nbinfer.interop.images import aclassify_images

        aclient = self._aclient()

        async def infer(inputs: dict[str, Any], outputs: list[RequestedOutput]) -> InferResult:
            return await aclient.infer(
                call.model,
                inputs,
                outputs=outputs,
                model_version=call.version,
                binary=self._binary_choice(None),
            )

        metadata = await aclient.get_model_metadata(call.model, call.version)
        frame: pd.DataFrame = await aclassify_images(infer, metadata, call.images, **call.options)
        return frame

    classify = public(_blocking("classify", _classify_call, _classify_now))
    aclassify = public(
        _awaiting(
            "aclassify",
            _classify_call,
            _aclassify_now,
            doc="Like :meth:`classify`, from a coroutine "
            "(inference on the session's async client).",
        )
    )


@functools.cache
def _client_options() -> frozenset[str]:
    """The keyword options of ``Client.infer`` (``AsyncClient.infer`` takes the same)."""
    parameters = inspect.signature(Client.infer).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


def _output_list(outputs: Sequence[str | RequestedOutput] | str) -> list[str | RequestedOutput]:
    """``outputs=`` as a list of names / RequestedOutput (one name may stand alone)."""
    listed = [outputs] if isinstance(outputs, str | RequestedOutput) else outputs
    if not isinstance(listed, Sequence) or not all(
        isinstance(o, str | RequestedOutput) for o in listed
    ):
        raise InvalidInputError(
            f"outputs= takes output names or RequestedOutput (or a list of them), not {outputs!r}"
        )
    return list(listed)


def _count(option: str, value: Any) -> int | None:
    """A whole-number option >= 1 as given (``None``: its default), checked whatever the data."""
    return None if value is None else count_option(option, value)


def _is_frame(data: Any, library: str | None = None) -> bool:
    """A pandas / Arrow / Polars frame (of ``library`` if given), importing none of them."""
    from nbinfer.interop.pandas import frame_library

    found = frame_library(data)
    return found is not None and library in (None, found)


def _is_input_list(data: Any) -> bool:
    return isinstance(data, list | tuple) and bool(data) and isinstance(data[0], InferInput)


def _check_sample(model: str, spec: TensorSpec, got: list[int], *, batch: bool) -> None:
    """Raise when a sample's dims (``got``, batch dim off) differ from ``spec``'s declared ones.

    A ``[-1, k]`` input says it in the words of a table: "iris needs 4 values per row, got 3".
    """
    item = spec.shape[1:]
    if all(d in (-1, g) for d, g in zip(item, got, strict=True)):
        return
    if len(item) == 1:
        k = item[0]
        fix = f"Pass {k} values per row: shape [{k}] for one sample, [n, {k}] for n rows."
        message = f"{model} needs {item[0]} values per {'row' if batch else 'sample'}, got {got[0]}"
    else:
        fix = f"Pass one sample of shape {item}, or a batch [n, {', '.join(map(str, item))}]."
        message = f"{model} needs samples of shape {item}, got {got}"
    raise InvalidInputError(
        f"{message}: input {spec.name!r} takes {spec.datatype} {spec.shape}. {fix}",
        hint=fix,
        model=model,
        tensor=spec.name,
        expected=item,
        got=got,
    )


def _is_numeric(value: Any, spec: TensorSpec) -> TypeGuard[np.ndarray[Any, Any]]:
    """A numeric array meeting an input declared with a numeric datatype."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype.kind in "biuf"
        and spec.datatype in DATATYPES
        and spec.datatype != "BYTES"
    )


def _is_pixels(value: Any, spec: TensorSpec | None) -> bool:
    """A ``uint8`` array meeting a float input (an image as pixels: the model's scaling)."""
    return (
        spec is not None
        and isinstance(value, np.ndarray)
        and value.dtype == np.uint8
        and spec.datatype in ("FP16", "FP32", "FP64", "BF16")
    )


def _nan_rows(arr: Any) -> Any:
    """Per row (the first dim), whether a float array has NaN there; None for other data."""
    if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f" or not arr.size:
        return None
    if not np.isnan(arr.min()):  # one pass without a temporary: min propagates NaN
        return None
    return np.isnan(arr.reshape(len(arr), -1) if arr.ndim else arr.reshape(1, 1)).any(axis=1)


def _nan_note(found: Sequence[tuple[str, Any]]) -> str:
    """``"2 of 5 rows had NaN inputs ('x'); ..."`` from ``(input, NaN per row)``, or ``""``."""
    hit: Any = None
    names: list[str] = []
    for name, rows in found:
        if rows is None or not rows.any():
            continue
        if name not in names:
            names.append(name)
        hit = rows if hit is None or len(hit) != len(rows) else hit | rows
    return "" if hit is None else _nan_text(names, int(hit.sum()), len(hit))


def _nan_text(names: Sequence[str], hit: int, rows: int) -> str:
    """The note of ``hit`` rows of ``rows`` with NaN in the inputs ``names`` (``""``: none)."""
    if not hit:
        return ""
    listed = ", ".join(repr(n) for n in names)
    if rows == 1:
        return f"the input had NaN values ({listed}); NaN in, NaN out: check the outputs"
    return f"{hit} of {rows} rows had NaN inputs ({listed}); NaN in, NaN out: their outputs are NaN"


def _data_nan_note(data: Mapping[str, Any]) -> str:
    return _nan_note([(name, _nan_rows(value)) for name, value in data.items()])


def _is_image(value: Any) -> bool:
    """A PIL image (without importing PIL when nobody has)."""
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(value, image.Image)


def _one_sample(result: InferResult) -> InferResult:
    """``result`` with the batch dim of one (added for a single sample) taken off its outputs."""
    outputs = [
        dataclasses.replace(
            out,
            shape=out.shape[1:],
            data=None if out.data is None else out.data.reshape(out.shape[1:]),
        )
        if out.shape[:1] == [1]
        else out
        for out in result.outputs
    ]
    return InferResult(dataclasses.replace(result.response, outputs=outputs), result.headers)
