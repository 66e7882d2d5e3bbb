"""Session: the one object a notebook needs.

A :class:`Session` owns a client (and, for ``Session()`` with no URL, the embedded local server
it started) and speaks DataFrames: ``session.infer("iris", df)`` returns a DataFrame.

Example::

    import nbinfer

    session = nbinfer.Session()                 # starts the local server with its demo models
    session.models                              # DataFrame: name, version, state, reason
    session.infer("iris", iris_frame)           # DataFrame of class probabilities
    session.close()

    remote = nbinfer.Session("localhost:8000")  # any v2 server: Triton, KServe, MLServer, ...

The package, by what each part does (each module says what it may import):

- ``core``: connection, clients, capabilities, the local server, ``restart()``, ``close()``,
  the model listing and statistics;
- ``boundary``: what escapes a public method (``public``): arguments that do not fit, bad
  values as ``InvalidInputError``, a local server that died named with ``session.restart()``;
- ``ops``: the declarations' lookups (metadata, config, labels, capabilities) as I/O-free ops,
  and the sync / async faces that perform them;
- ``frames``: the DataFrame / inference front (``infer`` / ``ainfer`` / ``classify``), over
  ``binary`` (binary tensors on servers that do not list them);
- ``serving``: ``serve()`` / ``load()`` / ``unload()``;
- ``handle``: :class:`ModelHandle`;
- ``textgen`` (over ``generate``, ``chat``, ``completions``): text generation streamed live
  (``generate`` / ``agenerate``, ``chat()``), a prompt column to a completion column;
- ``registry``: :func:`sessions`, ``Session.shared()``'s table, the finalizer and ``atexit``.

This module joins them into :class:`Session`. From the server, the package imports only
``server.launcher`` and ``server.model`` (and ``server.backends.torch`` to serve a torch module),
and only when a server feature is used: ``import nbinfer`` imports this package, so nothing here
may import the server, IPython or the notebook layer at import time.
"""

from __future__ import annotations

from nbinfer.session.frames import FrameFront
from nbinfer.session.handle import ModelHandle
from nbinfer.session.registry import sessions
from nbinfer.session.serving import Serving
from nbinfer.session.textgen import GenerateFront

__all__ = ["ModelHandle", "Session", "sessions"]


class Session(FrameFront, GenerateFront, Serving):
    """Clients plus (optionally) the embedded local server, with DataFrames in and out.

    Args:
        url: A v2 server (``"localhost:8000"``, ``"http://..."``, ``"grpc://..."``). ``None``
            starts the embedded local server (with the demo models, unless ``demo=False``).
            A list of URLs: several servers serving the same models, behind a
            :class:`~nbinfer.ReplicaClient` (see docs/beyond.md).
        protocol: ``"http"`` or ``"grpc"``; default from the URL (HTTP for a local server).
        model_repository: Local server only: a Triton-layout model repository to serve.
        device: Local server only: ``"auto"``, ``"cpu"`` or ``"cuda:N"``.
        demo: Local server only: also serve the demo models.
        auth_token: Local server only: the bearer token the server requires; the session's
            own clients (async ones, ``profile()``, the model browser, magics) send it. By
            default a random one, read it as :attr:`token` to call the server from
            tritonclient or curl. ``None`` starts the server without a token: any local user
            who finds its port can call it (unsafe on a shared host).
        headers: Headers (HTTP) / call metadata (gRPC) sent with every call of the session,
            metadata and statistics included: API keys, a restricted Triton's access header
            (``{"admin-key": "..."}``; over gRPC ``{"triton-grpc-protocol-admin-key": "..."}``).
        token: A bearer token sent with every call (``authorization: Bearer ...``); with no
            ``url``, the local server also requires it (as ``auth_token``).
        keep_previous: Local server only. By default a new local session replaces the
            earlier local sessions of this process: it closes them and stops their servers
            (a re-run ``session = nbinfer.Session()`` cell leaves one server, even when
            IPython's ``Out`` history still holds the old session), and using a replaced
            session raises :class:`~nbinfer.ConnectError` saying so. ``True`` keeps them
            running beside this one. ``Session.shared()`` sessions are never replaced.
        **client_options: Passed to :class:`~nbinfer.Client` (timeout, retries, ssl, auth,
            binary, ...).

    Example::

        with nbinfer.Session() as session:
            frame = session.infer("iris", df)

        team = nbinfer.Session("triton.internal:8000", headers={"admin-key": key})
        team.capabilities          # what the server offers: name, version, extensions
    """
