"""Real photographs at the sizes people send: scikit-learn's two bundled sample photos
(``china.jpg``, ``flower.jpg``, 640x427), cropped and resampled to a camera's size.

The synthetic pictures (``pictures``) are cheap to decode and compress unlike a camera's;
the decode-bound figures, the reduced-decoding gate and the photo benchmark use these.
Nothing is downloaded: the photos ship inside scikit-learn.
"""

from __future__ import annotations

import functools
import io
import random

import numpy as np
from PIL import Image

PHOTO_QUALITY = 90  # what a phone's camera app writes, about
# The sizes people send, by name: a thumbnail, a web picture, a video frame, a 12 MP
# phone photo, and a 48 MP one (the largest main sensors in phones).
PHOTO_SIZES: dict[str, tuple[int, int]] = {
    "224x224": (224, 224),
    "640x480": (640, 480),
    "1920x1080": (1920, 1080),
    "4032x3024": (4032, 3024),
    "8000x6000": (8000, 6000),
}


@functools.cache
def _sources() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_sample_images

    return tuple(load_sample_images().images)


def photo(index: int, width: int, height: int, seed: int = 0) -> Image.Image:
    """Photo ``index`` (alternating between the two sources) as ``width`` x ``height``: a
    seeded crop of the source with that aspect ratio, between 60% and 100% of the largest
    such crop, resampled with Lanczos (upsampled for camera sizes)."""
    sources = _sources()
    source = sources[index % len(sources)]
    rng = random.Random(seed * 1_000_003 + index)
    source_height, source_width = source.shape[:2]
    aspect = width / height
    full_width = min(source_width, round(source_height * aspect))
    scale = rng.uniform(0.6, 1.0)
    crop_width = max(16, round(full_width * scale))
    crop_height = max(16, min(source_height, round(crop_width / aspect)))
    left = rng.randint(0, source_width - crop_width)
    top = rng.randint(0, source_height - crop_height)
    crop = Image.fromarray(source[top : top + crop_height, left : left + crop_width])
    return crop.resize((width, height), Image.Resampling.LANCZOS)


def jpeg(image: Image.Image, quality: int = PHOTO_QUALITY, **options: object) -> bytes:
    """``image`` as the JPEG file a client uploads (``options``: PIL's, e.g. progressive)."""
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality, **options)
    return buffer.getvalue()


def photo_jpegs(width: int, height: int, count: int, seed: int = 0) -> list[bytes]:
    """``count`` different real photos of ``width`` x ``height`` as JPEG bodies."""
    return [jpeg(photo(index, width, height, seed)) for index in range(count)]


def varied_photos(count: int, seed: int = 0) -> list[Image.Image]:
    """``count`` real photos of varied size and aspect (portrait, landscape, square; 0.3 to
    2 megapixels): what accuracy checks compare decoding paths on."""
    rng = random.Random(seed)
    shapes = [(4, 3), (3, 4), (16, 9), (1, 1), (3, 2)]
    photos = []
    for index in range(count):
        ratio_w, ratio_h = shapes[index % len(shapes)]
        megapixels = rng.uniform(0.3, 2.0)
        height = round((megapixels * 1e6 * ratio_h / ratio_w) ** 0.5)
        photos.append(photo(index, round(height * ratio_w / ratio_h), height, seed))
    return photos
