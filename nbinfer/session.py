"""Session: the one object a notebook needs.

A :class:`Session` owns a client (and, for ``Session()`` with no URL, the embedded local server
it started) and speaks DataFrames: ``session.infer("iris", df)`` returns a DataFrame.

Example::

    import nbinfer

    session = nbinfer.Session()                 # starts the local server with its demo models
    session.models                              # DataFrame: name, version, state, reason
    session.infer("iris", iris_frame)           # DataFrame of class probabilities
    session.close()

    remote = nbinfer.Session("localhost:8000")  # any v2 server: Triton, KServe, MLServer, ...
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import dataclasses
import itertools
import json
import logging
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nbinfer.capabilities import Capabilities, is_missing_route, read_capabilities
from nbinfer.client import AsyncClient, Client, InferResult
from nbinfer.errors import (
    InvalidInputError,
    ModelNotFoundError,
    ModelNotReadyError,
    NbinferError,
    ServerError,
    ServerUnavailableError,
    UnauthenticatedError,
    UnsupportedError,
)
from nbinfer.protocol.columns import column_datatype
from nbinfer.protocol.types import (
    InferInput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RequestedOutput,
    TensorSpec,
)

if TYPE_CHECKING:
    import pandas as pd

    from nbinfer.interop.pandas import FrameJob
    from nbinfer.notebook.widgets import ModelBrowser
    from nbinfer.profiling import ProfileFrame
    from nbinfer.protocol.columns import ColumnSelection
    from nbinfer.server.launcher import LocalServer

__all__ = ["ModelHandle", "Session", "sessions"]

logger = logging.getLogger("nbinfer")
T = TypeVar("T")

#: ``inputs=`` of :meth:`Session.infer`: specs, or ``{input: datatype | (datatype, shape)}``.
InputSpecs = Sequence[TensorSpec] | Mapping[str, str | tuple[str, Sequence[int]]]

#: What :meth:`Session.models` / :meth:`Session.stats` say when a server offers neither.
_LIST_HINT = "Open a model by name instead: session.model('name') or session.infer('name', ...)."
_GRPC_LIST_HINT = (
    " The v2 gRPC protocol lists models only through the repository index; KServe lists them over"
    " REST (GET /v2/models): Session('http://host:port').models."
)
_STATS_HINT = (
    "Inference statistics are a Triton / nbinfer extension; for this server read its own "
    "metrics (e.g. its Prometheus endpoint) instead."
)

#: Config parameter prefix under which the nbinfer server publishes an output's class labels.
LABELS_PARAMETER = "nbinfer.labels."

#: Open sessions by creation number (weak: an unreferenced session closes itself).
_OPEN: weakref.WeakValueDictionary[int, Session] = weakref.WeakValueDictionary()
_COUNTER = itertools.count(1)
#: ``Session.shared()``: one session (and local server) per set of options, kept alive here.
_SHARED: dict[tuple[tuple[str, str], ...], Session] = {}
_SHARED_LOCK = threading.Lock()
_ATEXIT_LOCK = threading.Lock()
_ATEXIT_DONE = False


def _close_all() -> None:
    for session in list(_OPEN.values()):
        session.close()


def sessions() -> list[Session]:
    """The open sessions of this process, oldest first (what is running, and where).

    Example::

        nbinfer.sessions()     # [<Session http://127.0.0.1:39211 (local server, http)>]
    """
    return [s for _, s in sorted(_OPEN.items()) if not s._closed]


def _release(
    client: Client, aclients: dict[int, AsyncClient], server: LocalServer | None, owner: str
) -> None:
    """Close a session's clients and stop its server; run once, by close() or the finalizer."""
    try:
        client.close()
        for aclient in aclients.values():
            _close_async_client(aclient)
        aclients.clear()
    finally:
        if server is not None:
            logger.debug("stopping the local server of %s", owner)
            server.stop()


def _register_atexit() -> None:
    global _ATEXIT_DONE
    with _ATEXIT_LOCK:
        if not _ATEXIT_DONE:
            atexit.register(_close_all)
            _ATEXIT_DONE = True


def _is_frame(data: Any) -> bool:
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is a runtime dependency
        return False
    return isinstance(data, pandas.DataFrame)


class ModelHandle:
    """One model of a session: metadata, config, statistics and ``infer``.

    Obtained with ``session.model("name")``.
    """

    def __init__(self, session: Session, name: str, version: str = "") -> None:
        self._session = session
        self.name = name
        self.version = version

    @property
    def metadata(self) -> ModelMetadata:
        """The model's metadata (inputs, outputs, versions, platform)."""
        return self._session.client.get_model_metadata(self.name, self.version)

    @property
    def config(self) -> dict[str, Any]:
        """The model's configuration (Triton-shaped JSON)."""
        return self._session.client.get_model_config(self.name, self.version)

    @property
    def ready(self) -> bool:
        """Whether the server reports the model ready."""
        return self._session.client.is_model_ready(self.name, self.version)

    @property
    def labels(self) -> dict[str, list[str]]:
        """Class labels per output, where the server publishes them."""
        return self._session._labels(self.name, self.version)

    def stats(self) -> pd.DataFrame:
        """This model's inference statistics as a DataFrame."""
        return self._session.stats(self.name)

    def infer(self, data: Any, **kwargs: Any) -> Any:
        """Run inference; see :meth:`Session.infer`."""
        kwargs.setdefault("model_version", self.version)
        return self._session.infer(self.name, data, **kwargs)

    async def ainfer(self, data: Any, **kwargs: Any) -> Any:
        """Run inference from a coroutine; see :meth:`Session.ainfer`."""
        kwargs.setdefault("model_version", self.version)
        return await self._session.ainfer(self.name, data, **kwargs)

    def __repr__(self) -> str:
        version = f" version={self.version!r}" if self.version else ""
        return f"<ModelHandle {self.name!r}{version} at {self._session.url}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.notebook.display import mimebundle  # the one lazy edge into notebook/

        return mimebundle(self)


class Session:
    """Clients plus (optionally) the embedded local server, with DataFrames in and out.

    Args:
        url: A v2 server (``"localhost:8000"``, ``"http://..."``, ``"grpc://..."``). ``None``
            starts the embedded local server (with the demo models, unless ``demo=False``).
        protocol: ``"http"`` or ``"grpc"``; default from the URL (HTTP for a local server).
        model_repository: Local server only: a Triton-layout model repository to serve.
        device: Local server only: ``"auto"``, ``"cpu"`` or ``"cuda:N"``.
        demo: Local server only: also serve the demo models.
        auth_token: Local server only: require this bearer token (the session's clients send
            it). Needed to expose the server beyond 127.0.0.1.
        headers: Headers (HTTP) / call metadata (gRPC) sent with every call of the session,
            metadata and statistics included: API keys, a restricted Triton's access header
            (``{"admin-key": "..."}``; over gRPC ``{"triton-grpc-protocol-admin-key": "..."}``).
        token: A bearer token sent with every call (``authorization: Bearer ...``); with no
            ``url``, the local server also requires it (as ``auth_token``).
        **client_options: Passed to :class:`~nbinfer.Client` (timeout, retries, ssl, auth,
            binary, ...).

    Example::

        with nbinfer.Session() as session:
            frame = session.infer("iris", df)

        team = nbinfer.Session("triton.internal:8000", headers={"admin-key": key})
        team.capabilities          # what the server offers: name, version, extensions
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        protocol: str | None = None,
        model_repository: str | None = None,
        device: str = "auto",
        demo: bool = True,
        auth_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        **client_options: Any,
    ) -> None:
        self._server: LocalServer | None = None
        if headers is not None:
            client_options["headers"] = dict(headers)
        if token is not None:
            if "auth" in client_options or (url is None and auth_token not in (None, token)):
                raise ValueError("pass either token= or auth= / auth_token=, not both")
            if url is None:
                auth_token = token
            else:
                client_options["auth"] = token
        if url is None:
            from nbinfer.server.launcher import LocalServer

            self._server = LocalServer(
                model_repository=model_repository,
                demo=demo,
                device=device,
                control=True,
                auth_token=auth_token,
            ).start()
            if auth_token is not None:
                client_options.setdefault("auth", auth_token)
            url = f"grpc://{self._server.grpc_url}" if protocol == "grpc" else self._server.http_url
        elif model_repository is not None or auth_token is not None:
            raise ValueError(
                "model_repository / auth_token only apply to a local server (url=None); "
                "pass auth= for a remote server"
            )
        self.url = url
        self._client_options = dict(client_options)
        try:
            self.client = Client(url, protocol=protocol, **client_options)
        except BaseException:
            if self._server is not None:
                self._server.stop()
            raise
        self.protocol = self.client.protocol
        self._aclients: dict[int, AsyncClient] = {}
        self._labels_cache: dict[tuple[str, str], dict[str, list[str]]] = {}
        self._max_batch: dict[tuple[str, str], int] = {}
        self._capabilities: Capabilities | None = None
        self._caps_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._inferred_specs: set[str] = set()
        self._caps_tried = False
        #: Binary tensors over HTTP as found by a probe (servers that take them unlisted).
        self._binary_found: bool | None = None
        self._closed = False
        # Not __del__: a finalizer stops the local server of a session nobody references any
        # more (a re-run `session = Session()` cell), at once in CPython, and at exit.
        self._finalizer = weakref.finalize(
            self, _release, self.client, self._aclients, self._server, f"session {url}"
        )
        _OPEN[next(_COUNTER)] = self
        _register_atexit()

    @classmethod
    def local(
        cls,
        *,
        model_repository: str | None = None,
        device: str = "auto",
        demo: bool = True,
        protocol: str = "http",
        auth_token: str | None = None,
        **client_options: Any,
    ) -> Session:
        """Start the embedded local server and connect to it.

        Args:
            model_repository: A Triton-layout model repository to serve.
            device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda:N"``.
            demo: Also serve the demo models (``add_sub``, ``echo``, ``iris``, ``digits``).
            protocol: ``"http"`` or ``"grpc"`` for the session's client.
            auth_token: Require this bearer token (the session's clients send it).
            **client_options: Passed to :class:`~nbinfer.Client`.
        """
        return cls(
            None,
            protocol=protocol,
            model_repository=model_repository,
            device=device,
            demo=demo,
            auth_token=auth_token,
            **client_options,
        )

    @classmethod
    def shared(
        cls,
        *,
        model_repository: str | None = None,
        device: str = "auto",
        demo: bool = True,
        protocol: str = "http",
        **client_options: Any,
    ) -> Session:
        """The one local-server session of this process for these options (re-run safe).

        The first call starts the local server; later calls with the same options return the
        same open session, so re-running ``session = nbinfer.Session.shared()`` never starts a
        second server. It is closed at exit (or by ``close()``; the next call starts anew).

        Example::

            session = nbinfer.Session.shared()     # run the cell again: same server
            assert session is nbinfer.Session.shared()
        """
        options = dict(
            client_options,
            model_repository=model_repository,
            device=device,
            demo=demo,
            protocol=protocol,
        )
        key = tuple(sorted((name, repr(value)) for name, value in options.items()))
        with _SHARED_LOCK:
            session = _SHARED.get(key)
            server = None if session is None or session._closed else session._server
            if session is None or server is None or not server.running:
                session = _SHARED[key] = cls(None, **options)
            return session

    # -- properties ------------------------------------------------------------------------

    @property
    def server(self) -> LocalServer | None:
        """The embedded server this session started, if any."""
        return self._server

    @property
    def capabilities(self) -> Capabilities:
        """What the server offers: metadata read once (name, version, extensions) plus probes.

        When the metadata cannot be read (server down, credentials refused) the record says
        so in ``error`` and is read again next time.
        """
        caps = self._capabilities
        if caps is None:
            with self._caps_lock:
                caps = self._capabilities
                if caps is None:
                    caps = read_capabilities(self.client)
                    if caps.error is None:
                        self._capabilities = caps
        return caps

    def _ask(self, feature: str, api: str, call: Callable[[], T], *, model: str = "") -> T:
        """``call()`` for an optional ``feature``, learning once whether the server has it.

        Raises:
            UnsupportedError: The server lacks the feature (known, or found by this call).
            UnauthenticatedError: The API is restricted; the message says which header to pass.
        """
        caps = self.capabilities
        extension = "model_repository" if feature in ("repository_index", "model_list") else feature
        if caps.offers(feature) is False:
            raise caps.unsupported(extension, api, self._hint(feature))
        try:
            value = call()
        except UnauthenticatedError as exc:
            raise caps.access_error(exc, api) from exc
        except (ServerError, UnsupportedError) as exc:
            if isinstance(exc, ServerError):
                named = model and isinstance(exc, ModelNotFoundError) and caps.advertises(feature)
                if named or not is_missing_route(exc):
                    raise  # an unknown model, not a missing route
            caps.record(feature, False)
            raise caps.unsupported(extension, api, self._hint(feature)) from exc
        caps.record(feature, True)
        return value

    def _hint(self, feature: str) -> str:
        if feature == "statistics":
            return _STATS_HINT
        return _LIST_HINT + (_GRPC_LIST_HINT if self.protocol == "grpc" else "")

    @property
    def models(self) -> pd.DataFrame:
        """The server's models as a DataFrame, from whatever listing the server offers.

        The repository index gives ``name, version, state, reason``; KServe's model list
        (``GET /v2/models``, else ``/v1/models``) gives ``name`` only.

        Raises:
            UnsupportedError: The server lists its models nowhere this session can reach
                (e.g. KServe over gRPC); the message says what to do instead.
            UnauthenticatedError: The listing is restricted; the message names the header.
        """
        import pandas

        api = "model repository index"
        try:
            rows = self._ask("repository_index", api, self.client.get_model_repository_index)
        except UnsupportedError:
            if self.protocol != "http":
                raise
            try:
                names = self._ask("model_list", "model list", self.client.list_models)
            except UnsupportedError as exc:
                what = "a model listing (neither the repository index nor KServe's /v2/models)"
                raise self.capabilities.unsupported(
                    "model_repository", what, self._hint("repository_index")
                ) from exc
            return pandas.DataFrame({"name": names}, columns=["name"])
        return pandas.DataFrame(
            [(m.name, m.version, _state(m.state), m.reason) for m in rows],
            columns=["name", "version", "state", "reason"],
        )

    def model(self, name: str, version: str = "") -> ModelHandle:
        """A handle on one model (metadata, config, stats, infer).

        Raises:
            ModelNotFoundError: The server does not know the model.
        """
        self.client.get_model_metadata(name, version)  # fail loudly on unknown names
        return ModelHandle(self, name, version)

    # -- inference -------------------------------------------------------------------------

    def _labels(self, name: str, version: str) -> dict[str, list[str]]:
        key = (name, version)
        if key not in self._labels_cache:
            labels: dict[str, list[str]] = {}
            try:
                config = self.client.get_model_config(name, version)
            except NbinferError:
                config = {}
            params = config.get("parameters") or {}
            for pname, value in params.items():
                if pname.startswith(LABELS_PARAMETER) and isinstance(value, Mapping):
                    try:
                        labels[pname[len(LABELS_PARAMETER) :]] = list(
                            json.loads(value.get("string_value", "[]"))
                        )
                    except ValueError:
                        continue
            self._labels_cache[key] = labels
            try:
                self._max_batch[key] = int(config.get("max_batch_size") or 0)
            except (TypeError, ValueError):
                self._max_batch[key] = 0
        return self._labels_cache[key]

    def _forget_labels(self, model: str) -> None:
        self._labels_cache = {k: v for k, v in self._labels_cache.items() if k[0] != model}
        self._max_batch = {k: v for k, v in self._max_batch.items() if k[0] != model}

    def _declared(
        self, meta: ModelMetadata, frame: Any, columns: Any, inputs: InputSpecs | None
    ) -> ModelMetadata:
        """The metadata a frame is planned against: ``inputs=``, else the server's.

        Gaps in the server's (no inputs, no datatypes or shapes) are filled from the frame's
        columns, said once per model at debug level.
        """
        if inputs is not None:
            return dataclasses.replace(meta, inputs=_input_specs(inputs))
        if meta.inputs and all(s.datatype and s.shape for s in meta.inputs):
            return meta
        if meta.name not in self._inferred_specs:
            self._inferred_specs.add(meta.name)
            logger.debug(
                "model %r declares %s: mapping DataFrame columns by name, datatypes from dtypes",
                meta.name,
                "no input datatypes / shapes" if meta.inputs else "no inputs",
            )
        return dataclasses.replace(meta, inputs=_frame_specs(meta, frame, columns))

    def _frame_job(
        self,
        model: str,
        version: str,
        data: Any,
        columns: ColumnSelection | None,
        batch_size: int | None,
        inputs: InputSpecs | None = None,
    ) -> FrameJob:
        """The chunked plan of a DataFrame: columns mapped onto the model's inputs, row ranges."""
        from nbinfer.interop.pandas import FrameJob, chunk_rows
        from nbinfer.protocol.columns import plan_inputs

        meta = self.client.get_model_metadata(model, version)
        plan = plan_inputs(data, self._declared(meta, data, columns, inputs), columns=columns)
        self._labels(model, version)  # also reads max_batch_size from the config
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
    ) -> Any:
        """``outputs`` as sent: with ``classification=k``, every (named) output asks for top-k."""
        if not classification:
            return outputs
        if outputs is None:
            names = [o.name for o in self.client.get_model_metadata(model, version).outputs]
        else:
            listed = [outputs] if isinstance(outputs, str) else list(outputs)
            names = [o if isinstance(o, str) else o.name for o in listed]
        return [RequestedOutput(name, class_count=int(classification)) for name in names]

    def _answer(
        self,
        result: InferResult,
        model: str,
        version: str,
        index: Any,
        as_frame: bool,
        expand: bool,
        requested: Any,
    ) -> Any:
        """The result, or as a DataFrame: labelled columns, the input's index, label / score."""
        if not as_frame:
            return result
        from nbinfer.interop.pandas import outputs_to_dataframe

        classified = [
            r.name for r in requested or () if isinstance(r, RequestedOutput) and r.class_count
        ]
        return outputs_to_dataframe(
            result.outputs,
            labels=self._labels(model, version),
            index=index,
            expand=expand,
            classified=classified,
        )

    def infer(
        self,
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
    ) -> Any:
        """Run inference on ``model``; a DataFrame of any size is split, pipelined and reassembled.

        Args:
            model: The model name.
            data: A DataFrame (columns named after the inputs, the feature columns of a single
                ``[-1, k]`` input, one column per input in the model's declared order, or as
                mapped by ``columns=``), a dict ``{input: array}``, a list of
                :class:`~nbinfer.InferInput` or an :class:`~nbinfer.InferRequest`.
            outputs: Output names or :class:`~nbinfer.RequestedOutput`; default all.
            model_version: A specific version.
            as_frame: Return a DataFrame (default: when ``data`` is a DataFrame).
            columns: DataFrame only: ``{input: column or [columns]}`` (or a list of columns for
                a single-input model).
            batch_size: DataFrame only: rows per request (default: the model's
                ``max_batch_size``, else about 512 KiB of tensor data per request).
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
            A DataFrame (one row per input row, the input's index) or an
            :class:`~nbinfer.InferResult`.

        Raises:
            InvalidInputError: The data does not fit the model's inputs (a column that cannot be
                coerced is named, with the model, input and dtypes).
            ModelNotFoundError: Unknown model or version.

        Example::

            frame = session.infer("iris", df)                     # any number of rows
            top = session.infer("iris", df, classification=1)     # label / score columns
        """
        requested = self._requested(model, model_version, outputs, classification)
        explicit = kwargs.pop("binary", None)
        probe = self._binary_unknown(explicit)

        def send(payload: Any, binary: bool | None) -> concurrent.futures.Future[InferResult]:
            return self.client.async_infer(
                model,
                payload,
                outputs=requested,
                model_version=model_version,
                binary=binary,
                **kwargs,
            )

        if _is_frame(data):
            from nbinfer.interop.pandas import DEFAULT_CONCURRENCY, infer_frame

            job = self._frame_job(model, model_version, data, columns, batch_size, inputs)

            def submit(payload: Any) -> Any:
                if probe and self._binary_found is None:
                    return self._probe_binary(lambda b: send(payload, b))
                return send(payload, self._binary_choice(explicit))

            try:
                outs = infer_frame(
                    job, submit, concurrency=concurrency or DEFAULT_CONCURRENCY, progress=progress
                )
            except KeyboardInterrupt:
                self.client._abort_in_flight()  # the chunks in flight on the worker threads
                raise
            result = InferResult(InferResponse(model, outs, model_version))
            frame = as_frame is not False
            return self._answer(result, model, model_version, data.index, frame, expand, requested)
        data, single = self._samples(model, model_version, data)
        if probe:
            result = self._probe_binary(lambda b: send(data, b)).result()
        else:
            result = self.client.infer(
                model,
                data,
                outputs=requested,
                model_version=model_version,
                binary=self._binary_choice(explicit),
                **kwargs,
            )
        if single and not as_frame:
            result = _one_sample(result)
        return self._answer(result, model, model_version, None, bool(as_frame), expand, requested)

    # -- one array, one sample --------------------------------------------------------------

    def _samples(self, model: str, version: str, data: Any) -> tuple[Any, bool]:
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
        meta = self._metadata(model, version)
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
                value = self._image_sample(meta, version, name, value)
            if spec is None or len(spec.shape) < 2 or spec.shape[0] != -1:
                sent[name] = value
                continue
            if isinstance(value, InferInput) or np.ndim(value) != len(spec.shape) - 1:
                sent[name] = value
                batched.append(name)
                continue
            item, got = spec.shape[1:], list(np.shape(value))
            if any(d not in (-1, g) for d, g in zip(item, got, strict=True)):
                raise InvalidInputError(
                    f"input {name!r} of model {model!r} takes shape {spec.shape} (a batch of "
                    f"{item}); one sample of shape {got} does not fit",
                    model=model,
                    tensor=name,
                )
            sent[name] = value[np.newaxis] if isinstance(value, np.ndarray) else [value]
            single.append(name)
        if single and batched:
            raise InvalidInputError(
                f"model {model!r}: {single} are single samples but {batched} are batches; "
                "pass every input as a batch ([n, ...]) or every input as one sample",
                model=model,
            )
        return sent, bool(single)

    def _metadata(self, model: str, version: str) -> ModelMetadata | None:
        """The model's metadata from the client's cache (read once); None if it has none."""
        meta = self.client._metadata.get((model, version))  # kept fresh by load / unload
        if meta is None:
            try:
                meta = self.client.get_model_metadata(model, version)
            except ModelNotFoundError:
                raise
            except (ServerError, UnsupportedError) as exc:
                logger.debug("no metadata for %s (sending the data as given): %s", model, exc)
                return None
        return meta

    def _image_sample(self, meta: ModelMetadata, version: str, name: str, image: Any) -> Any:
        from nbinfer.interop.images import image_sample

        try:
            config = self.client.get_model_config(meta.name, version)
        except NbinferError:
            config = {}
        return image_sample(meta, config, image, input=name)

    # -- binary tensors on servers that do not list them ----------------------------------

    def _binary_choice(self, explicit: bool | None) -> bool | None:
        """``binary=`` for a request: explicit, else what a probe found.

        ``None`` leaves the choice to the client (from the server's extensions).
        """
        if explicit is not None or self.client.config.binary is not None:
            return explicit
        return self._binary_found

    def _binary_unknown(self, explicit: bool | None) -> bool:
        """Whether the next HTTP request should probe binary tensors (once per session)."""
        if self.protocol != "http" or self._binary_found is not None:
            return False
        if explicit is not None or self.client.config.binary is not None:
            return False
        caps = self._capabilities
        if caps is None:
            if self._caps_tried:
                return False
            self._caps_tried = True
            caps = self.capabilities
        return caps.error is None and caps.offers("binary_tensor_data") is None

    def _learn_binary(self, found: bool) -> None:
        self._binary_found = found
        self.capabilities.record("binary_tensor_data", found)
        logger.debug(
            "%s %s binary tensor data (not listed in its extensions)",
            self.capabilities.server,
            "takes" if found else "refuses",
        )

    def _probe_binary(
        self, send: Callable[[bool], concurrent.futures.Future[T]]
    ) -> concurrent.futures.Future[T]:
        """Send with binary tensors; if the server refuses them, resend as JSON; remember."""
        with self._probe_lock:
            if self._binary_found is not None:
                return send(self._binary_found)
            first = send(True)
            error = first.exception()
            if error is None:
                self._learn_binary(True)
                return first
            if not _refuses_binary(error):
                return first
            second = send(False)
            if second.exception() is None:
                self._learn_binary(False)
            return second

    async def _aprobe_binary(
        self, send: Callable[[bool | None], Awaitable[T]], lock: asyncio.Lock
    ) -> T:
        """Like :meth:`_probe_binary` from a coroutine (``lock``: one probe per call)."""
        async with lock:
            if self._binary_found is not None:
                return await send(self._binary_found)
            try:
                result = await send(True)
            except NbinferError as exc:
                if not _refuses_binary(exc):
                    raise
                result = await send(False)
                self._learn_binary(False)
                return result
            self._learn_binary(True)
            return result

    def _aclient(self) -> AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._aclients.get(id(loop))
        if client is None:
            client = AsyncClient(self.url, protocol=self.protocol, **self._client_options)
            self._aclients[id(loop)] = client
        return client

    async def ainfer(
        self,
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
    ) -> Any:
        """Like :meth:`infer`, from a coroutine (``await session.ainfer(...)``)."""
        requested = self._requested(model, model_version, outputs, classification)
        aclient = self._aclient()
        explicit = kwargs.pop("binary", None)
        probe = self._binary_unknown(explicit)
        lock = asyncio.Lock()

        def send(payload: Any) -> Callable[[bool | None], Awaitable[InferResult]]:
            def with_binary(binary: bool | None) -> Awaitable[InferResult]:
                return aclient.infer(
                    model,
                    payload,
                    outputs=requested,
                    model_version=model_version,
                    binary=binary,
                    **kwargs,
                )

            return with_binary

        if _is_frame(data):
            from nbinfer.interop.pandas import DEFAULT_CONCURRENCY, ainfer_frame

            job = self._frame_job(model, model_version, data, columns, batch_size, inputs)

            def submit(payload: Any) -> Awaitable[InferResult]:
                if probe and self._binary_found is None:
                    return self._aprobe_binary(send(payload), lock)
                return send(payload)(self._binary_choice(explicit))

            outs = await ainfer_frame(
                job, submit, concurrency=concurrency or DEFAULT_CONCURRENCY, progress=progress
            )
            result = InferResult(InferResponse(model, outs, model_version))
            frame = as_frame is not False
            return self._answer(result, model, model_version, data.index, frame, expand, requested)
        data, single = self._samples(model, model_version, data)
        if probe:
            result = await self._aprobe_binary(send(data), lock)
        else:
            result = await send(data)(self._binary_choice(explicit))
        if single and not as_frame:
            result = _one_sample(result)
        return self._answer(result, model, model_version, None, bool(as_frame), expand, requested)

    def _image_options(self, model: str, version: str, options: dict[str, Any]) -> dict[str, Any]:
        try:
            config = self.client.get_model_config(model, version)
        except NbinferError:
            config = {}
        options.setdefault("config", config)
        options.setdefault("server_labels", self._labels(model, version))
        options.setdefault("extensions", self.client.get_server_metadata().extensions)
        return options

    def classify(
        self, model: str, images: Any, *, top_k: int = 5, model_version: str = "", **options: Any
    ) -> pd.DataFrame:
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
                ``encoded`` (send JPEG / PNG bytes as BYTES), ``input``, ``output``,
                ``batch_size``, ``server_topk``, ``concurrency`` (requests in flight),
                ``workers`` (decoding threads for big images), ``progress``.

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
        from nbinfer.interop.images import classify_images

        def submit(inputs: dict[str, Any], outputs: list[RequestedOutput]) -> Any:
            return self.client.async_infer(
                model, inputs, outputs=outputs, model_version=model_version
            )

        opts = self._image_options(model, model_version, dict(options, top_k=top_k))
        metadata = self.client.get_model_metadata(model, model_version)
        try:
            frame: pd.DataFrame = classify_images(submit, metadata, images, **opts)
        except KeyboardInterrupt:
            self.client._abort_in_flight()  # the batches in flight on the worker threads
            raise
        return frame

    async def aclassify(
        self, model: str, images: Any, *, top_k: int = 5, model_version: str = "", **options: Any
    ) -> pd.DataFrame:
        """Like :meth:`classify`, from a coroutine (inference on the session's async client)."""
        from nbinfer.interop.images import aclassify_images

        aclient = self._aclient()

        async def infer(inputs: dict[str, Any], outputs: list[RequestedOutput]) -> InferResult:
            return await aclient.infer(model, inputs, outputs=outputs, model_version=model_version)

        opts = self._image_options(model, model_version, dict(options, top_k=top_k))
        metadata = await aclient.get_model_metadata(model, model_version)
        frame: pd.DataFrame = await aclassify_images(infer, metadata, images, **opts)
        return frame

    # -- repository and statistics ---------------------------------------------------------

    def load(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> ModelHandle:
        """Load (or reload) ``model`` from the server's repository; returns its handle.

        Raises:
            UnauthenticatedError: The repository API is restricted; the message names the
                header to pass (``Session(url, headers=...)``).
        """
        try:
            self.client.load_model(model, config=config, files=files)
        except UnauthenticatedError as exc:
            raise self.capabilities.access_error(exc, "model repository") from exc
        self._forget_labels(model)
        return ModelHandle(self, model)

    def unload(self, model: str) -> None:
        """Unload ``model`` (raises like :meth:`load`)."""
        try:
            self.client.unload_model(model)
        except UnauthenticatedError as exc:
            raise self.capabilities.access_error(exc, "model repository") from exc
        self._forget_labels(model)

    def stats(self, model: str = "") -> pd.DataFrame:
        """Inference statistics as a DataFrame: one row per model version.

        Columns: name, version, inference_count, execution_count, success/fail counts, and
        mean success / queue / compute_infer / compute_input / compute_output times in
        milliseconds. In a notebook it displays with a latency breakdown chart.

        Raises:
            UnsupportedError: The server has no statistics extension (KServe, MLServer).
            UnauthenticatedError: Statistics are restricted; the message names the header.
            ModelNotFoundError: Unknown model.
        """
        raw = self._ask(
            "statistics",
            "statistics",
            lambda: self.client.get_inference_statistics(model),
            model=model,
        )
        rows = []
        for entry in raw.get("model_stats", []):
            stats = entry.get("inference_stats", {})

            def mean_ms(key: str, stats: Mapping[str, Any] = stats) -> float:
                item = stats.get(key) or {}
                count = int(item.get("count", 0))
                return float(item.get("ns", 0)) / count / 1e6 if count else 0.0

            rows.append(
                {
                    "name": entry.get("name", ""),
                    "version": entry.get("version", ""),
                    "inference_count": int(entry.get("inference_count", 0)),
                    "execution_count": int(entry.get("execution_count", 0)),
                    "success": int((stats.get("success") or {}).get("count", 0)),
                    "fail": int((stats.get("fail") or {}).get("count", 0)),
                    "success_ms": mean_ms("success"),
                    "queue_ms": mean_ms("queue"),
                    "compute_infer_ms": mean_ms("compute_infer"),
                    "compute_input_ms": mean_ms("compute_input"),
                    "compute_output_ms": mean_ms("compute_output"),
                }
            )
        columns = [
            "name",
            "version",
            "inference_count",
            "execution_count",
            "success",
            "fail",
            "success_ms",
            "queue_ms",
            "compute_infer_ms",
            "compute_input_ms",
            "compute_output_ms",
        ]
        from nbinfer.interop.stats import StatsFrame  # a DataFrame that draws a latency chart

        return StatsFrame(rows, columns=columns)

    def profile(
        self, model: str, inputs: Any = None, *, protocol: str | None = None, **options: Any
    ) -> ProfileFrame:
        """Load-profile ``model`` on this session's server (perf_analyzer in the notebook).

        A thin front of :func:`nbinfer.profiling.profile` with the session's URL and
        credentials; ``options`` are its options (``concurrency=[1, 2, 4]``,
        ``request_rate=200``, ``batch_size=8``, ``window=1.0`` ...).

        Example::

            frame = session.profile("add_sub", concurrency=[1, 2, 4, 8])

        Raises:
            InvalidInputError: ``protocol`` differs from the session's on a server it did not
                start (call :func:`nbinfer.profiling.profile` with that server's URL).
        """
        from nbinfer.profiling import profile

        url, client_options = self.url, {**self._client_options, "protocol": self.protocol}
        if protocol is not None and protocol != self.protocol:
            if self._server is None:
                raise InvalidInputError(
                    f"this session speaks {self.protocol} to {self.url}; profile {protocol} "
                    "with nbinfer.profiling.profile(URL, model) and that server's URL"
                )
            client_options["protocol"] = protocol
            url = f"grpc://{self._server.grpc_url}" if protocol == "grpc" else self._server.http_url
        return profile(url, model, inputs, client_options=client_options, **options)

    def browse(self, *, models: Sequence[str] = ()) -> ModelBrowser:
        """Open the model browser: an ipywidgets UI over this session's server.

        The model list with state; for the selected model its metadata, config, statistics,
        load / unload buttons and a "try it" form built from its inputs. What the server does
        not offer is hidden (no repository extension: no load / unload).

        Args:
            models: Model names to list when the server offers no repository index.

        Example::

            session.browse()        # the last expression of a cell displays it
        """
        from nbinfer.notebook.widgets import ModelBrowser

        return ModelBrowser(self, models=models)

    # -- notebook-defined models -----------------------------------------------------------

    def serve(
        self,
        model: Any,
        *,
        name: str | None = None,
        inputs: Sequence[Any] | None = None,
        outputs: Sequence[Any] | None = None,
        **options: Any,
    ) -> ModelHandle:
        """Add a notebook-defined model to the running local server.

        ``model`` may be an :class:`nbinfer.Model`, a plain function (NumPy in, NumPy out;
        specs from ``inputs`` / ``outputs``, its type hints, or ``example=``: the inputs of
        one call, ``{parameter: array}`` or one array, whose datatypes and shapes become the
        specs) or a ``torch.nn.Module`` (``inputs`` / ``outputs`` required). The server is
        another process: the model is shipped over the launcher's private channel with
        cloudpickle — never through the network API.

        Raises:
            InvalidInputError: This session has no local server, or the model cannot be built.
        """
        if self._server is None:
            raise InvalidInputError(
                "session.serve() needs the embedded local server (Session() or Session.local()); "
                f"this session talks to {self.url}"
            )
        built = _as_model(model, name=name, inputs=inputs, outputs=outputs, **options)
        self._server.add_model(built)
        self.client.get_model_metadata(built.name)  # refresh the client's metadata cache
        self._forget_labels(built.name)
        return ModelHandle(self, built.name)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the clients and stop the local server this session started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "local server" if self._server is not None else "remote"
        state = "closed" if self._closed else self.protocol
        return f"<Session {self.url} ({where}, {state})>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.notebook.display import mimebundle  # the one lazy edge into notebook/

        return mimebundle(self)


def _input_specs(inputs: InputSpecs) -> list[TensorSpec]:
    """``inputs=`` as tensor specs (``{name: "FP32"}`` or ``{name: ("FP32", [-1, 16])}``)."""
    if not isinstance(inputs, Mapping):
        return list(inputs)
    specs = []
    for name, spec in inputs.items():
        datatype, shape = (spec, [-1]) if isinstance(spec, str) else (spec[0], list(spec[1]))
        specs.append(TensorSpec(str(name), str(datatype), [int(d) for d in shape]))
    return specs


def _frame_specs(meta: ModelMetadata, frame: Any, columns: Any) -> list[TensorSpec]:
    """Input specs read off a frame: one per declared input (or column, or ``columns=`` key).

    Datatypes come from the column's dtype (arrays in cells: the cells' dtype; text: BYTES).
    """
    declared = {s.name: s for s in meta.inputs}
    if isinstance(columns, Mapping):
        chosen = {
            str(k): list(v) if isinstance(v, list | tuple) else [v] for k, v in columns.items()
        }
    elif columns is not None and len(declared) == 1:
        chosen = {next(iter(declared)): list(columns)}
    elif declared:
        chosen = {name: [name] for name in declared}
    else:
        chosen = {str(c): [c] for c in (columns if columns is not None else frame.columns)}
    have = {str(c): c for c in frame.columns}
    specs = []
    for name, cols in chosen.items():
        spec = declared.get(name, TensorSpec(name, "", []))
        if str(cols[0]) not in have:
            raise InvalidInputError(
                f"model {meta.name!r} declares input {name!r} without a datatype or shape and "
                f"the frame has no column {cols[0]!r} to read them from (columns: {list(have)})",
                model=meta.name,
                tensor=name,
            )
        values = np.asarray(frame[have[str(cols[0])]].to_numpy())
        datatype = spec.datatype or column_datatype(values)
        if spec.shape:
            shape = list(spec.shape)
        elif len(cols) > 1:
            shape = [-1, len(cols)]
        elif values.dtype.kind == "O" and len(values) and isinstance(values[0], np.ndarray | list):
            shape = [-1, *np.shape(values[0])]
        else:
            shape = [-1]
        specs.append(TensorSpec(name, datatype, shape))
    return specs


def _is_input_list(data: Any) -> bool:
    return isinstance(data, list | tuple) and bool(data) and isinstance(data[0], InferInput)


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


def _refuses_binary(exc: BaseException) -> bool:
    """Whether a failed binary request may be the server refusing binary tensors.

    Not a missing model, a busy server or missing credentials: JSON would not change those.
    """
    refusal = isinstance(exc, ServerError) and not isinstance(
        exc, ModelNotFoundError | ModelNotReadyError | ServerUnavailableError | UnauthenticatedError
    )
    return refusal


def _state(state: str) -> str:
    """A repository state as Triton spells it (MLServer's gRPC index says ``State.READY``)."""
    return state.rsplit(".", 1)[-1] if state.startswith("State.") else state


def _close_async_client(client: AsyncClient) -> None:
    """Close an AsyncClient from sync code, whether or not a loop is running here."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        asyncio.run(client.aclose())
    else:
        loop.create_task(client.aclose())


def _as_model(
    model: Any,
    *,
    name: str | None,
    inputs: Sequence[Any] | None,
    outputs: Sequence[Any] | None,
    **options: Any,
) -> Any:
    """Turn a function, torch module or Model into an nbinfer Model (in this process)."""
    from nbinfer.server.model import FunctionModel, Model

    if isinstance(model, Model):
        if name is not None:
            model.name = name
        return model
    module_type = _torch_module_type()
    if module_type is not None and isinstance(model, module_type):
        from nbinfer.server.backends.torch import TorchModel

        if inputs is None or outputs is None:
            raise InvalidInputError("serving a torch module needs inputs= and outputs= specs")
        return TorchModel(
            model,
            name=name or type(model).__name__.lower(),
            inputs=list(inputs),
            outputs=list(outputs),
            **options,
        )
    if callable(model):
        fn: Callable[..., Any] = model
        kwargs: dict[str, Any] = dict(options)
        if inputs is not None:
            kwargs["inputs"] = list(inputs)
        if outputs is not None:
            kwargs["outputs"] = list(outputs)
        return FunctionModel(fn, name=name or getattr(fn, "__name__", "model"), **kwargs)
    raise InvalidInputError(
        f"cannot serve {type(model).__name__}: pass an nbinfer.Model, a function or a "
        "torch.nn.Module"
    )


def _torch_module_type() -> type | None:
    import sys

    torch = sys.modules.get("torch")  # only if the user already imported torch
    module: type | None = None if torch is None else torch.nn.Module
    return module
