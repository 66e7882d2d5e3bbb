"""Small sample datasets for the demo models, shipped in the package (no network, no sklearn).

* ``iris``: the 150 flowers of Fisher's iris data (UCI), a DataFrame with the four measurements in
  cm (``sepal_length``, ``sepal_width``, ``petal_length``, ``petal_width``) as ``data`` and the
  species as ``target`` / ``target_names``, the input the ``iris`` demo model takes.
* ``digits``: the 540 8x8 handwritten digits (UCI optical recognition of handwritten digits, as in
  scikit-learn's ``load_digits``) held out when the ``digits`` demo model was trained: ``data`` is
  a uint8 array ``(540, 8, 8)`` of grayscale images (white ink on black, 0..255), ``target`` the
  true digit.

Layer: interop (pandas is imported when the iris frame is built).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import numpy as np

from nbinfer.errors import InvalidInputError

__all__ = ["SampleData", "sample_data"]

_DATA = "nbinfer.interop.data"


@dataclass(frozen=True)
class SampleData:
    """A sample dataset: ``data`` (the model input), ``target`` (class indices), class names."""

    name: str
    data: Any
    target: np.ndarray[Any, Any]
    target_names: list[str]

    def __repr__(self) -> str:
        shape = getattr(self.data, "shape", None)
        return f"SampleData({self.name!r}, data shape {shape}, classes {self.target_names})"


def _iris() -> SampleData:
    import pandas as pd

    text = resources.files(_DATA).joinpath("iris.csv").read_text(encoding="utf-8")
    rows = list(csv.reader(text.splitlines()))
    header, body = rows[0], rows[1:]
    data = pd.DataFrame(np.array([row[:4] for row in body], dtype=np.float32), columns=header[:4])
    species = [row[4] for row in body]
    names = list(dict.fromkeys(species))
    target = np.array([names.index(s) for s in species], dtype=np.int64)
    return SampleData("iris", data, target, names)


def _digits() -> SampleData:
    with resources.files(_DATA).joinpath("digits.npz").open("rb") as handle, np.load(handle) as npz:
        levels = npz["images"]  # 0..16, as in the original data
        target = npz["target"].astype(np.int64)
    images = np.rint(levels.astype(np.float32) * (255 / 16)).astype(np.uint8)
    return SampleData("digits", images, target, [str(d) for d in range(10)])


def sample_data(name: Literal["iris", "digits"]) -> SampleData:
    """A sample dataset for a demo model: ``"iris"`` (a DataFrame) or ``"digits"`` (8x8 images).

    Example:
        >>> flowers = nbinfer.sample_data("iris")
        >>> session.infer("iris", flowers.data)
    """
    if name == "iris":
        return _iris()
    if name == "digits":
        return _digits()
    raise InvalidInputError(f"no sample dataset named {name!r}; there are 'iris' and 'digits'")
