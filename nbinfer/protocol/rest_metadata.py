"""v2 REST metadata documents: server metadata, model metadata and the repository index as JSON.

``GET v2`` / ``GET v2/models/{m}`` / ``POST v2/repository/index`` answer with these documents;
the client reads them (:mod:`nbinfer.protocol.http_binding`) and the server writes them. Each
reader checks the fields it needs and names what is wrong. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.rest import json_field, json_parameters
from nbinfer.protocol.types import ModelMetadata, RepositoryModel, ServerMetadata, TensorSpec

__all__ = [
    "model_metadata_from_json",
    "model_metadata_to_json",
    "repository_index_from_json",
    "repository_index_to_json",
    "server_metadata_from_json",
    "server_metadata_to_json",
]


def server_metadata_to_json(meta: ServerMetadata) -> dict[str, Any]:
    """``GET /v2`` answer."""
    return {"name": meta.name, "version": meta.version, "extensions": list(meta.extensions)}


def server_metadata_from_json(obj: Any) -> ServerMetadata:
    """Parse a ``GET /v2`` answer (missing version / extensions tolerated).

    Raises:
        InvalidInputError: not an object or no ``name``.
    """
    if not isinstance(obj, dict):
        raise InvalidInputError(f"server metadata must be an object, got {type(obj).__name__}")
    return ServerMetadata(
        name=str(json_field(obj, "name", str, "server metadata")),
        version=str(obj.get("version", "")),
        extensions=[str(e) for e in obj.get("extensions") or []],
    )


def _spec_to_json(spec: TensorSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": spec.name,
        "datatype": spec.datatype,
        "shape": [int(d) for d in spec.shape],
    }
    if spec.parameters:
        out["parameters"] = dict(spec.parameters)
    return out


def _spec_from_json(obj: Any, where: str) -> TensorSpec:
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{where} must be an object, got {type(obj).__name__}")
    name = json_field(obj, "name", str, where)
    shape = json_field(obj, "shape", list, f"{where} '{name}'")
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise InvalidInputError(f"{where} '{name}': invalid shape {shape}")
    return TensorSpec(
        name=name,
        datatype=str(json_field(obj, "datatype", str, f"{where} '{name}'")),
        shape=list(shape),
        parameters=dict(json_parameters(obj, where)),
    )


def model_metadata_to_json(meta: ModelMetadata) -> dict[str, Any]:
    """``GET /v2/models/{m}`` answer."""
    out: dict[str, Any] = {
        "name": meta.name,
        "versions": list(meta.versions),
        "platform": meta.platform,
        "inputs": [_spec_to_json(s) for s in meta.inputs],
        "outputs": [_spec_to_json(s) for s in meta.outputs],
    }
    if meta.parameters:
        out["parameters"] = dict(meta.parameters)
    return out


def model_metadata_from_json(obj: Any) -> ModelMetadata:
    """Parse a ``GET /v2/models/{m}`` answer.

    Raises:
        InvalidInputError: not an object, no ``name`` or malformed tensor specs.
    """
    if not isinstance(obj, dict):
        raise InvalidInputError(f"model metadata must be an object, got {type(obj).__name__}")
    name = json_field(obj, "name", str, "model metadata")
    return ModelMetadata(
        name=name,
        versions=[str(v) for v in obj.get("versions") or []],
        platform=str(obj.get("platform", "")),
        inputs=[_spec_from_json(s, "model input") for s in obj.get("inputs") or []],
        outputs=[_spec_from_json(s, "model output") for s in obj.get("outputs") or []],
        parameters=dict(json_parameters(obj, "model metadata")),
    )


def repository_index_to_json(models: Iterable[RepositoryModel]) -> list[dict[str, Any]]:
    """``POST /v2/repository/index`` answer (empty version / state / reason left out)."""
    out = []
    for m in models:
        row: dict[str, Any] = {"name": m.name}
        if m.version:
            row["version"] = m.version
        if m.state:
            row["state"] = m.state
        if m.reason:
            row["reason"] = m.reason
        out.append(row)
    return out


def repository_index_from_json(obj: Any) -> list[RepositoryModel]:
    """Parse a ``POST /v2/repository/index`` answer.

    Raises:
        InvalidInputError: not a list of objects with a ``name``.
    """
    if not isinstance(obj, list):
        raise InvalidInputError(f"repository index must be a list, got {type(obj).__name__}")
    rows = []
    for i, row in enumerate(obj):
        if not isinstance(row, dict):
            raise InvalidInputError(f"repository index row {i} must be an object")
        rows.append(
            RepositoryModel(
                name=str(json_field(row, "name", str, f"repository index row {i}")),
                version=str(row.get("version", "")),
                state=str(row.get("state", "")),
                reason=str(row.get("reason", "")),
            )
        )
    return rows
