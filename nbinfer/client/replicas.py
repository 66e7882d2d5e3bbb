"""Several servers behind one client: :class:`ReplicaClient` and :class:`AsyncReplicaClient`.

``Client([url1, url2])`` / ``AsyncClient([...])`` build one member client per URL and spread
calls over them, client-side (the servers know nothing of each other):

- each call goes to the healthy replica with the fewest calls in flight (least outstanding
  requests; ties go round-robin);
- a replica whose call fails with a transport error or "unavailable" (503) is marked down and
  skipped; after ``reprobe`` seconds it is asked ``is_server_ready`` again before it gets work;
- a unary call that failed that way is sent again to another replica (inference is idempotent),
  until every replica was tried; the error then names each replica and what it said;
- a sequence (``sequence_id=`` / ``sequence=``) stays on the replica that got its first request
  until ``sequence_end``; a stream stays on one replica for its life; both fail rather than move;
- calls that change a server (load / unload, shared-memory regions, trace / log settings) go to
  every replica that is up, and return the first one's answer;
- :meth:`ReplicaClient.replica_statistics` asks every replica (those marked down too) for its
  own inference statistics and says which could not answer (``session.stats()`` shows one row per
  replica, model and version); ``get_inference_statistics`` sums the answers of those that could
  (counts and times), as if one server had run it all;
- :meth:`ReplicaClient.replica_stats` counts calls, failures and retries per replica.

Every call is still the one declaration in :mod:`nbinfer.client.api`: :func:`_spread` turns it
into a method that runs the declaration on the chosen member (as ``sync._blocking`` does on one
server), so both faces keep the declared signatures and docstrings. Imports the client faces,
core and errors only.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, cast

from nbinfer.client import api
from nbinfer.client.aio import AsyncClient
from nbinfer.client.core import Callback, Inputs, _Core
from nbinfer.client.results import InferResult, InferSequence
from nbinfer.client.sync import Client
from nbinfer.errors import (
    ConnectError,
    InvalidInputError,
    NbinferError,
    ServerUnavailableError,
    TransportError,
)
from nbinfer.transports import Op

__all__ = ["AsyncReplicaClient", "ReplicaClient"]

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound=_Core)

#: Seconds a replica that failed stays skipped before it is probed again.
DEFAULT_REPROBE = 5.0

#: Calls that change a server: sent to every replica that is up.
_EVERYWHERE = frozenset(
    {
        "load_model",
        "unload_model",
        "register_system_shared_memory",
        "unregister_system_shared_memory",
        "register_cuda_shared_memory",
        "unregister_cuda_shared_memory",
        "update_trace_settings",
        "update_log_settings",
    }
)


#: Calls whose answers from every replica that is up are merged into one.
_MERGED = frozenset({"get_inference_statistics"})


def _merge_stats(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Inference statistics of several servers as one server's: counts and times summed."""
    models: dict[tuple[str, str], Any] = {}
    for answer in answers:
        for entry in answer.get("model_stats", []):
            key = (entry.get("name", ""), entry.get("version", ""))
            models[key] = _merged(models[key], entry) if key in models else entry
    return {**(answers[0] if answers else {}), "model_stats": list(models.values())}


def _merged(a: Any, b: Any, key: str = "") -> Any:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return {
            k: _merged(a[k], b[k], k) if k in a and k in b else a.get(k, b.get(k))
            for k in {**a, **b}
        }
    if isinstance(a, list) and isinstance(b, list):  # batch_stats: merged by batch size
        sizes: dict[Any, Any] = {}
        for item in (*a, *b):
            size = item.get("batch_size") if isinstance(item, Mapping) else id(item)
            sizes[size] = _merged(sizes[size], item) if size in sizes else item
        return list(sizes.values())
    if isinstance(a, bool) or isinstance(b, bool) or key in ("name", "version"):
        return a
    if isinstance(a, int | float) and isinstance(b, int | float):
        return max(a, b) if key == "last_inference" else a + b
    if isinstance(a, str) and isinstance(b, str) and a.isdigit() and b.isdigit():
        return str(max(int(a), int(b)) if key == "last_inference" else int(a) + int(b))
    return a


def _merge_answers(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The statistics of the replicas that answered, summed; the first error when none could.

    A replica that answered with an error (an unknown model, no statistics) raises it: the
    sum would leave that replica out without saying so.
    """
    for answer in answers:
        if answer["state"] == "error":
            raise answer["error"]
    up = [a["statistics"] for a in answers if a["state"] == "up"]
    if not up:
        errors = [(a["url"], a["error"]) for a in answers]
        raise _Pool.exhausted("get_inference_statistics", errors)
    return _merge_stats(up)


def _replica_failed(exc: BaseException) -> bool:
    """Whether ``exc`` says the replica (not the request) failed: try another one."""
    return isinstance(exc, TransportError | ServerUnavailableError)


class _Replica(Generic[M]):
    """One member: its client and what the pool knows of it."""

    def __init__(self, client: M) -> None:
        self.client = client
        self.url = client.url
        self.outstanding = 0
        self.requests = 0
        self.infers = 0
        self.failures = 0
        self.retried = 0  # calls it took over after another replica failed
        self.down_since: float | None = None
        self.last_error = ""


class _Pool(Generic[M]):
    """The replicas' state: choice, health, pins; thread-safe, no I/O."""

    def __init__(self, members: list[M], reprobe: float) -> None:
        self.replicas = [_Replica(m) for m in members]
        self.reprobe = reprobe
        self.lock = threading.Lock()
        self.turn = itertools.count()
        #: correlation id -> the replica its sequence runs on
        self.pins: dict[int | str, _Replica[M]] = {}

    def choose(self, tried: set[int]) -> tuple[_Replica[M] | None, bool]:
        """The replica for the next attempt and whether it must be probed first."""
        with self.lock:
            now = time.monotonic()
            due = [
                r
                for r in self.replicas
                if id(r) not in tried
                and r.down_since is not None
                and now - r.down_since >= self.reprobe
            ]
            if due:  # probe it first; until the probe ends, other callers skip it
                replica = min(due, key=lambda r: r.down_since or 0.0)
                replica.down_since = now
                return replica, True
            up = [r for r in self.replicas if id(r) not in tried and r.down_since is None]
            if up:
                least = min(r.outstanding for r in up)
                ties = [r for r in up if r.outstanding == least]
                return ties[next(self.turn) % len(ties)], False
            return None, False

    def begin(self, replica: _Replica[M], retry: bool, call: str) -> None:
        with self.lock:
            replica.outstanding += 1
            replica.requests += 1
            replica.infers += call == "infer"
            replica.retried += retry

    def end(self, replica: _Replica[M], error: BaseException | None) -> None:
        with self.lock:
            replica.outstanding -= 1
            if error is not None:
                replica.failures += 1
                replica.down_since = time.monotonic()
                replica.last_error = str(error)
            else:
                replica.down_since = None

    def mark(self, replica: _Replica[M], ready: bool, why: str = "") -> None:
        with self.lock:
            if ready:
                replica.down_since = None
            else:
                replica.down_since = time.monotonic()
                replica.last_error = why or "not ready"

    def up(self) -> list[_Replica[M]]:
        with self.lock:
            return [r for r in self.replicas if r.down_since is None] or list(self.replicas)

    def answered(
        self, replica: _Replica[M], value: dict[str, Any] | None, error: NbinferError | None
    ) -> dict[str, Any]:
        """A replica's statistics answer (``replica_statistics``), noted as a health check."""
        down = error is not None and _replica_failed(error)
        if error is None or down:
            self.mark(replica, not down, str(error))
        state = "up" if error is None else "down" if down else "error"
        return {"url": replica.url, "state": state, "statistics": value, "error": error}

    @staticmethod
    def exhausted(name: str, errors: Sequence[tuple[str, BaseException]]) -> NbinferError:
        said = "; ".join(f"{url}: {exc}" for url, exc in errors) or "all are marked down"
        last = errors[-1][1] if errors else None
        cls = type(last) if isinstance(last, ConnectError | ServerUnavailableError) else None
        message = f"{name}: no replica could serve the call ({said})"
        return (cls or ConnectError)(message)

    def stats(self) -> list[dict[str, Any]]:
        with self.lock:
            return [
                {
                    "url": r.url,
                    "up": r.down_since is None,
                    "outstanding": r.outstanding,
                    "requests": r.requests,
                    "infers": r.infers,
                    "failures": r.failures,
                    "retried": r.retried,
                    "last_error": r.last_error,
                }
                for r in self.replicas
            ]


def _sequence_key(kwargs: Mapping[str, Any]) -> tuple[int | str | None, bool]:
    """The correlation id a call belongs to (None: not a sequence) and whether it ends it."""
    seq = kwargs.get("sequence")
    key = seq.id if isinstance(seq, InferSequence) else kwargs.get("sequence_id")
    return key, bool(kwargs.get("sequence_end"))


def _members(face: type[M], urls: Sequence[str], options: Mapping[str, Any]) -> tuple[list[M], str]:
    if isinstance(urls, str | bytes) or not isinstance(urls, Sequence) or not urls:
        raise InvalidInputError(f"replicas: give a list of server URLs, not {urls!r:.80}")
    members = [face(str(url), **options) for url in urls]
    protocols = {m.protocol for m in members}
    if len(protocols) > 1:
        for m in members:
            m._closed = True
        raise InvalidInputError(
            f"replicas must speak one protocol, got {sorted(protocols)} from {list(urls)}"
        )
    first = members[0]
    for m in members[1:]:  # replicas serve the same models: one metadata cache
        m._metadata, m._dtypes, m._no_metadata = first._metadata, first._dtypes, first._no_metadata
    return members, ", ".join(m.url for m in members)


def _spread(
    declared: Callable[Concatenate[_Core, P], Op[T]],
) -> Callable[Concatenate[ReplicaClient, P], T]:
    """The blocking method of one declaration, run on the replicas."""

    def method(self: ReplicaClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._dispatch(declared, args, kwargs)

    return api.face_method(method, declared, "ReplicaClient", __name__)


def _aspread(
    declared: Callable[Concatenate[_Core, P], Op[T]],
) -> Callable[Concatenate[AsyncReplicaClient, P], Coroutine[Any, Any, T]]:
    """The coroutine method of one declaration, run on the replicas."""

    async def method(self: AsyncReplicaClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._dispatch(declared, args, kwargs)

    return api.face_method(method, declared, "AsyncReplicaClient", __name__)


def _kind(name: str, kwargs: Mapping[str, Any]) -> Literal["everywhere", "pinned", "spread"]:
    if name in _EVERYWHERE or name in _MERGED:
        return "everywhere"
    if name in ("infer", "build_request") and _sequence_key(kwargs)[0] is not None:
        return "pinned"
    return "spread"


class ReplicaClient(Client):
    """A blocking client over several servers serving the same models (``Client([urls])``).

    Args:
        urls: The servers' URLs (one protocol for all).
        reprobe: Seconds a failed replica is skipped before it is probed again.
        **options: Any option of :class:`~nbinfer.Client`, given to every member.

    Example::

        client = nbinfer.Client(["http://10.0.0.1:8000", "http://10.0.0.2:8000"])
        client.infer("iris", {"input": x})      # the least busy replica that is up
        client.replica_stats()                  # calls / failures / retries per replica
    """

    def __init__(
        self, urls: Sequence[str], *, reprobe: float = DEFAULT_REPROBE, **options: Any
    ) -> None:
        members, self.url = _members(Client, urls, options)
        self._pool: _Pool[Client] = _Pool(members, reprobe)
        first = members[0]
        self.protocol, self.config = first.protocol, first.config
        self._binding = first._binding
        self._metadata, self._dtypes, self._no_metadata = (
            first._metadata,
            first._dtypes,
            first._no_metadata,
        )
        self._closed = False
        self._max_workers = int(options.get("max_workers", 8)) * len(members)
        self._executor = None
        self._lock = threading.Lock()
        self._stream = None
        self._stream_member: Client | None = None

    @property
    def urls(self) -> list[str]:
        """The replicas' URLs."""
        return [r.url for r in self._pool.replicas]

    def __repr__(self) -> str:
        return f"<ReplicaClient {self.protocol} [{self.url}]>"

    def replica_stats(self) -> list[dict[str, Any]]:
        """Counts per replica, one dict each.

        Keys: ``url``, ``up``, ``outstanding`` (calls in flight), ``requests`` (calls sent),
        ``infers`` (of which inferences), ``failures``, ``retried`` (calls it took over after
        another replica failed) and ``last_error``.
        """
        return self._pool.stats()

    def replica_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Each replica's own inference statistics, asked of every replica at once.

        Replicas marked down are asked too (a fresh look), and the answers count as a health
        check: one that answers is marked up, one that cannot be reached (or says 503) down.

        Returns:
            One dict per replica, in the order of :attr:`urls`: ``url``, ``state`` (``"up"``:
            it answered; ``"down"``: unreachable or unavailable; ``"error"``: it answered with
            an error, such as an unknown model), ``statistics`` (its answer,
            ``{"model_stats": [...]}``, or None) and ``error`` (the exception, or None).
        """
        if self._closed:
            raise TransportError("the client is closed")

        def ask(replica: _Replica[Client]) -> dict[str, Any]:
            try:
                value = replica.client.get_inference_statistics(
                    model_name, model_version, headers=headers, timeout=timeout
                )
            except NbinferError as exc:
                return self._pool.answered(replica, None, exc)
            return self._pool.answered(replica, value, None)

        replicas = self._pool.replicas
        with ThreadPoolExecutor(len(replicas), thread_name_prefix="nbinfer-replicas") as pool:
            return list(pool.map(ask, replicas))

    # -- the driver ---------------------------------------------------------------------

    def _probe(self, replica: _Replica[Client]) -> bool:
        try:
            ready = replica.client.is_server_ready(timeout=2.0)
        except NbinferError as exc:
            self._pool.mark(replica, False, str(exc))
            return False
        self._pool.mark(replica, ready)
        return ready

    def _dispatch(
        self,
        declared: Callable[..., Op[T]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        if self._closed:
            raise TransportError("the client is closed")
        kind = _kind(declared.__name__, kwargs)
        if declared.__name__ in _MERGED:
            return cast(T, _merge_answers(self.replica_statistics(*args, **kwargs)))
        if kind == "everywhere":
            answers = [r.client._run(declared(r.client, *args, **kwargs)) for r in self._pool.up()]
            return answers[0]
        if kind == "pinned":
            return self._pinned(declared, args, kwargs)
        tried: set[int] = set()
        errors: list[tuple[str, BaseException]] = []
        while True:
            replica, probe = self._pool.choose(tried)
            if replica is None:
                raise self._pool.exhausted(declared.__name__, errors)
            tried.add(id(replica))
            if probe and not self._probe(replica):
                continue
            self._pool.begin(replica, bool(errors), declared.__name__)
            try:
                answer = replica.client._run(declared(replica.client, *args, **kwargs))
            except NbinferError as exc:
                failed = _replica_failed(exc) and not self._closed
                self._pool.end(replica, exc if failed else None)
                if not failed:
                    raise
                errors.append((replica.url, exc))
                continue
            self._pool.end(replica, None)
            return answer

    def _pinned(
        self, declared: Callable[..., Op[T]], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        key, ending = _sequence_key(kwargs)
        assert key is not None
        with self._pool.lock:
            replica = self._pool.pins.get(key)
        if replica is None:
            replica, _ = self._pool.choose(set())
            if replica is None:
                raise self._pool.exhausted(declared.__name__, [])
            with self._pool.lock:
                replica = self._pool.pins.setdefault(key, replica)
        self._pool.begin(replica, False, declared.__name__)
        error: BaseException | None = None
        try:
            return replica.client._run(declared(replica.client, *args, **kwargs))
        except NbinferError as exc:
            error = exc if _replica_failed(exc) else None
            raise
        finally:
            self._pool.end(replica, error)
            if ending or error is not None:
                with self._pool.lock:
                    self._pool.pins.pop(key, None)

    # -- lifecycle -----------------------------------------------------------------------

    def _abort_in_flight(self) -> None:
        for r in self._pool.replicas:
            r.client._abort_in_flight()

    def close(self) -> None:
        """Stop any stream, the ``async_infer`` threads and every member (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        for r in self._pool.replicas:
            r.client.close()

    # -- the declared calls ----------------------------------------------------------------

    is_server_live = _spread(api.is_server_live)
    is_server_ready = _spread(api.is_server_ready)
    is_model_ready = _spread(api.is_model_ready)
    get_server_metadata = _spread(api.get_server_metadata)
    get_model_metadata = _spread(api.get_model_metadata)
    get_model_config = _spread(api.get_model_config)
    build_request = _spread(api.build_request)
    infer = _spread(api.infer)
    get_model_repository_index = _spread(api.get_model_repository_index)
    load_model = _spread(api.load_model)
    unload_model = _spread(api.unload_model)
    get_inference_statistics = _spread(api.get_inference_statistics)
    get_trace_settings = _spread(api.get_trace_settings)
    update_trace_settings = _spread(api.update_trace_settings)
    get_log_settings = _spread(api.get_log_settings)
    update_log_settings = _spread(api.update_log_settings)
    get_system_shared_memory_status = _spread(api.get_system_shared_memory_status)
    register_system_shared_memory = _spread(api.register_system_shared_memory)
    unregister_system_shared_memory = _spread(api.unregister_system_shared_memory)
    get_cuda_shared_memory_status = _spread(api.get_cuda_shared_memory_status)
    register_cuda_shared_memory = _spread(api.register_cuda_shared_memory)
    unregister_cuda_shared_memory = _spread(api.unregister_cuda_shared_memory)
    list_models = _spread(api.list_models)
    predict = _spread(api.predict)
    explain = _spread(api.explain)

    # -- streams stay on one replica ---------------------------------------------------------

    def _stream_client(self) -> Client:
        replica, _ = self._pool.choose(set())
        if replica is None:
            raise self._pool.exhausted("stream", [])
        return replica.client

    def start_stream(  # noqa: D102 - Client.start_stream, on one replica
        self,
        callback: Callback,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        with self._lock:
            if self._stream_member is not None:
                raise NbinferError("a stream is already open; call stop_stream() first")
            self._stream_member = self._stream_client()
        self._stream_member.start_stream(callback, headers=headers, timeout=timeout)

    def stream_infer(  # type: ignore[override]  # noqa: D102 - as Client.stream_infer
        self,
        model_name: str | Any,
        inputs: Inputs | None = None,
        /,
        **options: Any,
    ) -> Iterator[InferResult] | None:
        if not isinstance(model_name, str):
            return self._stream_client().stream_infer(model_name, **options)
        member = self._stream_member
        if member is None:
            raise NbinferError("no open stream; call start_stream(callback) first")
        return member.stream_infer(model_name, inputs, **options)  # type: ignore[arg-type]

    def stop_stream(self, *, cancel_requests: bool = False) -> None:  # noqa: D102
        with self._lock:
            member, self._stream_member = self._stream_member, None
        if member is not None:
            member.stop_stream(cancel_requests=cancel_requests)


class AsyncReplicaClient(AsyncClient):
    """An asyncio client over several servers (``AsyncClient([urls])``).

    As :class:`ReplicaClient`, awaited.
    """

    def __init__(
        self, urls: Sequence[str], *, reprobe: float = DEFAULT_REPROBE, **options: Any
    ) -> None:
        members, self.url = _members(AsyncClient, urls, options)
        self._pool: _Pool[AsyncClient] = _Pool(members, reprobe)
        first = members[0]
        self.protocol, self.config = first.protocol, first.config
        self._binding = first._binding
        self._metadata, self._dtypes, self._no_metadata = (
            first._metadata,
            first._dtypes,
            first._no_metadata,
        )
        self._closed = False
        self._max_workers = 8

    @property
    def urls(self) -> list[str]:
        """The replicas' URLs."""
        return [r.url for r in self._pool.replicas]

    def __repr__(self) -> str:
        return f"<AsyncReplicaClient {self.protocol} [{self.url}]>"

    def replica_stats(self) -> list[dict[str, Any]]:
        """As :meth:`ReplicaClient.replica_stats`."""
        return self._pool.stats()

    async def replica_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """As :meth:`ReplicaClient.replica_statistics`, awaited (every replica at once)."""
        if self._closed:
            raise TransportError("the client is closed")

        async def ask(replica: _Replica[AsyncClient]) -> dict[str, Any]:
            try:
                value = await replica.client.get_inference_statistics(
                    model_name, model_version, headers=headers, timeout=timeout
                )
            except NbinferError as exc:
                return self._pool.answered(replica, None, exc)
            return self._pool.answered(replica, value, None)

        return list(await asyncio.gather(*(ask(r) for r in self._pool.replicas)))

    async def _probe(self, replica: _Replica[AsyncClient]) -> bool:
        try:
            ready = await replica.client.is_server_ready(timeout=2.0)
        except NbinferError as exc:
            self._pool.mark(replica, False, str(exc))
            return False
        self._pool.mark(replica, ready)
        return ready

    async def _dispatch(
        self,
        declared: Callable[..., Op[T]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        if self._closed:
            raise TransportError("the client is closed")
        kind = _kind(declared.__name__, kwargs)
        if declared.__name__ in _MERGED:
            return cast(T, _merge_answers(await self.replica_statistics(*args, **kwargs)))
        if kind == "everywhere":
            answers = await asyncio.gather(
                *(r.client._run(declared(r.client, *args, **kwargs)) for r in self._pool.up())
            )
            return answers[0]
        pinned_key = _sequence_key(kwargs) if kind == "pinned" else (None, False)
        tried: set[int] = set()
        errors: list[tuple[str, BaseException]] = []
        while True:
            if pinned_key[0] is not None and pinned_key[0] in self._pool.pins:
                replica: _Replica[AsyncClient] | None = self._pool.pins[pinned_key[0]]
                probe = False
            else:
                replica, probe = self._pool.choose(tried)
            if replica is None:
                raise self._pool.exhausted(declared.__name__, errors)
            tried.add(id(replica))
            if probe and not await self._probe(replica):
                continue
            if pinned_key[0] is not None:
                self._pool.pins.setdefault(pinned_key[0], replica)
            self._pool.begin(replica, bool(errors), declared.__name__)
            try:
                answer = await replica.client._run(declared(replica.client, *args, **kwargs))
            except NbinferError as exc:
                failed = _replica_failed(exc) and not self._closed
                self._pool.end(replica, exc if failed else None)
                if pinned_key[0] is not None and (failed or pinned_key[1]):
                    self._pool.pins.pop(pinned_key[0], None)
                if not failed or pinned_key[0] is not None:
                    raise
                errors.append((replica.url, exc))
                continue
            self._pool.end(replica, None)
            if pinned_key[0] is not None and pinned_key[1]:
                self._pool.pins.pop(pinned_key[0], None)
            return answer

    async def aclose(self) -> None:
        """Close every member (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(r.client.aclose() for r in self._pool.replicas))

    is_server_live = _aspread(api.is_server_live)
    is_server_ready = _aspread(api.is_server_ready)
    is_model_ready = _aspread(api.is_model_ready)
    get_server_metadata = _aspread(api.get_server_metadata)
    get_model_metadata = _aspread(api.get_model_metadata)
    get_model_config = _aspread(api.get_model_config)
    build_request = _aspread(api.build_request)
    infer = _aspread(api.infer)
    get_model_repository_index = _aspread(api.get_model_repository_index)
    load_model = _aspread(api.load_model)
    unload_model = _aspread(api.unload_model)
    get_inference_statistics = _aspread(api.get_inference_statistics)
    get_trace_settings = _aspread(api.get_trace_settings)
    update_trace_settings = _aspread(api.update_trace_settings)
    get_log_settings = _aspread(api.get_log_settings)
    update_log_settings = _aspread(api.update_log_settings)
    get_system_shared_memory_status = _aspread(api.get_system_shared_memory_status)
    register_system_shared_memory = _aspread(api.register_system_shared_memory)
    unregister_system_shared_memory = _aspread(api.unregister_system_shared_memory)
    get_cuda_shared_memory_status = _aspread(api.get_cuda_shared_memory_status)
    register_cuda_shared_memory = _aspread(api.register_cuda_shared_memory)
    unregister_cuda_shared_memory = _aspread(api.unregister_cuda_shared_memory)
    list_models = _aspread(api.list_models)
    predict = _aspread(api.predict)
    explain = _aspread(api.explain)

    async def stream_infer(  # noqa: D102 - on one replica
        self,
        requests: Any,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        replica, _ = self._pool.choose(set())
        if replica is None:
            raise self._pool.exhausted("stream_infer", [])
        async for result in replica.client.stream_infer(requests, headers=headers, timeout=timeout):
            yield result


# ``Client([...])`` / ``AsyncClient([...])`` build these (the faces cannot import this module:
# it builds on them).
Client._replica_face = ReplicaClient
AsyncClient._replica_face = AsyncReplicaClient
