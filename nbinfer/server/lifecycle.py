"""Which model versions the server serves, and how: the model lifecycle behind the dataplane.

:class:`ServedModels` wraps the :class:`~nbinfer.server.repository.ModelRepository` with what
serving needs per loaded version, built once and dropped when the version retires: its
:class:`~nbinfer.server.modelio.ModelIO`, whether it is decoupled or stateful, its scheduling
policy and its :class:`~nbinfer.server.batcher.Scheduler` (or, without one, its
:class:`~nbinfer.server.workers.ModelWorkers` threads). Repository operations (index, load,
add, unload) go through it so that a reload never serves with a stale policy or I/O plan, and
it assembles the effective model config (Triton's JSON shape). A scheduler's executions are
:meth:`Execution.run_batch <nbinfer.server.execution.Execution.run_batch>` (the run step lives
in ``execution.py``, with :class:`~nbinfer.server.execution.Served`).

Imports the repository, batcher, execution, sequence, shm and modelio modules; never the
dataplane or a frontend.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from nbinfer.errors import ModelLoadError, NbinferError, ServerUnavailableError
from nbinfer.protocol.types import RepositoryModel
from nbinfer.server.batcher import PendingRequest, Scheduler, SchedulingPolicy, scheduling_policy
from nbinfer.server.execution import Execution, Served
from nbinfer.server.model import Model
from nbinfer.server.model_config import sequence_batching_json
from nbinfer.server.modelio import ModelIO
from nbinfer.server.repository import READY, UNAVAILABLE, ModelRepository, ModelVersion
from nbinfer.server.sequence import SequenceManager, is_stateful, sequence_idle_us
from nbinfer.server.shm import SharedMemoryManager

__all__ = ["Served", "ServedModels"]

logger = logging.getLogger("nbinfer")


class ServedModels:
    """The repository's loaded versions with their I/O, flags, policies and schedulers.

    Args:
        repository: The models.
        shm: The shared-memory regions requests may name (given to each version's ModelIO).
        sequences: Active sequences, dropped when their model is (re)loaded or unloaded.
        execution: Runs the requests; a scheduled version's executions are its
            :meth:`~nbinfer.server.execution.Execution.run_batch`.
    """

    def __init__(
        self,
        repository: ModelRepository,
        shm: SharedMemoryManager,
        sequences: SequenceManager,
        execution: Execution,
    ) -> None:
        self.repository = repository
        self.shm = shm
        self.sequences = sequences
        self.execution = execution
        self.closed = False
        self._served: dict[ModelVersion, Served] = {}
        self._policies: dict[ModelVersion, SchedulingPolicy | None] = {}
        self._schedulers: dict[ModelVersion, Scheduler] = {}
        #: Closing schedulers of versions whose declarations changed (see ``get``).
        self._retiring: set[asyncio.Task[None]] = set()
        self.check_scheduling()

    def get(self, name: str, version: str = "") -> Served:
        """The version serving ``name`` (latest ready when ``version`` is empty).

        Raises:
            ServerUnavailableError: the server is shutting down.
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not loaded (the reason is in the message).
        """
        if self.closed:
            raise ServerUnavailableError("the server is shutting down")
        mv = self.repository.resolve(name, version)
        served = self._served.get(mv)
        if served is None:
            served = self._serve(mv)
        elif served.io.stale():
            # its declarations changed (inputs, outputs, max_batch_size): the policy and the
            # scheduler built from the old ones go with the old Served
            self._retire_scheduling(mv)
            served = self._serve(mv)
        return served

    def _retire_scheduling(self, mv: ModelVersion) -> None:
        """Forget ``mv``'s policy and scheduler: the next request builds them anew.

        Requests already queued or running on the old scheduler finish there (it closes once
        they have; at once when idle or made on another event loop).
        """
        self._policies.pop(mv, None)
        scheduler = self._schedulers.pop(mv, None)
        if scheduler is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if scheduler.idle or scheduler.loop is not loop:
            scheduler.discard()
        else:
            task = loop.create_task(_close_when_idle(scheduler))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    def _serve(self, mv: ModelVersion) -> Served:
        model = mv.model
        assert model is not None
        decoupled = model.is_decoupled or bool(
            (mv.config.get("model_transaction_policy") or {}).get("decoupled")
        )
        io = ModelIO(model, self.shm)
        stateful = is_stateful(model, mv.config)
        old = self._served.get(mv)
        if old is not None and old.workers is not None and old.model is not model:
            old.workers.shutdown()
        served = Served(
            mv,
            model,
            io,
            decoupled=decoupled,
            stateful=stateful,
            idle_us=sequence_idle_us(model, mv.config),
            inline=not model.run_in_thread and not io.any_async and not stateful,
            # the same model object (its declarations changed): its threads carry on
            workers=old.workers if old is not None and old.model is model else None,
            batches_sequences=stateful
            and mv.controls is not None
            and int(model.max_batch_size) > 0
            and mv.config.get("dynamic_batching") is None,
        )
        self._served[mv] = served
        return served

    # -- scheduling (dynamic batching, instances, queue policies: see batcher.py) ------------
    def policy_for(self, mv: ModelVersion) -> SchedulingPolicy | None:
        """The model version's scheduling policy (None: unscheduled), cached.

        Raises:
            InvalidInputError: the model's ``dynamic_batching`` settings are malformed.
        """
        try:
            return self._policies[mv]
        except KeyError:
            pass
        model = mv.model
        assert model is not None
        policy = scheduling_policy(
            model.name,
            max_batch_size=int(model.max_batch_size),
            config=mv.config,
            dynamic_batching=getattr(model, "dynamic_batching", None),
            max_queue_size=getattr(model, "max_queue_size", None),
            instances=model.max_concurrency,
        )
        self._policies[mv] = policy
        return policy

    def check_scheduling(self, name: str | None = None) -> str:
        """Validate the scheduling settings of newly loaded versions.

        A version whose settings are malformed is marked UNAVAILABLE with the reason; returns
        the reason for model ``name`` ("" when fine).
        """
        self.purge()
        problem = ""
        for mv in self.repository.ready_versions():
            if mv in self._policies:
                continue
            try:
                self.policy_for(mv)
            except NbinferError as exc:
                mv.state = UNAVAILABLE
                mv.reason = str(exc)
                logger.warning("model %r version %s cannot serve: %s", mv.name, mv.version, exc)
                if mv.name == name:
                    problem = str(exc)
        return problem

    def purge(self) -> None:
        """Forget what served retired model versions (their schedulers are discarded)."""
        for mv in [v for v in self._served if v.model is None]:
            workers = self._served.pop(mv).workers
            if workers is not None:
                workers.shutdown()
        for mv in [v for v in self._policies if v.model is None]:
            self._policies.pop(mv, None)
            scheduler = self._schedulers.pop(mv, None)
            if scheduler is not None:
                scheduler.discard()

    def scheduler_for(self, served: Served) -> Scheduler | None:
        """The version's scheduler on the running loop (None: requests run as they come)."""
        mv = served.version
        policy = self.policy_for(mv)
        if policy is None:
            return None
        scheduler = self._schedulers.get(mv)
        loop = asyncio.get_running_loop()
        if scheduler is not None and scheduler.loop is loop and not scheduler.closed:
            return scheduler
        if scheduler is not None:  # made on another (finished) event loop
            scheduler.discard()
        self.purge()
        box: list[Scheduler] = []
        execution = self.execution

        async def run(items: list[PendingRequest]) -> list[Any]:
            return await execution.run_batch(served, box[0], items)

        scheduler = Scheduler(
            policy, run, use_threads=served.model.run_in_thread, cancel_running=served.io.any_async
        )
        box.append(scheduler)
        self._schedulers[mv] = scheduler
        return scheduler

    async def close_schedulers(self) -> None:
        """Stop every scheduler: queued requests fail, running ones finish (server shutdown)."""
        loop = asyncio.get_running_loop()
        for task in list(self._retiring):
            task.cancel()
        schedulers = list(self._schedulers.values())
        self._schedulers.clear()
        for scheduler in schedulers:
            if scheduler.loop is loop:
                await scheduler.close("is stopping: the server is shutting down")
            else:
                scheduler.discard()

    def shutdown_workers(self) -> None:
        """Release every model's own threads without waiting (server shutdown)."""
        for served in self._served.values():
            if served.workers is not None:
                served.workers.shutdown()

    # -- repository operations ---------------------------------------------------------------
    def index(self, *, ready_only: bool = False) -> list[RepositoryModel]:
        """Every model version with its state (READY / UNAVAILABLE / LOADING / UNLOADING)."""
        return self.repository.index(ready_only=ready_only)

    async def load(
        self,
        name: str,
        *,
        config: str | None = None,
        files: dict[str, bytes] | None = None,
        remote: bool = False,
    ) -> None:
        """Load or reload a model (see :meth:`ModelRepository.load`).

        Raises:
            ModelNotFoundError: nothing to load under that name.
            InvalidInputError: bad overrides (config, file paths).
            ModelLoadError: no version came up: ``load()`` raised or returned False, the code
                did not import, or the scheduling settings are malformed (reason included).
        """
        await self.repository.load(name, config=config, files=files, remote=remote)
        self.sequences.drop_model(name)
        problem = self.check_scheduling(name)
        if problem:
            raise ModelLoadError(f"failed to load {name!r}: {problem}", model=name)

    async def add(self, model: Model) -> None:
        """Register (or replace) an in-memory model and load it without blocking the loop.

        A model whose ``load()`` fails is recorded as UNAVAILABLE with the reason.

        Raises:
            InvalidInputError: the model has no name or invalid declarations.
        """
        await self.repository.add_async(model)
        self.sequences.drop_model(model.name)
        self.check_scheduling()

    async def unload(self, name: str, *, remote: bool = False) -> None:
        """Unload a model after its in-flight requests finish; others keep serving.

        Raises:
            ModelNotFoundError: unknown model.
            PermissionDeniedError: (``remote``) the model control mode refuses it.
        """
        await self.repository.unload(name, remote=remote)
        self.purge()
        self.sequences.drop_model(name)

    def counted(self, name: str = "", version: str = "") -> list[ModelVersion]:
        """The versions whose statistics a request asks for (every ready one when no name).

        Raises:
            ModelNotFoundError: unknown model / version.
        """
        if not name:
            return self.repository.ready_versions()
        if version:
            return [self.repository.resolve(name, version)]
        return [v for v in self.repository.versions(name) if v.state == READY]

    def config(self, name: str, version: str = "") -> dict[str, Any]:
        """The model's effective config in Triton's JSON shape (batching, sequence, decoupled).

        Raises:
            ModelNotFoundError: unknown model / version.
            ModelNotReadyError: the model is not loaded.
        """
        served = self.get(name, version)
        mv = served.version
        cfg = dict(mv.config)
        if served.stateful:
            sb = cfg.get("sequence_batching")
            cfg["sequence_batching"] = sequence_batching_json(
                sb if isinstance(sb, Mapping) else {},
                served.idle_us,
                max_batch_size=int(served.model.max_batch_size),
            )
        if served.decoupled:
            policy_cfg = cfg.get("model_transaction_policy")
            cfg["model_transaction_policy"] = {
                **(policy_cfg if isinstance(policy_cfg, Mapping) else {}),
                "decoupled": True,
            }
        try:
            policy = self.policy_for(mv)
        except NbinferError:
            policy = None
        if policy is not None and policy.batching and "sequence_batching" not in cfg:
            # the effective settings, in Triton's JSON shape (also when a config.pbtxt wrote
            # priority_queue_policy as key/value entries)
            given = cfg.get("dynamic_batching")
            merged = dict(given) if isinstance(given, Mapping) else {}
            effective = policy.to_config()
            if "preserve_ordering" in merged:
                effective["preserve_ordering"] = bool(merged["preserve_ordering"])
            merged.update(effective)
            merged.setdefault("preserve_ordering", False)
            merged.setdefault("priority_queue_policy", {})
            cfg["dynamic_batching"] = merged
        return cfg


async def _close_when_idle(scheduler: Scheduler) -> None:
    """Close a retired scheduler once what it queued and runs has finished."""
    try:
        while not scheduler.idle and not scheduler.closed:
            await asyncio.sleep(0.05)
    finally:
        scheduler.discard()  # idle (or shutting down): nothing left to fail
