"""pandas DataFrame <-> v2 tensors, guided by the model's metadata.

How a DataFrame becomes inputs (first rule that applies):

1. every model input is a column of the frame: each column becomes that input (cells that are
   arrays or lists are stacked, so an image column works);
2. the model has one input of shape ``[-1, k]`` (or ``[k]`` with batching): the frame's ``k``
   columns, in order, become that input, one row per batch element.

Outputs come back as columns: an output of shape ``[n]`` or ``[n, 1]`` is one column named after
it; ``[n, k]`` becomes ``k`` columns named ``<output>[<label or index>]`` (class labels when the
model has them); deeper outputs stay one column holding an array per row. BYTES become ``str``
when they are valid UTF-8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.types import InferInput, InferOutput, ModelMetadata, TensorSpec

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dataframe_to_inputs", "outputs_to_dataframe"]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:  # pragma: no cover - pandas is a runtime dependency
        raise ImportError("DataFrame support needs pandas: pip install pandas") from exc
    return pandas


def _column_array(series: pd.Series[Any], spec: TensorSpec) -> np.ndarray[Any, Any]:
    values: np.ndarray[Any, Any] = series.to_numpy()
    if values.dtype == object and len(values) and isinstance(values[0], np.ndarray | list | tuple):
        values = np.stack([np.asarray(v) for v in values])
    if spec.datatype == "BYTES":
        out = np.empty(values.shape, dtype=object)
        out[...] = [v.encode() if isinstance(v, str) else v for v in values.ravel()]
        values = out.reshape(values.shape)
    else:
        values = values.astype(numpy_dtype(spec.datatype), copy=False)
    # A column feeding an input declared [-1, 1] (or [1] with batching) gets its trailing axis.
    if values.ndim == 1 and len(spec.shape) >= 2 and spec.shape[-1] == 1:
        values = values.reshape(-1, 1)
    return values


def dataframe_to_inputs(df: pd.DataFrame, metadata: ModelMetadata) -> list[InferInput]:
    """Turn a DataFrame into the model's inputs, one row per batch element.

    Raises:
        InvalidInputError: the frame's columns match neither the model's input names nor its
            single ``[-1, k]`` input; the message lists what the model expects.
    """
    columns = [str(c) for c in df.columns]
    inputs = metadata.inputs
    if inputs and all(spec.name in columns for spec in inputs):
        result = []
        for spec in inputs:
            arr = _column_array(df[spec.name], spec)
            result.append(InferInput(spec.name, spec.datatype, list(arr.shape), arr))
        return result
    if len(inputs) == 1 and len(inputs[0].shape) >= 1 and inputs[0].shape[-1] in (len(columns), -1):
        spec = inputs[0]
        if spec.datatype == "BYTES":
            raise InvalidInputError(
                f"model {metadata.name!r}: a BYTES input {spec.name!r} must come from a column "
                f"named {spec.name!r}; the frame has columns {columns}"
            )
        arr = np.ascontiguousarray(df.to_numpy(dtype=numpy_dtype(spec.datatype)))
        return [InferInput(spec.name, spec.datatype, list(arr.shape), arr)]
    wanted = ", ".join(f"{s.name} {s.datatype} {s.shape}" for s in inputs)
    raise InvalidInputError(
        f"model {metadata.name!r}: cannot map DataFrame columns {columns} onto its inputs "
        f"({wanted}); name the columns after the inputs, or pass exactly the k feature columns "
        "of a single [-1, k] input",
        model=metadata.name,
    )


def _as_text(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.empty(arr.shape, dtype=object)
    flat = arr.ravel()
    decoded: list[Any] = []
    for item in flat:
        if isinstance(item, bytes):
            try:
                decoded.append(item.decode())
            except UnicodeDecodeError:
                decoded.append(item)
        else:
            decoded.append(item)
    out.ravel()[...] = decoded
    return out


def outputs_to_dataframe(
    outputs: Sequence[InferOutput],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    index: Any = None,
) -> pd.DataFrame:
    """Turn response outputs into a DataFrame, one row per batch element.

    Args:
        outputs: Decoded outputs of one response.
        labels: Optional class labels per output name, used to name the columns of ``[n, k]``
            outputs.
        index: Index for the frame (e.g. the input frame's index).
    """
    pd_ = _pandas()
    data: dict[str, Any] = {}
    labels = labels or {}
    for out in outputs:
        arr = out.data
        if arr is None:
            continue
        if out.datatype == "BYTES":
            arr = _as_text(arr)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 1):
            data[out.name] = arr.reshape(-1)
        elif arr.ndim == 2:
            names = labels.get(out.name)
            if names is None or len(names) != arr.shape[1]:
                names = [str(i) for i in range(arr.shape[1])]
            for j, label in enumerate(names):
                data[f"{out.name}[{label}]"] = arr[:, j]
        else:
            data[out.name] = list(arr)
    frame = pd_.DataFrame(data)
    if index is not None and len(index) == len(frame):
        frame.index = index
    return frame
