"""Model versions and their states, model-control modes and the version naming rules.

Split out of :mod:`nbinfer.server.repository` (which re-exports these names): what a model
version is (:class:`ModelVersion`, its states), which versions a ``version_policy`` selects,
and how a version string that names none is refused (in Triton's words).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbinfer.config import DEFAULT_MAX_MODELS, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_MAX_UPLOAD_FILES
from nbinfer.errors import (
    InvalidInputError,
    ModelNotFoundError,
    NbinferError,
    PermissionDeniedError,
)
from nbinfer.protocol.types import RepositoryModel
from nbinfer.server.model import Model
from nbinfer.server.sequence_controls import SequenceControls
from nbinfer.server.stats import ModelStats

logger = logging.getLogger("nbinfer")


READY = "READY"
UNAVAILABLE = "UNAVAILABLE"
LOADING = "LOADING"
UNLOADING = "UNLOADING"


#: Triton's model control modes: what the repository API (load / unload) may do.
MODEL_CONTROL_MODES = ("none", "explicit", "poll")


@dataclass(frozen=True)
class ModelControl:
    """What a load / unload arriving over the network may do (Triton's model control).

    Args:
        mode: ``"none"`` (the repository API refuses load / unload), ``"explicit"`` (load and
            unload allowed, within the rules below) or ``"poll"`` (the repository directories
            are rescanned and changes applied; the API refuses load / unload).
        allow_replace: Let a network load replace a model: upload files or a config override
            under the name of a serving model, of an operator's repository model or of an
            in-memory model (demo, notebook-served), and unload an in-memory model.
        max_models: Most models known before a network load of a new name is refused.
        max_upload_files: Most ``file:`` uploads per load.
        max_upload_bytes: Most uploaded bytes per load.
        poll_seconds: Seconds between two rescans in ``"poll"`` mode.
    """

    mode: str = "explicit"
    allow_replace: bool = False
    max_models: int = DEFAULT_MAX_MODELS
    max_upload_files: int = DEFAULT_MAX_UPLOAD_FILES
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    poll_seconds: float = 15.0

    def __post_init__(self) -> None:
        if self.mode not in MODEL_CONTROL_MODES:
            raise InvalidInputError(
                f"model control mode {self.mode!r} is not one of {', '.join(MODEL_CONTROL_MODES)}"
            )
        for what in ("max_models", "max_upload_files", "max_upload_bytes"):
            if getattr(self, what) < 0:
                raise InvalidInputError(f"{what} must be >= 0, got {getattr(self, what)}")
        if self.poll_seconds <= 0:
            raise InvalidInputError(f"poll interval must be > 0 s, got {self.poll_seconds}")

    def check_settings_update(self, what: str) -> None:
        """Refuse a network update of log / trace settings unless load / unload is allowed.

        Raises:
            PermissionDeniedError: the mode is not ``explicit``.
        """
        if self.mode != "explicit":
            raise PermissionDeniedError(
                f"updating the {what} settings is refused: they change like a model load, and "
                f"--model-control-mode {self.mode} allows no changes over the network (start "
                "the server with --model-control-mode explicit to allow it); reading them is "
                "allowed"
            )


def _refuse_mode(name: str, action: str, mode: str) -> PermissionDeniedError:
    why = (
        "the repository directory is polled: change its files instead"
        if mode == "poll"
        else "start the server with --model-control-mode explicit to allow it"
    )
    return PermissionDeniedError(
        f"{action} of model {name!r} refused: explicit model load / unload is not allowed "
        f"with --model-control-mode {mode} ({why})",
        model=name,
    )


def _version_key(version: str) -> tuple[int, int | str]:
    return (0, int(version)) if version.isdigit() else (1, version)


@dataclass(eq=False)
class ModelVersion:
    """One version of a model in the repository: its state, the live object and its statistics."""

    name: str
    version: str
    model: Model | None = None
    state: str = UNAVAILABLE
    reason: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    stats: ModelStats = field(default_factory=ModelStats)
    inflight: int = 0
    #: The sequence batcher's control inputs and implicit states the config declares.
    controls: SequenceControls | None = None

    def row(self) -> RepositoryModel:
        """This version as a repository index row."""
        return RepositoryModel(self.name, self.version, self.state, self.reason)


@dataclass(eq=False)
class _Entry:
    name: str
    path: Path | None = None
    memory: Model | None = None
    versions: dict[str, ModelVersion] = field(default_factory=dict)
    state: str = UNAVAILABLE
    reason: str = "not loaded"
    temp_dir: Path | None = None
    busy: bool = False


def is_latest_alias(version: str, versions: Iterable[str]) -> bool:
    """Whether ``version`` means "the latest" (``0``, OpenVINO Model Server's convention).

    Only when the model has no version directory ``0`` of its own.
    """
    return str(version) == "0" and "0" not in versions


def unknown_version_error(name: str, version: str, known: Iterable[str]) -> NbinferError:
    """The error for a version ``name`` does not have, in Triton's words first.

    A version that is not a number at all is bad input (Triton: "failed to get model version
    from specified version string ..."), a negative one too; any other is not found.
    """
    have = ", ".join(known) or "(none loaded)"
    text = str(version)
    if not text.lstrip("-").isdigit():
        return InvalidInputError(
            f"failed to get model version from specified version string {text!r}, version "
            f"should be an integral value > 0; model {name!r} has versions: {have}",
            model=name,
        )
    if text.startswith("-"):
        return InvalidInputError(
            f"invalid model version specified {text!r} , version should be an integral "
            f"value > 0; model {name!r} has versions: {have}",
            model=name,
        )
    return ModelNotFoundError(
        f"Request for unknown model: {name!r} version {version} is not found; versions: {have}",
        model=name,
    )


def _select_versions(config: Mapping[str, Any], available: list[str]) -> list[str]:
    policy = config.get("version_policy") or {}
    ordered = sorted(available, key=_version_key)
    if isinstance(policy, Mapping) and "all" in policy:
        return ordered
    if isinstance(policy, Mapping) and "specific" in policy:
        wanted = [str(v) for v in (policy["specific"] or {}).get("versions") or []]
        missing = [v for v in wanted if v not in available]
        if missing:
            raise InvalidInputError(
                f"version_policy names version(s) {missing} that have no directory; "
                f"available: {ordered}"
            )
        return sorted(wanted, key=_version_key)
    latest = policy.get("latest") if isinstance(policy, Mapping) else None
    num = int((latest or {}).get("num_versions", 1) or 1)
    return ordered[-num:]
