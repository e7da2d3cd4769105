"""Image decoding and preprocessing shared by the image handler, the exporter and tests.

Decoding is defensive (bombs, truncation, odd modes, EXIF rotation); preprocessing is the
same resize / center-crop / normalize sequence as torchvision's ``ImageClassification``
reference transform, so a model trained or exported with torchvision weights sees
exactly the tensors it expects.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as tv_functional

from batchkit.errors import InvalidImage, PayloadTooLarge
from batchkit.payloads import check_size, parse_json_object
from batchkit.protocols import InputSchema

SIXTEEN_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I"}
ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}
WHITE = (255, 255, 255)
IMAGE_INPUTS = InputSchema(single_key="image", list_key="images", error=InvalidImage)
CHECK_SEED = 20_240_601


def check_images(crop_size: int, count: int = 2) -> torch.Tensor:
    """The fixed inputs the build records each candidate's outputs on and every worker
    re-runs after loading (``batchkit.loader``). NumPy's generator is used because its
    stream is the same on every CPU; torch's vectorised sampler is not guaranteed to be."""
    values = np.random.default_rng(CHECK_SEED).standard_normal((count, 3, crop_size, crop_size))
    return torch.from_numpy(values.astype(np.float32))


def decode_base64(text: str) -> bytes:
    """Standard base64 as clients write it: bare, inside a data URL
    (``data:image/png;base64,...``), or wrapped in lines (RFC 2045, ``base64.encodebytes``)."""
    if text[:5].lower() == "data:":
        header, comma, text = text.partition(",")
        if not comma or not header.lower().endswith(";base64"):
            raise InvalidImage("a data URL must be base64-encoded: data:<type>;base64,<data>")
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidImage(
            f"'image' is not valid base64 (standard alphabet with padding; data URLs and line breaks are accepted): {exc}"
        ) from exc


def image_bytes(body: Any, max_body_bytes: int) -> bytes:
    """Raw image bytes from a request body: the bytes themselves or ``{"image": base64}``."""
    check_size(body, max_body_bytes)
    document = parse_json_object(body, InvalidImage)
    if document is not None:
        encoded = document.get("image")
        if not isinstance(encoded, str) or not encoded:
            raise InvalidImage(
                'JSON body must be {"image": "<base64>"} (several: {"images": [...]}, '
                'KServe {"instances": [...]} or {"inputs": [...]})'
            )
        return decode_base64(encoded)
    if isinstance(body, bytes | bytearray):
        raw = bytes(body)
    elif isinstance(body, str):
        raise InvalidImage("body is text, not an image (send image bytes or JSON with 'image')")
    else:
        raise InvalidImage(f"unsupported body of type {type(body).__name__}")
    if not raw:
        raise InvalidImage("empty request body")
    return raw


def open_image(raw: bytes, max_pixels: int) -> Image.Image:
    """Open and fully decode an image, refusing bombs before their pixels are decoded."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
            width, height = image.size
            if width * height > max_pixels:
                raise PayloadTooLarge(
                    f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels}"
                )
            image.seek(0)  # first frame of animations
            image.load()
    except PayloadTooLarge:
        raise
    except Image.DecompressionBombError as exc:
        raise PayloadTooLarge(f"image rejected as a decompression bomb: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise InvalidImage("body is not an image in a supported format") from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise InvalidImage(f"image could not be decoded (truncated or corrupt): {exc}") from exc
    return image


def to_rgb(image: Image.Image) -> Image.Image:
    """Any PIL mode to 8-bit RGB: EXIF orientation applied, alpha composited on white."""
    image = ImageOps.exif_transpose(image) or image
    mode = image.mode
    if mode in SIXTEEN_BIT_MODES or mode == "F":
        pixels = np.asarray(image, dtype=np.float64)
        peak = pixels.max() if pixels.size else 0.0
        scale = 255.0 / 65535.0 if peak > 255 else 1.0
        image = Image.fromarray(np.clip(pixels * scale, 0, 255).astype(np.uint8), mode="L")
    elif (mode == "P" and "transparency" in image.info) or mode == "PA":
        image = image.convert("RGBA")
    if image.mode in ALPHA_MODES:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (*WHITE, 255))
        image = Image.alpha_composite(background, rgba)
    if image.mode != "RGB":
        try:
            image = image.convert("RGB")
        except ValueError as exc:
            raise InvalidImage(f"cannot convert image mode {mode} to RGB") from exc
    return image


def preprocess(
    image: Image.Image,
    resize_size: int,
    crop_size: int,
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor:
    """RGB image to a normalized CHW float tensor, as torchvision's reference transform.

    Like ``ImageClassification`` given a PIL image: resize (shorter side) and crop in PIL,
    then scale to [0, 1] and normalize.
    """
    image = tv_functional.resize(
        image, [resize_size], interpolation=InterpolationMode.BILINEAR, antialias=True
    )
    image = tv_functional.center_crop(image, [crop_size])
    tensor = tv_functional.pil_to_tensor(image)
    tensor = tv_functional.convert_image_dtype(tensor, torch.float)
    return tv_functional.normalize(tensor, mean=list(mean), std=list(std))


def decode_for_model(
    body: Any,
    *,
    resize_size: int,
    crop_size: int,
    mean: Sequence[float],
    std: Sequence[float],
    max_image_pixels: int,
    max_body_bytes: int,
) -> torch.Tensor:
    """One request body to the tensor the model takes; raises a RequestError when bad."""
    raw = image_bytes(body, max_body_bytes)
    image = to_rgb(open_image(raw, max_image_pixels))
    return preprocess(image, resize_size, crop_size, mean, std)
