"""Train the demo models shipped with nbinfer's embedded server and write their weights.

Run from the repository root (needs scikit-learn, a test extra; the runtime needs only numpy)::

    python scripts/train_demo_models.py

    python scripts/train_demo_models.py story     # only the ones named

Rewrites ``nbinfer/server/demo/weights/{iris,digits,story}.npz`` deterministically (fixed seeds) and
prints the held-out accuracy of each model, computed with the pure-numpy forward functions of
``nbinfer.server.demo.nets`` on float32 weights, i.e. exactly what the server will run.

* ``iris``: multinomial logistic regression on standardised features (sepal length, sepal width,
  petal length, petal width in cm) -> 3 classes.
* ``digits``: MLP 64 -> 64 (ReLU) -> 10 on sklearn's 8x8 digits scaled to 0..1 (value / 16),
  plus augmentation (no network): digits rendered with Pillow's bundled font and the TrueType
  fonts of this machine (random sizes, positions, stroke widths, small rotations and slants,
  both polarities, gray levels) and synthetic hand-drawn strokes (jittered polylines of random
  widths), each passed through :func:`nbinfer.protocol.inkfit.fit_ink_image`, the very function
  ``session.classify`` and ``digits_encoded`` prepare images with. The printed report adds the
  accuracy on a fresh rendered set (other seed) and per kind of augmentation.

* ``story``: word counts (unigrams, bigrams) of ``scripts/data/alice_ch1.txt``, the first
  paragraphs of *Alice's Adventures in Wonderland* (public domain); the model samples from them.

``iris`` and ``digits`` use a stratified 70/30 train/test split with ``random_state=SEED``; the
held-out indices and accuracy are stored in the npz so tests can re-check them without
re-deriving the split.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from sklearn.datasets import load_digits, load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nbinfer.protocol.inkfit import fit_ink_image  # noqa: E402
from nbinfer.server.demo import nets, story  # noqa: E402

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


#: Rendered digits (fonts) and drawn digits (strokes) per class in the training set.
FONT_PER_CLASS = 500
STROKE_PER_CLASS = 250
#: Times the scikit-learn training images are repeated, so they keep their weight.
REAL_REPEAT = 6
#: Where TrueType fonts are looked for (sorted, so the set is the same run to run).
FONT_DIRS = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"))
#: Fonts whose digits are not digits (symbols, dingbats).
FONT_SKIP = ("symbol", "dingbat", "wingding", "emoji", "math")

#: Hand-drawn digit shapes: polylines in the unit square (x right, y down), one or more per class.
STROKES: dict[int, list[list[list[tuple[float, float]]]]] = {
    0: [
        [
            [
                (0.5, 0.05),
                (0.22, 0.2),
                (0.15, 0.5),
                (0.22, 0.8),
                (0.5, 0.95),
                (0.78, 0.8),
                (0.85, 0.5),
                (0.78, 0.2),
                (0.5, 0.05),
            ]
        ],
        [
            [
                (0.55, 0.05),
                (0.3, 0.15),
                (0.25, 0.5),
                (0.35, 0.9),
                (0.6, 0.95),
                (0.75, 0.6),
                (0.72, 0.25),
                (0.5, 0.05),
            ]
        ],
    ],
    1: [
        [[(0.5, 0.05), (0.5, 0.95)]],
        [[(0.3, 0.25), (0.55, 0.05), (0.55, 0.95)]],
        [[(0.3, 0.25), (0.55, 0.05), (0.55, 0.95)], [(0.3, 0.95), (0.8, 0.95)]],
    ],
    2: [
        [
            [
                (0.2, 0.3),
                (0.35, 0.1),
                (0.55, 0.05),
                (0.75, 0.15),
                (0.78, 0.35),
                (0.6, 0.55),
                (0.2, 0.95),
                (0.85, 0.95),
            ]
        ],
        [[(0.2, 0.2), (0.5, 0.05), (0.8, 0.25), (0.2, 0.95), (0.85, 0.9)]],
    ],
    3: [
        [
            [
                (0.2, 0.12),
                (0.45, 0.05),
                (0.72, 0.15),
                (0.72, 0.35),
                (0.45, 0.48),
                (0.75, 0.6),
                (0.78, 0.82),
                (0.5, 0.95),
                (0.2, 0.88),
            ]
        ],
        [
            [
                (0.2, 0.08),
                (0.8, 0.08),
                (0.45, 0.42),
                (0.75, 0.55),
                (0.78, 0.8),
                (0.5, 0.95),
                (0.2, 0.85),
            ]
        ],
    ],
    4: [
        [[(0.62, 0.95), (0.62, 0.05), (0.15, 0.68), (0.85, 0.68)]],
        [[(0.3, 0.05), (0.2, 0.55), (0.8, 0.55)], [(0.65, 0.25), (0.65, 0.95)]],
    ],
    5: [
        [
            [
                (0.78, 0.05),
                (0.3, 0.05),
                (0.25, 0.45),
                (0.55, 0.38),
                (0.78, 0.55),
                (0.75, 0.82),
                (0.5, 0.95),
                (0.2, 0.85),
            ]
        ],
        [
            [(0.3, 0.05), (0.25, 0.45), (0.6, 0.42), (0.78, 0.65), (0.6, 0.92), (0.2, 0.88)],
            [(0.3, 0.05), (0.8, 0.05)],
        ],
    ],
    6: [
        [
            [
                (0.72, 0.08),
                (0.4, 0.2),
                (0.22, 0.55),
                (0.28, 0.85),
                (0.5, 0.95),
                (0.72, 0.82),
                (0.75, 0.6),
                (0.5, 0.5),
                (0.25, 0.62),
            ]
        ],
        [
            [
                (0.65, 0.05),
                (0.3, 0.45),
                (0.25, 0.8),
                (0.5, 0.95),
                (0.75, 0.75),
                (0.55, 0.52),
                (0.3, 0.65),
            ]
        ],
    ],
    7: [
        [[(0.15, 0.05), (0.85, 0.05), (0.4, 0.95)]],
        [[(0.15, 0.1), (0.85, 0.05), (0.5, 0.95)], [(0.35, 0.5), (0.8, 0.5)]],
    ],
    8: [
        [
            [
                (0.5, 0.5),
                (0.28, 0.33),
                (0.32, 0.1),
                (0.5, 0.05),
                (0.68, 0.1),
                (0.72, 0.33),
                (0.5, 0.5),
                (0.25, 0.68),
                (0.3, 0.9),
                (0.5, 0.95),
                (0.7, 0.9),
                (0.75, 0.68),
                (0.5, 0.5),
            ]
        ],
    ],
    9: [
        [
            [
                (0.75, 0.4),
                (0.5, 0.5),
                (0.27, 0.38),
                (0.28, 0.15),
                (0.5, 0.05),
                (0.73, 0.15),
                (0.75, 0.4),
                (0.68, 0.95),
            ]
        ],
        [[(0.75, 0.3), (0.5, 0.45), (0.25, 0.3), (0.45, 0.05), (0.75, 0.2), (0.75, 0.95)]],
    ],
}


def font_files() -> list[str]:
    """The TrueType / OpenType fonts of this machine that draw digits (sorted)."""
    found: set[str] = set()
    for folder in FONT_DIRS:
        if folder.is_dir():
            found.update(str(p) for p in folder.rglob("*.[ot]tf"))
    return sorted(f for f in found if not any(k in f.lower() for k in FONT_SKIP))


def _canvas(rng: np.random.Generator, side: int) -> tuple[Image.Image, int, int]:
    """A gray canvas of about ``side`` pixels with a random background and ink level."""
    light = bool(rng.integers(2))
    back = int(rng.integers(190, 256)) if light else int(rng.integers(0, 60))
    ink = int(rng.integers(0, 90)) if light else int(rng.integers(150, 256))
    w = int(side * rng.uniform(1.0, 1.6))
    h = int(side * rng.uniform(1.0, 1.6))
    return Image.new("L", (w, h), back), back, ink


def _finish(im: Image.Image, back: int, rng: np.random.Generator) -> np.ndarray:
    angle = float(rng.uniform(-12, 12))
    im = im.rotate(angle, resample=Image.Resampling.BILINEAR, expand=True, fillcolor=back)
    shear = float(rng.uniform(-0.2, 0.2))  # a slant, as handwriting and italics have
    w, h = im.size
    im = im.transform(
        (w + int(abs(shear) * h), h),
        Image.Transform.AFFINE,
        (1, shear, -abs(shear) * h if shear > 0 else 0, 0, 1, 0),
        resample=Image.Resampling.BILINEAR,
        fillcolor=back,
    )
    if rng.random() < 0.3:  # a blurred photo / scan
        arr = np.asarray(im, np.float32)
        arr = arr + rng.normal(0, rng.uniform(2, 12), arr.shape)
        im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    return fit_ink_image(im, (8, 8)).astype(np.float32) / 255.0


def render_font_digit(digit: int, fonts: list[str], rng: np.random.Generator) -> np.ndarray:
    """One digit in a random font, size, place, weight, angle and polarity, as the model's 8x8."""
    size = int(rng.integers(9, 64))
    which = int(rng.integers(len(fonts) + 1))
    font = (
        ImageFont.load_default(size=size)
        if which == len(fonts)
        else ImageFont.truetype(fonts[which], size)
    )
    im, back, ink = _canvas(rng, int(size * 1.4) + 4)
    draw = ImageDraw.Draw(im)
    w, h = im.size
    x = w / 2 + rng.uniform(-0.15, 0.15) * w
    y = h / 2 + rng.uniform(-0.15, 0.15) * h
    stroke = int(rng.integers(0, max(1, size // 12) + 1)) if rng.random() < 0.4 else 0
    draw.text(
        (x, y), str(digit), fill=ink, font=font, anchor="mm", stroke_width=stroke, stroke_fill=ink
    )
    return _finish(im, back, rng)


def render_stroke_digit(digit: int, rng: np.random.Generator) -> np.ndarray:
    """One hand-drawn digit: a jittered template, a random pen width and polarity."""
    shape = STROKES[digit][int(rng.integers(len(STROKES[digit])))]
    side = int(rng.integers(24, 160))
    im, back, ink = _canvas(rng, side)
    w, h = im.size
    sx, sy = side * rng.uniform(0.5, 0.85), side * rng.uniform(0.7, 0.95)
    ox = (w - sx) / 2 + rng.uniform(-0.1, 0.1) * w
    oy = (h - sy) / 2 + rng.uniform(-0.1, 0.1) * h
    pen = max(1, int(side * rng.uniform(0.03, 0.16)))
    draw = ImageDraw.Draw(im)
    for line in shape:
        jitter = rng.normal(0, 0.03, (len(line), 2))
        points = [
            (ox + (px + jx) * sx, oy + (py + jy) * sy)
            for (px, py), (jx, jy) in zip(line, jitter, strict=True)
        ]
        draw.line(points, fill=ink, width=pen, joint="curve")
        if pen > 2:  # round pen ends
            r = pen / 2
            for px, py in (points[0], points[-1]):
                draw.ellipse((px - r, py - r, px + r, py + r), fill=ink)
    return _finish(im, back, rng)


def synthetic_digits(
    seed: int, font_per_class: int, stroke_per_class: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rendered and drawn digits ``(x [n, 8, 8] in 0..1, y, kind)``; kind 0 font, 1 strokes."""
    rng = np.random.default_rng(seed)
    fonts = font_files()
    xs, ys, kinds = [], [], []
    for digit in range(10):
        for _ in range(font_per_class):
            xs.append(render_font_digit(digit, fonts, rng))
            ys.append(digit)
            kinds.append(0)
        for _ in range(stroke_per_class):
            xs.append(render_stroke_digit(digit, rng))
            ys.append(digit)
            kinds.append(1)
    return np.stack(xs), np.array(ys, np.int64), np.array(kinds, np.int8)


def train_digits() -> dict[str, np.ndarray]:
    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)  # (n, 8, 8) in 0..1
    y = data.target.astype(np.int64)
    train_idx, test_idx = split(len(y), y)
    sx, sy, _ = synthetic_digits(SEED, FONT_PER_CLASS, STROKE_PER_CLASS)
    x_train = np.concatenate([np.tile(x[train_idx], (REAL_REPEAT, 1, 1)), sx])
    y_train = np.concatenate([np.tile(y[train_idx], REAL_REPEAT), sy])

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
    clf.fit(x_train.reshape(len(x_train), 64), y_train)

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
    # A fresh rendered set (another seed): how well font-rendered and drawn digits are read.
    tx, ty, kind = synthetic_digits(SEED + 1, 30, 30)
    fresh = np.argmax(nets.digits_predict(weights, tx), axis=1) == ty
    for k, name in enumerate(("rendered", "drawn")):
        print(f"digits: {name} (fresh seed) accuracy {fresh[kind == k].mean():.4f}")
    print(f"digits: fonts used: {', '.join(Path(f).stem for f in font_files()) or 'none'}")
    return weights


#: The public-domain text the ``story`` model counts its words in.
STORY_TEXT = ROOT / "scripts" / "data" / "alice_ch1.txt"


def train_story() -> dict[str, np.ndarray]:
    """Word counts of :data:`STORY_TEXT`: unigrams and bigrams (a paragraph break is a word)."""
    words: list[str] = []
    for paragraph in STORY_TEXT.read_text(encoding="utf-8").split("\n\n"):
        if paragraph.strip():
            words.append(story.PARAGRAPH)
            words.extend(paragraph.split())
    vocab = sorted(set(words))
    index = {w: i for i, w in enumerate(vocab)}
    ids = [index[w] for w in words]
    unigram = np.bincount(ids, minlength=len(vocab)).astype(np.int32)

    def ngrams(n: int) -> np.ndarray:
        counts: dict[tuple[int, ...], int] = {}
        for i in range(len(ids) - n + 1):
            key = tuple(ids[i : i + n])
            counts[key] = counts.get(key, 0) + 1
        return np.array([(*k, c) for k, c in sorted(counts.items())], dtype=np.int32)

    weights = {
        "vocab": np.array(vocab, dtype=f"<U{max(len(w) for w in vocab)}"),
        "unigram": unigram,
        "bigram": ngrams(2),
    }
    sample = "".join(
        story.generate_words(
            story.StoryWeights(weights), "Alice", max_tokens=24, temperature=0.8, seed=SEED
        )
    )
    print(f"story: {len(vocab)} words, {len(ids)} tokens; seed {SEED}: Alice{sample}")
    return weights


TRAINERS = {"iris": train_iris, "digits": train_digits, "story": train_story}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="output directory")
    parser.add_argument(
        "models", nargs="*", choices=[[], *TRAINERS], help="models to train (default: all)"
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models or TRAINERS:
        train = TRAINERS[name]
        weights = train()
        if name == "story":
            path = out / f"{name}.npz"
            np.savez_compressed(path, **weights)
            print(f"{name}: -> {path} ({path.stat().st_size} bytes)")
            continue
        path = out / f"{name}.npz"
        np.savez_compressed(path, **weights)
        acc = float(weights["test_accuracy"])
        n_test = len(weights["test_idx"])
        size = path.stat().st_size
        print(f"{name}: held-out accuracy {acc:.4f} on {n_test} samples -> {path} ({size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
