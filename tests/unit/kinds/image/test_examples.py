"""The image kind's examples: digits dark on light as the model was trained, photo-like pictures
in colour, real photos at the asked sizes, and bodies that decode, all seeded."""

from __future__ import annotations

import io
import random
import sys

import numpy as np
import pytest
from PIL import Image

from tsbatch.kinds.image import examples


def is_dark_on_light(image: Image.Image) -> bool:
    grey = np.asarray(image.convert("L"), dtype=float)
    return grey.min() < 100 and np.median(grey) > 150


def test_handwritten_digits_are_distinct_dark_on_light_and_seeded() -> None:
    digits = examples.handwritten_digits(12, size=64, seed=3)
    assert [d.size for d in digits] == [(64, 64)] * 12 and all(d.mode == "RGB" for d in digits)
    assert len({d.tobytes() for d in digits}) == 12
    assert all(is_dark_on_light(d) for d in digits)
    assert [d.tobytes() for d in examples.handwritten_digits(12, size=64, seed=3)] == [
        d.tobytes() for d in digits
    ]


def test_handwritten_digits_are_drawn_where_scikit_learn_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # the import now raises ImportError
    digits = examples.handwritten_digits(4, size=48)
    assert [d.size for d in digits] == [(48, 48)] * 4
    assert all(is_dark_on_light(d) for d in digits)


def test_ink_becomes_dark_on_white() -> None:
    ink = np.zeros((1, 8, 8))
    ink[0, 2:6, 3] = 16
    (picture,) = examples.ink_pictures(ink)
    grey = np.asarray(picture.convert("L"))
    assert grey[0, 0] == 255 and grey[3, 3] == 0


def test_encoded_pictures_have_the_asked_sizes_format_and_kind() -> None:
    sizes = [(40, 30), (64, 64)]
    digits = [
        Image.open(io.BytesIO(body)) for body in examples.encoded_pictures("digit", sizes, "PNG", seed=1)
    ]
    photos = [
        Image.open(io.BytesIO(body)) for body in examples.encoded_pictures("photo", sizes, "JPEG", seed=1)
    ]
    assert [d.size for d in digits] == [p.size for p in photos] == sizes
    assert {d.format for d in digits} == {"PNG"} and {p.format for p in photos} == {"JPEG"}
    assert all(is_dark_on_light(d) for d in digits)
    colours = np.asarray(photos[1].convert("RGB"), dtype=float)
    assert np.abs(colours[..., 0] - colours[..., 1]).mean() > 5  # photo-like: not grey


def test_encode_round_trips_every_upload_format() -> None:
    picture = examples.photo_like(random.Random(0), 50, 40)
    for fmt in ("PNG", "JPEG", "WEBP"):
        decoded = Image.open(io.BytesIO(examples.encode(picture, fmt)))
        assert decoded.format == fmt and decoded.size == (50, 40)


def test_photos_have_the_requested_size_and_differ() -> None:
    bodies = examples.photo_jpegs(640, 480, count=4, seed=1)
    assert len(set(bodies)) == 4
    for body in bodies:
        with Image.open(io.BytesIO(body)) as image:
            assert (image.format, image.size, image.mode) == ("JPEG", (640, 480), "RGB")
    assert examples.photo_jpegs(640, 480, count=4, seed=1) == bodies


def test_varied_photos_span_aspects_and_sizes() -> None:
    images = examples.varied_photos(10, seed=2)
    aspects = {round(image.width / image.height, 2) for image in images}
    assert len(aspects) >= 4
    assert all(0.25e6 <= image.width * image.height <= 2.1e6 for image in images)


def test_camera_sizes_are_named_by_their_pixels() -> None:
    assert all(name == f"{w}x{h}" for name, (w, h) in examples.PHOTO_SIZES.items())
    assert examples.PHOTO_SIZES["4032x3024"] == (4032, 3024)


def test_request_pictures_are_photo_sized_jpegs_or_small_digit_pngs() -> None:
    imagenet = [Image.open(io.BytesIO(body)) for body in examples.request_pictures(6, "imagenet")]
    digits = [Image.open(io.BytesIO(body)) for body in examples.request_pictures(6, "digits")]
    assert {i.format for i in imagenet} == {"JPEG"} and {d.format for d in digits} == {"PNG"}
    assert all(256 <= i.width <= 639 and 256 <= i.height <= 479 for i in imagenet)
    assert all(28 <= d.width == d.height <= 95 and is_dark_on_light(d) for d in digits)
    assert examples.request_pictures(6, "digits") == examples.request_pictures(6, "digits", seed=0)
    assert examples.request_pictures(6, "digits", seed=1) != examples.request_pictures(6, "digits")
