"""IPython magics: ``%nbinfer`` (start / connect / inspect a session) and ``%%infer``.

Layer: the notebook floor: imports IPython and nbinfer's public API (``nbinfer``,
``nbinfer.protocol``) only, never private modules, so a magic can always be written as plain code.

Sugar over the public API only: every magic does what a line of ``Session`` code does.
Loaded by ``%load_ext nbinfer``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbinfer.protocol import numpy_dtype
from nbinfer.session import Session

__all__ = ["NbinferMagics"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _arguments() -> Callable[[_F], _F]:
    decorate: Callable[[_F], _F] = magic_arguments()  # type: ignore[no-untyped-call]
    return decorate


def _arg(*names: str, **options: Any) -> Callable[[_F], _F]:
    decorate: Callable[[_F], _F] = argument(*names, **options)  # type: ignore[no-untyped-call]
    return decorate


def _line(func: _F) -> _F:
    out: _F = line_magic(func)
    return out


def _cell(func: _F) -> _F:
    out: _F = cell_magic(func)
    return out


def _parse(magic: Callable[..., Any], line: str) -> Any:
    return parse_argstring(magic, line)  # type: ignore[no-untyped-call]


_COMMANDS = ("local", "connect", "models", "status", "browse", "stop")
_LOCAL_ONLY = ("model_repository", "device")
_CONNECT_ONLY = ("token",)


def _v2_request_inputs(body: Any) -> Any:
    """A v2 JSON request (``{"inputs": [{"name", "shape", "data", ...}]}``) -> ``{name: array}``."""
    if not (isinstance(body, dict) and isinstance(body.get("inputs"), list)):
        return body
    out = {}
    for item in body["inputs"]:
        if not isinstance(item, dict) or "name" not in item or "data" not in item:
            raise UsageError('each of "inputs" needs "name" and "data" (v2 JSON request)')
        datatype = item.get("datatype")
        if datatype is None:  # plain lists: the client casts them to the model's datatype
            data = np.asarray(item["data"])
            out[item["name"]] = data.reshape(item.get("shape", data.shape)).tolist()
            continue
        array = np.asarray(item["data"], dtype=numpy_dtype(datatype))
        out[item["name"]] = array.reshape(item.get("shape", array.shape))
    return out


@magics_class
class NbinferMagics(Magics):
    """``%nbinfer`` and ``%%infer``; the session they start or connect is :attr:`session`."""

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)  # type: ignore[no-untyped-call]
        #: The session the magics use (started by ``%nbinfer local`` / ``connect``).
        self.session: Session | None = None
        self._grpc: Session | None = None  # a gRPC face of the same local server

    @property
    def _shell(self) -> Any:
        return self.shell

    # -- %nbinfer ----------------------------------------------------------------------------

    @_arguments()
    @_arg("command", choices=_COMMANDS, help="what to do (see above)")
    @_arg("url", nargs="?", help="connect: the server URL (host:port, http://, grpc://)")
    @_arg("--model-repository", help="local: a Triton-layout model repository to serve")
    @_arg("--device", help="local: auto (default), cpu or cuda:N")
    @_arg("--grpc", action="store_true", help="local / connect: talk gRPC instead of HTTP")
    @_arg("--token", help="connect: a bearer token for the server")
    @_line
    def nbinfer(self, line: str) -> Any:
        """Start or connect an nbinfer session and look at it.

        Subcommands::

            %nbinfer local [--model-repository DIR] [--device D] [--grpc]
                                  start the embedded server (demo models + DIR); returns the Session
            %nbinfer connect URL [--grpc] [--token T]
                                  connect to any v2 server (Triton, KServe, MLServer, nbinfer)
            %nbinfer models       the model repository index (a DataFrame)
            %nbinfer status       the session: server, version, extensions, models and state
            %nbinfer browse       the model browser widget (session.browse())
            %nbinfer stop         close the session (and stop a local server it started)

        The cell magic ``%%infer MODEL [-o NAME] [--grpc]`` runs inference on the cell's
        inputs (JSON or a Python expression). ``session = %nbinfer local`` keeps the Session.
        """
        args = _parse(self.nbinfer, line)
        self._check_options(args)
        command: str = args.command
        if command == "local":
            return self._start(
                lambda: Session.local(
                    model_repository=args.model_repository,
                    device=args.device or "auto",
                    protocol="grpc" if args.grpc else "http",
                )
            )
        if command == "connect":
            if not args.url:
                raise UsageError(
                    "%nbinfer connect needs a URL, e.g. %nbinfer connect localhost:8000"
                )
            options: dict[str, Any] = {"auth": args.token} if args.token else {}
            protocol = "grpc" if args.grpc else None
            return self._start(lambda: Session(args.url, protocol=protocol, **options))
        if command == "stop":
            self._close()
            return None
        session = self._current()
        if command == "models":
            return session.models
        if command == "browse":
            return session.browse()
        return session  # status: the session's rich display

    def _check_options(self, args: Any) -> None:
        given = {k for k in (*_LOCAL_ONLY, *_CONNECT_ONLY, "grpc") if getattr(args, k)}
        allowed = {
            "local": {*_LOCAL_ONLY, "grpc"},
            "connect": {*_CONNECT_ONLY, "grpc"},
        }.get(args.command, set())
        extra = sorted(given - allowed)
        if extra:
            flags = ", ".join("--" + e.replace("_", "-") for e in extra)
            raise UsageError(f"%nbinfer {args.command} does not take {flags}")
        if args.url and args.command != "connect":
            raise UsageError(f"%nbinfer {args.command} takes no URL")

    def _start(self, make: Any) -> Session:
        self._close()
        self.session = make()
        return self.session

    def _close(self) -> None:
        for session in (self._grpc, self.session):
            if session is not None:
                session.close()
        self.session = self._grpc = None

    def _current(self) -> Session:
        if self.session is None:
            raise UsageError(
                "no nbinfer session: run `%nbinfer local` or `%nbinfer connect URL` first"
            )
        return self.session

    def _grpc_session(self) -> Session:
        """The current session if it speaks gRPC, else a gRPC session on the same local server."""
        session = self._current()
        if session.protocol == "grpc":
            return session
        if session.server is None:
            raise UsageError(
                "--grpc needs a gRPC URL for a remote server: `%nbinfer connect URL --grpc`"
            )
        if self._grpc is None:
            self._grpc = Session(f"grpc://{session.server.grpc_url}", token=session.token)
        return self._grpc

    # -- %%infer -----------------------------------------------------------------------------

    @_arguments()
    @_arg("model", help="the model name")
    @_arg("-o", "--output", metavar="NAME", help="store the result in this variable")
    @_arg("--grpc", action="store_true", help="send the request over gRPC")
    @_cell
    def infer(self, line: str, cell: str) -> Any:
        """Run inference on MODEL; the cell gives the inputs.

        The body is JSON (``{"input": [[...]]}`` or a v2 request ``{"inputs": [...]}``) or a
        Python expression evaluated in the notebook's namespace (a dict of arrays, a
        DataFrame, a list of ``nbinfer.InferInput``). The result (an ``InferResult`` or, for a
        DataFrame, a DataFrame) is displayed and stored in ``NAME`` when ``-o NAME`` is given.

        Example::

            %%infer iris -o probs
            {"input": [[5.1, 3.5, 1.4, 0.2]]}
        """
        args = _parse(self.infer, line)
        session = self._grpc_session() if args.grpc else self._current()
        inputs = _v2_request_inputs(self._inputs(cell))
        result = session.infer(args.model, inputs)
        if args.output:
            if not args.output.isidentifier():
                raise UsageError(f"-o needs a variable name, got {args.output!r}")
            self._shell.user_ns[args.output] = result
        return result

    def _inputs(self, cell: str) -> Any:
        text = cell.strip()
        if not text:
            raise UsageError(
                "%%infer needs the inputs in the cell body (JSON or a Python expression)"
            )
        try:
            return json.loads(text)
        except ValueError:
            pass
        try:
            return self._shell.ev(text)
        except SyntaxError as exc:
            raise UsageError(
                f"the %%infer body is neither JSON nor a Python expression: {exc.msg} "
                f"(line {exc.lineno})"
            ) from exc
