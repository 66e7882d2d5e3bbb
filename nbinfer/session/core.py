"""The Session core: connection, clients, capabilities, the local server and the lifecycle.

:class:`SessionCore` holds what every part of a :class:`~nbinfer.Session` builds on: the URL and
the sync client, one async client per event loop, what the server offers (``capabilities``),
the embedded local server it started (and ``restart()`` after that server died), the model
listing, statistics, and ``close()``; what its card shows is held from the last reads
(``refresh()`` reads them again: a repr never calls the server). The DataFrame front
(``frames``) and serving (``serving``) derive from it; ``nbinfer.session.Session`` joins them.
What escapes a public method, and how a dead local server is named, is ``boundary``'s.

May import ``capabilities``, ``client``, ``errors``, ``protocol`` and, from the server, only
``server.launcher`` (lazily, when a local server starts), ``profiling`` only inside
``profile()``, and the renderer ``render.cards`` inside the repr hook; never the notebook layer
(the model browser is built over a session by ``nbinfer.browse(session)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from nbinfer.capabilities import Capabilities, is_missing_route, read_capabilities
from nbinfer.client import AsyncClient, Client, ReplicaClient
from nbinfer.config import GENERATE_TOKEN, AuthTokenOption, BearerAuth
from nbinfer.errors import (
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    ServerError,
    UnauthenticatedError,
    UnsupportedError,
)
from nbinfer.session.boundary import Boundary, public
from nbinfer.session.handle import ModelHandle
from nbinfer.session.registry import Resources, register, retire_previous, shared_session

if TYPE_CHECKING:
    import pandas as pd

    from nbinfer.profiling import ProfileFrame
    from nbinfer.profiling.streaming import StreamProfileFrame
    from nbinfer.protocol.types import ModelMetadata
    from nbinfer.server.launcher import LocalServer
    from nbinfer.session import Session

__all__ = ["SessionCore"]

logger = logging.getLogger("nbinfer")
T = TypeVar("T")
#: The class a constructor is called on (typing.Self, which Python 3.10 lacks).
Self = TypeVar("Self", bound="SessionCore")

#: What :meth:`Session.models` / :meth:`Session.stats` say when a server offers neither.
_LIST_HINT = "Open a model by name instead: session.model('name') or session.infer('name', ...)."
_GRPC_LIST_HINT = (
    " The v2 gRPC protocol lists models only through the repository index; KServe lists them over"
    " REST (GET /v2/models): Session('http://host:port').models."
)
#: The columns of a listing this session assembles itself (no listing on the server).
_MET_COLUMNS = ["name", "state"]
_STATS_HINT = (
    "Inference statistics are a Triton / nbinfer extension; for this server read its own "
    "metrics (e.g. its Prometheus endpoint) instead."
)


class SessionCore(Boundary):
    """The connection and lifecycle half of :class:`~nbinfer.Session` (see there)."""

    def __init__(
        self,
        url: str | Sequence[str] | None = None,
        *,
        protocol: str | None = None,
        model_repository: str | None = None,
        device: str = "auto",
        demo: bool = True,
        auth_token: AuthTokenOption = GENERATE_TOKEN,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        keep_previous: bool = False,
        **client_options: Any,
    ) -> None:
        local = url is None
        _check_where(local, keep_previous=keep_previous, ssl=client_options.get("ssl"))
        self._server: LocalServer | None = None
        if headers is not None:
            client_options["headers"] = dict(headers)
        if token is not None:
            if "auth" in client_options or (
                url is None and auth_token is not GENERATE_TOKEN and auth_token != token
            ):
                raise InvalidInputError("pass either token= or auth= / auth_token=, not both")
            if url is None:
                auth_token = token
            else:
                client_options["auth"] = token
        if url is None:
            from nbinfer.server.launcher import LocalServer

            auth_token = _local_token(auth_token, client_options)
            self._server = LocalServer(
                model_repository=model_repository,
                demo=demo,
                device=device,
                control=True,
                auth_token=auth_token,
            )
            if self._server.auth_token is not None:
                client_options.setdefault("auth", self._server.auth_token)
            self._server.start()
            url = self._local_url(protocol)
        elif model_repository is not None or isinstance(auth_token, str):
            raise InvalidInputError(
                "model_repository / auth_token only apply to a local server (url=None); "
                "pass auth= (or token=) for a remote server"
            )
        #: Several servers' URLs (``Session([url1, url2])``: a ReplicaClient), or None.
        self._replicas = None if isinstance(url, str) else list(url)
        self.url = url if isinstance(url, str) else ", ".join(url)
        self._protocol_option = protocol
        self._client_options = dict(client_options)
        try:
            self.client = Client(url, protocol=protocol, **client_options)
        except BaseException as exc:
            if self._server is not None:
                self._server.stop()
            if isinstance(exc, TypeError | ValueError):  # a client option it does not take
                raise InvalidInputError(f"Session(): {exc}") from exc
            raise
        self.protocol = self.client.protocol
        if client_options.get("ssl") not in (None, False):
            self.url = self.client.url  # ssl= made it https:// / grpcs://: show what is used
        self._labels_cache: dict[tuple[str, str], dict[str, list[str]]] = {}
        self._max_batch: dict[tuple[str, str], int] = {}
        #: Model metadata the async face read (the sync client caches its own).
        self._metadata_held: dict[tuple[str, str], ModelMetadata] = {}
        self._capabilities: Capabilities | None = None
        #: The last capability record read, an error one included (what the card shows).
        self._caps_seen: Capabilities | None = None
        #: The last model listing read (``models``), or the error that read raised.
        self._listing: pd.DataFrame | NbinferError | None = None
        self._caps_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._inferred_specs: set[str] = set()
        #: Model names this session has met (infer, classify, model(), load, serve), in order:
        #: what :attr:`models` lists when the server offers no listing.
        self._met: dict[str, None] = {}
        self._listing_said = False
        self._caps_tried = False
        #: Binary tensors over HTTP as found by a probe (servers that take them unlisted).
        self._binary_found: bool | None = None
        #: Models added with serve(), by name: restart() serves them again.
        self._served: dict[str, Any] = {}
        self._closed = False
        #: The URL of the newer local session that replaced (and closed) this one.
        self._replaced_by: str | None = None
        self._resources = Resources(self.client, self._server, f"session {url}")
        # Not __del__: a finalizer stops the local server of a session nobody references any
        # more (a re-run `session = Session()` cell), at once in CPython, and at exit.
        self._finalizer = weakref.finalize(self, self._resources.release)
        register(self)
        if local and not keep_previous:
            # A re-run `session = Session()` cell: IPython's Out history (or any other
            # reference) may keep the previous session alive, so replace it explicitly.
            for old in retire_previous(self):
                logger.info("closed %r: replaced by the newer local session %s", old, self.url)
        if local:
            self.refresh()  # our own server, just started: its card has something to show

    def _retire(self, newer: SessionCore) -> None:
        """Close this session because ``newer`` (a newer local session) replaces it."""
        self._replaced_by = newer.url
        self.close()

    def _local_url(self, protocol: str | None) -> str:
        assert self._server is not None
        return self._server.grpc_url if protocol == "grpc" else self._server.http_url

    @classmethod
    def local(
        cls: type[Self],
        *,
        model_repository: str | None = None,
        device: str = "auto",
        demo: bool = True,
        protocol: str = "http",
        auth_token: AuthTokenOption = GENERATE_TOKEN,
        keep_previous: bool = False,
        **client_options: Any,
    ) -> Self:
        """Start the embedded local server and connect to it.

        Args:
            model_repository: A Triton-layout model repository to serve.
            device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda:N"``.
            demo: Also serve the demo models (``add_sub``, ``echo``, ``iris``, ``digits``).
            protocol: ``"http"`` or ``"grpc"`` for the session's client.
            auth_token: The bearer token the server requires; the session's clients send
                it. By default a random one (:attr:`token`). ``None`` starts the server
                without a token: any local user can then call it (unsafe on a shared host).
            keep_previous: Leave the earlier local sessions of this process open; by default
                this session replaces them (closes them and stops their servers).
            **client_options: Passed to :class:`~nbinfer.Client`.
        """
        return cls(
            None,
            protocol=protocol,
            model_repository=model_repository,
            device=device,
            demo=demo,
            auth_token=auth_token,
            keep_previous=keep_previous,
            **client_options,
        )

    @classmethod
    def shared(
        cls: type[Self],
        *,
        model_repository: str | None = None,
        device: str = "auto",
        demo: bool = True,
        protocol: str = "http",
        **client_options: Any,
    ) -> Self:
        """The one local-server session of this process for these options (re-run safe).

        The first call starts the local server; later calls with the same options return the
        same open session, so re-running ``session = nbinfer.Session.shared()`` never starts a
        second server. It is closed at exit (or by ``close()``; the next call starts anew). A
        shared session neither replaces the other local sessions nor is replaced by a newer
        ``Session()``.

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
        return shared_session(key, lambda: cls(None, keep_previous=True, **options))

    # -- the local server --------------------------------------------------------------------

    @property
    def server(self) -> LocalServer | None:
        """The embedded server this session started, if any."""
        return self._server

    @property
    def token(self) -> str | None:
        """The bearer token this session sends (``None``: none).

        For the local server a session started, the token that server requires (random
        unless given): pass it to other clients of that server, e.g. tritonclient's
        ``headers={"Authorization": f"Bearer {session.token}"}`` or curl's
        ``-H "Authorization: Bearer $TOKEN"``. For a remote server, the bearer token given
        with ``token=`` / ``auth=``.
        """
        if self._server is not None:
            return self._server.auth_token
        auth = self.client.config.auth
        return auth.token if isinstance(auth, BearerAuth) else None

    def restart(self) -> None:
        """Start the local server again and reconnect: after it died, or to reset it.

        The new server gets the same options (repository, device, demo models, token) and
        free ports, so :attr:`url` may change; the models added with :meth:`serve` are served
        again. Models loaded or unloaded by hand, and statistics, start afresh.

        Raises:
            UnsupportedError: This session did not start a server (a remote server restarts
                on its own side).
            ServerStartError: The new server did not start (with its log).
            InvalidInputError: The session is closed.
            ConnectError: A newer local session replaced this one (see ``keep_previous``).

        Example::

            session.restart()      # after "the local server of this session ... is gone"
        """
        server = self._server
        if server is None:
            raise UnsupportedError(
                f"session.restart() restarts the local server a session started; this session "
                f"talks to {self.url}, which it did not start"
            )
        if self._replaced_by is not None:
            raise self._replaced_error()
        if self._closed:
            raise InvalidInputError("this session is closed; open a new one: nbinfer.Session()")
        self._resources.close_clients()
        server.stop()
        server.start()
        self.url = self._local_url(self._protocol_option)
        self.client = self._resources.client = Client(
            self.url, protocol=self._protocol_option, **self._client_options
        )
        self._resources.owner = f"session {self.url}"
        self._labels_cache.clear()
        self._max_batch.clear()
        self._metadata_held.clear()
        self._capabilities = self._caps_seen = None
        self._listing = None
        self._caps_tried = False
        self._binary_found = None
        for model in self._served.values():
            server.add_model(model)
        logger.info("restarted the local server of this session: %s", self.url)

    # -- clients and capabilities --------------------------------------------------------------

    def _aclient(self) -> AsyncClient:
        """The session's AsyncClient for the running event loop (one per loop)."""
        loop = asyncio.get_running_loop()
        aclients = self._resources.aclients
        client = aclients.get(id(loop))
        if client is None:
            target = self._replicas or self.url
            client = AsyncClient(target, protocol=self.protocol, **self._client_options)
            aclients[id(loop)] = client
        return client

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
                    self._caps_seen = caps
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

    # -- what the server holds -------------------------------------------------------------

    @property
    @public
    def models(self) -> pd.DataFrame:
        """The server's models as a DataFrame, from whatever listing the server offers.

        The repository index gives ``name, version, state, reason``; KServe's model list
        (``GET /v2/models``, else ``/v1/models``) gives ``name`` only. A server that lists its
        models nowhere this session can reach (KServe over gRPC) gets ``name, state`` for the
        models this session has used, each checked with model-ready: a warning (once) and
        ``attrs["note"]`` say so and how to list them all. ``attrs["source"]`` is
        ``"repository_index"``, ``"model_list"`` or ``"session"``; ``attrs["complete"]`` is
        ``False`` for the last.

        A server whose listing is restricted (Triton's ``--http-restricted-api``) gets the
        same session-assembled frame, its note naming the header to pass.
        """
        try:
            frame = self._read_models()
        except NbinferError as exc:
            self._listing = exc
            raise
        self._listing = frame
        return frame

    def refresh(self: Self) -> Self:
        """Read again what the session's card shows: the server's metadata and its models.

        A session's notebook display never calls the server: it shows what was last read
        (by this, by creating a local session, by :attr:`capabilities`, :attr:`models` or
        inference). The server's answers, errors included, are held for the card, not
        raised. Returns the session (a cell ending in ``session.refresh()`` shows the card).
        """
        if self._closed or self._replaced_by is not None:
            return self
        self._capabilities = None
        if self.capabilities.error is None:
            with contextlib.suppress(NbinferError):  # held for the card
                _ = self.models
        return self

    def _read_models(self) -> pd.DataFrame:
        """:attr:`models`, read from the server."""
        import pandas

        api = "model repository index"
        try:
            rows = self._ask("repository_index", api, self.client.get_model_repository_index)
        except UnauthenticatedError as exc:
            if self.capabilities.error is not None:
                raise  # the whole server refuses this session, not just its listing
            return self._models_met(restricted=exc)
        except UnsupportedError:
            if self.protocol != "http":
                return self._models_met()
            try:
                names = self._ask("model_list", "model list", self.client.list_models)
            except UnsupportedError:
                return self._models_met()
            frame = pandas.DataFrame({"name": names}, columns=["name"])
            return _listed(frame, "model_list")
        frame = pandas.DataFrame(
            [(m.name, m.version, _state(m.state), m.reason) for m in rows],
            columns=["name", "version", "state", "reason"],
        )
        return _listed(frame, "repository_index")

    def _meet(self, name: str) -> None:
        """Remember a model name this session was given (listed when the server lists none)."""
        if name:
            self._met[name] = None

    def _models_met(self, restricted: UnauthenticatedError | None = None) -> pd.DataFrame:
        """The listing of a server that offers none (or ``restricted`` it): the models met.

        Each is checked with model-ready (one it no longer knows is left out); the frame's
        ``attrs`` say it is incomplete and how to list them all, logged once per session.
        """
        import pandas

        rows = []
        for name in list(self._met):
            try:
                ready = self.client.is_model_ready(name)
            except ModelNotFoundError:
                continue
            rows.append((name, "READY" if ready else "UNAVAILABLE"))
        frame = _listed(pandas.DataFrame(rows, columns=_MET_COLUMNS), "session", complete=False)
        note = self._listing_note() if restricted is None else self._restricted_note(restricted)
        frame.attrs["note"] = note
        if not self._listing_said:
            self._listing_said = True
            logger.warning("%s", note)
        return frame

    def _listing_note(self) -> str:
        """What a listing assembled by the session says: why, what it holds, how to list all."""
        caps = self.capabilities
        if self.protocol == "grpc":
            host = self.url.split("://", 1)[-1].rsplit(":", 1)[0] or "host"
            why = (
                f"{caps.server} offers no model listing over gRPC (no repository index RPC; "
                "KServe lists its models over REST only)"
            )
            how = (
                f"list them all over its HTTP port: Session('http://{host}:<http port>').models "
                "(GET /v2/models)"
            )
        else:
            why = (
                f"{caps.server} offers no model listing (no repository index, no GET /v2/models "
                "or /v1/models)"
            )
            how = "open any other model by name: session.model('name')"
        return (
            f"{why}: session.models holds only the models this session has used, each checked "
            f"with model-ready; {how}."
        )

    @staticmethod
    def _restricted_note(exc: UnauthenticatedError) -> str:
        """The note of a listing the server restricts: its access error says which header."""
        return (
            f"{exc}. Until then session.models holds only the models this session has used, "
            "each checked with model-ready."
        )

    @public
    def model(self, name: str, version: str = "") -> ModelHandle:
        """A handle on one model (metadata, config, stats, infer).

        Raises:
            ModelNotFoundError: The server does not know the model.
        """
        handle = self._handle(name, version)
        handle._read()  # what its card shows
        error = handle._held.get("error")
        if error is not None:
            raise error  # fail loudly on unknown names
        return handle

    def _handle(self, name: str, version: str = "") -> ModelHandle:
        self._meet(name)
        return ModelHandle(cast("Session", self), name, version)  # every SessionCore is one

    def _forget_labels(self, model: str) -> None:
        self._labels_cache = {k: v for k, v in self._labels_cache.items() if k[0] != model}
        self._max_batch = {k: v for k, v in self._max_batch.items() if k[0] != model}
        self._metadata_held = {k: v for k, v in self._metadata_held.items() if k[0] != model}

    @public
    def stats(self, model: str = "", *, per_replica: bool = True) -> pd.DataFrame:
        """Inference statistics as a DataFrame: one row per model version.

        Columns: name, version, inference_count, execution_count, success/fail counts, and
        mean success / queue / compute_infer / compute_input / compute_output times in
        milliseconds. In a notebook it displays with a latency breakdown chart.

        A session over several servers (``Session([url1, url2])``) gives one row per replica,
        model and version: ``replica`` (the URL) and ``state`` (``up``; ``down``: unreachable;
        ``error``: it answered with an error) come first, ``error`` (the message) last. A
        replica that cannot answer is one row of zeros saying so, beside the others' rows.
        ``attrs["replicas"]`` (and the card) hold this session's own calls per replica, as
        :meth:`replica_stats`. ``per_replica=False`` sums the replicas that answered into one
        row per model version, as one server's frame.

        Raises:
            UnsupportedError: The server has no statistics extension (KServe, MLServer).
            UnauthenticatedError: Statistics are restricted; the message names the header.
            ModelNotFoundError: Unknown model (on every replica that answered).
        """
        from nbinfer.interop import stats  # a DataFrame that draws a latency chart

        client = self.client
        if per_replica and isinstance(client, ReplicaClient):
            answers = self._ask(
                "statistics",
                "statistics",
                lambda: _some_answered(client.replica_statistics(model)),
                model=model,
            )
            return stats.replica_stats_frame(answers, client.replica_stats())
        raw = self._ask(
            "statistics",
            "statistics",
            lambda: self.client.get_inference_statistics(model),
            model=model,
        )
        return stats.stats_frame(raw)

    @public
    def replica_stats(self) -> pd.DataFrame:
        """This session's own calls per replica (``Session([url1, url2])``), one row each.

        Columns: ``url``, ``state`` (``healthy``, or ``skipped``: a call to it failed and it
        waits to be probed again), ``outstanding`` (calls in flight), ``requests`` (calls
        sent), ``infers`` (of which inferences), ``failures``, ``retried`` (calls it took over
        after another replica failed) and ``last_error``. Counted by this session's client,
        not asked of the servers: no network I/O.

        Raises:
            UnsupportedError: The session has one server (nothing to count per replica).
        """
        client = self.client
        if not isinstance(client, ReplicaClient):
            raise UnsupportedError(
                f"replica_stats(): this session has one server ({self.url}); per-replica counts"
                " exist over several: Session([url1, url2]). session.stats() has its statistics.",
                hint="nbinfer.Session(['http://host1:8000', 'http://host2:8000'])",
            )
        from nbinfer.interop.stats import replica_counts_frame

        return replica_counts_frame(client.replica_stats())

    @public
    def profile(
        self, model: str, inputs: Any = None, *, protocol: str | None = None, **options: Any
    ) -> ProfileFrame | StreamProfileFrame:
        """Load-profile ``model`` on this session's server (perf_analyzer in the notebook).

        A thin front of :func:`nbinfer.profiling.profile` with the session's URL and
        credentials; ``options`` are its options (``concurrency=[1, 2, 4]``,
        ``request_rate=200``, ``batch_size=8``, ``window=1.0`` ...).

        Example::

            frame = session.profile("add_sub", concurrency=[1, 2, 4, 8])

        A streaming (decoupled) model gets
        :func:`nbinfer.profiling.streaming.profile_stream` instead (``inputs``: the prompt;
        options ``concurrency``, ``duration`` and the model's inputs such as ``max_tokens``):
        time to first token, inter-token latency, output tokens/s, latency percentiles, over
        ``generate_stream`` as :meth:`generate` calls it (HTTP Server-Sent Events or the gRPC
        decoupled stream: ``protocol``, by default the session's).

        Raises:
            InvalidInputError: ``protocol`` differs from the session's on a server it did not
                start (call :func:`nbinfer.profiling.profile` with that server's URL).
        """
        from nbinfer.profiling import profile
        from nbinfer.profiling.streaming import is_streaming, profile_stream

        url, client_options = self.url, {**self._client_options, "protocol": self.protocol}
        if protocol is not None and protocol != self.protocol:
            if self._server is None:
                raise InvalidInputError(
                    f"this session speaks {self.protocol} to {self.url}; profile {protocol} "
                    "with nbinfer.profiling.profile(URL, model) and that server's URL"
                )
            client_options["protocol"] = protocol
            url = self._local_url(protocol)
        if is_streaming(self.client, model, options.get("model_version", "")):
            return profile_stream(url, model, inputs, client_options=client_options, **options)
        return profile(url, model, inputs, client_options=client_options, **options)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the clients and stop the local server this session started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def __enter__(self: Self) -> Self:
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
        state = (
            "replaced by a newer Session"
            if self._replaced_by is not None
            else "closed"
            if self._closed
            else self.protocol
        )
        return f"<Session {self.url} ({where}, {state})>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.cards import session_bundle  # drawn from what it holds: no I/O

        return session_bundle(self, self._repr_held())

    def _repr_held(self) -> dict[str, Any]:
        """What the session's card is drawn from: its last reads, never a new one."""
        return {
            "closed": self._closed,
            "replaced_by": self._replaced_by,
            "capabilities": self._capabilities or self._caps_seen,
            "listing": self._listing,
        }


def _check_where(local: bool, *, keep_previous: bool, ssl: Any) -> None:
    """Refuse the options that only apply to a remote url, or only to a local server."""
    if local and ssl not in (None, False):
        raise InvalidInputError(
            "Session(ssl=...) applies to a remote url: the local server a Session starts "
            "serves plaintext HTTP / gRPC on 127.0.0.1 only (no TLS to connect to)"
        )
    if not local and keep_previous:
        raise InvalidInputError(
            "keep_previous applies to a local server (url=None): a session with a url is "
            "never replaced by a newer one"
        )


def _local_token(auth_token: AuthTokenOption, client_options: dict[str, Any]) -> AuthTokenOption:
    """The local server's ``auth_token`` given the session's ``auth=`` client option.

    A bearer ``auth=`` given without ``auth_token=`` becomes the server's token (as ``token=``),
    so the session's clients and its server agree.

    Raises:
        InvalidInputError: ``auth=`` is not a bearer token while the server requires one, or
            disagrees with ``auth_token=``.
    """
    if "auth" not in client_options or auth_token is None:
        return auth_token
    auth = client_options["auth"]
    given = auth.token if isinstance(auth, BearerAuth) else auth if isinstance(auth, str) else None
    if given is None:
        raise InvalidInputError(
            "the local server of Session() takes a bearer token: pass auth_token= (or token=), "
            f"not auth={auth!r}; auth_token=None starts it without one"
        )
    if auth_token is not GENERATE_TOKEN and auth_token != given:
        raise InvalidInputError("pass either auth= or auth_token=, not both")
    return given


def _listed(frame: pd.DataFrame, source: str, *, complete: bool = True) -> pd.DataFrame:
    """``frame`` with where its listing came from in ``attrs`` (``source``, ``complete``)."""
    frame.attrs["source"] = source
    frame.attrs["complete"] = complete
    return frame


def _some_answered(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``answers`` (one per replica) unless none answered and one said why: raise that."""
    if not any(a["state"] == "up" for a in answers):
        for answer in answers:
            if answer["state"] == "error":
                raise answer["error"]  # an unknown model, no statistics: as on one server
    return answers


def _state(state: str) -> str:
    """A repository state as Triton spells it (MLServer's gRPC index says ``State.READY``)."""
    return state.rsplit(".", 1)[-1] if state.startswith("State.") else state
