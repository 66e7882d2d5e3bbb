"""KServe's v1 protocol (``/v1/models/<m>[:predict|:explain]``) as an adapter over the dataplane.

v1 carries JSON ``instances`` instead of typed tensors: they feed the model's first declared
input, and the first output comes back as ``predictions``. Prediction is a v2 inference
through :meth:`DataPlane.infer` (same checks, statistics and scheduling); explanation runs the
model's ``explain`` hook with the same input checks. The instances are read by the rules of v2
JSON ``data`` (:func:`~nbinfer.protocol.jsonvalues.json_to_tensor`): nothing is coerced, so
strings, booleans, ``null`` or out-of-range numbers for a numeric input are a 400 naming the
instance, the value and the input's datatype, as they are on ``/v2/.../infer``.

Imports the dataplane (types only), modelio, protocol and errors; never a frontend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nbinfer.errors import InferenceError, InvalidInputError, ModelNotFoundError, NbinferError
from nbinfer.protocol.dtypes import numpy_dtype
from nbinfer.protocol.jsonvalues import json_to_tensor, loads
from nbinfer.protocol.types import InferInput, InferRequest
from nbinfer.server.model import InferContext, Model
from nbinfer.server.modelio import Timings

if TYPE_CHECKING:
    from nbinfer.server.dataplane import DataPlane

__all__ = ["KServeV1", "jsonable", "parse_body"]


def parse_body(body: bytes) -> Any:
    """A v1 request body: JSON, with the ``NaN`` / ``Infinity`` tokens v2 JSON data may carry.

    Raises:
        InvalidInputError: the body is not JSON (the message says where).
    """
    return loads(body, what="KServe v1 request body") if body else {}


class KServeV1:
    """KServe v1 model status, predict and explain over a :class:`DataPlane`.

    Example::

        v1 = KServeV1(dataplane)
        await v1.predict("iris", {"instances": [[5.1, 3.5, 1.4, 0.2]]})
    """

    def __init__(self, dataplane: DataPlane) -> None:
        self.dp = dataplane

    async def model(self, name: str) -> dict[str, Any]:
        """KServe v1 model status ``{"name", "ready"}``.

        Raises:
            ModelNotFoundError: unknown model.
        """
        return {"name": name, "ready": self.dp.model_ready(name)}

    async def predict(
        self,
        name: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """KServe v1 predict: ``{"instances": [...]}`` -> ``{"predictions": [...]}``.

        Raises:
            ModelNotFoundError: unknown model.
            ModelNotReadyError: the model is not loaded.
            InvalidInputError: malformed instances.
            InferenceError: the model raised.
        """
        served = self.dp.models.get(name)
        request, added = _request_of(served.model, payload)
        response = await self.dp.infer(request, headers=headers, response_headers=response_headers)
        if not response.outputs:
            return {"predictions": []}
        return {"predictions": jsonable(_drop_axes(response.outputs[0].data, added))}

    async def explain(
        self,
        name: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> Any:
        """KServe v1 explain (only for models implementing ``explain()``).

        Raises:
            ModelNotFoundError: unknown model, or it has no explainer.
            ModelNotReadyError: the model is not loaded.
            InvalidInputError: malformed instances.
            InferenceError: ``explain()`` raised.
        """
        served = self.dp.models.get(name)
        model = served.model
        if not model.implements_explain:
            raise ModelNotFoundError(
                f"model {name!r} has no explainer (it does not implement explain())", model=name
            )
        inputs, _ = served.io.check_inputs(_request(model, payload))
        ctx = InferContext(model_name=name, model_version=served.version.version)
        if headers is not None:
            ctx.headers = headers
        if response_headers is not None:
            ctx.response_headers = response_headers
        served.version.inflight += 1
        try:
            result = await served.io.hook("explain", inputs, ctx, self.dp.offload, Timings())
        except NbinferError:
            raise
        except Exception as exc:
            raise InferenceError(
                f"explain() of model {name!r} failed: {type(exc).__name__}: {exc}", model=name
            ) from exc
        finally:
            served.version.inflight -= 1
        if isinstance(result, Mapping):
            return {str(k): jsonable(v) for k, v in result.items()}
        return {"explanations": jsonable(result)}


def _request(model: Model, payload: Any) -> InferRequest:
    """A v2 request feeding the v1 ``instances`` to the model's first input."""
    return _request_of(model, payload)[0]


def _request_of(model: Model, payload: Any) -> tuple[InferRequest, int]:
    """:func:`_request`, and how many trailing axes :func:`_fit_rank` gave the instances."""
    if isinstance(payload, Mapping):
        if "instances" in payload:
            instances = payload["instances"]
        elif "inputs" in payload:
            instances = payload["inputs"]
        else:
            raise InvalidInputError(
                "KServe v1 request needs an 'instances' list; got keys: "
                + ", ".join(map(str, payload))
            )
    else:
        instances = payload
    defs = model.input_defs()
    if not defs:
        raise InvalidInputError(f"model {model.name!r} declares no inputs")
    spec = defs[0]
    given = _instances_tensor(model.name, spec.name, spec.datatype, instances)
    arr = _fit_rank(given, spec.spec(int(model.max_batch_size)).shape)
    request = InferRequest(
        inputs=[InferInput(spec.name, spec.datatype, list(arr.shape), arr)],
        model_name=model.name,
    )
    return request, arr.ndim - given.ndim


def _fit_rank(arr: np.ndarray[Any, Any], declared: list[int]) -> np.ndarray[Any, Any]:
    """Instances of a lower rank than the input, given one trailing axis per missing dim.

    KServe hands ``instances`` to the model as they come: ``[1, 2]`` for a batching model whose
    input is declared ``[-1]`` (shape ``[-1, -1]``) are two instances of one value each, so they
    become ``[[1], [2]]`` (and the predictions lose those axes again: :func:`_drop_axes`). Only
    missing dims declared ``-1`` or ``1`` are added; anything else is left for the input check
    to refuse.
    """
    missing = len(declared) - arr.ndim
    if arr.ndim >= 1 and missing > 0 and all(d in (-1, 1) for d in declared[arr.ndim :]):
        return arr.reshape(arr.shape + (1,) * missing)
    return arr


def _drop_axes(data: Any, added: int) -> Any:
    """The predictions without the trailing size-1 axes :func:`_fit_rank` added to the instances.

    ``[1, 2]`` in, ``[2, 4]`` out (not ``[[2], [4]]``), as KServe answers scalar instances.
    """
    trailing = data.shape[-added:] if added and isinstance(data, np.ndarray) else ()
    if trailing and data.ndim > added and all(d == 1 for d in trailing):
        return data.reshape(data.shape[:-added])
    return data


def _nested_shape(value: Any) -> list[int]:
    """The shape of nested JSON lists, read along the first elements (raggedness found later)."""
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _instances_tensor(
    model: str, tensor: str, datatype: str, instances: Any
) -> np.ndarray[Any, Any]:
    """The v1 ``instances`` as the input's tensor, read by the v2 JSON rules.

    Values are never coerced (the rules of :func:`~nbinfer.protocol.jsonvalues.json_to_tensor`):
    strings, booleans or ``null`` for a numeric input, numbers for BOOL or BYTES, ``1e39`` for
    FP32 and ragged lists are refused, with the instance and the value named.

    Raises:
        InvalidInputError: instances that are not one rectangular array of ``datatype``.
    """
    shape = _nested_shape(instances)
    try:
        return json_to_tensor(instances, datatype, shape, name=tensor, kind="input")
    except InvalidInputError as exc:
        raise _instance_error(model, tensor, datatype, instances, shape, exc) from exc


def _instance_error(
    model: str,
    tensor: str,
    datatype: str,
    instances: Any,
    shape: list[int],
    error: InvalidInputError,
) -> InvalidInputError:
    """The error naming the first instance that is refused (else the whole request's error)."""
    where = f"KServe v1 instances for input {tensor!r} ({datatype}) of model {model!r}"
    if isinstance(instances, list) and shape:
        element = error.context.get("element")
        per_instance = math.prod(shape[1:])
        if isinstance(element, int) and per_instance > 0:
            index = element // per_instance  # decode only that instance again: its own message
            try:
                json_to_tensor(instances[index], datatype, shape[1:], name=tensor, kind="input")
            except InvalidInputError as exc:
                return InvalidInputError(
                    f"KServe v1 instance {index} of model {model!r} is refused: {exc}",
                    model=model,
                    tensor=tensor,
                    datatype=datatype,
                )
        for i, instance in enumerate(instances):  # ragged lists: find the odd instance out
            inner = _nested_shape(instance)
            if inner != shape[1:]:
                return InvalidInputError(
                    f"{where} are not one rectangular array (ragged lists): instance {i} has "
                    f"shape {inner}, instance 0 has {shape[1:]}",
                    model=model,
                    tensor=tensor,
                )
    return InvalidInputError(f"{where} are refused: {error}", model=model, tensor=tensor)


def jsonable(value: Any) -> Any:
    """Numpy -> JSON-ready Python (BYTES decoded as UTF-8 when possible)."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [jsonable(v) for v in value.tolist()]
        if value.dtype.kind == "V" or value.dtype == numpy_dtype("BF16"):
            return value.astype(np.float32).tolist()
        return value.tolist()
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, np.generic):
        return value.item()
    return value
