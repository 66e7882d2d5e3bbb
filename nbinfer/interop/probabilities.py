"""Probabilities that read as probabilities: a DataFrame whose display fixes their format.

Layer: interop (pandas only); never the client, transports, session or server.

pandas picks a float format per column, so a softmax output prints as ``9.975868e-01`` in one
column and ``0.002413`` in the next. :func:`outputs_to_dataframe` returns a
:class:`ProbabilityFrame` when an output is a probability distribution (every value in 0..1,
each row summing to 1): it *displays* those columns with four decimals (``0.9976``,
``0.0024``, ``0.0000``) in HTML and plain text alike. The values are never changed, and every
other column keeps pandas' format; frames derived from it (``head()``, slices) keep the rule.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["PROBABILITY_FORMAT", "SAMPLE_ROWS", "ProbabilityFrame", "probability_columns"]

#: How a probability is shown: fixed, four decimals.
PROBABILITY_FORMAT = "{:.4f}"
_GROUP = re.compile(r"^(?P<output>.+)\[[^\[\]]*\]$")
_TOLERANCE = 1e-3  # float32 softmax rows sum to 1 within ~1e-6; be generous
#: Rows a big frame's probability check reads (see :func:`probability_columns`).
SAMPLE_ROWS = 4096


def probability_columns(frame: pd.DataFrame) -> list[str]:
    """Columns ``out[label]`` whose group is a distribution per row (values in 0..1, sum 1).

    A frame of more than :data:`SAMPLE_ROWS` rows is judged on that many of them: its first
    and last rows (the ones displayed) and rows spread evenly in between, so a result of
    millions of rows is neither copied nor read whole to choose a display format.
    """
    groups: dict[str, list[int]] = {}
    for j, (column, dtype) in enumerate(zip(frame.columns, frame.dtypes, strict=True)):
        match = _GROUP.match(str(column)) if isinstance(column, str) else None
        if match is not None and dtype.kind == "f":
            groups.setdefault(match["output"], []).append(j)
    found: list[str] = []
    rows = _sample(len(frame))
    for positions in groups.values():
        if len(positions) < 2:
            continue
        picked = [frame.iloc[:, j].to_numpy() for j in positions]  # views, where pandas allows
        values = np.stack([c if rows is None else c[rows] for c in picked], axis=1)
        values = values.astype(np.float64, copy=False)
        if values.size == 0 or not np.isfinite(values).all():
            continue
        if values.min() < 0.0 or values.max() > 1.0:
            continue
        if np.abs(values.sum(axis=1) - 1.0).max() > _TOLERANCE:
            continue
        found += [frame.columns[j] for j in positions]
    return found


def _sample(rows: int) -> np.ndarray[Any, Any] | None:
    """The rows :func:`probability_columns` reads (``None``: all of them)."""
    if rows <= SAMPLE_ROWS:
        return None
    edge = SAMPLE_ROWS // 4
    middle = np.linspace(edge, rows - edge - 1, SAMPLE_ROWS - 2 * edge).astype(np.intp)
    return np.concatenate([np.arange(edge), middle, np.arange(rows - edge, rows)])


def _fixed(value: Any) -> str:
    return PROBABILITY_FORMAT.format(value) if np.isfinite(value) else str(value)


class ProbabilityFrame(pd.DataFrame):  # type: ignore[misc]
    """A DataFrame whose probability columns display with four decimals (values unchanged)."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return ProbabilityFrame

    def _formatters(self) -> list[Any]:
        """One formatter per column (None: pandas' own), or ``[]`` when none is a probability.

        A list, not a dict: pandas applies a dict's formatters to the wrong columns once it
        truncates a wide frame.
        """
        found = set(probability_columns(self))
        return [_fixed if column in found else None for column in self.columns] if found else []

    def __repr__(self) -> str:
        formatters = self._formatters()
        if not formatters:
            return str(super().__repr__())
        text: str = self.to_string(
            formatters=formatters,
            max_rows=pd.get_option("display.max_rows"),
            min_rows=pd.get_option("display.min_rows"),
            max_cols=pd.get_option("display.max_columns"),
            max_colwidth=pd.get_option("display.max_colwidth"),
            show_dimensions=pd.get_option("display.show_dimensions"),
            line_width=pd.get_option("display.width"),
        )
        return text

    def _repr_html_(self) -> str | None:
        formatters = self._formatters()
        if not formatters:
            html: str | None = super()._repr_html_()
            return html
        out: str = self.to_html(
            formatters=formatters,
            notebook=True,
            max_rows=pd.get_option("display.max_rows"),
            max_cols=pd.get_option("display.max_columns"),
            show_dimensions=pd.get_option("display.show_dimensions"),
        )
        return out


def with_probabilities(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a :class:`ProbabilityFrame` when it holds probabilities, else unchanged."""
    if type(frame) is pd.DataFrame and probability_columns(frame):
        return ProbabilityFrame(frame, copy=False)
    return frame
