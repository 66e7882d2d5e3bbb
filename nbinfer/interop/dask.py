"""Dask DataFrames: ``session.infer("model", ddf)`` is a lazy Dask frame, inferred on the workers.

Nothing is computed when the call is made: the output frame's ``meta`` (columns and dtypes) comes
from the model's metadata, and each partition becomes one task of ``ddf.map_partitions``. Inside
the worker that holds a partition, a session opened once per worker process (from a small
picklable :class:`WorkerRecipe`: the URLs, protocol and client options such as the token, never a
socket) runs the pandas path on it: the same column plan, chunks and checks as
``session.infer("model", pandas_df)``, so a Dask frame gives exactly the pandas path's rows. With
several URLs that session is a :class:`~nbinfer.ReplicaClient` one: the chunks of a partition
spread over the servers, and a server that dies mid-run costs no row.

Dask is the scheduler; nbinfer only supplies the per-partition function and its client. Dask is
imported lazily here and only here (``import nbinfer`` never loads it). Imports protocol and
errors; the session class reaches the workers inside the recipe (``opener``), not as an import.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.types import InferOutput, ModelMetadata, RequestedOutput

__all__ = ["SESSION_OPTIONS", "WorkerRecipe", "infer_lazily", "is_dask_frame"]

#: ``session.infer``'s own options, given to each partition's pandas path as they are.
SESSION_OPTIONS = (
    "outputs",
    "model_version",
    "as_frame",
    "columns",
    "batch_size",
    "concurrency",
    "progress",
    "expand",
    "classification",
    "inputs",
)

#: The sessions this process opened for partitions, by recipe (one per worker process).
_OPEN: dict[str, Any] = {}
_OPEN_LOCK = threading.Lock()


def is_dask_frame(data: Any) -> bool:
    """Whether ``data`` is a Dask DataFrame (without importing Dask)."""
    return type(data).__module__.split(".", 1)[0] in ("dask", "dask_expr") and hasattr(
        data, "map_partitions"
    )


@dataclasses.dataclass(frozen=True)
class WorkerRecipe:
    """How a worker opens its own session: picklable, no connection inside.

    Args:
        urls: The servers (one, or several replicas).
        options: Keyword arguments of the session (``protocol``, ``auth``, ``headers``,
            ``timeout`` ...): plain values only.
        opener: What opens it, as ``opener(target, tokens, **options)`` (pickled by
            reference: a partial of :func:`nbinfer.session.workers.open_session`).
        tokens: ``(url, token)`` of the local servers the driver's process started: the
            worker has no other way to know them.
    """

    urls: tuple[str, ...]
    options: tuple[tuple[str, Any], ...]
    opener: Callable[..., Any]
    tokens: tuple[tuple[str, str], ...] = ()

    def _key(self) -> str:
        return repr((self.urls, self.options, self.opener, self.tokens))

    def open(self) -> Any:
        """This process's session for the recipe: opened on first use, then reused."""
        key = self._key()
        with _OPEN_LOCK:
            session = _OPEN.get(key)
            if session is None:
                target: str | list[str] = self.urls[0] if len(self.urls) == 1 else list(self.urls)
                session = self.opener(target, self.tokens, **dict(self.options))
                _OPEN[key] = session
        return session


def _infer_partition(
    part: Any,
    recipe: WorkerRecipe,
    model: str,
    options: Mapping[str, Any],
    npartitions: int,
    partition_info: Mapping[str, Any] | None = None,
) -> Any:
    """One partition through the pandas path, on the worker's session."""
    number = (partition_info or {}).get("number", "?")
    try:
        return recipe.open().infer(model, part, progress=False, **options)
    except NbinferError as exc:
        where = f"partition {number} of {npartitions} (rows {len(part)})"
        exc.message = f"{where}: {exc.message}"
        exc.args = (exc.message, *exc.args[1:])
        exc.context.setdefault("partition", number)
        raise


@dataclasses.dataclass(frozen=True)
class _Empty:
    """The output meta, boxed: Dask passes it to the task as it is (not as a collection)."""

    frame: Any


def _infer_or_empty(
    part: Any,
    recipe: WorkerRecipe,
    model: str,
    options: Mapping[str, Any],
    npartitions: int,
    empty: _Empty,
    partition_info: Mapping[str, Any] | None = None,
) -> Any:
    if len(part) == 0:  # an empty partition: no request, the meta's columns on its index
        return empty.frame.set_axis(part.index[:0], axis=0)
    return _infer_partition(part, recipe, model, options, npartitions, partition_info)


def output_meta(
    meta: ModelMetadata,
    *,
    labels: Mapping[str, Sequence[str]],
    index: Any,
    outputs: Any = None,
    expand: bool = True,
) -> Any:
    """The empty DataFrame a model's outputs make (the lazy frame's ``meta``).

    Raises:
        InvalidInputError: An output whose per-row shape the metadata leaves open (``-1``
            beyond the batch dim) with ``expand=True``: its columns are unknown until it runs.
    """
    from nbinfer.interop.pandas import outputs_to_dataframe

    wanted = None
    if outputs is not None:
        names = [outputs] if isinstance(outputs, str) else list(outputs)
        wanted = [o.name if isinstance(o, RequestedOutput) else str(o) for o in names]
    specs = [o for o in meta.outputs if wanted is None or o.name in wanted]
    tensors = []
    for spec in specs:
        row = list(spec.shape[1:])
        if expand and any(d < 0 for d in row):
            raise InvalidInputError(
                f"output {spec.name!r} of model {meta.name!r} has shape {spec.shape}: its "
                "columns are unknown until it runs; a Dask frame needs them up front "
                "(pass expand=False for one column of arrays)",
                model=meta.name,
            )
        shape = [0, *(max(d, 0) for d in row)]
        data = np.empty(shape, dtype=numpy_dtype(spec.datatype))
        tensors.append(InferOutput(spec.name, spec.datatype, shape, data))
    return outputs_to_dataframe(tensors, labels=labels, index=index, expand=expand)


def infer_lazily(
    ddf: Any,
    recipe: WorkerRecipe,
    model: str,
    meta: ModelMetadata,
    labels: Mapping[str, Sequence[str]],
    options: Mapping[str, Any],
) -> Any:
    """``ddf`` inferred partition by partition on its workers: a lazy Dask DataFrame.

    ``options`` are ``session.infer``'s (``columns``, ``batch_size``, ``outputs`` ...), given
    to the pandas path of each partition as they are.

    Raises:
        InvalidInputError: An option a lazy frame cannot honour (``classification``,
            ``as_frame=False``, ``progress``), or outputs whose columns the metadata leaves
            open.
    """
    for name in ("classification", "progress"):
        if options.get(name):
            raise InvalidInputError(
                f"{name}= is not available on a Dask frame (each partition is inferred on a "
                "worker); run it on a pandas frame",
                model=model,
            )
    if options.get("as_frame") is False:
        raise InvalidInputError("a Dask frame gives a Dask frame: drop as_frame=False", model=model)
    empty = output_meta(
        meta,
        labels=labels,
        index=ddf._meta.index,
        outputs=options.get("outputs"),
        expand=bool(options.get("expand", True)),
    )
    kept = {k: v for k, v in options.items() if v is not None and k != "progress"}
    return ddf.map_partitions(
        _infer_or_empty,
        recipe,
        model,
        kept,
        ddf.npartitions,
        _Empty(empty),
        meta=empty,
        enforce_metadata=False,
        align_dataframes=False,
    )
