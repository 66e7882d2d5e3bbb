"""Griffe extension: show the derived sync / async faces as the methods they are.

`nbinfer.client.sync.Client` and `nbinfer.client.aio.AsyncClient` declare most methods as
``name = _blocking(api.name)`` / ``_awaiting(api.name)``: one declaration in
`nbinfer.client.api` serves both faces (the core argument becomes ``self``; ``Op[T]`` returns
become ``T``). `nbinfer.session.frames.FrameFront` (inherited by ``Session``) does the same for
``infer`` / ``ainfer`` and ``classify`` / ``aclassify``:
``infer = public(_blocking("infer", _infer_call, _send))``, the declaration a private method of
the class, the result type that of the runner, the asyncio face's docstring its ``doc=``.
Static analysis sees class attributes; this extension replaces each with a function carrying
the declaration's docstring and parameters (the asyncio faces' are ``async``).
Docs build only: the package never imports this.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

_ADAPTERS = {"_blocking": False, "_awaiting": True}
#: The classes whose members are derived faces.
_FACES = (
    "nbinfer.client.sync.Client",
    "nbinfer.client.aio.AsyncClient",
    "nbinfer.session.frames.FrameFront",
)


class ClientFaces(griffe.Extension):
    """Replace ``_blocking(...)`` / ``_awaiting(...)`` attributes with documented functions."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Once nbinfer is loaded: rewrite the faces' derived members."""
        if pkg.path != "nbinfer":
            return
        modules = pkg.modules_collection
        api = modules.get_member("nbinfer.client.api")
        for path in _FACES:
            cls = modules.get_member(path)
            for name, member in list(cls.members.items()):
                derived = _derived(member, api, cls)
                if derived is not None:
                    cls.set_member(name, derived)


def _adapter_call(member: Any) -> ast.Call | None:
    """The ``_blocking(...)`` / ``_awaiting(...)`` call a member is (under ``public(...)``)."""
    if not isinstance(member, griffe.Attribute) or member.value is None:
        return None
    try:
        call = ast.parse(str(member.value), mode="eval").body
    except SyntaxError:
        return None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "public"
        and len(call.args) == 1
    ):
        call = call.args[0]  # the Session's boundary decorator
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in _ADAPTERS:
        return call
    return None


def _derived(member: Any, api: griffe.Object, cls: griffe.Object) -> griffe.Function | None:
    call = _adapter_call(member)
    if call is None:
        return None
    refs = [a for a in call.args if isinstance(a, ast.Attribute | ast.Name)]
    if not refs:
        return None
    # the client's declarations live in ``api``; the session's are methods of its class
    declared = (
        api.members.get(refs[0].attr)
        if isinstance(refs[0], ast.Attribute)
        else cls.members.get(refs[0].id)
    )
    if not isinstance(declared, griffe.Function):
        return None
    core, *rest = list(declared.parameters)
    if isinstance(refs[0], ast.Attribute):
        self_param = griffe.Parameter("self", kind=core.kind)
        text = str(declared.returns) if declared.returns is not None else ""
        returns = text[3:-1] if text.startswith("Op[") and text.endswith("]") else declared.returns
    else:
        self_param = griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)
        run = (
            cls.members.get(refs[1].id) if len(refs) > 1 and isinstance(refs[1], ast.Name) else None
        )
        returns = run.returns if isinstance(run, griffe.Function) else declared.returns
    docstring = declared.docstring
    doc = next((k.value for k in call.keywords if k.arg == "doc"), None)
    if isinstance(doc, ast.Constant) and isinstance(doc.value, str) and docstring is not None:
        docstring = griffe.Docstring(
            doc.value,
            parser=docstring.parser,
            parser_options=docstring.parser_options,
        )
    function = griffe.Function(
        member.name,
        lineno=member.lineno,
        endlineno=member.endlineno,
        parameters=griffe.Parameters(self_param, *rest),
        returns=returns,
        docstring=docstring,
    )
    if isinstance(call.func, ast.Name) and _ADAPTERS[call.func.id]:
        function.labels.add("async")
    return function
