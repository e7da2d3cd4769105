"""The synthetic pictures: digits dark on light as the model was trained, photos in colour, bodies that decode."""

from __future__ import annotations

import io
import random
import sys

import numpy as np
import pytest
from PIL import Image

from tsbatch.kinds.image import pictures


def is_dark_on_light(image: Image.Image) -> bool:
    grey = np.asarray(image.convert("L"), dtype=float)
    return grey.min() < 100 and np.median(grey) > 150


def test_handwritten_digits_are_distinct_dark_on_light_and_seeded() -> None:
    digits = pictures.handwritten_digits(12, size=64, seed=3)
    assert [d.size for d in digits] == [(64, 64)] * 12 and all(d.mode == "RGB" for d in digits)
    assert len({d.tobytes() for d in digits}) == 12
    assert all(is_dark_on_light(d) for d in digits)
    assert [d.tobytes() for d in pictures.handwritten_digits(12, size=64, seed=3)] == [
        d.tobytes() for d in digits
    ]


def test_handwritten_digits_are_drawn_where_scikit_learn_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # the import now raises ImportError
    digits = pictures.handwritten_digits(4, size=48)
    assert [d.size for d in digits] == [(48, 48)] * 4
    assert all(is_dark_on_light(d) for d in digits)


def test_ink_becomes_dark_on_white() -> None:
    ink = np.zeros((1, 8, 8))
    ink[0, 2:6, 3] = 16
    (picture,) = pictures.ink_pictures(ink)
    grey = np.asarray(picture.convert("L"))
    assert grey[0, 0] == 255 and grey[3, 3] == 0


def test_encoded_pictures_have_the_asked_sizes_format_and_kind() -> None:
    sizes = [(40, 30), (64, 64)]
    digits = [
        Image.open(io.BytesIO(body)) for body in pictures.encoded_pictures("digit", sizes, "PNG", seed=1)
    ]
    photos = [
        Image.open(io.BytesIO(body)) for body in pictures.encoded_pictures("photo", sizes, "JPEG", seed=1)
    ]
    assert [d.size for d in digits] == [p.size for p in photos] == sizes
    assert {d.format for d in digits} == {"PNG"} and {p.format for p in photos} == {"JPEG"}
    assert all(is_dark_on_light(d) for d in digits)
    colours = np.asarray(photos[1].convert("RGB"), dtype=float)
    assert np.abs(colours[..., 0] - colours[..., 1]).mean() > 5  # photo-like: not grey


def test_encode_round_trips_every_upload_format() -> None:
    picture = pictures.photo_like(random.Random(0), 50, 40)
    for fmt in ("PNG", "JPEG", "WEBP"):
        decoded = Image.open(io.BytesIO(pictures.encode(picture, fmt)))
        assert decoded.format == fmt and decoded.size == (50, 40)
