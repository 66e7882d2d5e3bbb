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
import json
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from nbinfer.client import AsyncClient, Client, InferResult
from nbinfer.errors import InvalidInputError, NbinferError
from nbinfer.protocol.types import InferResponse, ModelMetadata, RequestedOutput

if TYPE_CHECKING:
    import pandas as pd

    from nbinfer.interop.pandas import FrameJob
    from nbinfer.notebook.widgets import ModelBrowser
    from nbinfer.protocol.columns import ColumnSelection
    from nbinfer.server.launcher import LocalServer

__all__ = ["ModelHandle", "Session"]

#: Config parameter prefix under which the nbinfer server publishes an output's class labels.
LABELS_PARAMETER = "nbinfer.labels."

_OPEN: weakref.WeakSet[Session] = weakref.WeakSet()
_ATEXIT_LOCK = threading.Lock()
_ATEXIT_DONE = False


def _close_all() -> None:
    for session in list(_OPEN):
        session.close()


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
        **client_options: Passed to :class:`~nbinfer.Client` (timeout, retries, ssl, auth,
            headers, binary, ...).

    Example::

        with nbinfer.Session() as session:
            frame = session.infer("iris", df)
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
        **client_options: Any,
    ) -> None:
        self._server: LocalServer | None = None
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
        self._closed = False
        _OPEN.add(self)
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

    # -- properties ------------------------------------------------------------------------

    @property
    def server(self) -> LocalServer | None:
        """The embedded server this session started, if any."""
        return self._server

    @property
    def models(self) -> pd.DataFrame:
        """The model repository index: one row per model (name, version, state, reason)."""
        import pandas

        rows = self.client.get_model_repository_index()
        return pandas.DataFrame(
            [(m.name, m.version, m.state, m.reason) for m in rows],
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

    def _frame_job(
        self,
        model: str,
        version: str,
        data: Any,
        columns: ColumnSelection | None,
        batch_size: int | None,
    ) -> FrameJob:
        """The chunked plan of a DataFrame: columns mapped onto the model's inputs, row ranges."""
        from nbinfer.interop.pandas import FrameJob, chunk_rows
        from nbinfer.protocol.columns import plan_inputs

        meta = self.client.get_model_metadata(model, version)
        plan = plan_inputs(data, meta, columns=columns)
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
        if _is_frame(data):
            from nbinfer.interop.pandas import DEFAULT_CONCURRENCY, infer_frame

            job = self._frame_job(model, model_version, data, columns, batch_size)

            def submit(payload: Any) -> Any:
                return self.client.async_infer(
                    model, payload, outputs=requested, model_version=model_version, **kwargs
                )

            outs = infer_frame(
                job, submit, concurrency=concurrency or DEFAULT_CONCURRENCY, progress=progress
            )
            result = InferResult(InferResponse(model, outs, model_version))
            frame = as_frame is not False
            return self._answer(result, model, model_version, data.index, frame, expand, requested)
        result = self.client.infer(
            model, data, outputs=requested, model_version=model_version, **kwargs
        )
        return self._answer(result, model, model_version, None, bool(as_frame), expand, requested)

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
        **kwargs: Any,
    ) -> Any:
        """Like :meth:`infer`, from a coroutine (``await session.ainfer(...)``)."""
        requested = self._requested(model, model_version, outputs, classification)
        aclient = self._aclient()
        if _is_frame(data):
            from nbinfer.interop.pandas import DEFAULT_CONCURRENCY, ainfer_frame

            job = self._frame_job(model, model_version, data, columns, batch_size)

            def submit(payload: Any) -> Any:
                return aclient.infer(
                    model, payload, outputs=requested, model_version=model_version, **kwargs
                )

            outs = await ainfer_frame(
                job, submit, concurrency=concurrency or DEFAULT_CONCURRENCY, progress=progress
            )
            result = InferResult(InferResponse(model, outs, model_version))
            frame = as_frame is not False
            return self._answer(result, model, model_version, data.index, frame, expand, requested)
        result = await aclient.infer(
            model, data, outputs=requested, model_version=model_version, **kwargs
        )
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
        frame: pd.DataFrame = classify_images(submit, metadata, images, **opts)
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
        """Load (or reload) ``model`` from the server's repository; returns its handle."""
        self.client.load_model(model, config=config, files=files)
        self._forget_labels(model)
        return ModelHandle(self, model)

    def unload(self, model: str) -> None:
        """Unload ``model``."""
        self.client.unload_model(model)
        self._forget_labels(model)

    def stats(self, model: str = "") -> pd.DataFrame:
        """Inference statistics as a DataFrame: one row per model version.

        Columns: name, version, inference_count, execution_count, success/fail counts, and
        mean success / queue / compute_infer / compute_input / compute_output times in
        milliseconds. In a notebook it displays with a latency breakdown chart.
        """
        raw = self.client.get_inference_statistics(model)
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
        specs from ``inputs`` / ``outputs`` or its type hints) or a ``torch.nn.Module``
        (``inputs`` / ``outputs`` required). The server is another process: the model is
        shipped over the launcher's private channel with cloudpickle — never through the
        network API.

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
        _OPEN.discard(self)
        try:
            self.client.close()
            for aclient in self._aclients.values():
                _close_async_client(aclient)
            self._aclients.clear()
        finally:
            if self._server is not None:
                self._server.stop()

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
