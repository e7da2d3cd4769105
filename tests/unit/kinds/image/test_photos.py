"""The real photos: the requested sizes, distinct, seeded, and real JPEG bodies."""

from __future__ import annotations

import io

from PIL import Image

from tsbatch.kinds.image import photos


def test_photos_have_the_requested_size_and_differ() -> None:
    bodies = photos.photo_jpegs(640, 480, count=4, seed=1)
    assert len(set(bodies)) == 4
    for body in bodies:
        with Image.open(io.BytesIO(body)) as image:
            assert (image.format, image.size, image.mode) == ("JPEG", (640, 480), "RGB")
    assert photos.photo_jpegs(640, 480, count=4, seed=1) == bodies


def test_varied_photos_span_aspects_and_sizes() -> None:
    images = photos.varied_photos(10, seed=2)
    aspects = {round(image.width / image.height, 2) for image in images}
    assert len(aspects) >= 4
    assert all(0.25e6 <= image.width * image.height <= 2.1e6 for image in images)


def test_camera_sizes_are_named_by_their_pixels() -> None:
    assert all(name == f"{w}x{h}" for name, (w, h) in photos.PHOTO_SIZES.items())
    assert photos.PHOTO_SIZES["4032x3024"] == (4032, 3024)
