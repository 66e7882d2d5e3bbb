"""``nbinfer.sample_data``: the shipped iris and digits match their sources and feed the demos."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbinfer
from nbinfer.server.demo.nets import load_weights


def test_iris_sample_is_fishers_iris_with_the_demo_models_column_names() -> None:
    from sklearn import datasets  # here, not at collection (over a second of CPU per process)

    iris = nbinfer.sample_data("iris")
    source = datasets.load_iris()
    assert isinstance(iris.data, pd.DataFrame)
    assert list(iris.data.columns) == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    assert iris.data.dtypes.unique().tolist() == [np.dtype(np.float32)]
    np.testing.assert_allclose(iris.data.to_numpy(), source.data, atol=1e-6)
    np.testing.assert_array_equal(iris.target, source.target)
    assert iris.target_names == list(source.target_names)


def test_digits_sample_is_the_held_out_split_of_the_shipped_weights() -> None:
    from sklearn import datasets

    digits = nbinfer.sample_data("digits")
    source = datasets.load_digits()
    idx = load_weights("digits")["test_idx"]
    assert digits.data.dtype == np.uint8 and digits.data.shape == (len(idx), 8, 8)
    expected = np.rint(source.images[idx] * (255 / 16)).astype(np.uint8)
    np.testing.assert_array_equal(digits.data, expected)
    np.testing.assert_array_equal(digits.target, source.target[idx])
    assert digits.target_names == [str(d) for d in range(10)]


def test_the_samples_feed_the_demo_models() -> None:
    with nbinfer.Session(device="cpu") as session:
        iris = nbinfer.sample_data("iris")
        probabilities = session.infer("iris", iris.data).to_numpy()
        assert (probabilities.argmax(axis=1) == iris.target).mean() > 0.9
        digits = nbinfer.sample_data("digits")
        top = session.classify("digits", digits.data[:100], top_k=1, progress=False)
        assert (top["label"].astype(int).to_numpy() == digits.target[:100]).mean() > 0.9


def test_an_unknown_sample_names_the_ones_there_are() -> None:
    with pytest.raises(nbinfer.InvalidInputError, match="'iris' and 'digits'"):
        nbinfer.sample_data("mnist")  # type: ignore[arg-type]
