"""The image kind's example inputs: every picture the toolkit makes comes from here.

Three sources, nothing downloaded:
- real photographs (scikit-learn's two bundled 640x427 sample photos, cropped and resampled
  to the sizes people send): what decode-bound figures, the reduced-decoding gate and the
  photo benchmarks need, since a camera's JPEG decodes like no synthetic picture;
- handwritten digits (scikit-learn's bundled set; drawn with PIL where it is missing), dark
  ink on a light background as the digits model was trained;
- photo-like pictures (colour gradients, seeded noise, shapes, blur): cheap stand-ins of any
  size and format for load pools and timing.

The load pool (``workload.image_pool``), the sweep, the gates and the benches' request
bodies (``request_pictures``) all draw from these, so one seed gives one set of bytes.
"""

from __future__ import annotations

import functools
import io
import random
from collections.abc import Sequence
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

PictureKind = Literal["digit", "photo"]
QUALITY = 90  # JPEG / WebP quality where the caller does not vary it: about what a phone's camera writes


def drawn_digit(rng: random.Random, width: int, height: int) -> Image.Image:
    """A dark digit, slightly off-centre and rotated, sometimes blurred, on a light background."""
    background = rng.randint(200, 255)
    image = Image.new("L", (width, height), background)
    draw = ImageDraw.Draw(image)
    side = min(width, height)
    font = ImageFont.load_default(size=max(8, int(side * rng.uniform(0.6, 0.9))))
    digit = str(rng.randint(0, 9))
    left, top, right, bottom = draw.textbbox((0, 0), digit, font=font)
    x = (width - (right - left)) / 2 - left + rng.uniform(-0.05, 0.05) * width
    y = (height - (bottom - top)) / 2 - top + rng.uniform(-0.05, 0.05) * height
    draw.text((x, y), digit, fill=rng.randint(0, 60), font=font, stroke_width=max(1, side // 40))
    image = image.rotate(rng.uniform(-15, 15), fillcolor=background)
    if rng.random() < 0.5:
        image = image.filter(ImageFilter.GaussianBlur(radius=side / 200))
    return image.convert("RGB")


def photo_like(rng: random.Random, width: int, height: int) -> Image.Image:
    """Smooth colour gradients with seeded noise and a few blurred ellipses."""
    channels = []
    for _ in range(3):
        gradient = Image.linear_gradient("L").rotate(rng.uniform(0, 360)).resize((width, height))
        noise = Image.frombytes(
            "L", (width, height), rng.randbytes(width * height)
        )  # seeded, unlike effect_noise
        channels.append(Image.blend(gradient, noise, rng.uniform(0.1, 0.3)))
    image = Image.merge("RGB", channels)
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(2, 6)):
        x0, y0 = rng.uniform(0, width), rng.uniform(0, height)
        x1, y1 = x0 + rng.uniform(0.1, 0.5) * width, y0 + rng.uniform(0.1, 0.5) * height
        draw.ellipse((x0, y0, x1, y1), fill=tuple(rng.randint(0, 255) for _ in range(3)))
    return image.filter(ImageFilter.GaussianBlur(radius=max(0.5, min(width, height) / 300)))


def picture(kind: PictureKind, rng: random.Random, width: int, height: int) -> Image.Image:
    return drawn_digit(rng, width, height) if kind == "digit" else photo_like(rng, width, height)


def encode(image: Image.Image, fmt: str, quality: int = QUALITY, **options: object) -> bytes:
    """The image as a file of ``fmt`` (PNG, JPEG, WEBP): what a client uploads (``options``:
    PIL's, e.g. progressive)."""
    buffer = io.BytesIO()
    if fmt in ("JPEG", "WEBP"):
        image.save(buffer, fmt, quality=quality, **options)
    else:
        image.save(buffer, fmt, optimize=False, **options)
    return buffer.getvalue()


def encoded_pictures(
    kind: PictureKind, sizes: Sequence[tuple[int, int]], fmt: str, seed: int = 0
) -> list[bytes]:
    """One picture of ``kind`` per (width, height), encoded as ``fmt``: request bodies."""
    rng = random.Random(seed)
    return [encode(picture(kind, rng, width, height), fmt) for width, height in sizes]


def ink_pictures(ink: np.ndarray) -> list[Image.Image]:
    """scikit-learn digits (8x8, ink 0..16) as dark-on-white RGB pictures."""
    pixels = (255 - np.clip(ink, 0, 16) * (255 / 16)).astype(np.uint8)
    return [Image.fromarray(p).convert("RGB") for p in pixels]


def handwritten_digits(count: int, size: int, seed: int = 0) -> list[Image.Image]:
    """``count`` different real handwritten digits of ``size`` px; drawn ones where
    scikit-learn is not installed (a bare GPU machine)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        rng = random.Random(seed)
        return [drawn_digit(rng, size, size) for _ in range(count)]
    ink = load_digits().images
    order = random.Random(seed).sample(range(len(ink)), count)
    return [image.resize((size, size), Image.Resampling.BILINEAR) for image in ink_pictures(ink[order])]


# Real photographs

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


def jpeg(image: Image.Image, quality: int = QUALITY, **options: object) -> bytes:
    """``image`` as the JPEG file a camera or phone uploads."""
    return encode(image, "JPEG", quality, **options)


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


def request_pictures(count: int, shape: str, seed: int = 0) -> list[bytes]:
    """Request bodies for a benchmark: photo-sized JPEGs (256-639 x 256-479) for an
    ImageNet-shaped model (``shape`` "imagenet"), small digit PNGs (28-95 px) for the digits model."""
    rng = random.Random(seed)
    if shape == "imagenet":
        sizes = [(rng.randint(256, 639), rng.randint(256, 479)) for _ in range(count)]
        return encoded_pictures("photo", sizes, "JPEG", seed)
    sides = [rng.randint(28, 95) for _ in range(count)]
    return encoded_pictures("digit", [(side, side) for side in sides], "PNG", seed)
