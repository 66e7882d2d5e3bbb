"""The OpenAPI 3 document of the REST surface and the ``/docs`` page that renders it.

Layer: the server. Builds from the REST adapter's own route table (``rest.ROUTES``, passed in,
never imported here, so this module imports neither the REST nor the gRPC frontend): each route's
summary is its handler's docstring, its tag and bodies come from :data:`_OPERATIONS` (keyed by
handler name; a route missing there fails the build and its test). Stdlib only: the page is
self-contained HTML (inline CSS, no script, no CDN), readable offline and in a terminal browser.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from typing import Any, Protocol

__all__ = ["build_document", "docs_page"]

_JSON = "application/json"


class Route(Protocol):
    """What this module reads of a route of ``rest.ROUTES`` (no import of the REST adapter)."""

    @property
    def template(self) -> str: ...
    @property
    def methods(self) -> tuple[str, ...]: ...
    @property
    def handler(self) -> Callable[..., Any]: ...


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_ANY: dict[str, Any] = {"type": "object", "additionalProperties": True}
_TENSOR_DATA: dict[str, Any] = {
    "description": "Row-major tensor data (flat or nested), absent when sent as binary data",
    "type": "array",
    "items": {},
}
# a request input and a response output have the same JSON form
_TENSOR: dict[str, Any] = {
    "type": "object",
    "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer"}},
        "datatype": {"type": "string", "example": "FP32"},
        "parameters": _ANY,
        "data": _TENSOR_DATA,
    },
}
_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}},
    },
    "Live": {"type": "object", "properties": {"live": {"type": "boolean"}}},
    "Ready": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    "ModelReady": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "ready": {"type": "boolean"}},
    },
    "ServerMetadata": {
        "type": "object",
        "required": ["name", "version", "extensions"],
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "string"},
            "extensions": {"type": "array", "items": {"type": "string"}},
        },
    },
    "TensorMetadata": {
        "type": "object",
        "required": ["name", "datatype", "shape"],
        "properties": {
            "name": {"type": "string"},
            "datatype": {"type": "string", "example": "FP32"},
            "shape": {"type": "array", "items": {"type": "integer"}},
        },
    },
    "ModelMetadata": {
        "type": "object",
        "required": ["name", "platform", "inputs", "outputs"],
        "properties": {
            "name": {"type": "string"},
            "versions": {"type": "array", "items": {"type": "string"}},
            "platform": {"type": "string"},
            "inputs": {"type": "array", "items": _ref("TensorMetadata")},
            "outputs": {"type": "array", "items": _ref("TensorMetadata")},
        },
    },
    "RequestInput": _TENSOR,
    "RequestOutput": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "parameters": _ANY},
    },
    "InferenceRequest": {
        "type": "object",
        "required": ["inputs"],
        "properties": {
            "id": {"type": "string"},
            "parameters": _ANY,
            "inputs": {"type": "array", "items": _ref("RequestInput")},
            "outputs": {"type": "array", "items": _ref("RequestOutput")},
        },
    },
    "ResponseOutput": _TENSOR,
    "InferenceResponse": {
        "type": "object",
        "required": ["model_name", "outputs"],
        "properties": {
            "model_name": {"type": "string"},
            "model_version": {"type": "string"},
            "id": {"type": "string"},
            "parameters": _ANY,
            "outputs": {"type": "array", "items": _ref("ResponseOutput")},
        },
    },
    "RepositoryIndexRequest": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    "RepositoryIndex": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "version": {"type": "string"},
                "state": {"type": "string"},
                "reason": {"type": "string"},
            },
        },
    },
    "LoadRequest": {
        "type": "object",
        "properties": {
            "parameters": {
                "description": "config (JSON text) and file:<path> entries (base64)",
                "type": "object",
                "additionalProperties": True,
            }
        },
    },
    "V1Request": {"type": "object", "properties": {"instances": {"type": "array", "items": {}}}},
    "V1Predictions": {
        "type": "object",
        "properties": {"predictions": {"type": "array", "items": {}}},
    },
    "V1Models": {
        "type": "object",
        "properties": {"models": {"type": "array", "items": {"type": "string"}}},
    },
    "Object": _ANY,
}

# handler name -> (tag, request body schema or None, 200 response: schema name or content type)
_OPERATIONS: dict[str, tuple[str, str | None, str]] = {
    "_live": ("health", None, "Live"),
    "_ready": ("health", None, "Ready"),
    "_model_ready": ("health", None, "ModelReady"),
    "_v1_live": ("health", None, "Object"),
    "_server_metadata": ("metadata", None, "ServerMetadata"),
    "_model_metadata": ("metadata", None, "ModelMetadata"),
    "_config": ("metadata", None, "Object"),
    "_infer": ("inference", "InferenceRequest", "InferenceResponse"),
    "generate": ("inference", "Object", "Object"),
    "generate_stream": ("inference", "Object", "text/event-stream"),
    "_repository_index": ("repository", "RepositoryIndexRequest", "RepositoryIndex"),
    "_load": ("repository", "LoadRequest", ""),
    "_unload": ("repository", "Object", ""),
    "_stats": ("statistics", None, "Object"),
    "_metrics": ("statistics", None, "text/plain"),
    "_shm_status": ("shared memory", None, "Object"),
    "_shm_register": ("shared memory", "Object", ""),
    "_shm_unregister": ("shared memory", None, ""),
    "_logging": ("trace and logging", "Object", "Object"),
    "_trace": ("trace and logging", "Object", "Object"),
    "_v1_models": ("KServe v1", None, "V1Models"),
    "_v1_model": ("KServe v1", None, "Object"),
    "_v1_predict": ("KServe v1", "V1Request", "V1Predictions"),
    "_v1_explain": ("KServe v1", "V1Request", "Object"),
    "_openapi": ("docs", None, "Object"),
    "_docs": ("docs", None, "text/html"),
}

_ERRORS = {
    "400": "invalid input",
    "404": "unknown model, version or route",
    "405": "method not allowed",
    "500": "the model raised, or a custom exception handler's status",
    "503": "not ready or overloaded",
}


def _path_parameters(template: str) -> list[dict[str, Any]]:
    params = []
    for part in template.split("/"):
        if part.startswith("{"):
            name = part[1:].partition("}")[0]
            params.append(
                {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            )
    return params


def _response(kind: str) -> dict[str, Any]:
    if not kind:
        return {"description": "done (empty body)"}
    if "/" in kind:
        return {"description": "OK", "content": {kind: {"schema": {"type": "string"}}}}
    return {"description": "OK", "content": {_JSON: {"schema": _ref(kind)}}}


def _operation(route: Route, method: str, template: str) -> dict[str, Any]:
    name = route.handler.__name__
    tag, request, response = _OPERATIONS[name]
    summary = (route.handler.__doc__ or name).strip().splitlines()[0].replace("``", "`")
    op_id = f"{method.lower()}{template.replace('/', '_').replace('{', '').replace('}', '')}"
    op: dict[str, Any] = {
        "tags": [tag],
        "summary": summary,
        "operationId": op_id.replace(":", "_").rstrip("_") or "root",
        "responses": {
            "200": _response(response),
            **{
                code: {"description": text, "content": {_JSON: {"schema": _ref("Error")}}}
                for code, text in _ERRORS.items()
            },
        },
    }
    params = _path_parameters(template)
    if name == "_infer":
        params.append(
            {
                "name": "Inference-Header-Content-Length",
                "in": "header",
                "required": False,
                "description": "binary tensor extension: length of the JSON header of the body",
                "schema": {"type": "integer"},
            }
        )
    if params:
        op["parameters"] = params
    if request is not None and method == "POST":
        content: dict[str, Any] = {_JSON: {"schema": _ref(request)}}
        if name == "_infer":
            content["application/octet-stream"] = {"schema": {"type": "string", "format": "binary"}}
        op["requestBody"] = {"required": name == "_infer", "content": content}
    return op


def build_document(routes: Iterable[Route], *, version: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``routes`` (the REST adapter passes its ``ROUTES``).

    Raises:
        KeyError: a route's handler has no entry in the operation table (a test pins this).
    """
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        # an OpenAPI path template has whole-segment parameters: {model}:predict stays literal
        # text around the parameter, which OpenAPI 3 allows in a segment
        item = paths.setdefault(route.template, {})
        for method in route.methods:
            item[method.lower()] = _operation(route, method, route.template)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "nbinfer inference server",
            "version": version,
            "description": "KServe v2 / Open Inference Protocol REST API (plus KServe v1 and "
            "Triton's extensions) of nbinfer's embedded server.",
        },
        "paths": paths,
        "components": {"schemas": _SCHEMAS},
    }


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em;
color:#1f2328;background:#fff}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #d0d7de}
.op{margin:.35em 0}.m{display:inline-block;min-width:3.6em;font:bold 12px monospace;
padding:.1em .4em;border-radius:3px;color:#fff;text-align:center}
.GET{background:#1f6feb}.POST{background:#1a7f37}code{font-size:13px}
.s{color:#59636e;margin-left:.5em}
@media (prefers-color-scheme: dark){body{background:#0d1117;color:#e6edf3}.s{color:#9198a1}}
"""


def docs_page(document: dict[str, Any]) -> str:
    """A self-contained HTML page listing the operations of an OpenAPI ``document`` by tag."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for path, item in document["paths"].items():
        for method, op in item.items():
            groups.setdefault(op["tags"][0], []).append((method.upper(), path, op["summary"]))
    info = document["info"]
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(info['title'])}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(info['title'])} <small>{html.escape(info['version'])}</small></h1>",
        f"<p>{html.escape(info['description'])} Machine-readable: "
        "<a href='/v2/openapi.json'><code>GET /v2/openapi.json</code></a>.</p>",
    ]
    for tag, ops in groups.items():
        out.append(f"<h2>{html.escape(tag)}</h2>")
        for method, path, summary in ops:
            out.append(
                f"<div class='op'><span class='m {method}'>{method}</span> "
                f"<code>{html.escape(path)}</code><span class='s'>{html.escape(summary)}</span>"
                "</div>"
            )
    out.append("</body></html>")
    return "\n".join(out)
