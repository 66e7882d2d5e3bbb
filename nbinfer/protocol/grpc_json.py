"""Triton-shaped JSON <-> the v2 gRPC messages that carry documents: model config, statistics.

Triton's REST answers ``GET v2/models/{m}/config`` and ``.../stats`` with JSON whose fields are
the protobuf messages' (snake_case, enum names, 64-bit integers as numbers); its gRPC answers
carry the same documents as ``ModelConfig`` / ``ModelStatisticsResponse``. Both ends of nbinfer
convert here. Imports protobuf and :mod:`nbinfer.protocol.grpc` (for the messages); no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeVar, cast

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.grpc import config_message, response_message

__all__ = [
    "config_json_to_proto",
    "config_proto_to_json",
    "statistics_json_to_proto",
    "statistics_proto_to_json",
]

_INT64_TYPES: Final = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


def _ints_as_numbers(doc: dict[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    """Turn the 64-bit integers that protobuf's JSON writes as strings back into numbers.

    Triton's JSON (REST config and statistics) writes ``"dims": [16]``, not ``["16"]``.
    """
    for field in descriptor.fields:
        if field.name not in doc:
            continue
        value = doc[field.name]
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            value_field = sub.fields_by_name["value"]
            if value_field.message_type is not None:
                for item in value.values():
                    _ints_as_numbers(item, value_field.message_type)
            elif value_field.type in _INT64_TYPES:
                doc[field.name] = {k: int(v) for k, v in value.items()}
        elif sub is not None:
            for item in value if isinstance(value, list) else [value]:
                _ints_as_numbers(item, sub)
        elif field.type in _INT64_TYPES:
            doc[field.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
    return doc


def _to_json(msg: Message, include_defaults: bool) -> dict[str, Any]:
    doc = json_format.MessageToDict(
        msg,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=include_defaults,
    )
    return _ints_as_numbers(doc, cast(Descriptor, msg.DESCRIPTOR))


_M = TypeVar("_M", bound=Message)


def _from_json(doc: Mapping[str, Any], msg: _M, what: str, ignore_unknown: bool) -> _M:
    try:
        json_format.ParseDict(dict(doc), msg, ignore_unknown_fields=ignore_unknown)
    except json_format.ParseError as exc:
        raise InvalidInputError(f"invalid {what}: {exc}") from exc
    return msg


def config_json_to_proto(
    config: Mapping[str, Any], *, ignore_unknown_fields: bool = False
) -> Message:
    """Triton-shaped model configuration JSON -> ``ModelConfig``.

    The JSON uses Triton's names: snake_case fields, enum names (``"data_type": "TYPE_FP32"``,
    ``"kind": "KIND_CPU"``), integers as numbers or strings.

    Raises:
        InvalidInputError: an unknown field (unless ``ignore_unknown_fields``) or a bad value.
    """
    return _from_json(config, config_message(), "model configuration", ignore_unknown_fields)


def config_proto_to_json(msg: Message, *, include_defaults: bool = True) -> dict[str, Any]:
    """``ModelConfig`` -> Triton-shaped JSON dict (what ``GET v2/models/{m}/config`` returns).

    Args:
        msg: The configuration.
        include_defaults: Also write fields left at their default (as Triton does).
    """
    return _to_json(msg, include_defaults)


def statistics_json_to_proto(
    stats: Mapping[str, Any], *, ignore_unknown_fields: bool = False
) -> Message:
    """Triton-shaped statistics JSON (``{"model_stats": [...]}``) -> ``ModelStatisticsResponse``.

    Raises:
        InvalidInputError: an unknown field (unless ``ignore_unknown_fields``) or a bad value.
    """
    return _from_json(
        stats, response_message("ModelStatistics"), "model statistics", ignore_unknown_fields
    )


def statistics_proto_to_json(msg: Message, *, include_defaults: bool = True) -> dict[str, Any]:
    """``ModelStatisticsResponse`` -> Triton-shaped statistics JSON (integers as numbers)."""
    return _to_json(msg, include_defaults)
