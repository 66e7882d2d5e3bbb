"""The statistics DataFrame: a plain ``pandas.DataFrame`` that also draws itself in Jupyter.

Layer: interop (imports ``nbinfer.errors`` and ``protocol`` only, plus pandas / Pillow); never the
client, transports, session or server; its repr hook names its renderer in
:mod:`nbinfer.render.cards`.

``session.stats()`` returns a :class:`StatsFrame`: everything a DataFrame does still works
(indexing, ``plot``, ``to_csv``; derived frames are plain DataFrames), and in a notebook it
displays as a table plus a latency breakdown chart (queue / compute input / infer / output).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["StatsFrame"]


class StatsFrame(pd.DataFrame):  # type: ignore[misc]
    """Inference statistics, one row per model version (a DataFrame with a rich HTML repr)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from nbinfer.render.cards import stats_bundle

        return stats_bundle(self)
