"""Response outputs laid out as result columns, once for every frame library.

:func:`output_blocks` is the one rule (see :mod:`nbinfer.interop.pandas`, "Outputs"): which
columns an output becomes, their names and order. pandas (:func:`~nbinfer.interop.pandas.
outputs_to_dataframe`), Arrow (:mod:`nbinfer.interop.arrow`) and Polars
(:mod:`nbinfer.interop.polars`) build their frames from its blocks, so every library gets the
same columns.

Layer: interop (imports ``protocol`` only; no frame library).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from nbinfer.protocol.types import InferOutput

__all__ = ["CONFIG_LABELS", "OutputBlock", "config_labels", "output_blocks"]

#: The model-config parameter prefix naming an output's class labels (``nbinfer.labels.<output>``,
#: a JSON list as its ``string_value``).
CONFIG_LABELS = "nbinfer.labels."


def config_labels(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Class labels per output, from a model config's ``nbinfer.labels.<output>`` parameters."""
    labels: dict[str, list[str]] = {}
    params = config.get("parameters") or {}
    for pname, value in params.items():
        if pname.startswith(CONFIG_LABELS) and isinstance(value, Mapping):
            try:
                labels[pname[len(CONFIG_LABELS) :]] = list(
                    json.loads(value.get("string_value", "[]"))
                )
            except ValueError:
                continue
    return labels


def _as_text(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.empty(arr.shape, dtype=object)
    decoded: list[Any] = []
    for item in arr.ravel().tolist():
        if isinstance(item, bytes):
            try:
                decoded.append(item.decode())
            except UnicodeDecodeError:
                decoded.append(item)
        else:
            decoded.append(item)
    out.reshape(-1)[...] = decoded
    return out


def _classification_block(
    arr: np.ndarray[Any, Any], labels: Sequence[str] | None, prefix: str
) -> tuple[list[str], list[np.ndarray[Any, Any]]]:
    """``label`` / ``score`` columns (then ``label_2`` / ``score_2``, ...) of classifications."""
    rows = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr.reshape(-1, 1)
    texts = [v.decode() if isinstance(v, bytes) else str(v) for v in rows.reshape(-1).tolist()]
    parts = [t.split(":", 2) for t in texts]  # "score:index[:label]"
    score = np.array([float(p[0]) for p in parts], dtype=np.float64)
    index = [int(p[1]) for p in parts]
    label = np.empty(len(parts), dtype=object)
    known = list(labels or [])
    # the server sent no label: the model's, else the class index
    label[:] = [
        p[2] if len(p) > 2 else known[i] if i < len(known) else str(i)
        for p, i in zip(parts, index, strict=True)
    ]
    k = rows.shape[1]
    names_out: list[str] = []
    columns: list[np.ndarray[Any, Any]] = []
    for rank in range(k):
        suffix = "" if rank == 0 else f"_{rank + 1}"
        names_out += [f"{prefix}label{suffix}", f"{prefix}score{suffix}"]
        columns += [label.reshape(-1, k)[:, rank], score.reshape(-1, k)[:, rank]]
    return names_out, columns


class OutputBlock(NamedTuple):
    """Result columns of one output, as :func:`output_blocks` lays them out.

    ``values`` is ``[n, len(names)]`` (one column per name), or, when ``cells``, ``[n, ...]``
    for the one column ``names[0]`` whose rows are arrays; ``columns`` (classification
    blocks) lists one 1-D array per name instead.
    """

    names: list[str]
    values: np.ndarray[Any, Any] | None
    cells: bool = False
    columns: list[np.ndarray[Any, Any]] | None = None


def output_blocks(
    outputs: Sequence[InferOutput],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    expand: bool = True,
    classified: Sequence[str] = (),
) -> list[OutputBlock]:
    """The result columns of ``outputs`` (names, order, values), whatever frame holds them.

    The one rule of :func:`outputs_to_dataframe` (see the module docstring), shared by the
    Arrow and Polars results so every frame library gets the same columns.
    """
    labels = labels or {}
    blocks: list[OutputBlock] = []
    many_classified = len([o for o in outputs if o.name in classified]) > 1
    for out in outputs:
        arr = out.data
        if arr is None:
            continue
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if out.name in classified:
            prefix = f"{out.name}." if many_classified else ""
            names, cols = _classification_block(arr, labels.get(out.name), prefix)
            blocks.append(OutputBlock(names, None, columns=cols))
            continue
        if out.datatype == "BYTES":
            arr = _as_text(arr)
        if arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 1):
            blocks.append(OutputBlock([out.name], arr.reshape(-1, 1)))
        elif arr.ndim == 2 and expand:
            names = list(labels.get(out.name) or [])
            if len(names) != arr.shape[1]:
                names = [str(i) for i in range(arr.shape[1])]
            blocks.append(OutputBlock([f"{out.name}[{label}]" for label in names], arr))
        else:
            blocks.append(OutputBlock([out.name], arr, cells=True))
    return blocks
