"""Image decoding is defensive and preprocessing is torchvision's reference transform
(to within one grey level where it resamples straight into the crop)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from torchvision.transforms import functional as tv_functional

from batchkit.errors import PayloadTooLarge
from image_serving.errors import InvalidImage
from image_serving.images import (
    crop_pixels,
    decode_pixels,
    image_bytes,
    model_batch,
    normalize_pixels,
    open_image,
    preprocess,
    to_rgb,
)
from tests.conftest import image_bytes as make_image
from tests.fakes import bomb_png

IMAGENET = dict(resize_size=256, crop_size=224)
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# One grey level after normalization: what resampling straight into the crop may differ by.
ONE_GREY_LEVEL = 1 / (255 * min(STD)) + 1e-6


def decode(body: object, **overrides: object) -> torch.Tensor:
    options = dict(IMAGENET, max_image_pixels=50_000_000, max_body_bytes=10_000_000)
    options.update(overrides)
    return decode_pixels(body, **options)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF"])
def test_every_supported_format_decodes_to_the_model_shape(fmt: str) -> None:
    tensor = decode(make_image(fmt, size=(300, 200)))
    assert tensor.shape == (3, 224, 224) and tensor.dtype == torch.uint8


@pytest.mark.parametrize(
    ("mode", "color"),
    [
        ("RGBA", (255, 0, 0, 128)),
        ("LA", (100, 200)),
        ("P", 3),
        ("CMYK", (0, 255, 255, 0)),
        ("L", 128),
        ("1", 1),
        ("I;16", 40000),
    ],
)
def test_any_mode_becomes_rgb(mode: str, color: object) -> None:
    fmt = "TIFF" if mode in ("CMYK", "I;16") else "PNG"
    if mode == "CMYK":
        fmt = "JPEG"
    image = open_image(make_image(fmt, size=(20, 10), mode=mode, color=color), 10_000)
    rgb = to_rgb(image)
    assert rgb.mode == "RGB" and rgb.size == (20, 10)


def test_sixteen_bit_grayscale_keeps_its_brightness() -> None:
    image = Image.new("I;16", (8, 8), 65535)
    assert np.asarray(to_rgb(image)).min() == 255
    image = Image.new("I;16", (8, 8), 32768)
    assert abs(int(np.asarray(to_rgb(image))[0, 0, 0]) - 127) <= 1


def test_transparent_pixels_are_composited_on_white() -> None:
    transparent = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    assert np.asarray(to_rgb(transparent)).min() == 255


def test_exif_orientation_is_applied() -> None:
    image = Image.new("RGB", (40, 20), "blue")
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif)
    rgb = to_rgb(open_image(buffer.getvalue(), 10_000))
    assert rgb.size == (20, 40)


def test_base64_json_body_is_accepted_as_dict_or_raw_bytes() -> None:
    encoded = base64.b64encode(make_image("PNG")).decode()
    from_dict = decode({"image": encoded})
    from_bytes = decode(json.dumps({"image": encoded}).encode())
    assert torch.equal(from_dict, from_bytes)


def test_data_urls_and_mime_line_breaks_decode_to_the_same_image() -> None:
    raw = make_image("PNG")
    plain = decode({"image": base64.b64encode(raw).decode()})
    for encoded in (
        "data:image/png;base64," + base64.b64encode(raw).decode(),
        "DATA:image/png;charset=x;BASE64," + base64.b64encode(raw).decode(),
        base64.encodebytes(raw).decode(),  # RFC 2045: 76-character lines
        base64.encodebytes(raw).decode().replace("\n", "\r\n"),
    ):
        assert torch.equal(decode({"image": encoded}), plain)


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        ("data:image/png,%89PNG", "data URL must be base64-encoded"),
        ("data:image/png;base64", "data URL must be base64-encoded"),
        ("data:image/png;base64,***", "not valid base64"),
        ("aGk", "not valid base64"),
        ("aGk=-_", "not valid base64"),
    ],
)
def test_other_base64_is_still_a_clear_400(encoded: str, expected: str) -> None:
    with pytest.raises(InvalidImage) as raised:
        decode({"image": encoded})
    assert raised.value.status == 400 and expected in raised.value.message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", "empty request body"),
        (b"hello, this is text", "not an image"),
        ("a text body", "body is text"),
        ({"img": "x"}, 'JSON body must be {"image"'),
        ({"image": "***"}, "not valid base64"),
        (b'{"image": 5', "not valid JSON"),
        (12, "unsupported body"),
    ],
)
def test_bad_bodies_get_a_400_that_says_why(body: object, expected: str) -> None:
    with pytest.raises(InvalidImage) as raised:
        decode(body)
    assert raised.value.status == 400 and expected in raised.value.message


def test_truncated_jpeg_is_rejected() -> None:
    whole = make_image("JPEG", size=(256, 256), color="green")
    with pytest.raises(InvalidImage) as raised:
        decode(whole[: len(whole) // 2])
    assert "truncated or corrupt" in raised.value.message


@pytest.mark.parametrize("side", [5_000, 100_000])
def test_decompression_bomb_is_refused_with_413_before_decoding(side: int) -> None:
    with pytest.raises(PayloadTooLarge) as raised:
        decode(bomb_png(side, side), max_image_pixels=4_000_000)
    assert raised.value.status == 413


def test_oversized_body_is_refused_with_413() -> None:
    with pytest.raises(PayloadTooLarge):
        image_bytes(b"x" * 101, max_body_bytes=100)


def random_picture(size: tuple[int, int]) -> Image.Image:
    rng = np.random.default_rng(sum(size))
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


@pytest.mark.parametrize("size", [(500, 375), (224, 224), (97, 301), (1024, 50), (639, 257), (257, 256)])
def test_preprocessing_is_torchvisions_reference_transform_to_one_grey_level(size: tuple[int, int]) -> None:
    reference = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.transforms()
    image = random_picture(size)
    ours = preprocess(
        image,
        int(reference.resize_size[0]),
        int(reference.crop_size[0]),
        tuple(reference.mean),
        tuple(reference.std),
    )
    expected = reference(image)
    assert ours.shape == expected.shape
    assert float((ours - expected).abs().max()) <= ONE_GREY_LEVEL


@pytest.mark.parametrize("size", [(256, 300), (400, 256), (32, 32)])
def test_an_image_that_needs_no_resampling_is_cropped_exactly(size: tuple[int, int]) -> None:
    image = random_picture(size)
    side = min(size)
    crop = min(side, 224)
    expected = tv_functional.pil_to_tensor(tv_functional.center_crop(image, [crop]))
    assert torch.equal(crop_pixels(image, side, crop), expected)


def test_a_crop_larger_than_the_resize_is_padded_as_torchvision_does() -> None:
    image = random_picture((40, 30))
    expected = tv_functional.center_crop(tv_functional.resize(image, [24], antialias=True), [32])
    assert torch.equal(crop_pixels(image, 24, 32), tv_functional.pil_to_tensor(expected))


def test_a_batch_is_normalized_exactly_as_each_image_alone() -> None:
    pixels = [crop_pixels(random_picture((300 + i, 260)), 256, 224) for i in range(3)]
    batch = model_batch(pixels, MEAN, STD, torch.device("cpu"))
    alone = [
        tv_functional.normalize(tv_functional.convert_image_dtype(p, torch.float), list(MEAN), list(STD))
        for p in pixels
    ]
    assert batch.dtype == torch.float32 and batch.shape == (3, 3, 224, 224)
    assert torch.equal(batch, torch.stack(alone))
    assert torch.equal(normalize_pixels(pixels[0], MEAN, STD), alone[0])
