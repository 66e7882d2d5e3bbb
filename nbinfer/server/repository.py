"""The model repository: Triton's on-disk layout plus models registered in memory.

Layout::

    <repo>/<model>/config.pbtxt        Triton text format (or config.json)
    <repo>/<model>/labels.txt          any label_filename, relative to the model dir
    <repo>/<model>/<N>/model.py        version N: defines an nbinfer ``Model`` subclass

A model that fails to load is recorded with state ``UNAVAILABLE`` and the reason; the others keep
serving. ``version_policy`` (latest N / all / specific) picks the versions to load.

Owns discovery, versions, load / unload and uploads. Reading and applying a config belongs to
:mod:`nbinfer.server.model_config`, building a backend's model to :mod:`nbinfer.server.backends`.
Imports neither the dataplane nor the frontends (they import this module).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from nbinfer.config import DEFAULT_MAX_MODELS, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_MAX_UPLOAD_FILES
from nbinfer.errors import (
    InvalidInputError,
    LimitExceededError,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    NbinferError,
    PayloadTooLargeError,
    PermissionDeniedError,
)
from nbinfer.protocol.types import RepositoryModel
from nbinfer.server.model import Model
from nbinfer.server.model_config import apply_config, model_config_json, read_config
from nbinfer.server.model_versions import (
    LOADING,
    MODEL_CONTROL_MODES,
    READY,
    UNAVAILABLE,
    UNLOADING,
    ModelControl,
    ModelVersion,
    _Entry,
    _refuse_mode,
    _select_versions,
    _version_key,
    is_latest_alias,
    unknown_version_error,
)
from nbinfer.server.paths import ModelFiles, check_model_name, upload_plan
from nbinfer.server.repository_files import (
    DATA_FILE_SUFFIXES,
    _fingerprint,
    _load_model_object,
    _model_of_version,
    _parse_config_override,
    _reason,
    _relative_text,
    _unload_model_object,
    _write_files,
)
from nbinfer.server.scratch import Scratch
from nbinfer.server.sequence_controls import SequenceControls

__all__ = [
    "DEFAULT_MAX_MODELS",
    "DEFAULT_MAX_UPLOAD_BYTES",
    "DEFAULT_MAX_UPLOAD_FILES",
    "LOADING",
    "MODEL_CONTROL_MODES",
    "READY",
    "UNAVAILABLE",
    "UNLOADING",
    "ModelControl",
    "ModelRepository",
    "ModelVersion",
    "is_latest_alias",
    "unknown_version_error",
]

logger = logging.getLogger("nbinfer")


class ModelRepository:
    """Models served by a :class:`~nbinfer.server.dataplane.DataPlane`.

    Args:
        path: A Triton-style model repository directory (optional).
        models: Model objects to register in memory.
        load: Which repository models to load now: True = all (Triton's default mode),
            False = none (load explicitly later), or a list of names.
        device: Device for models that do not choose one.
        allow_code_upload: Let load requests upload code or pickles.
        control: What load / unload requests from the network may do (default: explicit
            load / unload, no replacing, the default caps).

    Example::

        repo = ModelRepository("models/", models=demo_models())
        repo.index()
    """

    def __init__(
        self,
        path: str | Path | Sequence[str | Path] | None = None,
        *,
        models: Iterable[Model] = (),
        load: bool | Sequence[str] = True,
        device: str | None = None,
        allow_code_upload: bool = False,
        control: ModelControl | None = None,
    ) -> None:
        if path is None:
            paths: list[Path] = []
        elif isinstance(path, str | Path):
            paths = [Path(path)]
        else:
            paths = [Path(p) for p in path]
        for p in paths:
            if not p.is_dir():
                raise InvalidInputError(f"model repository {str(p)!r} is not a directory")
        self.paths = paths
        #: Device for models that do not choose one ("cpu", "auto", "cuda:N").
        self.device = device or "cpu"
        #: Whether load requests may upload code or pickles (``model.py``, ``.pt``, ...): off by
        #: default, since any local user who can reach the port could run code as this user.
        self.allow_code_upload = allow_code_upload
        #: What network loads / unloads may do (see :class:`ModelControl`).
        self.control = control or ModelControl()
        self._entries: dict[str, _Entry] = {}
        #: Names whose uploaded files are being written (on a worker thread) for a load.
        self._preparing: set[str] = set()
        #: Per model directory: a fingerprint of its files at the last load (``poll`` mode).
        self._stamps: dict[str, tuple[tuple[str, int, int], ...]] = {}
        #: Where uploads are copied and the server's other files go (one root per repository,
        #: swept after a crash: scratch.py); removed by :meth:`close`.
        self.scratch = Scratch()
        self._scan()
        if load is True:
            names = [n for n, e in self._entries.items() if e.path is not None]
        elif load is False:
            names = []
        else:
            names = [str(n) for n in load]
        for n in names:
            entry = self._entries.get(n)
            if entry is None:
                entry = self._entries[n] = _Entry(n)
                entry.reason = f"no model directory {n!r} in the repository"
                continue
            self._install(entry, self._build_from_dir(n, entry.path, None), entry.temp_dir)
        for m in models:
            self.add(m)
        if self.control.mode == "poll":
            self._stamps = self._poll_plan()[1]

    @property
    def path(self) -> Path | None:
        """The first repository directory (None when serving in-memory models only)."""
        return self.paths[0] if self.paths else None

    # -- discovery ---------------------------------------------------------------------------
    def _scan(self) -> None:
        present: set[str] = set()
        for root in self.paths:
            for child in sorted(root.iterdir()):
                if not child.is_dir() or child.name.startswith((".", "_")):
                    continue
                if child.name in present:
                    logger.warning(
                        "model %r found in several repositories; using the first", child.name
                    )
                    continue
                present.add(child.name)
                entry = self._entries.get(child.name)
                if entry is None:
                    self._entries[child.name] = _Entry(child.name, path=child)
                elif entry.path is None and entry.memory is None:
                    entry.path = child
        for name, entry in list(self._entries.items()):
            vanished = (
                entry.path is not None
                and entry.temp_dir is None
                and name not in present
                and entry.memory is None
            )
            if vanished and not any(v.state == READY for v in entry.versions.values()):
                del self._entries[name]

    def names(self) -> list[str]:
        """All model names known (loaded or not)."""
        return sorted(self._entries)

    # -- building (blocking; runs in a worker thread for async loads) -----------------------
    def _build_from_dir(
        self,
        name: str,
        model_dir: Path | None,
        override: Mapping[str, Any] | None,
        uploaded: frozenset[PurePosixPath] = frozenset(),
    ) -> tuple[dict[str, ModelVersion], str]:
        """Build every selected version of a disk model; returns (versions, model-level error).

        With a config ``override`` or ``uploaded`` files the request chose the files read, so
        they are resolved strictly inside ``model_dir`` (see :mod:`nbinfer.server.paths`).
        """
        if model_dir is None or not model_dir.is_dir():
            return {}, f"no model directory for {name!r}"
        files = ModelFiles(
            model_dir,
            strict=override is not None or bool(uploaded),
            uploaded=uploaded,
            allow_code=self.allow_code_upload,
        )
        try:
            config = dict(override) if override is not None else read_config(model_dir)
            available = [c.name for c in model_dir.iterdir() if c.is_dir() and c.name.isdigit()]
            if not available:
                raise InvalidInputError(
                    f"model {name!r} has no version directory (e.g. {name}/1/model.py)"
                )
            versions = _select_versions(config, available)
        except NbinferError as exc:
            logger.warning("model %r failed to load: %s", name, exc)
            return {}, _relative_text(str(exc), model_dir, name)
        built: dict[str, ModelVersion] = {}
        for v in versions:
            mv = ModelVersion(name, v, config=config)
            try:
                model = _model_of_version(files, v, config)
                model.version = v
                apply_config(model, config, name=name, model_dir=model_dir, files=files)
                mv.controls = SequenceControls.from_config(config, model_dir)
                _load_model_object(model, self.device)
            except Exception as exc:  # the reason is recorded, the others keep serving
                logger.warning("model %r version %s failed to load: %s", name, v, _reason(exc))
                mv.reason = _relative_text(_reason(exc), model_dir, name)
                built[v] = mv
                continue
            mv.model = model
            mv.state = READY
            mv.config = model_config_json(model, config)
            built[v] = mv
        return built, ""

    def _build_memory(self, model: Model) -> tuple[dict[str, ModelVersion], str]:
        name = model.name
        version = str(model.version or "1")
        mv = ModelVersion(name, version)
        try:
            _load_model_object(model, self.device)
        except Exception as exc:
            mv.reason = (
                f"{exc}" if isinstance(exc, NbinferError) else f"{type(exc).__name__}: {exc}"
            )
            logger.warning("model %r failed to load: %s", name, mv.reason)
            return {version: mv}, ""
        mv.model = model
        mv.state = READY
        mv.config = model_config_json(model)
        return {version: mv}, ""

    def _install(
        self,
        entry: _Entry,
        result: tuple[dict[str, ModelVersion], str],
        temp_dir: Path | None,
    ) -> list[ModelVersion]:
        """Swap freshly built versions in; returns the old versions that must be retired."""
        built, error = result
        old = list(entry.versions.values())
        ok = any(v.state == READY for v in built.values())
        old_ready = any(v.state == READY for v in old)
        fresh_temp = temp_dir is not None and temp_dir != entry.temp_dir
        if not ok and fresh_temp:
            # a failed load leaves nothing behind: its uploaded copy goes
            shutil.rmtree(temp_dir, ignore_errors=True)  # type: ignore[arg-type]
        if not ok and old_ready:
            # a failed reload keeps the previous versions serving
            return []
        entry.versions = built
        entry.state = READY if ok else UNAVAILABLE
        entry.reason = "" if ok else (error or "; ".join(v.reason for v in built.values()))
        if ok and fresh_temp:
            if entry.temp_dir is not None:
                shutil.rmtree(entry.temp_dir, ignore_errors=True)
            entry.temp_dir = temp_dir
        return [v for v in old if v.model is not None and v not in built.values()]

    # -- public API --------------------------------------------------------------------------
    def add(self, model: Model, *, load: bool = True) -> None:
        """Register an in-memory model (replacing one with the same name) and load it.

        A model whose ``load()`` fails is recorded as UNAVAILABLE with the reason.

        Raises:
            InvalidInputError: the model has no name or invalid declarations.
        """
        model.finalize()
        old = self._entries.get(model.name)
        entry = _Entry(model.name, memory=model)
        self._entries[model.name] = entry
        if old is not None:
            for v in old.versions.values():
                v.state = UNAVAILABLE
                v.reason = "replaced"
                self._retire_sync(v)
        if load:
            self._install(entry, self._build_memory(model), None)

    async def add_async(self, model: Model) -> None:
        """Like :meth:`add`, but runs ``load()`` in a worker thread (for use on a running loop).

        Raises:
            InvalidInputError: the model has no name or invalid declarations.
        """
        model.finalize()
        old = self._entries.get(model.name)
        entry = _Entry(model.name, memory=model, busy=True, state=LOADING, reason="")
        self._entries[model.name] = entry
        if old is not None:
            for v in old.versions.values():
                v.state = UNLOADING
                await self._retire(v)
                v.reason = "replaced"
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(None, self._build_memory, model)
            self._install(entry, result, None)
        finally:
            entry.busy = False

    def index(self, *, ready_only: bool = False) -> list[RepositoryModel]:
        """The repository index: one row per model version (one per model when none built)."""
        self._scan()
        rows: list[RepositoryModel] = []
        for name in sorted(self._entries):
            entry = self._entries[name]
            if entry.versions:
                for v in sorted(entry.versions, key=_version_key):
                    rows.append(entry.versions[v].row())
            else:
                rows.append(RepositoryModel(name, "", entry.state, entry.reason))
        if ready_only:
            rows = [r for r in rows if r.state == READY]
        return rows

    def _entry(self, name: str) -> _Entry:
        entry = self._entries.get(name)
        if entry is None:
            self._scan()
            entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "(none)"
            raise ModelNotFoundError(
                f"Request for unknown model: {name!r} is not found; known models: {known}",
                model=name,
            )
        return entry

    def versions(self, name: str) -> list[ModelVersion]:
        """All versions of a model (any state), oldest first.

        Raises:
            ModelNotFoundError: unknown model.
        """
        entry = self._entry(name)
        return [entry.versions[v] for v in sorted(entry.versions, key=_version_key)]

    def resolve(self, name: str, version: str = "") -> ModelVersion:
        """The version serving ``name`` (latest ready when ``version`` is empty).

        Raises:
            ModelNotFoundError: unknown model or version.
            ModelNotReadyError: the model / version exists but is not ready.
        """
        entry = self._entry(name)
        if is_latest_alias(version, entry.versions):
            version = ""
        if version:
            mv = entry.versions.get(str(version))
            if mv is None:
                raise unknown_version_error(name, version, sorted(entry.versions, key=_version_key))
            if mv.state != READY:
                raise ModelNotReadyError(
                    f"model {name!r} version {mv.version} is not ready ({mv.state}"
                    + (f": {mv.reason})" if mv.reason else ")"),
                    model=name,
                )
            return mv
        ready = [v for v in entry.versions.values() if v.state == READY]
        if not ready:
            states = {v.state for v in entry.versions.values()} or {entry.state}
            reason = entry.reason or "; ".join(
                f"version {v.version}: {v.reason}" for v in entry.versions.values() if v.reason
            )
            raise ModelNotReadyError(
                f"model {name!r} is not ready ({', '.join(sorted(states))}"
                + (f": {reason})" if reason else ")"),
                model=name,
            )
        return max(ready, key=lambda v: _version_key(v.version))

    def ready_versions(self) -> list[ModelVersion]:
        """Every READY model version."""
        return [
            v
            for name in sorted(self._entries)
            for v in sorted(
                self._entries[name].versions.values(), key=lambda x: _version_key(x.version)
            )
            if v.state == READY
        ]

    async def _prepare(
        self,
        name: str,
        entry: _Entry | None,
        override: Mapping[str, Any] | None,
        files: Mapping[str, bytes] | None,
    ) -> tuple[Path | None, Path | None, frozenset[PurePosixPath]] | None:
        """:meth:`_prepare_source`; with files (a copy, the uploads) on a worker thread.

        The name is held meanwhile (a second load of it is refused as busy); if the model
        changed while the files were written, they are removed and the load is refused.
        """
        if not files:
            return self._prepare_source(name, entry, override, files)
        self._preparing.add(name)
        try:
            prepared = await asyncio.get_running_loop().run_in_executor(
                None, self._prepare_source, name, entry, override, files
            )
        finally:
            self._preparing.discard(name)
        if self._entries.get(name) is not entry or (entry is not None and entry.busy):
            if prepared is not None and prepared[1] is not None:
                shutil.rmtree(prepared[1], ignore_errors=True)
            raise InvalidInputError(f"model {name!r} changed while its files were written")
        return prepared

    def _prepare_source(
        self,
        name: str,
        entry: _Entry | None,
        override: Mapping[str, Any] | None,
        files: Mapping[str, bytes] | None,
    ) -> tuple[Path | None, Path | None, frozenset[PurePosixPath]] | None:
        """Where to load ``name`` from: (model dir or None, temp dir to own, uploaded files).

        Uploads are validated before anything is written.
        """
        if files:
            check_model_name(name)
            plan = upload_plan(
                files.items(), allow_code=self.allow_code_upload, data_suffixes=DATA_FILE_SUFFIXES
            )
            src = entry.path if entry is not None else None
            temp_dir = self.scratch.directory("nbinfer-model-")
            model_dir = temp_dir / name
            try:
                if src is not None and src.is_dir():
                    # Links are copied as links, never followed: a link that leaves the model
                    # directory then fails the strict path check of this load.
                    shutil.copytree(src, model_dir, symlinks=True)
                else:
                    model_dir.mkdir()
                _write_files(model_dir, plan)
            except OSError as exc:
                shutil.rmtree(temp_dir, ignore_errors=True)
                raise InvalidInputError(
                    f"model {name!r}: cannot place the uploaded files: {exc.strerror or exc}",
                    model=name,
                ) from exc
            except BaseException:
                shutil.rmtree(temp_dir, ignore_errors=True)
                raise
            return model_dir, temp_dir, frozenset(rel for rel, _ in plan)
        if entry is not None and entry.memory is not None:
            if override is not None:
                raise InvalidInputError(
                    f"model {name!r} was registered in memory; a config override needs files "
                    "or a repository directory"
                )
            if any(v.state == READY for v in entry.versions.values()):
                return None
            return None, None, frozenset()
        if entry is not None and entry.path is not None:
            return entry.path, None, frozenset()
        known = ", ".join(sorted(self._entries)) or "(none)"
        raise ModelNotFoundError(
            f"failed to load {name!r}, failed to poll from model repository: no such model "
            f"directory in the repository and no files given; known models: {known}",
            model=name,
        )

    async def load(
        self,
        name: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        remote: bool = False,
    ) -> None:
        """Load or reload a model; other models keep serving meanwhile.

        Args:
            name: Model name (a repository directory, an in-memory model, or a new name when
                ``files`` supply it).
            config: Config JSON overriding the model's config file.
            files: ``{"file:<relative path>": bytes}`` written over a temporary copy of the
                model directory (e.g. ``{"file:1/model.py": b"..."}``).
            remote: The request came over the network: :attr:`control` applies.

        Raises:
            ModelNotFoundError: nothing to load under that name.
            InvalidInputError: bad config / file paths.
            PermissionDeniedError: (remote) the model control mode refuses it, or it would
                replace a model without ``allow_replace``.
            PayloadTooLargeError: (remote) more files or bytes than the caps allow.
            LimitExceededError: (remote) a new model beyond ``max_models``.
            ModelLoadError: the model failed to load (the reason is also recorded in the index).
        """
        if remote:
            self._check_remote_request(name, files)
        override = _parse_config_override(name, config)
        changes = override is not None or bool(files)
        entry = self._entry_to_load(name, remote=remote, changes=changes)
        if (entry is not None and entry.busy) or name in self._preparing:
            raise InvalidInputError(f"model {name!r} is already being loaded or unloaded")
        loop = asyncio.get_running_loop()
        prepared = await self._prepare(name, entry, override, files)
        if prepared is None:
            return
        model_dir, temp_dir, uploaded = prepared
        created = entry is None
        if entry is None:
            entry = self._entries[name] = _Entry(name)
        entry.busy = True
        was_state = entry.state
        if not any(v.state == READY for v in entry.versions.values()):
            entry.state = LOADING
            entry.reason = ""
            for v in entry.versions.values():
                v.state = LOADING
        try:
            if model_dir is None:
                assert entry.memory is not None
                result = await loop.run_in_executor(None, self._build_memory, entry.memory)
            else:
                result = await loop.run_in_executor(
                    None, self._build_from_dir, name, model_dir, override, uploaded
                )
            retired = self._install(entry, result, temp_dir)
            if temp_dir is not None and entry.temp_dir == temp_dir:
                entry.path = entry.path or model_dir
        except BaseException:
            entry.state = was_state
            if temp_dir is not None and entry.temp_dir != temp_dir:
                shutil.rmtree(temp_dir, ignore_errors=True)
            if created and self._entries.get(name) is entry:
                del self._entries[name]
            raise
        finally:
            entry.busy = False
        for old in retired:
            await self._retire(old)
        built, error = result
        if not any(v.state == READY for v in built.values()):
            if created and self._entries.get(name) is entry:
                del self._entries[name]  # a failed first load leaves nothing behind
            reason = error or "; ".join(f"version {v.version}: {v.reason}" for v in built.values())
            raise ModelLoadError(f"failed to load {name!r}: {reason}", model=name)

    async def unload(self, name: str, *, remote: bool = False) -> None:
        """Unload every version of a model after its in-flight requests finish.

        Args:
            name: The model.
            remote: The request came over the network: :attr:`control` applies.

        Raises:
            ModelNotFoundError: unknown model.
            PermissionDeniedError: (remote) the model control mode refuses it, or the model
                is served from memory (demo, notebook) without ``allow_replace``.
        """
        if remote:
            self.check_remote_mode(name, "unload")
        entry = self._entry(name)
        if remote and entry.memory is not None and not self.control.allow_replace:
            raise PermissionDeniedError(
                f"unload of model {name!r} refused: it is served from memory (a demo model or "
                "one served from a notebook) and only its operator may unload it; start the "
                "server with --allow-model-replace to allow it over the network",
                model=name,
            )
        live = [v for v in entry.versions.values() if v.state in (READY, LOADING)]
        for v in live:
            v.state = UNLOADING
        for v in live:
            await self._retire(v)
        entry.state = UNAVAILABLE
        entry.reason = "unloaded"
        if entry.memory is None and entry.temp_dir is None and entry.path is None:
            del self._entries[name]

    # -- model control (requests from the network) -----------------------------------------
    def check_remote_mode(self, name: str, action: str) -> None:
        """Refuse a network ``action`` ("load" / "unload") the model control mode forbids.

        Frontends call it before decoding a request's files, so a refused load costs nothing.

        Raises:
            PermissionDeniedError: the mode is not ``explicit``.
        """
        if self.control.mode != "explicit":
            raise _refuse_mode(name, action, self.control.mode)

    def _check_remote_request(self, name: str, files: Mapping[str, bytes] | None) -> None:
        """The mode first (nothing of the request is looked at), then the upload caps."""
        self.check_remote_mode(name, "load")
        limits = self.control
        if not files:
            return
        if len(files) > limits.max_upload_files:
            raise PayloadTooLargeError(
                f"load of model {name!r} refused: {len(files)} uploaded files exceeds the "
                f"server's limit of {limits.max_upload_files} per load (--max-upload-files)",
                model=name,
            )
        total = sum(len(content) for content in files.values())
        if total > limits.max_upload_bytes:
            raise PayloadTooLargeError(
                f"load of model {name!r} refused: {total} uploaded bytes exceeds the server's "
                f"limit of {limits.max_upload_bytes} bytes per load (--max-upload-bytes)",
                model=name,
            )

    def _entry_to_load(self, name: str, *, remote: bool, changes: bool) -> _Entry | None:
        """The entry a load of ``name`` acts on (None: a new name, checked by the policy)."""
        self._scan()
        entry = self._entries.get(name)
        if entry is None:
            check_model_name(name)
        if remote:
            self._check_remote_load(name, entry, changes=changes)
        return entry

    def _check_remote_load(self, name: str, entry: _Entry | None, *, changes: bool) -> None:
        """Apply the model control mode, the replace rule and the model cap to a load."""
        control = self.control
        if control.mode != "explicit":
            raise _refuse_mode(name, "load", control.mode)
        if entry is None:
            if len(self._entries) + len(self._preparing) >= control.max_models:
                raise LimitExceededError(
                    f"load of model {name!r} refused: the server's limit of "
                    f"{control.max_models} models is reached (--max-models); unload one, reuse "
                    "a name or ask the operator to raise it",
                    model=name,
                )
            return
        if not changes or control.allow_replace:
            return
        serving = any(v.state in (READY, LOADING) for v in entry.versions.values())
        if entry.memory is not None:
            what = "is served from memory (a demo model or one served from a notebook)"
        elif entry.path is not None and entry.temp_dir is None:
            what = "comes from the operator's model repository"
        elif serving:
            what = "is serving"
        else:
            return  # uploaded earlier and unloaded since: the name is free again
        raise PermissionDeniedError(
            f"load of model {name!r} with uploaded files or a config override refused: the "
            f"model {what} and would be replaced; start the server with "
            "--allow-model-replace to allow it (a plain load without files or config reloads "
            "it)",
            model=name,
        )

    def _poll_plan(self) -> tuple[dict[str, Path], dict[str, tuple[tuple[str, int, int], ...]]]:
        """The repository's model directories now and their fingerprints (blocking)."""
        present: dict[str, Path] = {}
        for root in self.paths:
            for child in sorted(root.iterdir()):
                if child.is_dir() and not child.name.startswith((".", "_")):
                    present.setdefault(child.name, child)
        return present, {name: _fingerprint(d) for name, d in present.items()}

    async def poll(self) -> list[str]:
        """Rescan the repository directories (``poll`` mode); return the models changed.

        A new model directory is loaded, a changed one reloaded (the sizes or times of its
        files differ from the last scan) while the old version serves, a removed one unloaded
        once its requests finish. In-memory and uploaded models are left alone.
        """
        loop = asyncio.get_running_loop()
        present, stamps = await loop.run_in_executor(None, self._poll_plan)
        changed: list[str] = []
        for name, directory in present.items():
            entry = self._entries.get(name)
            if entry is not None and (entry.memory is not None or entry.temp_dir is not None):
                continue
            if entry is not None and (entry.busy or self._stamps.get(name) == stamps[name]):
                continue
            if entry is None:
                entry = self._entries[name] = _Entry(name, path=directory)
            self._stamps[name] = stamps[name]
            entry.busy = True
            try:
                result = await loop.run_in_executor(
                    None, self._build_from_dir, name, directory, None
                )
                retired = self._install(entry, result, None)
            finally:
                entry.busy = False
            for old in retired:
                await self._retire(old)
            changed.append(name)
        for name, entry in list(self._entries.items()):
            gone = entry.memory is None and entry.temp_dir is None and name not in present
            if not gone or entry.busy:
                continue
            for v in list(entry.versions.values()):
                v.state = UNLOADING
                await self._retire(v)
            self._entries.pop(name, None)
            self._stamps.pop(name, None)
            changed.append(name)
        return changed

    async def _retire(self, mv: ModelVersion) -> None:
        while mv.inflight > 0:
            await asyncio.sleep(0.002)
        model, mv.model = mv.model, None
        if model is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, _unload_model_object, model)
        mv.state = UNAVAILABLE
        mv.reason = "unloaded"

    def _retire_sync(self, mv: ModelVersion) -> None:
        model, mv.model = mv.model, None
        if model is not None:
            _unload_model_object(model)
        mv.state = UNAVAILABLE
        if not mv.reason:
            mv.reason = "unloaded"

    def close(self) -> None:
        """Unload every model (blocking) and delete temporary model copies. Idempotent."""
        for entry in list(self._entries.values()):
            for v in entry.versions.values():
                if v.state in (READY, UNLOADING, LOADING):
                    self._retire_sync(v)
            entry.temp_dir = None
        self.scratch.close()  # every copy is under its root
