"""The session an engine's worker opens for its partitions (Dask: :mod:`nbinfer.interop.dask`).

:func:`dask_frame` is ``session.infer``'s Dask branch. A worker process gets a picklable
recipe, never a connection: the URLs, the client options and the tokens of the local servers the
driver's process started (a worker did not start them, so the process registry that hands a
LocalServer's token to clients of its address knows them only once :func:`open_session` has
registered them there). May import the config and the interop layer; the session class comes in
the recipe (pickled by reference), not as an import.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbinfer.config import adopt_local_server_tokens, local_server_tokens

if TYPE_CHECKING:
    from nbinfer.session.frames import FrameFront
    from nbinfer.session.ops import SessionOp

__all__ = ["dask_frame", "open_session"]


def dask_frame(
    session: FrameFront, model: str, ddf: Any, own: Mapping[str, Any], kwargs: Mapping[str, Any]
) -> SessionOp[Any]:
    """``session.infer(model, ddf)`` of a Dask frame: lazy, the pandas path per partition.

    ``own`` holds ``infer``'s own arguments (its locals), ``kwargs`` the client's options.
    """
    from nbinfer.interop.dask import SESSION_OPTIONS, WorkerRecipe, infer_lazily

    key = (model, own["model_version"])
    meta = yield from session._metadata_op(*key)
    yield from session._labels_op(*key)
    opts = {**session._client_options, "protocol": session.protocol}
    urls = tuple(session._replicas or [session.url])
    opener = functools.partial(open_session, type(session))
    recipe = WorkerRecipe(urls, tuple(opts.items()), opener, local_server_tokens(urls))
    options = {**{k: own[k] for k in SESSION_OPTIONS}, **kwargs}
    return infer_lazily(ddf, recipe, model, meta, session._labels_cache.get(key, {}), options)


def open_session(
    cls: Callable[..., Any],
    target: str | list[str],
    tokens: Sequence[tuple[str, str]],
    **options: Any,
) -> Any:
    """A session (of class ``cls``) for a worker: the driver's local-server tokens registered."""
    adopt_local_server_tokens(tokens, open_session)
    return cls(target, **options)
