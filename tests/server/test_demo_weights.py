"""The shipped demo weights: held-out accuracy, probability outputs, pickle-free loading."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from nbinfer.errors import InvalidInputError, ModelNotFoundError
from nbinfer.server.demo import nets

TEST_SIZE = 0.3


def _held_out(name: str, y: np.ndarray) -> np.ndarray:
    """The stored held-out indices, checked against the seeded stratified split they came from."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    weights = nets.load_weights(name)
    _, expected = model_selection.train_test_split(
        np.arange(len(y)), test_size=TEST_SIZE, random_state=int(weights["seed"]), stratify=y
    )
    test_idx = weights["test_idx"]
    np.testing.assert_array_equal(test_idx, np.sort(expected))
    return test_idx


def test_iris_held_out_accuracy_at_least_0_9() -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_iris()
    test_idx = _held_out("iris", data.target)
    weights = nets.load_weights("iris")
    probs = nets.iris_predict(weights, data.data[test_idx].astype(np.float32))
    acc = float(np.mean(probs.argmax(axis=1) == data.target[test_idx]))
    assert acc >= 0.9
    assert acc == pytest.approx(float(weights["test_accuracy"]), abs=1e-6)
    assert list(weights["labels"]) == list(data.target_names) == list(nets.IRIS_LABELS)


def test_digits_held_out_accuracy_at_least_0_95() -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_digits()
    test_idx = _held_out("digits", data.target)
    weights = nets.load_weights("digits")
    images = (data.images[test_idx] / 16.0).astype(np.float32)
    probs = nets.digits_predict(weights, images)
    acc = float(np.mean(probs.argmax(axis=1) == data.target[test_idx]))
    assert acc >= 0.95
    assert acc == pytest.approx(float(weights["test_accuracy"]), abs=1e-6)
    assert list(weights["labels"]) == [str(i) for i in range(10)] == list(nets.DIGITS_LABELS)


@pytest.mark.parametrize("n", [0, 1, 7, 256])
def test_iris_outputs_float32_probability_rows(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.uniform(0.1, 8.0, size=(n, 4)).astype(np.float32)
    probs = nets.iris_predict(nets.load_weights("iris"), x)
    assert probs.dtype == np.float32
    assert probs.shape == (n, 3)
    assert np.all(probs >= 0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 7, 256])
def test_digits_outputs_float32_probability_rows(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.uniform(0.0, 1.0, size=(n, 8, 8)).astype(np.float32)
    probs = nets.digits_predict(nets.load_weights("digits"), x)
    assert probs.dtype == np.float32
    assert probs.shape == (n, 10)
    assert np.all(probs >= 0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_softmax_is_stable_for_huge_logits() -> None:
    probs = nets.softmax(np.array([[1e30, 0.0, -1e30], [5e3, 5e3, 5e3]], dtype=np.float32))
    assert np.all(np.isfinite(probs))
    np.testing.assert_allclose(probs, [[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-6)


def test_iris_classifies_textbook_flowers() -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.4, 3.2, 4.5, 1.5], [6.3, 3.3, 6.0, 2.5]], np.float32)
    probs = nets.iris_predict(nets.load_weights("iris"), x)
    assert [nets.IRIS_LABELS[i] for i in probs.argmax(axis=1)] == list(nets.IRIS_LABELS)


def test_float64_input_gives_same_result_as_float32() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0.0, 1.0, size=(5, 8, 8))
    weights = nets.load_weights("digits")
    np.testing.assert_array_equal(
        nets.digits_predict(weights, x), nets.digits_predict(weights, x.astype(np.float32))
    )


@pytest.mark.parametrize("name", nets.DEMO_MODELS)
def test_weight_files_load_without_pickle_and_stay_small(name: str) -> None:
    path = nets.WEIGHTS_DIR / f"{name}.npz"
    assert path.stat().st_size < 100_000
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    assert all(a.dtype != object for a in arrays.values())
    params = {k: a for k, a in arrays.items() if k not in ("labels", "test_idx", "seed")}
    assert all(a.dtype == np.float32 for a in params.values())
    assert arrays["labels"].dtype.kind == "U"


def test_load_weights_unknown_name_lists_known_models() -> None:
    with pytest.raises(ModelNotFoundError, match="iris, digits") as info:
        nets.load_weights("mnist")
    assert "mnist" in str(info.value)


def test_iris_rejects_wrong_shape_naming_expected_and_actual() -> None:
    with pytest.raises(InvalidInputError, match=r"\[-1, 4\].*\[2, 3\]"):
        nets.iris_predict(nets.load_weights("iris"), np.zeros((2, 3), np.float32))


def test_digits_rejects_flat_pixels_and_non_numeric_input() -> None:
    weights = nets.load_weights("digits")
    with pytest.raises(InvalidInputError, match=r"\[-1, 8, 8\].*\[2, 64\]"):
        nets.digits_predict(weights, np.zeros((2, 64), np.float32))
    with pytest.raises(InvalidInputError, match="numeric"):
        nets.digits_predict(weights, np.full((1, 8, 8), "x"))


def test_runtime_forward_does_not_import_sklearn() -> None:
    code = (
        "import sys, numpy as np\n"
        "from nbinfer.server.demo import nets\n"
        "nets.iris_predict(nets.load_weights('iris'), np.zeros((1, 4), np.float32))\n"
        "nets.digits_predict(nets.load_weights('digits'), np.zeros((1, 8, 8), np.float32))\n"
        "assert not any(m.split('.')[0] == 'sklearn' for m in sys.modules), 'sklearn imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
