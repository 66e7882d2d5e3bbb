"""Triton's ``config.pbtxt``: the protobuf text format subset it uses, read and written.

:func:`parse_pbtxt` returns the config as Triton-shaped JSON (the shape ``GET .../config``
answers): repeated fields are lists, enums are strings, ``parameters`` is a map
``{key: {"string_value": ...}}``. Example::

    parse_pbtxt('name: "m" max_batch_size: 8 input [{name: "x" data_type: TYPE_FP32 dims: [4]}]')
    # {'name': 'm', 'max_batch_size': 8,
    #  'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [4]}]}

:func:`config_to_pbtxt` writes that JSON back as text. A leaf of the server: imports only the
error tree (the config's meaning for a model is :mod:`nbinfer.server.model_config`'s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from nbinfer.errors import InvalidInputError

__all__ = ["config_device", "config_to_pbtxt", "parse_pbtxt", "string_params"]

#: Fields of Triton's ModelConfig (and its sub-messages) that are repeated.
REPEATED = frozenset(
    {
        "input",
        "output",
        "batch_input",
        "batch_output",
        "dims",
        "shape",
        "instance_group",
        "gpus",
        "versions",
        "preferred_batch_size",
        "profile",
        "step",
        "secondary_devices",
        "source_input",
        "model_warmup",
        "cc_model_filenames",
        "metric_tags",
        "gpu_execution_accelerator",
        "cpu_execution_accelerator",
        "input_pinned_memory",
        "control_input",
        "control",
        "state",
        "initial_state",
        "int32_false_true",
        "fp32_false_true",
        "bool_false_true",
        "priority_queue_policy",
        "label_filename_list",
    }
)
#: Map fields written as repeated ``{key: ..., value: ...}`` entries.
MAPS = frozenset({"parameters", "input_map", "output_map"})

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fF]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}\[\]:,;<>])
    """,
    re.VERBOSE,
)

_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "?": "?",
}


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            hexd = m.group(0) if m else ""
            out.append(chr(int(hexd or "0", 16)))
            i += 2 + len(hexd)
        elif nxt.isdigit():
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            octd = m.group(0) if m else "0"
            out.append(chr(int(octd, 8)))
            i += 1 + len(octd)
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        line = 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self._error(f"unexpected character {text[pos]!r}", line)
            kind = m.lastgroup or ""
            value = m.group(0)
            if kind != "ws":
                self.tokens.append((kind, value, line))
            line += value.count("\n")
            pos = m.end()
        self.i = 0

    def _error(self, msg: str, line: int | None = None) -> InvalidInputError:
        if line is None:
            if self.i < len(self.tokens):
                line = self.tokens[self.i][2]
            else:
                line = self.tokens[-1][2] if self.tokens else 1
                msg += " (at the end of the text)"
        return InvalidInputError(f"{self.source}:{line}: {msg}")

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            raise self._error("unexpected end of text")
        self.i += 1
        return tok

    def accept(self, value: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "punct" and tok[1] == value:
            self.i += 1
            return True
        return False

    def message(self, closer: str | None) -> dict[str, list[Any]]:
        fields: dict[str, list[Any]] = {}
        while True:
            tok = self.peek()
            if tok is None:
                if closer is not None:
                    raise self._error(f"missing {closer!r}")
                return fields
            if tok[0] == "punct" and closer is not None and tok[1] == closer:
                self.i += 1
                return fields
            if tok[0] == "punct" and tok[1] in ",;":
                self.i += 1
                continue
            kind, name, _ = self.take()
            if kind != "ident":
                raise self._error(f"expected a field name, got {name!r}")
            has_colon = self.accept(":")
            values = self.field_value(name, has_colon)
            fields.setdefault(name, []).extend(values)

    def field_value(self, name: str, has_colon: bool) -> list[Any]:
        tok = self.peek()
        if tok is None:
            raise self._error(f"field {name!r} has no value")
        if tok[0] == "punct" and tok[1] in "{<":
            self.i += 1
            return [self.message("}" if tok[1] == "{" else ">")]
        if tok[0] == "punct" and tok[1] == "[":
            self.i += 1
            items: list[Any] = []
            while not self.accept("]"):
                if self.accept(","):
                    continue
                nxt = self.peek()
                if nxt is not None and nxt[0] == "punct" and nxt[1] in "{<":
                    self.i += 1
                    items.append(self.message("}" if nxt[1] == "{" else ">"))
                else:
                    items.append(self.scalar())
            return items
        if not has_colon:
            raise self._error(f"expected ':' after field {name!r}")
        return [self.scalar()]

    def scalar(self) -> Any:
        kind, value, _ = self.take()
        if kind == "str":
            parts = [_unescape(value[1:-1])]
            while (nxt := self.peek()) is not None and nxt[0] == "str":
                self.i += 1
                parts.append(_unescape(nxt[1][1:-1]))
            return "".join(parts)
        if kind == "num":
            text = value.rstrip("fF") if not value.lower().startswith(("0x", "-0x")) else value
            if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+)", text):
                return int(text, 16)
            if re.fullmatch(r"[-+]?\d+", text):
                return int(text)
            return float(text)
        if kind == "ident":
            low = value.lower()
            if low in ("true", "t"):
                return True
            if low in ("false", "f"):
                return False
            if low in ("inf", "infinity"):
                return float("inf")
            if low == "nan":
                return float("nan")
            return value
        raise self._error(f"expected a value, got {value!r}")


def _normalize(fields: dict[str, list[Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in fields.items():
        values = [_normalize(v) if isinstance(v, dict) else v for v in values]
        is_entries = bool(values) and all(isinstance(v, dict) and "key" in v for v in values)
        if name in MAPS and is_entries:
            out[name] = {str(v["key"]): v.get("value") for v in values}
        elif name in REPEATED:
            out[name] = values
        else:
            out[name] = values[-1] if values else None
    return out


def parse_pbtxt(text: str, *, source: str = "config.pbtxt") -> dict[str, Any]:
    """Parse protobuf text format (as in Triton ``config.pbtxt``) into Triton-shaped JSON.

    Raises:
        InvalidInputError: the text is malformed; the message names ``source`` and the line.
    """
    parser = _Parser(text, source)
    return _normalize(parser.message(None))


def string_params(config: Mapping[str, Any]) -> dict[str, str]:
    """A Triton config's ``parameters`` map as plain strings (``{key: {string_value}}``)."""
    raw = config.get("parameters") or {}
    out: dict[str, str] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if isinstance(value, Mapping):
                out[str(key)] = str(value.get("string_value", ""))
            else:
                out[str(key)] = str(value)
    return out


def config_device(config: Mapping[str, Any]) -> str | None:
    """The device a Triton config asks for: ``parameters.device``, else ``instance_group``.

    Returns ``"cuda:N"`` for ``KIND_GPU``, ``"cpu"`` for ``KIND_CPU``, ``"auto"`` for
    ``KIND_AUTO`` and ``None`` when the config does not say.
    """
    params = string_params(config)
    if params.get("device"):
        return params["device"]
    for group in config.get("instance_group") or []:
        if not isinstance(group, Mapping):
            continue
        kind = str(group.get("kind", "KIND_AUTO"))
        if kind == "KIND_GPU":
            gpus = group.get("gpus") or [0]
            return f"cuda:{int(gpus[0])}"
        if kind == "KIND_CPU":
            return "cpu"
        if kind == "KIND_AUTO":
            return "auto"
    return None


#: Fields written bare (``kind: KIND_GPU``) when their value looks like an enum constant.
_ENUM_FIELDS = frozenset({"data_type", "kind", "format", "priority", "timeout_action"})
_ENUM_VALUE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _pb_scalar(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if key in _ENUM_FIELDS and _ENUM_VALUE.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _pb_fields(obj: Mapping[str, Any], indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    for key, value in obj.items():
        if value is None:
            continue
        if key in MAPS and isinstance(value, Mapping):  # one {key, value} message per entry
            for k, v in value.items():
                lines.append(f"{pad}{key} {{")
                lines.extend(_pb_fields({"key": str(k), "value": v}, indent + 1))
                lines.append(f"{pad}}}")
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{key} {{")
            lines.extend(_pb_fields(value, indent + 1))
            lines.append(f"{pad}}}")
        elif isinstance(value, list | tuple):
            if value and all(isinstance(v, Mapping) for v in value):
                lines.append(f"{pad}{key} [")
                for i, item in enumerate(value):
                    lines.append(f"{pad}  {{")
                    lines.extend(_pb_fields(item, indent + 2))
                    lines.append(f"{pad}  }}" + ("," if i < len(value) - 1 else ""))
                lines.append(f"{pad}]")
            else:
                items = ", ".join(_pb_scalar(key, v) for v in value)
                lines.append(f"{pad}{key}: [ {items} ]")
        else:
            lines.append(f"{pad}{key}: {_pb_scalar(key, value)}")
    return lines


def config_to_pbtxt(config: Mapping[str, Any]) -> str:
    """Write a Triton-shaped config dict in protobuf text format (``config.pbtxt``).

    Example::

        config_to_pbtxt({"name": "m", "max_batch_size": 8,
                         "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]})
    """
    return "\n".join(_pb_fields(config, 0)) + "\n"
