"""Griffe extension: show the client faces' derived methods as the methods they are.

`nbinfer.client.sync.Client` and `nbinfer.client.aio.AsyncClient` declare most methods as
``name = _blocking(api.name)`` / ``_awaiting(api.name)``: one declaration in
`nbinfer.client.api` serves both faces. Static analysis sees class attributes; this extension
replaces each with a function carrying the declaration's docstring and parameters (the core
argument becomes ``self``; ``Op[T]`` returns become ``T``; the asyncio face's are ``async``).
Docs build only: the package never imports this.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

_ADAPTERS = {"_blocking": False, "_awaiting": True}


class ClientFaces(griffe.Extension):
    """Replace ``name = _blocking(api.name)`` attributes with documented functions."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Once nbinfer is loaded: rewrite the two faces' derived members."""
        if pkg.path != "nbinfer":
            return
        client = pkg.modules_collection.get_member("nbinfer.client")
        api = client.members["api"]
        for module_name, class_name in (("sync", "Client"), ("aio", "AsyncClient")):
            cls = client.members[module_name].members[class_name]
            for name, member in list(cls.members.items()):
                derived = self._derived(member, api)
                if derived is not None:
                    cls.set_member(name, derived)

    @staticmethod
    def _derived(member: Any, api: griffe.Module) -> griffe.Function | None:
        if not isinstance(member, griffe.Attribute) or member.value is None:
            return None
        try:
            call = ast.parse(str(member.value), mode="eval").body
        except SyntaxError:
            return None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in _ADAPTERS
            and len(call.args) == 1
            and isinstance(call.args[0], ast.Attribute)
        ):
            return None
        declared = api.members.get(call.args[0].attr)
        if not isinstance(declared, griffe.Function):
            return None
        core, *rest = list(declared.parameters)
        self_param = griffe.Parameter("self", kind=core.kind)
        returns = declared.returns
        text = str(returns) if returns is not None else ""
        if text.startswith("Op[") and text.endswith("]"):
            returns = text[3:-1]
        function = griffe.Function(
            member.name,
            lineno=member.lineno,
            endlineno=member.endlineno,
            parameters=griffe.Parameters(self_param, *rest),
            returns=returns,
            docstring=declared.docstring,
        )
        if _ADAPTERS[call.func.id]:
            function.labels.add("async")
        return function
