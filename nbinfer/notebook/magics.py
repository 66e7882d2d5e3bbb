"""IPython magics: ``%nbinfer`` (start / connect / inspect a session) and ``%%infer``.

Layer: the notebook floor: imports IPython and nbinfer's public API (``nbinfer``,
``nbinfer.protocol``) only, never private modules, so a magic can always be written as plain code.

Sugar over the public API only: every magic does what a line of ``Session`` code does.
Loaded by ``%load_ext nbinfer``.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbinfer.protocol import numpy_dtype
from nbinfer.session import Session, sessions

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


def _plain_help(magic: str) -> Callable[[_F], _F]:
    """Make the usage that ``magic_arguments`` puts atop a docstring plain text for ``?``.

    IPython writes it as a reST literal block (``::`` then ``%name``, one ``%`` even for a
    cell magic); ``%nbinfer?`` shows the docstring as is.
    """

    def fix(func: _F) -> _F:
        doc = func.__doc__ or ""
        head = f"::\n\n  %{func.__name__}"
        if doc.startswith(head):
            func.__doc__ = f"Usage:\n\n  {magic}" + doc[len(head) :]
        return func

    return fix


def _parse(magic: Callable[..., Any], line: str) -> Any:
    return parse_argstring(magic, line)  # type: ignore[no-untyped-call]


_COMMANDS = ("local", "connect", "use", "models", "status", "browse", "stop")
_LOCAL_ONLY = ("model_repository", "device", "keep_previous")
_CONNECT_ONLY = ("token",)


#: The gRPC faces the magics open on local sessions (``%%infer --grpc``), in any shell: never
#: the current session.
_FACES: weakref.WeakSet[Session] = weakref.WeakSet()


def _say(text: str) -> None:
    """Tell the notebook user something (a magic's own output, not a diagnostic)."""
    print(text)  # noqa: T201


def _where(session: Session) -> str:
    """``URL (local server, http)``: what ``%nbinfer`` says about a session."""
    kind = "local server" if session.server is not None else "remote server"
    return f"{session.url} ({kind}, {session.protocol})"


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
    """``%nbinfer`` and ``%%infer``; they use the kernel's current session (:attr:`session`)."""

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)  # type: ignore[no-untyped-call]
        #: The session the last ``%nbinfer local`` / ``connect`` started (kept alive here).
        self._started: Session | None = None
        #: The session picked by ``%nbinfer use`` (or reused by ``%nbinfer local``), and the
        #: sessions open when it was picked: a session created after it takes over.
        self._chosen: weakref.ref[Session] | None = None
        self._seen: weakref.WeakSet[Session] = weakref.WeakSet()
        self._why = ""
        #: gRPC faces of local sessions (``%%infer --grpc``): never the current session.
        self._faces: weakref.WeakKeyDictionary[Session, Session] = weakref.WeakKeyDictionary()

    @property
    def _shell(self) -> Any:
        return self.shell

    @property
    def session(self) -> Session | None:
        """The session the magics use now (``None``: no open session in this kernel)."""
        return self._pick()[0]

    # -- %nbinfer ----------------------------------------------------------------------------

    @_plain_help("%nbinfer")
    @_arguments()
    @_arg("command", nargs="?", choices=_COMMANDS, help="what to do (none: say which session)")
    @_arg("url", nargs="?", help="connect: the server URL; use: a variable holding a Session")
    @_arg("--model-repository", help="local: a Triton-layout model repository to serve")
    @_arg("--device", help="local: auto (default), cpu or cuda:N")
    @_arg("--grpc", action="store_true", help="local / connect: talk gRPC instead of HTTP")
    @_arg(
        "--keep-previous",
        action="store_true",
        help="local: start a new server and keep the open local sessions running",
    )
    @_arg("--token", help="connect: a bearer token for the server")
    @_line
    def nbinfer(self, line: str) -> Any:
        """Start, connect or look at the nbinfer session the magics use.

        The magics use the kernel's current session: the most recently created open
        nbinfer.Session (so after session = nbinfer.Session(), %nbinfer models lists its
        models), or the one picked with %nbinfer use NAME until a newer one is created.

        Subcommands:

            %nbinfer              say which session the magics use, and how to switch
            %nbinfer local [--model-repository DIR] [--device D] [--grpc] [--keep-previous]
                                  reuse the open local session when it fits, else start
                                  the embedded server (demo models + DIR); returns it
            %nbinfer connect URL [--grpc] [--token T]
                                  connect to any v2 server (Triton, KServe, MLServer, nbinfer)
            %nbinfer use NAME     use the Session held in the variable NAME
            %nbinfer models       the model repository index (a DataFrame)
            %nbinfer status       the session: server, version, extensions, models and state
            %nbinfer browse       the model browser widget (nbinfer.browse(session))
            %nbinfer stop         close the session (and stop a local server it started)

        The cell magic %%infer MODEL [-o NAME] [--grpc] runs inference on the cell's
        inputs (JSON or a Python expression) with the same session.
        session = %nbinfer local keeps the Session in a variable.
        """
        args = _parse(self.nbinfer, line)
        self._check_options(args)
        command: str | None = args.command
        if command is None:
            _say(self._describe())
            return None
        if command == "local":
            return self._local(args)
        if command == "connect":
            if not args.url:
                raise UsageError(
                    "%nbinfer connect needs a URL, e.g. %nbinfer connect localhost:8000"
                )
            options: dict[str, Any] = {"auth": args.token} if args.token else {}
            protocol = "grpc" if args.grpc else None
            self._close_started()
            self._started = Session(args.url, protocol=protocol, **options)
            return self._started.refresh()  # its card shows the server it reached
        if command == "use":
            self._use(args.url)
            return None
        if command == "stop":
            self._stop()
            return None
        session = self._current()
        if command == "models":
            return session.models
        if command == "browse":
            from nbinfer.notebook.widgets import browse  # ipywidgets: only when asked for

            return browse(session)
        return session  # status: the session's rich display

    def _check_options(self, args: Any) -> None:
        given = {k for k in (*_LOCAL_ONLY, *_CONNECT_ONLY, "grpc") if getattr(args, k)}
        allowed = {
            "local": {*_LOCAL_ONLY, "grpc"},
            "connect": {*_CONNECT_ONLY, "grpc"},
        }.get(args.command or "", set())
        magic = f"%nbinfer {args.command}" if args.command else "%nbinfer"
        extra = sorted(given - allowed)
        if extra:
            flags = ", ".join("--" + e.replace("_", "-") for e in extra)
            raise UsageError(f"{magic} does not take {flags}")
        if args.url and args.command not in ("connect", "use"):
            raise UsageError(f"{magic} takes no argument {args.url!r}")

    # -- which session -----------------------------------------------------------------------

    def _pick(self) -> tuple[Session | None, str]:
        """The session the magics use now, and why (for ``%nbinfer``)."""
        open_now = sessions()
        for base, face in list(self._faces.items()):
            if base not in open_now:  # closed or replaced: its gRPC face goes with it
                del self._faces[base]
                face.close()
        candidates = [s for s in open_now if s not in _FACES]
        chosen = None if self._chosen is None else self._chosen()
        if chosen is not None and chosen in candidates:
            newer = [s for s in candidates if s not in self._seen]
            if not newer:
                return chosen, self._why
            return newer[-1], "the most recently created open session (newer than the one picked)"
        if not candidates:
            return None, ""
        return candidates[-1], "the most recently created open session"

    def _choose(self, session: Session, why: str) -> None:
        self._chosen = weakref.ref(session)
        self._why = why
        self._seen = weakref.WeakSet(sessions())

    def _current(self) -> Session:
        session = self._pick()[0]
        if session is None:
            raise UsageError(
                "no open nbinfer session in this kernel: create one with "
                "`session = nbinfer.Session()`, or run `%nbinfer local` or "
                "`%nbinfer connect URL`"
            )
        return session

    def _held(self, session: Session) -> str:
        """`` (the variable NAME)``: the notebook variables that hold ``session``, if any."""
        namespace = getattr(self._shell, "user_ns", {}) or {}
        names = sorted(k for k, v in namespace.items() if v is session and not k.startswith("_"))
        if not names:
            return ""
        return f" (the variable{'s' if len(names) > 1 else ''} {', '.join(names)})"

    def _describe(self) -> str:
        session, why = self._pick()
        switch = (
            "To switch: `%nbinfer use NAME` (a variable holding a Session), `%nbinfer local`, "
            "`%nbinfer connect URL`; a newer nbinfer.Session(...) becomes the current one. "
            "`%nbinfer?` lists every subcommand."
        )
        if session is None:
            return (
                "The nbinfer magics have no session: no nbinfer.Session is open in this kernel.\n"
                "Start one: `session = nbinfer.Session()`, `%nbinfer local` or "
                "`%nbinfer connect URL`."
            )
        held = self._held(session)
        count = len([s for s in sessions() if s not in _FACES])
        others = (
            f"{count - 1} other open session{'s' if count > 2 else ''}: nbinfer.sessions() "
            "lists them.\n"
            if count > 1
            else ""
        )
        return f"The nbinfer magics use {_where(session)}{held}: {why}.\n{others}{switch}"

    def _use(self, name: str | None) -> None:
        if not name:
            raise UsageError("%nbinfer use needs a variable name, e.g. %nbinfer use session")
        namespace = getattr(self._shell, "user_ns", {}) or {}
        if name not in namespace:
            raise UsageError(f"%nbinfer use: no variable {name!r} in the notebook")
        session = namespace[name]
        if not isinstance(session, Session):
            raise UsageError(
                f"%nbinfer use: {name} is a {type(session).__name__}, not an nbinfer.Session"
            )
        if session not in sessions():
            raise UsageError(f"%nbinfer use: the session in {name} is closed")
        self._choose(session, f"picked with %nbinfer use {name}")
        _say(f"The nbinfer magics now use {_where(session)} (the variable {name}).")

    # -- local / stop ------------------------------------------------------------------------

    def _fits(self, session: Session, args: Any) -> bool:
        """Whether an open local ``session`` serves what ``%nbinfer local ARGS`` asks for."""
        server = session.server
        if server is None or not server.running:
            return False
        if session.protocol != ("grpc" if args.grpc else "http"):
            return False
        if args.device not in (None, "auto", server.device):
            return False
        wanted = args.model_repository
        have = server.model_repository
        return wanted is None or (
            have is not None and os.path.abspath(wanted) == os.path.abspath(have)
        )

    def _local(self, args: Any) -> Session:
        local = [s for s in sessions() if s.server is not None and s not in _FACES]
        if not args.keep_previous:
            fitting = [s for s in local if self._fits(s, args)]
            if fitting:
                session = fitting[-1]
                self._choose(session, "the open local session %nbinfer local reused")
                held = self._held(session)
                _say(
                    f"%nbinfer local: reusing the open local session {_where(session)}{held}; "
                    "no second server started. `%nbinfer local --keep-previous` starts another."
                )
                return session
        session = Session.local(
            model_repository=args.model_repository,
            device=args.device or "auto",
            protocol="grpc" if args.grpc else "http",
            keep_previous=args.keep_previous,
        )
        replaced = [s for s in local if s not in sessions()]
        if replaced:
            _say(
                f"%nbinfer local: started {_where(session)}; it replaces the local session"
                f"{'s' if len(replaced) > 1 else ''} {', '.join(s.url for s in replaced)} "
                "(closed, server stopped). `--keep-previous` keeps them."
            )
        # what the magics started before: a local one is replaced above (unless kept), a
        # connected one stays open while the notebook holds it
        self._started = session
        self._chosen = None  # the newest session: the current one
        return session

    def _close_started(self) -> None:
        """Close the session the last ``local`` / ``connect`` started (and its gRPC face)."""
        started, self._started = self._started, None
        if started is not None:
            self._close(started)

    def _close(self, session: Session) -> None:
        face = self._faces.pop(session, None)
        if face is not None:
            face.close()
        session.close()

    def _stop(self) -> None:
        session = self._pick()[0]
        if session is None:
            _say("%nbinfer stop: no open nbinfer session")
            return
        self._close(session)
        if session is self._started:
            self._started = None
        self._chosen = None
        stopped = " and stopped its local server" if session.server is not None else ""
        _say(f"%nbinfer stop: closed the session {session.url}{stopped}.")

    def _grpc_session(self) -> Session:
        """The current session if it speaks gRPC, else a gRPC session on the same local server."""
        session = self._current()
        if session.protocol == "grpc":
            return session
        if session.server is None:
            raise UsageError(
                "--grpc needs a gRPC URL for a remote server: `%nbinfer connect URL --grpc`"
            )
        face = self._faces.get(session)
        if face is None or face not in sessions():
            face = Session(session.server.grpc_url, token=session.token)
            self._faces[session] = face
            _FACES.add(face)
        return face

    # -- %%infer -----------------------------------------------------------------------------

    @_plain_help("%%infer")
    @_arguments()
    @_arg("model", help="the model name")
    @_arg("-o", "--output", metavar="NAME", help="store the result in this variable")
    @_arg("--grpc", action="store_true", help="send the request over gRPC")
    @_cell
    def infer(self, line: str, cell: str) -> Any:
        """Run inference on MODEL with the session the magics use; the cell gives the inputs.

        The body is JSON ({"input": [[...]]} or a v2 request {"inputs": [...]}) or a Python
        expression evaluated in the notebook's namespace (a dict of arrays, a DataFrame, a
        list of nbinfer.InferInput). The result (an InferResult or, for a DataFrame, a
        DataFrame) is displayed, and stored in the variable NAME when -o NAME is given.

        For example, a cell:

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
