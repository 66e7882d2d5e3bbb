"""Spark: a model served over the v2 protocol as a Spark UDF, on Spark's own batch-inference API.

:func:`predict_batch_udf` reads the model's metadata once on the driver (input shapes, output
datatypes) and hands Spark's :func:`pyspark.ml.functions.predict_batch_udf` a ``make_predict_fn``
that opens one nbinfer client per Python worker (Spark caches it) and sends each batch as one
request. Spark schedules; nbinfer only talks to the servers. With several URLs the client is a
:class:`~nbinfer.ReplicaClient`: batches spread over the servers, and a server that dies costs no
row (inference is idempotent: a cut-off batch is sent again to another).

With ``expand=True`` the outputs come back as the pandas path's columns (``probabilities[setosa]``
...): one scalar field each in a struct, which Spark moves column by column (an array per row is
built and converted row by row, about twice the Python work per batch).

pyspark is imported lazily, inside the call (``import nbinfer`` never loads it). Imports the
client, protocol, errors and the one output-column rule of :mod:`nbinfer.interop.outputs`.

Example::

    from pyspark.sql.functions import array
    import nbinfer.spark

    iris = nbinfer.spark.predict_batch_udf(["http://10.0.0.1:8000", "http://10.0.0.2:8000"], "iris")
    df = df.withColumn("probabilities", iris(array("sl", "sw", "pl", "pw")))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nbinfer.client import Client
from nbinfer.config import adopt_local_server_tokens, local_server_tokens
from nbinfer.errors import InvalidInputError
from nbinfer.interop.chunks import DEFAULT_CHUNK_BYTES
from nbinfer.interop.outputs import config_labels, output_blocks
from nbinfer.protocol.dtypes import element_size, numpy_dtype
from nbinfer.protocol.types import InferOutput, ModelMetadata, TensorSpec

__all__ = ["predict_batch_udf", "spark_type"]

#: Rows per request when neither ``batch_size=``, the model's ``max_batch_size`` nor the byte
#: budget (a row's size unknown: BYTES or open dims) says.
DEFAULT_BATCH_SIZE = 1024

#: The Spark SQL type of each v2 datatype (unsigned integers widen to the next signed type).
_SPARK_TYPES = {
    "BOOL": "BooleanType",
    "INT8": "ByteType",
    "INT16": "ShortType",
    "INT32": "IntegerType",
    "INT64": "LongType",
    "UINT8": "ShortType",
    "UINT16": "IntegerType",
    "UINT32": "LongType",
    "FP16": "FloatType",
    "BF16": "FloatType",
    "FP32": "FloatType",
    "FP64": "DoubleType",
    "BYTES": "StringType",
}
_WIDENED = {"UINT8": np.int16, "UINT16": np.int32, "UINT32": np.int64, "FP16": np.float32}


def _row_shape(spec: TensorSpec, model: str, what: str) -> list[int]:
    """A tensor's per-row shape (its dims after the batch dim), every dim known."""
    row = list(spec.shape[1:])
    if any(d < 0 for d in row):
        raise InvalidInputError(
            f"{what} {spec.name!r} of model {model!r} has shape {spec.shape}: Spark needs the "
            "size of every dim after the batch dim",
            model=model,
        )
    return row


def spark_type(spec: TensorSpec, model: str = "") -> Any:
    """The Spark SQL type of one output: a scalar for ``[-1]`` / ``[-1, 1]``, else an array.

    Raises:
        InvalidInputError: A datatype Spark has no type for (UINT64), or a shape with more
            than one dim after the batch dim (Spark's batch UDF returns 1-D arrays per row).
    """
    from pyspark.sql import types

    name = _SPARK_TYPES.get(spec.datatype)
    if name is None:
        raise InvalidInputError(
            f"output {spec.name!r} of model {model!r} is {spec.datatype}: Spark has no such type",
            model=model,
        )
    scalar = getattr(types, name)()
    row = _row_shape(spec, model, "output")
    if row in ([], [1]):
        return scalar
    if len(row) > 1:
        raise InvalidInputError(
            f"output {spec.name!r} of model {model!r} has shape {spec.shape}: Spark's batch "
            "UDF returns one flat array per row; serve it flattened",
            model=model,
        )
    return types.ArrayType(scalar)


def _as_spark(array: np.ndarray[Any, Any], spec: TensorSpec) -> np.ndarray[Any, Any]:
    """An output as Spark takes it: ``[n]`` for scalars, ``[n, k]`` for arrays, Spark's dtype."""
    row = spec.shape[1:]
    out = array.reshape(len(array)) if list(row) in ([], [1]) else array.reshape(len(array), -1)
    if spec.datatype == "BYTES":
        return np.array([v.decode() if isinstance(v, bytes) else v for v in out], dtype=object)
    widened = _WIDENED.get(spec.datatype)
    return out.astype(widened) if widened is not None else out


def _expanded(
    outputs: Sequence[InferOutput], labels: Mapping[str, Sequence[str]]
) -> dict[str, np.ndarray[Any, Any]]:
    """The outputs as the pandas path's columns (one 1-D array per name, Spark's dtypes)."""
    columns: dict[str, np.ndarray[Any, Any]] = {}
    for out in outputs:
        widened = _WIDENED.get(out.datatype)
        for block in output_blocks([out], labels=labels):
            assert block.values is not None  # no classification; shapes checked on the driver
            for j, name in enumerate(block.names):
                column = block.values[:, j]
                columns[name] = column.astype(widened) if widened is not None else column
    return columns


def _expanded_fields(
    specs: Sequence[TensorSpec], labels: Mapping[str, Sequence[str]], model: str
) -> list[Any]:
    """The struct fields of :func:`_expanded`: the pandas path's column names, scalar types."""
    from pyspark.sql.types import StructField

    fields = []
    for spec in specs:
        spark_type(spec, model)  # refuses what Spark cannot carry
        row = _row_shape(spec, model, "output")
        scalar = spark_type(TensorSpec(spec.name, spec.datatype, [-1]), model)
        empty = InferOutput(spec.name, spec.datatype, [0, *row], np.empty((0, *row)))
        for block in output_blocks([empty], labels=labels):
            fields += [StructField(name, scalar) for name in block.names]
    return fields


class _Predict:
    """What ``make_predict_fn`` returns on a worker: one request per batch, on one client."""

    def __init__(
        self,
        target: str | list[str],
        options: Mapping[str, Any],
        model: str,
        version: str,
        inputs: list[TensorSpec],
        outputs: list[TensorSpec],
        labels: Mapping[str, Sequence[str]] | None = None,
        tokens: Sequence[tuple[str, str]] = (),
    ) -> None:
        adopt_local_server_tokens(tokens, _Predict)  # the driver's local servers
        self.client = Client(target, **options)
        self.model, self.version = model, version
        self.inputs, self.outputs = inputs, outputs
        self.labels = labels  # not None: expand=True (the pandas path's columns, these labels)
        # Spark counts the predict function's parameters: one per model input
        params = [
            inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_ONLY)
            for i in range(len(inputs))
        ]
        self.__signature__ = inspect.Signature(params)

    def __call__(self, *arrays: np.ndarray[Any, Any]) -> Any:
        tensors = {}
        for spec, array in zip(self.inputs, arrays, strict=True):
            data = np.asarray(array)
            if spec.datatype != "BYTES":
                data = data.astype(numpy_dtype(spec.datatype), copy=False)
            tensors[spec.name] = data.reshape(len(data), *spec.shape[1:])
        result = self.client.infer(
            self.model,
            tensors,
            model_version=self.version,
            outputs=[o.name for o in self.outputs],
        )
        if self.labels is not None:
            answered = [result.as_numpy(o.name) for o in self.outputs]
            got = [
                InferOutput(o.name, o.datatype, list(a.shape), a)
                for o, a in zip(self.outputs, answered, strict=True)
            ]
            return _expanded(got, self.labels)
        answers = {o.name: _as_spark(result.as_numpy(o.name), o) for o in self.outputs}
        return answers if len(self.outputs) > 1 else answers[self.outputs[0].name]


def _default_batch(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> int:
    """Rows per request as the pandas path sizes them: its byte budget over a row's bytes."""
    per_row = 0
    for spec in [*inputs, *outputs]:
        if spec.datatype == "BYTES" or any(d < 0 for d in spec.shape[1:]):
            return DEFAULT_BATCH_SIZE
        per_row = max(per_row, element_size(spec.datatype) * int(np.prod(spec.shape[1:])))
    return max(1, DEFAULT_CHUNK_BYTES // max(per_row, 1))


def predict_batch_udf(
    url: str | Sequence[str],
    model: str,
    *,
    model_version: str = "",
    outputs: Sequence[str] | None = None,
    expand: bool = False,
    batch_size: int | None = None,
    input_tensor_shapes: Sequence[Sequence[int] | None] | None = None,
    return_type: Any = None,
    **client_options: Any,
) -> Callable[..., Any]:
    """A Spark UDF running ``model`` on the server(s) at ``url``, built on Spark's own API.

    The UDF takes one column per model input, in the model's declared order: a scalar column
    for an input of shape ``[-1]`` / ``[-1, 1]``; for ``[-1, k]`` a struct of ``k`` numeric
    columns (``pyspark.sql.functions.struct``: the fastest, Spark hands it over column by
    column) or an array column (``array`` of feature columns, or a flat array). It returns one
    column: the output (a scalar for ``[-1]`` / ``[-1, 1]``, an array for ``[-1, k]``), or a
    struct of the outputs, one field each, when there are several. With ``expand=True`` it
    returns a struct of scalar fields named as the pandas path's columns
    (``probabilities[setosa]`` ...): ``df.select("id", "p.*")`` gives the same columns as
    ``session.infer``, and Spark moves them column by column (faster than arrays).

    Args:
        url: The server's URL, or several servers serving the same model (replicas).
        model: The model name.
        model_version: A specific version ("" = the server's policy).
        outputs: The outputs to return (default: all, in the metadata's order).
        expand: One scalar field per value of each output (the pandas path's columns, class
            labels from the model's config), in a struct.
        batch_size: Rows per request (default: the model's ``max_batch_size``, else the pandas
            path's 1 MiB budget per request, else 1024). Spark hands the UDF at most
            ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000) at a time: a request
            never holds more.
        input_tensor_shapes: Per input, the row shape of its array column (default: from the
            metadata: ``None`` for scalar inputs).
        return_type: The UDF's Spark type (default: from the outputs' metadata).
        **client_options: Options of :class:`~nbinfer.Client` (``protocol``, ``auth``,
            ``headers``, ``timeout`` ...), used on the driver and by every worker: plain,
            picklable values.

    Raises:
        InvalidInputError: An unknown output name, or a datatype / shape Spark cannot carry.
        ModelNotFoundError: The server does not know the model.

    Example::

        iris = nbinfer.spark.predict_batch_udf("http://127.0.0.1:8000", "iris", expand=True)
        df.withColumn("p", iris(struct("sl", "sw", "pl", "pw"))).select("id", "p.*")
    """
    from pyspark.ml.functions import predict_batch_udf as spark_predict_batch_udf
    from pyspark.sql.types import StructField, StructType

    target: str | list[str] = url if isinstance(url, str) else [str(u) for u in url]
    with Client(target, **client_options) as client:
        meta: ModelMetadata = client.get_model_metadata(model, model_version)
        config = (
            client.get_model_config(model, model_version) if batch_size is None or expand else {}
        )
    specs = list(meta.outputs)
    if outputs is not None:
        known = {o.name: o for o in specs}
        unknown = [name for name in outputs if name not in known]
        if unknown:
            raise InvalidInputError(
                f"model {model!r} has no output(s) {unknown}; it has {sorted(known)}", model=model
            )
        specs = [known[name] for name in outputs]
    labels = config_labels(config) if expand else None
    if return_type is None and labels is not None:
        return_type = StructType(_expanded_fields(specs, labels, model))
    elif return_type is None:
        fields = [StructField(o.name, spark_type(o, model)) for o in specs]
        return_type = fields[0].dataType if len(fields) == 1 else StructType(fields)
    if input_tensor_shapes is None:
        rows = [_row_shape(s, model, "input") for s in meta.inputs]
        input_tensor_shapes = [row if row not in ([], [1]) else None for row in rows]
    inputs = list(meta.inputs)
    size = batch_size or int(config.get("max_batch_size") or 0) or _default_batch(inputs, specs)
    options = dict(client_options)
    # A local server this process started wants its token; Spark's Python workers are other
    # processes that do not know it, so the UDF carries it (as the Dask recipe does).
    tokens = local_server_tokens([target] if isinstance(target, str) else target)

    def make_predict_fn() -> _Predict:
        return _Predict(target, options, model, model_version, inputs, specs, labels, tokens)

    shapes = [list(s) if s is not None else None for s in input_tensor_shapes]
    return spark_predict_batch_udf(
        make_predict_fn,
        return_type=return_type,
        batch_size=size,
        input_tensor_shapes=shapes if any(s is not None for s in shapes) else None,
    )
