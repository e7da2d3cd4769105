"""Reduced-size JPEG decoding: the DCT scale chosen, the pixel limit on what is decoded,
and each kind of JPEG people send decoded reduced to what the reference decoding gives."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from batchkit.config import from_mapping
from batchkit.errors import PayloadTooLarge
from image_serving.config import ImageModelConfig, ReducedDecodeGate
from image_serving.decode import DecodePool, ImageDecoder, tensor_decodable
from image_serving.errors import InvalidImage
from image_serving.images import open_image, raw_pixels
from image_serving.reduced import dct_scale, reduced_decode_enabled, scaled_size
from tests.conftest import tiny_image_handler
from tsbatch.kinds.image.examples import jpeg, photo

LIMIT = 40_000_000
CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("size", "scale"),
    [
        ((640, 480), 1),  # shorter side below 2 x 512: no reduction
        ((1920, 1080), 2),  # 1080 / 2 = 540 >= 512
        ((4032, 3024), 4),  # 756 at 1/4; 378 at 1/8 would be too few
        ((3024, 4032), 4),  # portrait: the same
        ((8000, 6000), 8),  # 48 MP: 750 at 1/8
        ((4096, 4096), 8),  # exactly at the margin: decoded 512
        ((4087, 4087), 4),  # 511 at 1/8: one short
    ],
)
def test_the_scale_keeps_twice_the_resize_size(size: tuple[int, int], scale: int) -> None:
    assert dct_scale(*size, 256, LIMIT) == scale
    assert min(scaled_size(*size, scale)) >= 512 or scale == 1


def test_the_limit_is_on_the_pixels_decoded() -> None:
    assert dct_scale(8000, 6000, 256, LIMIT) == 8  # 48 MP: 0.75 MP decoded
    assert dct_scale(80_000, 60_000, 256, LIMIT) is None  # 75 MP even at 1/8
    # Too elongated to be sharp within the limit: reduced further, down to what fits.
    assert dct_scale(100_000, 1000, 256, 20_000_000) == 4  # 1/2 would decode 25 MP
    assert dct_scale(30_000, 2000, 256, 20_000_000) == 2


def test_the_setting_and_the_build_s_gate() -> None:
    passed, failed = ReducedDecodeGate(passed=True), ReducedDecodeGate()
    assert reduced_decode_enabled("auto", passed) and not reduced_decode_enabled("auto", failed)
    assert reduced_decode_enabled("on", failed) and not reduced_decode_enabled("off", passed)
    with pytest.raises(ValueError, match="reduced_decode must be one of"):
        reduced_decode_enabled("yes", passed)


def crop(raw: bytes, reduced: bool, limit: int = LIMIT) -> torch.Tensor:
    return raw_pixels(raw, resize_size=256, crop_size=224, max_image_pixels=limit, reduced=reduced)


def rotated(image: Image.Image, orientation: int) -> bytes:
    exif = Image.Image().getexif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90, exif=exif)
    return buffer.getvalue()


PHOTO = photo(0, 2400, 1800)
VARIANTS = {
    "plain": jpeg(PHOTO),
    "progressive": jpeg(PHOTO, progressive=True),
    "grey": jpeg(PHOTO.convert("L")),
    "cmyk": jpeg(PHOTO.convert("CMYK")),
    # Stored sideways, shown upright: the transposed picture is what both decodings crop.
    "exif-rotated": rotated(PHOTO.transpose(Image.Transpose.ROTATE_90), 6),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_kind_of_jpeg_decodes_reduced_close_to_the_reference(name: str) -> None:
    raw = VARIANTS[name]
    assert sorted(open_image(raw, LIMIT, load=False, reduce_for=256).size) == [900, 1200]  # at 1/2
    reference, reduced = crop(raw, reduced=False), crop(raw, reduced=True)
    assert reduced.shape == reference.shape == (3, 224, 224)
    difference = (reduced.float() - reference.float()).abs()
    assert float(difference.mean()) < 2.0, name  # grey levels: the same picture, not a shifted one
    if name == "exif-rotated":
        upright = crop(VARIANTS["plain"], reduced=True)
        assert float((reduced.float() - upright.float()).abs().mean()) < 2.0


def test_a_48_megapixel_jpeg_decodes_at_one_eighth_and_a_bigger_bomb_gets_413() -> None:
    big = jpeg(Image.new("RGB", (8000, 6000), (90, 140, 200)))
    assert open_image(big, LIMIT, load=False, reduce_for=256).size == (1000, 750)
    assert crop(big, reduced=True).shape == (3, 224, 224)
    with pytest.raises(PayloadTooLarge, match="the limit is 40000000"):
        crop(big, reduced=False)  # the reference decodes every pixel: over the limit
    with pytest.raises(PayloadTooLarge, match="even decoded at 1/8"):
        crop(big, reduced=True, limit=500_000)


def test_a_non_jpeg_bomb_still_gets_413() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (3000, 2000)).save(buffer, format="PNG")
    with pytest.raises(PayloadTooLarge, match="3000x2000"):
        crop(buffer.getvalue(), reduced=True, limit=5_000_000)


def test_a_truncated_jpeg_is_a_clear_400_reduced_too() -> None:
    raw = VARIANTS["plain"]
    with pytest.raises(InvalidImage, match="truncated or corrupt"):
        crop(raw[: len(raw) // 3], reduced=True)


def test_which_jpegs_the_tensor_path_leaves_to_reduced_decoding() -> None:
    small, large = jpeg(photo(1, 640, 480)), VARIANTS["plain"]
    assert tensor_decodable(small, LIMIT, reduce_for=256)  # nothing to reduce
    assert not tensor_decodable(large, LIMIT, reduce_for=256)  # on a CPU: PIL decodes it at 1/2
    assert tensor_decodable(large, LIMIT, reduce_for=256, on_gpu=True)  # nvJPEG, then resampled there
    assert not tensor_decodable(large, 1_000_000, reduce_for=256, on_gpu=True)  # over the limit: PIL reduces
    with pytest.raises(PayloadTooLarge):
        tensor_decodable(large, 1_000_000)  # reduced decoding off: the limit is the full size


def decoder_config(**overrides: object) -> ImageModelConfig:
    values = {
        **tiny_image_handler(),
        "resize_size": 256,
        "crop_size": 224,
        "max_image_pixels": LIMIT,
        **overrides,
    }
    return from_mapping(ImageModelConfig, values)


def test_the_tensor_path_decodes_large_jpegs_in_one_batched_call_as_the_pil_path_does() -> None:
    """What a GPU runs (one ``decode_jpeg`` call for the batch, the resample where the pixels
    are), forced on the CPU: one decode thread makes the CPU's share the whole batch."""
    bodies = [
        jpeg(photo(index, *size)) for index, size in enumerate([(1920, 1080), (4032, 3024), (1080, 1920)])
    ]
    off = decoder_config(reduced_decode="off")
    tensor = ImageDecoder(off, CPU, "tensor", DecodePool(1))
    assert all(tensor_decodable(body, off.max_image_pixels) for body in bodies)
    crops = tensor.decode_batch(bodies)
    reference = ImageDecoder(off, CPU, "pil", DecodePool(1)).decode_batch(bodies)
    for ours, theirs in zip(crops, reference, strict=True):
        assert isinstance(ours, torch.Tensor) and ours.shape == (3, 224, 224)
        assert int((ours.int() - theirs.int()).abs().max()) <= 2  # libjpeg both ways; two resamplers
    # Reduced decoding on: on a CPU the tensor path leaves what a DCT scale shrinks to PIL.
    on = decoder_config(reduced_decode="on")
    reduced = ImageDecoder(on, CPU, "tensor", DecodePool(1)).decode_batch(bodies)
    pil_reduced = ImageDecoder(on, CPU, "pil", DecodePool(1)).decode_batch(bodies)
    assert all(torch.equal(a, b) for a, b in zip(reduced, pil_reduced, strict=True))
