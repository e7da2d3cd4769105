"""Synthetic pictures that every image workload draws from (nothing is downloaded).

Digits are dark ink on a light background, as the digits model was trained: real
handwritten ones from scikit-learn's bundled set, or drawn with PIL where it is missing.
Photo-like pictures (colour gradients, seeded noise, shapes, blur) stand in for camera
images, whose decode and resize cost on the server grows with their size.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

PictureKind = Literal["digit", "photo"]
DEFAULT_QUALITY = 90  # JPEG / WebP quality when the caller does not vary it


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


def encode(image: Image.Image, fmt: str, quality: int = DEFAULT_QUALITY) -> bytes:
    """The image as a file of ``fmt`` (PNG, JPEG, WEBP): what a client uploads."""
    buffer = io.BytesIO()
    if fmt in ("JPEG", "WEBP"):
        image.save(buffer, fmt, quality=quality)
    else:
        image.save(buffer, fmt, optimize=False)
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
