"""Reduced-size JPEG decoding: libjpeg's DCT scaling (1/2, 1/4, 1/8; PIL's ``Image.draft``)
picks a smaller picture straight out of the compressed data, several times faster than
decoding every pixel of a camera photo, and the reference resize then runs on it.

The scale keeps the decoded picture's shorter side at least ``SHARPNESS_MARGIN`` times the
resize size: at one time the DCT's box-like reduction leaves the antialiased resample
almost nothing to do and a real ImageNet classifier changes its top-1 on 2 of 64 real
photos; at twice it agrees on all of them (the build checks each model,
``tsbatch.kinds.image.decode_gate``). The image-bomb limit is on the pixels decoded, so a
48 MP photo decoded at 1/8 is served while a JPEG over the limit even at 1/8 is not.
"""

from __future__ import annotations

from image_serving.config import ReducedDecodeGate

# The worker key's values (config.properties reducedDecode): auto follows the build's gate.
REDUCED_DECODE = ("auto", "on", "off")
DCT_SCALES = (8, 4, 2, 1)  # what libjpeg can reduce by, most first
SHARPNESS_MARGIN = 2  # decoded shorter side >= this x the resize size


def scaled_size(width: int, height: int, scale: int) -> tuple[int, int]:
    """The size libjpeg decodes a ``width`` x ``height`` JPEG to at 1/``scale`` (rounded up)."""
    return -(-width // scale), -(-height // scale)


def dct_scale(width: int, height: int, resize_size: int, max_pixels: int) -> int | None:
    """How much to reduce a JPEG by: the most that keeps its shorter side at least
    ``SHARPNESS_MARGIN`` x ``resize_size``, reduced further where that would decode more
    than ``max_pixels``; None when even 1/8 would (the 413)."""
    least = SHARPNESS_MARGIN * resize_size
    fitting = [s for s in DCT_SCALES if _pixels(scaled_size(width, height, s)) <= max_pixels]
    sharp = [s for s in fitting if min(scaled_size(width, height, s)) >= least]
    if sharp:
        return sharp[0]
    return fitting[-1] if fitting else None


def _pixels(size: tuple[int, int]) -> int:
    return size[0] * size[1]


def reduced_decode_enabled(setting: str, gate: ReducedDecodeGate) -> bool:
    """Whether a worker decodes JPEGs reduced: ``on``/``off`` as set; ``auto`` only when the
    build's gate passed for this archive (``gate.passed``; archives built before it: off)."""
    if setting not in REDUCED_DECODE:
        raise ValueError(f"reduced_decode must be one of {REDUCED_DECODE}, got {setting!r}")
    return setting == "on" or (setting == "auto" and gate.passed)
