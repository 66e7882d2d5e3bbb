"""The answer types of the client.

:class:`InferResult` (lazy, zero-copy outputs) and :class:`InferSequence` (a stateful-model
correlation id carried across calls).

Owns how a reply is read, not how it is fetched: imports protocol types and errors only, never a
transport, an engine, pandas (lazily, in ``to_dataframe``) or IPython.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.types import ClassificationResult, InferOutput, InferResponse, Parameters

__all__ = ["InferResult", "InferSequence"]

_UINT63 = 2**63 - 1


class _ResponseView(Protocol):
    """What an :class:`InferResult` reads: a reply whose outputs may be decoded on access."""

    names: list[str]

    @property
    def model_name(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def parameters(self) -> Parameters: ...
    def array(self, index: int) -> np.ndarray[Any, Any] | None: ...
    def output(self, index: int) -> InferOutput: ...
    def response(self) -> InferResponse: ...


class _Decoded:
    """A :class:`_ResponseView` over an already decoded :class:`InferResponse`."""

    __slots__ = ("_response", "names")

    def __init__(self, response: InferResponse) -> None:
        self._response = response
        self.names = [out.name for out in response.outputs]

    @property
    def model_name(self) -> str:
        return self._response.model_name

    @property
    def model_version(self) -> str:
        return self._response.model_version

    @property
    def id(self) -> str:
        return self._response.id

    @property
    def parameters(self) -> Parameters:
        return self._response.parameters

    def array(self, index: int) -> np.ndarray[Any, Any] | None:
        out = self._response.outputs[index]
        data = out.data
        if data is None:
            return None
        shape = tuple(out.shape)
        if data.shape != shape and data.size == int(np.prod(shape, dtype=np.int64)):
            data = data.reshape(shape)
        return data

    def output(self, index: int) -> InferOutput:
        return self._response.outputs[index]

    def response(self) -> InferResponse:
        return self._response


class InferResult:
    """The answer to one inference call.

    Outputs are decoded when first asked for (zero-copy views on the received bytes).

    Attributes:
        headers: The response headers, keys lower-cased: the HTTP reply's headers, or over
            gRPC the initial then trailing metadata (``-bin`` values decoded as latin-1). What a
            model's hook set in ``context.response_headers`` shows here on both transports;
            empty for a streamed result (a stream's metadata belongs to the stream).
        notes: What the result's card says besides the outputs: a :class:`~nbinfer.Session`
            notes inputs that had NaN ("2 of 5 rows had NaN inputs ...").
        labels: Class labels per output name; a :class:`~nbinfer.Session` fills them from the
            model's config, and the card shows the top classes by name.

    Example::

        result = client.infer("add_sub", inputs)
        result.as_numpy("OUTPUT0")      # or result["OUTPUT0"]
        result.output_names            # ["OUTPUT0", "OUTPUT1"]
    """

    __slots__ = ("_headers", "_index", "_view", "labels", "notes")

    def __init__(
        self,
        response: InferResponse | _ResponseView,
        headers: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        view = _Decoded(response) if isinstance(response, InferResponse) else response
        self._view: _ResponseView = view
        #: The headers, or what reads them on first use (gRPC metadata: see ``headers``).
        self._headers = headers
        self._index = {name: i for i, name in enumerate(view.names)}
        #: What the result's card says besides the outputs (e.g. that inputs had NaN).
        self.notes: tuple[str, ...] = ()
        #: Class labels per output name, when known (a Session reads them from the config).
        self.labels: dict[str, list[str]] = {}

    @property
    def headers(self) -> dict[str, str]:
        """The response headers (see the class docstring).

        gRPC metadata is read into this dict on first access, not on every call.
        """
        headers = self._headers
        if type(headers) is not dict:
            raw = headers() if callable(headers) else headers
            headers = self._headers = raw if type(raw) is dict else dict(raw or {})
        return headers

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """Pickled with its headers read (what reads them belongs to a live call)."""
        self.headers  # noqa: B018 - resolves the headers before they are copied
        return None, {name: getattr(self, name) for name in self.__slots__}

    @property
    def response(self) -> InferResponse:
        """The decoded :class:`~nbinfer.InferResponse` (decodes every output)."""
        return self._view.response()

    @property
    def model_name(self) -> str:
        """The model that answered."""
        return self._view.model_name

    @property
    def model_version(self) -> str:
        """The model version that answered."""
        return self._view.model_version

    @property
    def id(self) -> str:
        """The request id echoed by the server."""
        return self._view.id

    @property
    def parameters(self) -> Parameters:
        """Response parameters."""
        return self._view.parameters

    @property
    def outputs(self) -> list[InferOutput]:
        """The output tensors, in the server's order."""
        return self._view.response().outputs

    @property
    def output_names(self) -> list[str]:
        """The output names."""
        return list(self._index)

    def _position(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError as exc:
            known = ", ".join(self._index) or "none"
            raise InvalidInputError(
                f"model {self.model_name!r} returned no output {name!r}; outputs: {known}",
                model=self.model_name,
                tensor=name,
            ) from exc

    def get_output(self, name: str) -> InferOutput:
        """The output tensor ``name`` with its datatype, shape and parameters.

        Raises:
            InvalidInputError: No output of that name (the message lists the known ones).
        """
        return self._view.output(self._position(name))

    def as_numpy(self, name: str) -> np.ndarray[Any, Any]:
        """The output ``name`` as a numpy array (BYTES: an object array of ``bytes``).

        Fixed-width outputs are zero-copy, read-only views on the received bytes; use
        ``.copy()`` to modify one.

        Raises:
            InvalidInputError: No output of that name, or it was written to shared memory.
        """
        index = self._index.get(name)
        if index is None:
            index = self._position(name)
        data = self._view.array(index)
        if data is None:
            out = self._view.output(index)
            region = out.parameters.get("shared_memory_region", "?")
            raise InvalidInputError(
                f"output {name!r} was written to shared-memory region {region!r}; read it there",
                tensor=name,
            )
        return data

    def as_classification(self, name: str) -> list[list[ClassificationResult]]:
        """Decode an output requested with ``class_count`` into rows of ClassificationResult."""
        from nbinfer.protocol.classification import decode_classification

        rows: list[list[ClassificationResult]] = decode_classification(self.as_numpy(name))
        return rows

    def as_dict(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every output as ``{name: array}``."""
        return {name: self.as_numpy(name) for name in self._index}

    def to_dataframe(
        self,
        *,
        labels: Mapping[str, Sequence[str]] | None = None,
        index: Any = None,
        expand: bool = True,
        classified: Sequence[str] = (),
    ) -> Any:
        """The outputs as a pandas DataFrame, one row per batch element.

        ``[n, k]`` outputs become ``k`` columns ``<output>[<label or index>]`` (one column of
        arrays with ``expand=False``); outputs named in ``classified`` (asked for with
        ``class_count``) become ``label`` / ``score`` columns. Also available as
        ``as_dataframe`` (KServe's name). See :mod:`nbinfer.interop.pandas`.
        """
        from nbinfer.interop.pandas import outputs_to_dataframe

        return outputs_to_dataframe(
            self.outputs, labels=labels, index=index, expand=expand, classified=classified
        )

    as_dataframe = to_dataframe

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        return self.as_numpy(name)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __repr__(self) -> str:
        outs = ", ".join(
            f"{o.name}: {o.datatype}{list(o.shape)}"
            for o in (self._view.output(i) for i in self._index.values())
        )
        notes = "".join(f", note={n!r}" for n in self.notes)
        return f"InferResult(model={self.model_name!r}, id={self.id!r}, outputs=[{outs}]{notes})"

    def release(self) -> None:
        """Give this result's shared-memory outputs back to the client's pool.

        Arrays already taken from it stay valid: a region returns to the pool only when no
        array views it any more. After ``release()`` the result no longer serves those outputs.
        Without it, the region returns when the result is garbage (e.g. not kept in ``Out``).
        """
        release = getattr(self._view, "release", None)
        if release is not None:
            release()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.protocol.classification import decode_classification
        from nbinfer.render.tensors import result_bundle

        return result_bundle(self, classify=decode_classification)


class InferSequence:
    """A stateful-model sequence: carries the correlation id (and start flag) across calls.

    Example::

        seq = nbinfer.Sequence()            # a random id; or Sequence(42) / Sequence("abc")

    ``nbinfer.Sequence`` is the short public name of this class; inside nbinfer it is always
    ``InferSequence``, so ``Sequence`` keeps meaning :class:`collections.abc.Sequence`.
        client.infer("acc", x1, sequence=seq)                     # sends sequence_start
        client.infer("acc", x2, sequence=seq, sequence_end=True)  # sends sequence_end
    """

    __slots__ = ("ended", "id", "started")

    def __init__(self, id: int | str | None = None) -> None:
        self.id: int | str = random.randint(1, _UINT63) if id is None else id
        self.started = False
        self.ended = False

    def __repr__(self) -> str:
        return f"InferSequence(id={self.id!r}, started={self.started}, ended={self.ended})"
