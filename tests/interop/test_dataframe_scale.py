"""SCALE: a 20-million-row DataFrame through the demo ``iris`` model (marked ``scale``).

Deselect with ``-m "not scale"``; it takes seconds on two cores and ~1.5 GB of memory. One request
for this frame would be 320 MB, over the server's request limit: the frame must be split,
pipelined and reassembled.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from nbinfer import Session
from nbinfer.server.demo.nets import IRIS_LABELS, iris_predict, load_weights

ROWS = 20_000_000


@pytest.mark.scale
@pytest.mark.timeout(600)
def test_scale_20_million_rows_come_back_whole_aligned_and_equal_to_row_wise() -> None:
    rng = np.random.default_rng(20)
    features = rng.random((ROWS, 4), dtype=np.float32)
    features *= 7.9
    features += 0.1
    frame = pd.DataFrame(
        features,
        columns=["sepal_length", "sepal_width", "petal_length", "petal_width"],
        index=pd.Index(rng.permutation(ROWS) * 3 + 7, name="id"),  # shuffled, not 0..n-1
        copy=False,
    )
    with Session(device="cpu") as session:
        started = time.perf_counter()
        out = session.infer("iris", frame)
        elapsed = time.perf_counter() - started
        print(f"\n{ROWS:,} rows in {elapsed:.1f} s ({ROWS / elapsed / 1e6:.1f} M rows/s)")

        assert out.shape == (ROWS, 3)
        assert out.index.equals(frame.index)
        assert list(out.columns) == [f"probabilities[{label}]" for label in IRIS_LABELS]
        probs = out.to_numpy()
        assert not np.isnan(probs).any()
        # the whole set against the model's numpy forward pass, piece by piece: a piece stays in
        # the cache and is small enough for BLAS to run it on one thread (on a million rows its
        # threads spin for a core each: 2-3x the CPU), and every element is still compared
        weights = load_weights("iris")
        step = 1 << 16
        for i in range(0, ROWS, step):
            expected = iris_predict(weights, features[i : i + step])
            np.testing.assert_allclose(probs[i : i + step], expected, rtol=1e-5, atol=1e-7)
        # a sample of rows, each inferred on its own (one request per row), found by label
        for position in rng.choice(ROWS, 16, replace=False):
            label = frame.index[position]
            single = session.infer("iris", frame.iloc[[position]])
            assert single.index[0] == label
            np.testing.assert_allclose(single.loc[label], out.loc[label], rtol=1e-5, atol=1e-7)
