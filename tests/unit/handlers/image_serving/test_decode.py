"""The decode pool keeps order and per-item errors; the tensor path decodes JPEGs with
``decode_jpeg`` (here on the CPU, the code a GPU runs) and sends the rest through PIL."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import functional as tv_functional

from batchkit.config import from_mapping
from batchkit.errors import InvalidInput, PayloadTooLarge, RequestError
from image_serving.config import ImageModelConfig
from image_serving.decode import (
    DecodePool,
    ImageDecoder,
    chunks,
    crop_tensor,
    decode_jpegs,
    faster_path,
    image_decoder,
    tensor_decodable,
)
from image_serving.images import crop_pixels
from tests.conftest import image_bytes, tiny_image_handler

CPU = torch.device("cpu")


def config(**overrides: object) -> ImageModelConfig:
    """The tiny archive's config at the production shape (resize 256, crop 224)."""
    values = {**tiny_image_handler(), "resize_size": 256, "crop_size": 224, **overrides}
    return from_mapping(ImageModelConfig, values)


def photo(size: tuple[int, int], fmt: str = "JPEG", mode: str = "RGB", seed: int = 0) -> bytes:
    """A smooth random picture (JPEG decoders agree on smooth pictures, as on photos)."""
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8))
    picture = small.resize(size, Image.Resampling.BILINEAR).convert(mode)
    buffer = io.BytesIO()
    picture.save(buffer, format=fmt)
    return buffer.getvalue()


def test_the_pool_keeps_order_and_each_item_s_error() -> None:
    def slow_square(value: int) -> int:
        time.sleep(0.01 * (5 - value))  # later items finish first
        if value == 2:
            raise InvalidInput("two is bad")
        return value * value

    results = DecodePool(3).map(slow_square, [0, 1, 2, 3, 4])
    assert results[:2] == [0, 1] and results[3:] == [9, 16]
    assert (results[2].status, results[2].code) == (400, "invalid_input")


def test_one_decode_thread_runs_inline_and_more_use_the_pool() -> None:
    def thread(_: int) -> int:
        return threading.get_ident()

    assert set(DecodePool(1).map(thread, [0, 1, 2])) == {threading.get_ident()}
    assert threading.get_ident() not in DecodePool(2).map(thread, [0, 1, 2])
    with pytest.raises(ValueError, match="at least 1"):
        DecodePool(0)


def test_chunks_cover_every_item_in_order() -> None:
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert chunks([1], 4) == [[1]] and chunks([], 2) == []


@pytest.mark.parametrize("threads", [1, 2])
def test_png_and_cmyk_go_through_pil_and_a_truncated_jpeg_fails_alone(threads: int) -> None:
    jpeg = photo((320, 260))
    bodies = [photo((300, 280), "PNG"), photo((280, 300), mode="CMYK"), jpeg[: len(jpeg) // 2], jpeg]
    tensor = ImageDecoder(config(), CPU, "tensor", DecodePool(threads)).decode_batch(bodies)
    pil = ImageDecoder(config(), CPU, "pil", DecodePool(1)).decode_batch(bodies)

    assert torch.equal(tensor[0], pil[0]) and torch.equal(tensor[1], pil[1])  # the PIL path itself
    assert (tensor[2].status, tensor[2].code) == (400, "invalid_image")
    assert "truncated or corrupt" in tensor[2].message
    assert isinstance(tensor[3], torch.Tensor) and tensor[3].shape == (3, 224, 224)
    assert int((tensor[3].int() - pil[3].int()).abs().max()) <= 1  # libjpeg both ways, one grey level


def test_a_request_rejected_before_decoding_keeps_its_error() -> None:
    rejected = InvalidInput.error("bad envelope")
    results = ImageDecoder(config(), CPU, "tensor", DecodePool(1)).decode_batch([rejected, b""])
    assert results[0] is rejected
    assert results[1].code == "invalid_image" and "empty request body" in results[1].message


def test_which_jpegs_the_tensor_path_takes() -> None:
    assert tensor_decodable(photo((64, 48)), 10_000)
    assert tensor_decodable(photo((64, 48), mode="L"), 10_000)
    assert not tensor_decodable(photo((64, 48), mode="CMYK"), 10_000)
    assert not tensor_decodable(photo((64, 48), "PNG"), 10_000)
    assert not tensor_decodable(b"\xff\xd8\xff not really", 10_000)
    rotated = io.BytesIO()
    exif = Image.Image().getexif()
    exif[0x0112] = 6
    Image.new("RGB", (40, 20), "blue").save(rotated, format="JPEG", exif=exif)
    assert not tensor_decodable(rotated.getvalue(), 10_000)
    with pytest.raises(PayloadTooLarge):
        tensor_decodable(photo((200, 100)), 10_000)


def test_a_jpeg_bomb_is_refused_with_413_on_the_tensor_path() -> None:
    results = ImageDecoder(config(max_image_pixels=10_000), CPU, "tensor", DecodePool(1)).decode_batch(
        [photo((200, 100)), photo((90, 80))]
    )
    assert isinstance(results[0], RequestError) and results[0].status == 413
    assert isinstance(results[1], torch.Tensor)


def test_a_refused_jpeg_in_a_batch_is_none_and_the_others_decode() -> None:
    good = photo((64, 48))
    decoded = decode_jpegs([good, good[:100], good], CPU)
    assert decoded[1] is None
    assert all(
        isinstance(item, torch.Tensor) and item.shape == (3, 48, 64) for item in (decoded[0], decoded[2])
    )


@pytest.mark.parametrize("size", [(500, 375), (224, 224), (97, 301), (1024, 50), (257, 256)])
def test_the_tensor_resize_matches_the_pil_crop_to_one_grey_level(size: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(size))
    image = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    ours = crop_tensor(tv_functional.pil_to_tensor(image), 256, 224)
    assert ours.shape == (3, 224, 224) and ours.dtype == torch.uint8
    assert int((ours.int() - crop_pixels(image, 256, 224).int()).abs().max()) <= 1


def test_auto_is_the_tensor_path_on_a_gpu_and_the_faster_one_on_a_cpu() -> None:
    assert image_decoder(config(decode_threads=2), torch.device("cuda")).path == "tensor"
    chosen = image_decoder(config(resize_size=64, crop_size=56), CPU)
    assert chosen.path in ("pil", "tensor") and chosen.pool.threads == "auto"
    assert faster_path({"pil": 2.0, "tensor": 1.0}.__getitem__) == "tensor"
    assert faster_path({"pil": 1.0, "tensor": 2.0}.__getitem__) == "pil"
    assert image_decoder(config(decode_path="pil"), torch.device("cuda")).path == "pil"
    with pytest.raises(ValueError, match="decode_path must be one of"):
        image_decoder(config(decode_path="fast"), CPU)


def test_the_tensor_path_serves_the_handler_end_to_end(tiny_image_model_dir, fake_context_factory) -> None:
    from image_classifier_handler import ImageClassifierHandler

    model_dir, model_yaml = tiny_image_model_dir
    handler_config = {**model_yaml["handler"], "decode_path": "tensor", "decode_threads": 2}
    context = fake_context_factory(model_dir, {**model_yaml, "handler": handler_config}, batch_size=4)
    handler = ImageClassifierHandler()
    handler.initialize(context)
    jpeg = image_bytes("JPEG", size=(64, 48), color="blue")
    responses = handler.handle([{"body": jpeg}, {"body": jpeg[:200]}, {"body": image_bytes("PNG")}], context)
    assert [context.status(i) for i in range(3)] == [200, 400, 200]
    assert handler.describe()["decode_path"] == "tensor" and handler.describe()["decode_threads"] == 2
    assert responses[0]["predictions"]
