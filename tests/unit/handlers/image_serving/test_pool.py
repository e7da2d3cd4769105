"""decodeThreads auto: threads per batch from the pixels its images decode to, inline for
small pictures and side by side for big ones; a whole number still pins the pool."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest
import torch
from PIL import Image

from batchkit.config import from_mapping
from batchkit.errors import RequestError
from image_serving.config import ImageModelConfig
from image_serving.decode import ImageDecoder
from image_serving.pool import (
    AUTO,
    LARGE_PICTURE_PIXELS,
    DecodePool,
    batch_threads,
    decode_threads_problem,
    pixel_cost,
    worker_cores,
)
from tests.conftest import tiny_image_handler

CPU = torch.device("cpu")
SMALL = 224 * 224
BIG = 960 * 540  # a 1920x1080 photo decoded at 1/2


def encoded(width: int, height: int, fmt: str = "JPEG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 140, 200)).save(buffer, format=fmt)
    return buffer.getvalue()


def config(**overrides: object) -> ImageModelConfig:
    values = {
        **tiny_image_handler(),
        "resize_size": 256,
        "crop_size": 224,
        "max_image_pixels": 40_000_000,
        **overrides,
    }
    return from_mapping(ImageModelConfig, values)


def test_one_image_or_one_core_decodes_inline() -> None:
    assert batch_threads([48_000_000], 16) == 1
    assert batch_threads([BIG] * 8, 1) == 1
    assert batch_threads([], 4) == 1


def test_small_pictures_decode_inline_however_many() -> None:
    assert batch_threads([SMALL] * 32, 16) == 1
    assert batch_threads([LARGE_PICTURE_PIXELS - 1] * 8, 2) == 1
    assert batch_threads([BIG, SMALL, SMALL, SMALL, SMALL], 4) == 1  # mostly small


def test_big_pictures_decode_side_by_side_up_to_the_cores_and_the_images() -> None:
    assert batch_threads([LARGE_PICTURE_PIXELS] * 2, 2) == 2
    assert batch_threads([BIG] * 8, 2) == 2
    assert batch_threads([BIG] * 3, 16) == 3
    assert batch_threads([12_000_000, SMALL], 4) == 2


def test_the_cost_comes_from_the_header_at_the_reduced_scale() -> None:
    jpeg = encoded(1920, 1080)
    assert pixel_cost(jpeg, 40_000_000) == 1920 * 1080
    # 1/2 (shorter side >= 2 x 256): the pixels decoded, and a quarter of those skipped
    assert pixel_cost(jpeg, 40_000_000, reduce_for=256) == 960 * 540 + (1920 * 1080 - 960 * 540) // 4
    assert pixel_cost(encoded(1920, 1080, "PNG"), 40_000_000, reduce_for=256) == 1920 * 1080
    assert pixel_cost(encoded(224, 224), 40_000_000, reduce_for=256) == 224 * 224  # not reduced
    # 12 MP for a 32x32 model: 1/8 decodes only 504x378, but entropy-decodes every block
    assert pixel_cost(encoded(4032, 3024), 40_000_000, reduce_for=32) > 4 * LARGE_PICTURE_PIXELS
    assert pixel_cost(b"not an image", 40_000_000) == 0
    assert pixel_cost(encoded(1000, 1000, "PNG"), 10_000) == 0  # its 413 is its own


def test_the_setting_is_auto_or_a_whole_number() -> None:
    assert decode_threads_problem(AUTO) is None and decode_threads_problem(3) is None
    for wrong in (0, True, "2", "fast", 1.5):
        assert "auto or a whole number of at least 1" in str(decode_threads_problem(wrong))
    with pytest.raises(ValueError, match="at least 1"):
        DecodePool("many")


def test_auto_takes_the_cores_this_process_may_use(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert worker_cores(tmp_path / "absent") == affinity
    quota = tmp_path / "cpu.max"
    quota.write_text("max 100000\n")
    assert worker_cores(quota) == affinity
    quota.write_text("150000 100000\n")  # a container limited to 1.5 CPUs
    assert worker_cores(quota) == min(affinity, 2)
    quota.write_text("50000 100000\n")
    assert worker_cores(quota) == 1
    assert DecodePool(AUTO).limit == worker_cores()
    assert DecodePool(3, cores=16).limit == 3  # a whole number pins the pool


def test_a_fixed_pool_ignores_what_the_batch_holds() -> None:
    assert DecodePool(1).threads_for([BIG] * 8) == 1
    assert DecodePool(2).threads_for([SMALL] * 8) == 2
    assert DecodePool(AUTO, cores=2).threads_for([SMALL] * 8) == 1


def record_threads(decoder: ImageDecoder) -> set[int]:
    """The threads the decoder's PIL crops run on, from now on."""
    seen: set[int] = set()
    crop = decoder.raw_crop

    def recorded(raw: bytes) -> torch.Tensor:
        seen.add(threading.get_ident())
        return crop(raw)

    decoder.raw_crop = recorded  # type: ignore[method-assign]
    return seen


def test_auto_decodes_big_photos_on_the_pool_and_small_ones_inline() -> None:
    """The pool branch forced on any host: two cores given, big photos in the batch."""
    decoder = ImageDecoder(config(decode_threads=AUTO), CPU, "pil", DecodePool(AUTO, cores=2))
    seen = record_threads(decoder)
    big = decoder.decode_batch([encoded(1600, 1200), encoded(1200, 1600), b"broken"])
    assert [tuple(crop.shape) for crop in big[:2]] == [(3, 224, 224)] * 2
    assert isinstance(big[2], RequestError) and big[2].code == "invalid_image"
    assert threading.get_ident() not in seen
    seen.clear()
    small = decoder.decode_batch([encoded(224, 224)] * 4)
    assert all(tuple(crop.shape) == (3, 224, 224) for crop in small)
    assert seen == {threading.get_ident()}


def test_auto_sizes_the_tensor_path_s_pool_too() -> None:
    decoder = ImageDecoder(config(decode_threads=AUTO), CPU, "tensor", DecodePool(AUTO, cores=2))
    bodies = [encoded(1600, 1200), encoded(640, 480, "PNG"), encoded(1200, 1600)]
    assert decoder.threads_for(bodies) == 2
    crops = decoder.decode_batch(bodies)
    assert all(isinstance(crop, torch.Tensor) and crop.shape == (3, 224, 224) for crop in crops)


def test_the_decoder_counts_its_batches_per_thread_count() -> None:
    decoder = ImageDecoder(config(decode_threads=AUTO), CPU, "pil", DecodePool(AUTO, cores=2))
    decoder.decode_batch([encoded(1600, 1200)] * 2)
    decoder.decode_batch([encoded(224, 224)] * 3)
    decoder.decode_batch([encoded(224, 224)])
    assert decoder.batches_by_threads == {2: 1, 1: 2}
