"""Classification extension: top-k "value:index[:label]" strings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.classification import decode_classification, encode_classification, top_k
from nbinfer.protocol.dtypes import bfloat16
from nbinfer.protocol.types import ClassificationResult


def test_encodes_best_first_with_labels_like_triton() -> None:
    enc = encode_classification(np.array([0.1, 0.7, 0.2], np.float32), 2, ["cat", "dog", "eel"])
    assert enc.dtype == object and enc.shape == (2,)
    assert enc.tolist() == [b"0.700000:1:dog", b"0.200000:2:eel"]


def test_batched_scores_give_one_row_per_batch_entry() -> None:
    scores = np.array([[0.1, 0.9, 0.5], [0.8, 0.1, 0.3]])
    enc = encode_classification(scores, 2)
    assert enc.shape == (2, 2)
    rows = decode_classification(enc)
    assert [[r.index for r in row] for row in rows] == [[1, 2], [0, 2]]
    assert rows[0][0] == ClassificationResult(score=0.9, index=1, label=None)


def test_integer_scores_are_written_as_integers_and_ties_keep_index_order() -> None:
    enc = encode_classification(np.array([3, 7, 7, 1], np.int32), 3)
    assert enc.tolist() == [b"7:1", b"7:2", b"3:0"]


def test_k_is_clipped_to_the_class_count_and_missing_labels_are_left_out() -> None:
    enc = encode_classification(np.array([0.5, 0.25]), 5, ["only"])
    assert enc.tolist() == [b"0.500000:0:only", b"0.250000:1"]


def test_nan_scores_rank_last_and_bf16_scores_work() -> None:
    idx, _ = top_k(np.array([np.nan, 0.1, 0.2]), 3)
    assert idx.tolist() == [2, 1, 0]
    enc = encode_classification(np.array([0.5, 2.0], bfloat16), 1)
    assert enc.tolist() == [b"2.000000:1"]


def test_labels_may_contain_colons() -> None:
    (row,) = decode_classification(encode_classification(np.array([1.0, 2.0]), 1, ["a", "b:c"]))
    assert row == [ClassificationResult(2.0, 1, "b:c")]


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64, st.tuples(st.integers(1, 4), st.integers(1, 300)), elements=st.floats(-1e6, 1e6)
    ),
    st.integers(1, 10),
)
def test_top_k_matches_a_full_stable_sort(scores: np.ndarray, k: int) -> None:
    idx, values = top_k(scores, k)
    full = np.argsort(-scores, axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(idx, full)
    np.testing.assert_array_equal(values, np.take_along_axis(scores, full, axis=-1))


def test_decode_accepts_str_and_rejects_malformed_entries() -> None:
    assert decode_classification(np.array(["1.5:2"], dtype=object)) == [
        [ClassificationResult(1.5, 2)]
    ]
    with pytest.raises(InvalidInputError, match=r"entry \[0\]\[1\] 'oops'"):
        decode_classification(np.array([b"1:0", b"oops"], dtype=object))


def test_invalid_requests_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match=">= 1"):
        encode_classification(np.ones(3), 0)
    with pytest.raises(InvalidInputError, match="at least one dimension"):
        encode_classification(np.float32(1.0), 1)
