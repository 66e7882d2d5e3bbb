"""session.classify against the embedded server: held-out digits, encoded bytes, layouts, grid."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import struct
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from nbinfer import AsyncClient
from nbinfer.errors import InvalidInputError
from nbinfer.interop import images as images_module
from nbinfer.interop.image_frame import ClassificationFrame
from nbinfer.interop.images import (
    aclassify_images,
    expand_images,
    ovms_input,
    pixels,
    plan_images,
)
from nbinfer.protocol import grpc as pgrpc
from nbinfer.protocol import rest
from nbinfer.protocol.types import InferRequest, ModelMetadata, TensorSpec
from nbinfer.server.demo.nets import load_weights
from nbinfer.server.model import Model
from nbinfer.session import Session

# scikit-learn's digits, imported by the fixture: at collection it would cost every pytest
# process (each xdist worker collects the whole suite) over a second of CPU
if importlib.util.find_spec("sklearn") is None:
    pytest.skip("could not import 'sklearn.datasets'", allow_module_level=True)


@pytest.fixture(scope="module")
def digits() -> Any:
    from sklearn import datasets

    return datasets.load_digits()


@pytest.fixture(scope="module")
def held_out(digits: Any) -> tuple[np.ndarray, np.ndarray]:
    """The images the demo model did not train on (the split stored with its weights), 0..255."""
    idx = load_weights("digits")["test_idx"]
    images = (digits.images[idx] * 255.0 / 16.0).round().astype(np.uint8)
    return images, digits.target[idx]


@pytest.fixture(scope="module")
def png_dir(tmp_path_factory: pytest.TempPathFactory, held_out: Any) -> Path:
    """Held-out digits as 8x8 grayscale PNG files (what load_digits holds, as image files)."""
    folder = tmp_path_factory.mktemp("digits")
    images, targets = held_out
    for i, (img, target) in enumerate(zip(images, targets, strict=True)):
        Image.fromarray(img).save(folder / f"{i:04d}_{target}.png")
    return folder


def _truth(paths: pd.Series) -> np.ndarray:
    return np.array([int(Path(p).stem.split("_")[1]) for p in paths])


def _top1_accuracy(frame: pd.DataFrame, truth: np.ndarray) -> float:
    top = frame[frame["rank"] == 1]
    return float((top["label"].astype(int).to_numpy() == truth).mean())


@pytest.fixture(scope="module", params=["http", "grpc"])
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    with Session(device="cpu", protocol=request.param) as s:
        yield s


def test_classify_held_out_digit_files_reaches_95_percent(session: Session, png_dir: Path) -> None:
    frame = session.classify("digits", str(png_dir / "*.png"), top_k=3, progress=False)
    assert isinstance(frame, ClassificationFrame)
    assert list(frame.columns) == ["image", "rank", "label", "score", "class"]
    assert len(frame) == 3 * 540
    top = frame[frame["rank"] == 1]
    assert _top1_accuracy(frame, _truth(top["image"])) >= 0.95
    # ranks 1..3 per image, best first
    scores = frame["score"].to_numpy().reshape(-1, 3)
    assert (np.diff(scores, axis=1) <= 0).all()
    assert frame["rank"].tolist()[:6] == [1, 2, 3, 1, 2, 3]


def test_classify_arrays_matches_the_model_on_the_raw_digits(
    session: Session, held_out: Any
) -> None:
    images, targets = held_out
    frame = session.classify("digits", images, top_k=1)
    assert frame["image"].tolist() == list(range(len(images)))
    probs = session.client.infer("digits", {"input": images / np.float32(255)}).as_numpy(
        "probabilities"
    )
    np.testing.assert_array_equal(frame["class"].to_numpy(), probs.argmax(axis=1))
    assert _top1_accuracy(frame, targets) >= 0.95


def test_encoded_png_bytes_are_decoded_by_the_server(session: Session, png_dir: Path) -> None:
    frame = session.classify("digits_encoded", png_dir, top_k=2)  # a directory
    top = frame[frame["rank"] == 1]
    assert _top1_accuracy(frame, _truth(top["image"])) >= 0.95


def test_encoded_and_pixel_paths_agree_on_jpeg_bytes(session: Session, held_out: Any) -> None:
    images, _ = held_out
    blobs = []
    for img in images[:40]:
        buf = io.BytesIO()
        Image.fromarray(img).resize((64, 64)).save(buf, format="JPEG", quality=95)
        blobs.append(buf.getvalue())
    pixels_side = session.classify("digits", blobs, top_k=1)
    server_side = session.classify("digits_encoded", blobs, top_k=1)
    agree = (pixels_side["class"].to_numpy() == server_side["class"].to_numpy()).mean()
    assert agree >= 0.95  # JPEG draft decoding on the client may differ in a pixel or two


@pytest.mark.parametrize("batch_size", [None, 1])  # gRPC: 1 image = OVMS's unprefixed raw entry
def test_encoded_images_in_ovms_form_classify_as_in_tritons(
    session: Session, png_dir: Path, batch_size: int | None
) -> None:
    paths = sorted(png_dir.glob("*.png"))[: 100 if batch_size is None else 12]
    triton = session.classify("digits_encoded", paths, top_k=2, batch_size=batch_size)
    ovms = session.classify("digits_encoded", paths, top_k=2, batch_size=batch_size, encoded="ovms")
    pd.testing.assert_frame_equal(pd.DataFrame(ovms), pd.DataFrame(triton))
    top = ovms[ovms["rank"] == 1]
    assert _top1_accuracy(ovms, _truth(top["image"])) >= 0.9


def test_aclassify_images_sends_the_ovms_form_too(session: Session, png_dir: Path) -> None:
    blobs = [p.read_bytes() for p in sorted(png_dir.glob("*.png"))[:20]]

    async def main() -> pd.DataFrame:
        async with AsyncClient(
            session.url, protocol=session.protocol, auth=session.token
        ) as client:
            meta = await client.get_model_metadata("digits_encoded")

            async def infer(inputs: Any, outputs: Any) -> Any:
                return await client.infer("digits_encoded", inputs, outputs=outputs)

            return await aclassify_images(infer, meta, blobs, top_k=1, encoded="OVMS")

    frame = asyncio.run(main())
    expected = session.classify("digits_encoded", blobs, top_k=1)
    assert frame["class"].tolist() == expected["class"].tolist()


_IMAGES = [b"\xff\xd8\xff\xe0" + bytes(range(200)), b"\x89PNG\r\n\x1a\n" + b"\x00" * 45]


def test_ovms_form_over_http_is_the_images_back_to_back_with_their_sizes() -> None:
    data = np.empty(2, dtype=object)
    data[:] = _IMAGES
    request = InferRequest([ovms_input("image", data)])
    body, header_length = rest.encode_request(request)
    assert header_length is not None
    (tensor,) = json.loads(body[:header_length])["inputs"]
    assert tensor["parameters"] == {"binary_data_size": f"{len(_IMAGES[0])},{len(_IMAGES[1])}"}
    assert body[header_length:] == b"".join(_IMAGES)  # no 4-byte length prefixes
    decoded = rest.decode_request(body, header_length).inputs[0].data
    assert decoded is not None and list(decoded) == _IMAGES


def test_ovms_form_over_grpc_sends_one_image_as_one_unprefixed_raw_entry() -> None:
    one = np.empty(1, dtype=object)
    one[:] = _IMAGES[:1]
    msg = pgrpc.request_to_proto(InferRequest([ovms_input("image", one)], model_name="m"))
    assert list(msg.raw_input_contents) == [_IMAGES[0]]
    assert "binary_data_size" not in msg.inputs[0].parameters  # a REST parameter only
    two = np.empty(2, dtype=object)
    two[:] = _IMAGES
    msg = pgrpc.request_to_proto(InferRequest([ovms_input("image", two)], model_name="m"))
    prefixed = b"".join(struct.pack("<I", len(e)) + e for e in _IMAGES)
    assert list(msg.raw_input_contents) == [prefixed]  # OVMS reads raw batches prefixed


def test_unknown_encoded_form_is_invalid_input(session: Session) -> None:
    with pytest.raises(
        InvalidInputError, match=r"unknown encoded form 'kserve'; known: triton, ovms"
    ):
        session.classify("digits_encoded", [_IMAGES[1]], encoded="kserve")


def test_server_and_local_top_k_agree(session: Session, held_out: Any) -> None:
    images, _ = held_out
    remote = session.classify("digits", images[:70], top_k=4, server_topk=True)
    local = session.classify("digits", images[:70], top_k=4, server_topk=False)
    pd.testing.assert_frame_equal(
        pd.DataFrame(remote[["image", "rank", "label", "class"]]),
        pd.DataFrame(local[["image", "rank", "label", "class"]]),
    )
    np.testing.assert_allclose(remote["score"], local["score"], atol=1e-5)


def test_mixed_sources_keep_their_keys(session: Session, png_dir: Path, held_out: Any) -> None:
    images, targets = held_out
    path = sorted(png_dir.glob("*.png"))[0]
    frame = session.classify(
        "digits",
        [str(path), Image.fromarray(images[1]), images[2], path.read_bytes()],
        top_k=1,
    )
    assert frame["image"].tolist() == [str(path), 1, 2, 3]
    # the file is held-out image 0; its bytes are the same image again
    assert frame["label"].tolist() == [str(t) for t in targets[[0, 1, 2, 0]]]


def test_labels_file_overrides_the_models_labels(session: Session, tmp_path: Path) -> None:
    names = [f"digit {i}" for i in range(10)]
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(names) + "\n")
    img = np.zeros((8, 8), dtype=np.uint8)
    frame = session.classify("digits", img, top_k=10, labels=labels)
    assert frame["label"].tolist() == [names[c] for c in frame["class"]]
    with pytest.raises(InvalidInputError, match="labels file") as info:
        session.classify("digits", img, labels=tmp_path / "missing.txt")
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_rgb_nchw_model_gets_batches_within_max_batch_size(session: Session) -> None:
    class Brightest(Model):
        """Scores = mean of each channel; images arrive as UINT8 NCHW 3x6x5."""

        name = "brightest_channel"
        inputs = (("x", "UINT8", [3, 6, 5]),)
        outputs = (("scores", "FP32", [3]),)
        max_batch_size = 4
        labels = ("red", "green", "blue")

        def predict(self, inputs: dict[str, Any], context: Any) -> Any:
            return inputs["x"].astype(np.float32).mean(axis=(2, 3))

    session.serve(Brightest())  # runs in the server process
    colours = [(250, 10, 10), (10, 250, 10), (10, 10, 250)] * 3
    images = [Image.new("RGB", (40, 30), c) for c in colours]
    frame = session.classify("brightest_channel", images, top_k=1)
    assert frame["label"].tolist() == ["red", "green", "blue"] * 3
    stats = session.stats("brightest_channel").iloc[0]
    assert (stats["inference_count"], stats["execution_count"]) == (9, 3)  # 4 + 4 + 1


def test_threaded_decoding_gives_the_same_frame(
    session: Session, png_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(str(p) for p in png_dir.glob("*.png"))[:200]
    inline = session.classify("digits", files, top_k=2, batch_size=16, workers=0)
    monkeypatch.setattr(images_module, "THREADED_DECODE_FROM", 0.0)  # every image is "big"
    threaded = session.classify("digits", files, top_k=2, batch_size=16, workers=3)
    pd.testing.assert_frame_equal(pd.DataFrame(inline), pd.DataFrame(threaded))


def test_aclassify_matches_classify(session: Session, held_out: Any) -> None:
    images, _ = held_out
    sync = session.classify("digits", images[:100], top_k=2, batch_size=16)

    async def in_a_loop() -> pd.DataFrame:
        try:
            return await session.aclassify("digits", images[:100], top_k=2, batch_size=16)
        finally:
            # The session keeps one AsyncClient per loop and closes them in close(), after
            # asyncio.run closed this loop: their sockets would leak (ResourceWarning).
            await session._aclient().aclose()

    result = asyncio.run(in_a_loop())
    pd.testing.assert_frame_equal(pd.DataFrame(sync), pd.DataFrame(result))


def test_unreadable_inputs_fail_with_invalid_input(session: Session, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        session.classify("digits", str(tmp_path / "nope.png"))
    with pytest.raises(InvalidInputError, match="no image matches"):
        session.classify("digits", str(tmp_path / "*.png"))
    with pytest.raises(InvalidInputError, match="cannot decode"):
        session.classify("digits", b"not an image")
    with pytest.raises(InvalidInputError, match="has no input"):
        session.classify("digits", np.zeros((8, 8)), input="pixels")


# -- the grid --------------------------------------------------------------------------------


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_grid_html_shows_thumbnails_and_escapes_labels(session: Session, tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join([evil, *[str(i) for i in range(1, 10)]]))
    path = tmp_path / "<img src=x onerror=alert(2)>.png"
    Image.fromarray(np.eye(8, dtype=np.uint8) * 255).save(path)
    images = [str(path), np.zeros((8, 8), np.uint8)]
    frame = session.classify("digits", images, labels=labels, top_k=10)  # every label shows
    html = frame._repr_html_()
    assert "<script>" not in html and "<img src=x" not in html
    parser = _Collect()
    parser.feed(html)
    imgs = [attrs for tag, attrs in parser.tags if tag == "img"]
    inputs = [a for a in imgs if (a["alt"] or "").startswith("model input of")]
    assert len(imgs) == 4 and len(inputs) == 2  # each image, and in its details the model's input
    assert all((a["src"] or "").startswith("data:image/png;base64,") for a in imgs)
    assert evil in "".join(parser.text)  # shown as text, not markup
    # filtering keeps the frame type and its images
    top = frame[frame["rank"] == 1]
    assert isinstance(top, ClassificationFrame) and len(top.images) == 2
    assert top._repr_html_().count("<figure") == 2


# -- preprocessing from metadata (no server) -------------------------------------------------


def _meta(shape: list[int], datatype: str = "FP32") -> ModelMetadata:
    return ModelMetadata(
        name="m",
        inputs=[TensorSpec("x", datatype, shape)],
        outputs=[TensorSpec("y", "FP32", [-1, 10])],
    )


@pytest.mark.parametrize(
    ("shape", "config", "expected"),
    [
        ([-1, 3, 224, 224], {"max_batch_size": 8}, ("NCHW", 3, 224, 224, True)),
        ([-1, 224, 224, 3], {"max_batch_size": 8}, ("NHWC", 3, 224, 224, True)),
        ([-1, 8, 8], {}, ("NHW", 1, 8, 8, True)),
        ([1, 28, 28], {}, ("NCHW", 1, 28, 28, False)),
        ([1, 3, 32, 32], {}, ("NCHW", 3, 32, 32, True)),  # ONNX export with a fixed batch of 1
        (
            [-1, 3, 32, 3],
            {"max_batch_size": 2, "input": [{"name": "x", "format": "FORMAT_NHWC"}]},
            ("NHWC", 3, 3, 32, True),
        ),
    ],
)
def test_plan_reads_layout_size_and_batching(
    shape: list[int], config: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    plan = plan_images(_meta(shape), config)
    assert (plan.layout, plan.channels, plan.height, plan.width, plan.batched) == expected
    if shape[0] == 1 and len(shape) == 4:
        assert plan.max_batch == 1


def test_encoded_plan_sends_one_bytes_element_per_image() -> None:
    ovms = plan_images(_meta([-1, 224, 224, 3]), {"max_batch_size": 8}, encoded=True)
    assert (ovms.datatype, ovms.item_shape, ovms.batched) == ("BYTES", (), True)
    column = plan_images(_meta([-1, 1], "BYTES"), {"max_batch_size": 8})
    assert (column.encoded, column.item_shape) == (True, (1,))


def test_plan_needs_a_size_for_variable_spatial_dims() -> None:
    with pytest.raises(InvalidInputError, match="size="):
        plan_images(_meta([-1, 3, -1, -1]), {"max_batch_size": 4})
    plan = plan_images(_meta([-1, 3, -1, -1]), {"max_batch_size": 4}, size=(20, 30))
    assert plan.item_shape == (3, 20, 30)


@pytest.mark.parametrize(
    ("scaling", "value"),
    [("none", 200.0), ("unit", 200 / 255), ("inception", 200 / 127.5 - 1), ("vgg", 200 - 123.0)],
)
def test_scalings_follow_tritons_image_client(scaling: str, value: float) -> None:
    plan = plan_images(_meta([-1, 3, 4, 4]), {"max_batch_size": 2})
    batch = pixels([Image.new("RGB", (9, 9), (200, 200, 200))], plan, scaling=scaling)
    assert batch.shape == (1, 3, 4, 4) and batch.dtype == np.float32
    assert batch[0, 0, 0, 0] == pytest.approx(value, rel=1e-6)


def test_rgba_inputs_keep_the_alpha_channel() -> None:
    plan = plan_images(_meta([-1, 4, 6, 5]), {"max_batch_size": 2}, layout="NCHW")
    assert (plan.channels, plan.item_shape) == (4, (4, 6, 5))
    batch = pixels([Image.new("RGBA", (5, 6), (10, 20, 30, 40))], plan)
    assert batch.shape == (1, 4, 6, 5)
    assert batch[0, :, 0, 0].tolist() == [10.0, 20.0, 30.0, 40.0]
    with pytest.raises(InvalidInputError, match="vgg"):
        pixels([Image.new("RGBA", (6, 6))], plan, scaling="vgg")


def test_a_plan_without_a_size_keeps_each_images_own_size() -> None:
    own = images_module.ImagePlan(
        input="x",
        datatype="UINT8",
        output="y",
        layout="NHWC",
        channels=3,
        height=0,
        width=0,
        batched=True,
        max_batch=0,
        encoded=False,
        item_shape=(-1, -1, 3),
    )
    png = io.BytesIO()
    Image.new("RGB", (7, 5), (1, 2, 3)).save(png, format="PNG")
    batch = pixels([png.getvalue(), Image.new("L", (7, 5), 9)], own)
    assert batch.shape == (2, 5, 7, 3) and batch.dtype == np.uint8
    assert batch[0, 0, 0].tolist() == [1, 2, 3] and batch[1, 0, 0].tolist() == [9, 9, 9]
    with pytest.raises(InvalidInputError, match=r"differ \(4x4, 7x5\)"):
        pixels([Image.new("RGB", (7, 5)), Image.new("RGB", (4, 4))], own)


def test_unknown_options_and_scalings_are_invalid_input(session: Session) -> None:
    with pytest.raises(InvalidInputError, match=r"unknown classify option.*'topk'"):
        session.classify("digits", np.zeros((8, 8)), topk=3)
    with pytest.raises(InvalidInputError, match="unknown scaling 'unit8'"):
        session.classify("digits", np.zeros((8, 8)), scaling="unit8")


def test_user_preprocess_replaces_the_pipeline() -> None:
    plan = plan_images(_meta([-1, 8, 8]), {})
    batch = pixels(
        [Image.new("L", (3, 3), 7)],
        plan,
        preprocess=lambda im: np.full((8, 8), im.getpixel((0, 0))),
    )
    assert batch.dtype == np.float32 and (batch == 7).all()
    with pytest.raises(InvalidInputError, match="preprocess returned"):
        pixels([Image.new("L", (3, 3))], plan, preprocess=lambda im: np.zeros((4, 4)))


def test_expand_images_splits_array_batches() -> None:
    assert len(expand_images(np.zeros((5, 8, 8)))) == 5
    assert len(expand_images(np.zeros((8, 8, 3)))) == 1
    assert len(expand_images(np.zeros((2, 8, 8, 3)))) == 2
    with pytest.raises(InvalidInputError, match="cannot read an image"):
        expand_images([1.5])
