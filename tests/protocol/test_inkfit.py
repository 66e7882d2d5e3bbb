"""fit_ink: polarity, crop to the ink, pad keeping the aspect, area resize, stretch (pure NumPy)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from nbinfer.errors import InvalidInputError
from nbinfer.protocol.inkfit import area_resize, fit_ink, fit_ink_image, gray_pixels


def _glyph() -> np.ndarray:
    """A 20 x 12 bright 'L' shape (white ink, black ground)."""
    g = np.zeros((20, 12), np.uint8)
    g[:, :4] = 255
    g[-4:, :] = 255
    return g


def _on_canvas(glyph: np.ndarray, shape: tuple[int, int], at: tuple[int, int]) -> np.ndarray:
    canvas = np.zeros(shape, np.uint8)
    canvas[at[0] : at[0] + glyph.shape[0], at[1] : at[1] + glyph.shape[1]] = glyph
    return canvas


def test_dark_ink_on_paper_fits_like_bright_ink_on_black() -> None:
    bright = _on_canvas(_glyph(), (60, 50), (20, 10))
    np.testing.assert_array_equal(fit_ink(255 - bright, (8, 8)), fit_ink(bright, (8, 8)))


def test_where_the_glyph_sits_and_how_big_the_canvas_is_do_not_matter() -> None:
    corner = fit_ink(_on_canvas(_glyph(), (100, 100), (0, 80)), (8, 8))
    middle = fit_ink(_on_canvas(_glyph(), (40, 40), (10, 14)), (8, 8))
    np.testing.assert_array_equal(corner, middle)


def test_the_longer_side_fills_the_box_and_the_aspect_is_kept() -> None:
    # 20 x 12 -> 8 rows x 4.8 columns, centred: columns 0 and 7 stay empty, every row has ink.
    out = fit_ink(_on_canvas(_glyph(), (64, 64), (5, 30)), (8, 8))
    assert out.dtype == np.uint8 and out.shape == (8, 8)
    assert (out.max(axis=1) > 0).all()
    assert out[:, 0].max() == 0 and out[:, 7].max() == 0
    assert out.max() == 255  # stretched: the strongest pixel is full ink
    # the "L": its stem on the left half, its foot along the bottom row
    assert out[:4, 1:4].mean() > out[:4, 4:7].mean() and out[7, 2:6].min() > 100


def test_a_margin_leaves_an_empty_border() -> None:
    out = fit_ink(_on_canvas(_glyph(), (64, 64), (5, 30)), (16, 16), margin=0.125)
    assert out[:2].max() == 0 and out[-2:].max() == 0 and out[2].max() > 0


def test_area_resize_averages_blocks_as_load_digits_did() -> None:
    # scikit-learn's 8x8 digits count the ink of 4x4 blocks of a 32x32 bitmap.
    bitmap = np.random.default_rng(0).integers(0, 2, (32, 32)).astype(np.float32)
    blocks = bitmap.reshape(8, 4, 8, 4).mean(axis=(1, 3))
    np.testing.assert_allclose(area_resize(bitmap, (8, 8)), blocks, atol=1e-6)


def test_an_image_at_the_models_size_is_taken_as_prepared() -> None:
    digit = np.random.default_rng(1).integers(0, 256, (8, 8)).astype(np.uint8)
    np.testing.assert_array_equal(fit_ink(digit, (8, 8)), digit)


def test_a_flat_image_is_plainly_resized() -> None:
    np.testing.assert_array_equal(fit_ink(np.full((30, 20), 200, np.uint8), (8, 8)), 200)
    np.testing.assert_array_equal(fit_ink(np.zeros((28, 28), np.uint8), (8, 8)), 0)


def test_strokes_on_a_transparent_canvas_are_ink_whatever_their_colour() -> None:
    for colour in ((0, 0, 0), (255, 255, 255), (200, 30, 30)):
        sketch = Image.new("RGBA", (80, 80), (0, 0, 0, 0))
        ImageDraw.Draw(sketch).line([(40, 10), (40, 70), (60, 70)], fill=(*colour, 255), width=8)
        plain = Image.new("L", (80, 80), 0)
        ImageDraw.Draw(plain).line([(40, 10), (40, 70), (60, 70)], fill=255, width=8)
        fitted, expected = fit_ink_image(sketch, (8, 8)), fit_ink_image(plain, (8, 8))
        assert np.abs(fitted.astype(int) - expected.astype(int)).max() <= 2, colour


def test_rgb_and_palette_images_become_gray_by_luma() -> None:
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[..., 1] = 100
    np.testing.assert_allclose(gray_pixels(rgb), 58.7, atol=1e-3)
    palette = Image.fromarray(_on_canvas(_glyph(), (40, 40), (10, 14))).convert("P")
    np.testing.assert_array_equal(
        fit_ink_image(palette, (8, 8)), fit_ink(_on_canvas(_glyph(), (40, 40), (10, 14)), (8, 8))
    )


def test_bad_images_boxes_and_margins_are_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match=r"H x W or H x W x C.*\[2, 3, 4, 5\]"):
        fit_ink(np.zeros((2, 3, 4, 5), np.uint8), (8, 8))
    with pytest.raises(InvalidInputError, match="non-empty numbers"):
        fit_ink(np.array([["a"]]), (8, 8))
    with pytest.raises(InvalidInputError, match="must be positive"):
        fit_ink(np.zeros((9, 9), np.uint8), (0, 8))
    with pytest.raises(InvalidInputError, match=r"margin must be in \[0, 0.5\)"):
        fit_ink(np.zeros((9, 9), np.uint8), (8, 8), margin=0.5)
