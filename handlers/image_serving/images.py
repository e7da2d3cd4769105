"""Image decoding and preprocessing shared by the image handler, the exporter and tests.

Decoding is defensive (bombs, truncation, odd modes, EXIF rotation); preprocessing is
torchvision's ``ImageClassification`` reference transform (resize, center crop,
normalize) to within one grey level, so a model trained or exported with torchvision
weights sees the tensors it expects. Each request is decoded to uint8 pixels on its own;
the batch is normalized in one step.
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

from batchkit.errors import PayloadTooLarge
from batchkit.payloads import check_size, parse_json_object
from batchkit.protocols import InputSchema
from image_serving.errors import InvalidImage
from image_serving.reduced import DCT_SCALES, dct_scale, scaled_size

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


def open_image(raw: bytes, max_pixels: int, *, load: bool = True, reduce_for: int = 0) -> Image.Image:
    """Open an image, refusing bombs before their pixels are decoded; with ``load`` false
    only its header is read (size, mode, EXIF), to choose how to decode it. With
    ``reduce_for`` (a resize size), a JPEG is decoded at the DCT scale ``dct_scale`` picks
    for it, and the limit is on the pixels that scale decodes."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
            width, height = image.size
            if reduce_for and image.format == "JPEG":
                reduce_jpeg(image, reduce_for, max_pixels)
            if image.width * image.height > max_pixels:
                raise PayloadTooLarge(
                    f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels}"
                )
            if load:
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


def reduce_jpeg(image: Image.Image, resize_size: int, max_pixels: int) -> None:
    """Set an opened JPEG to decode at the DCT scale ``dct_scale`` picks (its size becomes
    the reduced one); 413 when even 1/8 decodes more than ``max_pixels``."""
    width, height = image.size
    scale = dct_scale(width, height, resize_size, max_pixels)
    if scale is None:
        smallest = scaled_size(width, height, DCT_SCALES[0])
        raise PayloadTooLarge(
            f"JPEG is {width}x{height}: even decoded at 1/{DCT_SCALES[0]} it is {smallest[0]}x{smallest[1]} = "
            f"{smallest[0] * smallest[1]} pixels; the limit is {max_pixels}"
        )
    if scale > 1:  # draft reduces by the most that keeps the size asked for (floor: exactly 1/scale)
        image.draft(None, (max(1, width // scale), max(1, height // scale)))


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


def crop_box(width: int, height: int, resize_size: int, crop_size: int) -> tuple[float, float, float, float]:
    """Where torchvision's resize (shorter side to ``resize_size``) then center crop would
    take its ``crop_size`` square from, in the source image's coordinates."""
    if width <= height:
        resized_width, resized_height = resize_size, int(resize_size * height / width)
    else:
        resized_width, resized_height = int(resize_size * width / height), resize_size
    left = round((resized_width - crop_size) / 2.0)
    top = round((resized_height - crop_size) / 2.0)
    scale_x, scale_y = width / resized_width, height / resized_height
    return (left * scale_x, top * scale_y, (left + crop_size) * scale_x, (top + crop_size) * scale_y)


def crop_pixels(image: Image.Image, resize_size: int, crop_size: int) -> torch.Tensor:
    """RGB image to the uint8 CHW crop the model sees: torchvision's reference resize and
    center crop, resampled in one step straight into the crop's box.

    Only the pixels the crop keeps are computed, not the whole resized picture. Each one
    has the sample position and filter support it has in the two-step transform, up to
    floating-point rounding, so the result differs from it by at most one grey level.
    """
    if crop_size > resize_size:  # the crop is padded: only the two-step transform does that
        image = tv_functional.resize(
            image, [resize_size], interpolation=InterpolationMode.BILINEAR, antialias=True
        )
        return tv_functional.pil_to_tensor(tv_functional.center_crop(image, [crop_size]))
    box = crop_box(image.width, image.height, resize_size, crop_size)
    return tv_functional.pil_to_tensor(
        image.resize((crop_size, crop_size), Image.Resampling.BILINEAR, box=box)
    )


def normalize_pixels(pixels: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 images (CHW or NCHW) to float, scaled to [0, 1] and normalized with the
    reference transform's arithmetic, in place on one new tensor; once per batch, the
    per-call overhead is paid once instead of per image."""
    shape = (3, 1, 1) if pixels.dim() == 3 else (1, 3, 1, 1)
    scaled = pixels.float().div_(255)
    mean_t = torch.tensor(mean, dtype=scaled.dtype, device=scaled.device).view(shape)
    std_t = torch.tensor(std, dtype=scaled.dtype, device=scaled.device).view(shape)
    return scaled.sub_(mean_t).div_(std_t)


def model_batch(
    pixels: Sequence[torch.Tensor], mean: Sequence[float], std: Sequence[float], device: torch.device
) -> torch.Tensor:
    """Decoded images (``decode_pixels``, or already on ``device`` from the tensor path of
    ``image_serving.decode``) to the model's normalized float batch on ``device``; uint8
    crosses to a GPU, a quarter of the bytes of float."""
    if len({p.device for p in pixels}) == 1:
        stacked = torch.stack(list(pixels))  # one copy to the device for the whole batch
    else:  # the tensor path's device crops beside CPU fallbacks
        stacked = torch.stack([p.to(device) for p in pixels])
    return normalize_pixels(stacked.to(device, non_blocking=True), mean, std)


def preprocess(
    image: Image.Image,
    resize_size: int,
    crop_size: int,
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor:
    """One RGB image to its normalized CHW float tensor (the build's calibration and
    held-out images; served images are normalized per batch by ``model_batch``)."""
    return normalize_pixels(crop_pixels(image, resize_size, crop_size), mean, std)


def decode_pixels(
    body: Any,
    *,
    resize_size: int,
    crop_size: int,
    max_image_pixels: int,
    max_body_bytes: int,
    reduced: bool = False,
) -> torch.Tensor:
    """One request body to its uint8 CHW crop; raises a RequestError when bad."""
    raw = image_bytes(body, max_body_bytes)
    return raw_pixels(
        raw, resize_size=resize_size, crop_size=crop_size, max_image_pixels=max_image_pixels, reduced=reduced
    )


def raw_pixels(
    raw: bytes, *, resize_size: int, crop_size: int, max_image_pixels: int, reduced: bool = False
) -> torch.Tensor:
    """Encoded image bytes to their uint8 CHW crop through PIL; raises a RequestError when
    bad. ``reduced``: a JPEG is decoded at a DCT scale (``image_serving.reduced``), then given
    the same resize and crop."""
    image = to_rgb(open_image(raw, max_image_pixels, reduce_for=resize_size if reduced else 0))
    return crop_pixels(image, resize_size, crop_size)
