"""Train the demo models shipped with nbinfer's embedded server and write their weights.

Run from the repository root (needs scikit-learn, a test extra; the runtime needs only numpy)::

    python scripts/train_demo_models.py

Rewrites ``nbinfer/server/demo/weights/{iris,digits}.npz`` deterministically (fixed seeds) and
prints the held-out accuracy of each model, computed with the pure-numpy forward functions of
``nbinfer.server.demo.nets`` on float32 weights, i.e. exactly what the server will run.

* ``iris``: multinomial logistic regression on standardised features (sepal length, sepal width,
  petal length, petal width in cm) -> 3 classes.
* ``digits``: MLP 64 -> 64 (ReLU) -> 10 on sklearn's 8x8 digits scaled to 0..1 (value / 16).

Both use a stratified 70/30 train/test split with ``random_state=SEED``; the held-out indices
and accuracy are stored in the npz so tests can re-check them without re-deriving the split.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nbinfer.server.demo import nets  # noqa: E402

SEED = 0
TEST_SIZE = 0.3
WEIGHTS_DIR = ROOT / "nbinfer" / "server" / "demo" / "weights"


def split(n: int, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stratified, seeded train / test index split."""
    train_idx, test_idx = train_test_split(
        np.arange(n), test_size=TEST_SIZE, random_state=SEED, stratify=y
    )
    return np.sort(train_idx).astype(np.int32), np.sort(test_idx).astype(np.int32)


def accuracy(probs: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(probs, axis=1) == y))


def train_iris() -> dict[str, np.ndarray]:
    data = load_iris()
    x = data.data.astype(np.float64)
    y = data.target.astype(np.int64)
    train_idx, test_idx = split(len(y), y)

    mean = x[train_idx].mean(axis=0)
    std = x[train_idx].std(axis=0)
    clf = LogisticRegression(C=10.0, max_iter=2000, random_state=SEED)
    clf.fit((x[train_idx] - mean) / std, y[train_idx])

    weights: dict[str, np.ndarray] = {
        "mean": mean.astype(np.float32),
        "std": std.astype(np.float32),
        "w": clf.coef_.T.astype(np.float32),  # (4, 3)
        "b": clf.intercept_.astype(np.float32),  # (3,)
        "labels": np.array(nets.IRIS_LABELS, dtype="<U16"),
        "test_idx": test_idx,
        "seed": np.array(SEED, dtype=np.int32),
    }
    probs = nets.iris_predict(weights, x[test_idx].astype(np.float32))
    weights["test_accuracy"] = np.array(accuracy(probs, y[test_idx]), dtype=np.float32)
    return weights


def train_digits() -> dict[str, np.ndarray]:
    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)  # (n, 8, 8) in 0..1
    y = data.target.astype(np.int64)
    train_idx, test_idx = split(len(y), y)

    clf = MLPClassifier(
        hidden_layer_sizes=(64,),
        activation="relu",
        solver="adam",
        alpha=1e-3,
        batch_size=64,
        learning_rate_init=1e-3,
        max_iter=300,
        random_state=SEED,
    )
    clf.fit(x[train_idx].reshape(len(train_idx), 64), y[train_idx])

    weights: dict[str, np.ndarray] = {
        "w1": clf.coefs_[0].astype(np.float32),  # (64, 64)
        "b1": clf.intercepts_[0].astype(np.float32),  # (64,)
        "w2": clf.coefs_[1].astype(np.float32),  # (64, 10)
        "b2": clf.intercepts_[1].astype(np.float32),  # (10,)
        "labels": np.array(nets.DIGITS_LABELS, dtype="<U16"),
        "test_idx": test_idx,
        "seed": np.array(SEED, dtype=np.int32),
    }
    probs = nets.digits_predict(weights, x[test_idx])
    weights["test_accuracy"] = np.array(accuracy(probs, y[test_idx]), dtype=np.float32)
    return weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="output directory")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, train in (("iris", train_iris), ("digits", train_digits)):
        weights = train()
        path = out / f"{name}.npz"
        np.savez_compressed(path, **weights)
        acc = float(weights["test_accuracy"])
        n_test = len(weights["test_idx"])
        size = path.stat().st_size
        print(f"{name}: held-out accuracy {acc:.4f} on {n_test} samples -> {path} ({size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
