"""Load profiling of any v2 server, perf_analyzer style, from Python and notebooks.

Layer: imports ``nbinfer.errors``, ``config``, ``protocol``, ``client`` and ``interop``; the
renderer ``nbinfer.render.profile`` only lazily inside the frame's repr hook (matplotlib lives
there, lazily too); never the server or the session. By concern: ``sweep.py`` (settings, windows,
rows, :func:`profile`), ``load.py`` (the load generator, :func:`random_inputs`), ``frame.py``
(:class:`ProfileFrame`, :func:`compare`), ``shm.py`` (``shared_memory="system"``).

``session.profile("add_sub")`` runs a concurrency sweep (closed loop: N requests always in
flight) or, with ``request_rate=``, a fixed-rate schedule (open loop: requests leave at their
scheduled time whatever the server does, and latency counts from the *scheduled* send time, so
a slow server is not hidden by coordinated omission). Each setting is warmed up, then measured
in windows until the last three agree within ``stability`` on throughput and mean latency (the
stability criterion of Triton's perf_analyzer) or ``max_windows`` is reached. The defaults
(0.5 s warm-up, 0.5 s windows, at most 6) keep a four-setting sweep near ten seconds in a
notebook; the progress bar (or a ``progress=`` callable, :class:`ProfileProgress`) names each
phase as it happens: connecting, warm-up, window n, done.

The load comes from threads blocking on a sync :class:`~nbinfer.Client` (one per concurrency
slot; open loop: a scheduler thread handing due times to sender threads), a monitor on an
asyncio :class:`~nbinfer.AsyncClient` closing the windows and reading the statistics. Every
request is timed in three client parts (encode, network + server, decode) and, when the
server has the statistics extension, the same windows' server statistics are differenced into
queue / compute input / compute infer / compute output. When the load generator itself sets the
pace (its threads busy, on a CPU or waiting for one, 40 % of the time or more: the
``generator_busy`` column; its process at ~100 % of a core; or an open-loop schedule it could
not keep) the row says so in ``client_saturated`` and a warning is logged.

The result is a :class:`ProfileFrame`: a DataFrame with one row per setting (``to_csv``,
``to_json`` as usual) that draws a throughput-latency curve, percentile bars and the time split
in a notebook; :func:`compare` overlays two runs.

Example::

    frame = session.profile("add_sub", concurrency=[1, 2, 4])
    frame.to_csv("add_sub.csv")
    nbinfer.profiling.compare(http_run, grpc_run, labels=["http", "grpc"])
"""

from __future__ import annotations

from nbinfer.profiling.frame import COLUMNS as COLUMNS
from nbinfer.profiling.frame import ProfileFrame, compare
from nbinfer.profiling.load import random_inputs
from nbinfer.profiling.sweep import STABLE_WINDOWS as STABLE_WINDOWS
from nbinfer.profiling.sweep import ProfileProgress, profile
from nbinfer.profiling.sweep import run_profile as run_profile

__all__ = ["ProfileFrame", "ProfileProgress", "compare", "profile", "random_inputs"]
