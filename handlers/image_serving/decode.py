"""A worker's image decoding for a whole batch: a thread pool, and a tensor path.

A batch's bodies are read inline (JSON and base64 hold the GIL), then decoded on the
worker's decode pool (``image_serving.pool``: a fixed number of threads, or ``auto``, sized per
batch by the pixels its images decode to). The tensor path decodes JPEGs with ``torchvision.io.decode_jpeg`` where the model
runs: on a GPU in one batched nvJPEG call, resampled there, so only compressed bytes
cross to it; on a CPU the same code runs, so the suite covers it on any machine. Other
formats, CMYK, EXIF-rotated JPEGs and JPEGs the decoder refuses take the PIL path, each
on its own, so a bad image still fails only its own request. With reduced-size JPEG
decoding (``image_serving.reduced``) on, PIL decodes JPEGs at a DCT scale: on a CPU it takes
those a scale shrinks, on a GPU those over the pixel limit at full size.
"""

from __future__ import annotations

import io
import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from PIL import Image
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as tv_functional

from batchkit.batching import decode_each
from batchkit.errors import RequestError
from image_serving.config import ImageModelConfig
from image_serving.errors import InvalidImage
from image_serving.images import check_images, image_bytes, open_image, raw_pixels
from image_serving.pool import DecodePool, pixel_cost
from image_serving.reduced import dct_scale, reduced_decode_enabled

logger = logging.getLogger(__name__)

DECODE_PATHS = ("auto", "pil", "tensor")
JPEG_START = b"\xff\xd8\xff"
# Modes libjpeg turns into RGB as PIL does; CMYK and the rest are PIL's to convert.
TENSOR_MODES = frozenset({"RGB", "L"})
EXIF_ORIENTATION = 0x0112
# Pictures each path decodes at load when ``auto`` must choose between them on a CPU.
TIMING_PICTURES = 8

Item = TypeVar("Item")


def tensor_decodable(raw: bytes, max_pixels: int, *, reduce_for: int = 0, on_gpu: bool = False) -> bool:
    """Whether ``decode_jpeg`` gives the pixels PIL would: a JPEG in RGB or grey, not
    rotated by EXIF. Reads the header only; a bomb is refused here (413).

    With reduced decoding (``reduce_for``, the resize size), a JPEG over ``max_pixels`` goes
    to PIL, which decodes it reduced or refuses it; so does, on a CPU, one a DCT scale
    would shrink: ``decode_jpeg`` decodes every pixel, and there no transfer is saved."""
    if not raw.startswith(JPEG_START):
        return False
    try:
        header = open_image(raw, sys.maxsize if reduce_for else max_pixels, load=False)
    except InvalidImage:
        return False  # the PIL path says what is wrong with it
    orientation = header.getexif().get(EXIF_ORIENTATION, 1)
    if header.format != "JPEG" or header.mode not in TENSOR_MODES or orientation != 1:
        return False
    if not reduce_for:
        return True
    width, height = header.size
    if on_gpu:
        return width * height <= max_pixels
    return dct_scale(width, height, reduce_for, max_pixels) == 1


def decode_jpegs(raws: Sequence[bytes], device: torch.device) -> list[torch.Tensor | None]:
    """JPEGs to uint8 RGB CHW tensors on ``device``, in one batched call (nvJPEG on a GPU);
    when the batch fails, each alone, and None for each the decoder refuses."""
    data = [torch.frombuffer(bytearray(raw), dtype=torch.uint8) for raw in raws]
    try:
        return list(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))
    except RuntimeError:
        pass
    decoded: list[torch.Tensor | None] = []
    for tensor in data:
        try:
            decoded.append(decode_jpeg(tensor, mode=ImageReadMode.RGB, device=device))
        except RuntimeError:
            decoded.append(None)
    return decoded


def crop_tensor(pixels: torch.Tensor, resize_size: int, crop_size: int) -> torch.Tensor:
    """torchvision's reference resize (shorter side, bilinear, antialiased) and center crop
    on a uint8 CHW tensor, on whatever device it lives. The v2 functional keeps uint8 on
    a CPU (PyTorch's vectorised uint8 kernel), where v1 resamples in float, several
    times slower."""
    resized = tv_functional.resize(
        pixels, [resize_size], interpolation=InterpolationMode.BILINEAR, antialias=True
    )
    return tv_functional.center_crop(resized, [crop_size]).contiguous()


def chunks(items: Sequence[Item], count: int) -> list[list[Item]]:
    """``items`` cut into at most ``count`` contiguous runs of near-equal length."""
    size = max(1, math.ceil(len(items) / count))
    return [list(items[start : start + size]) for start in range(0, len(items), size)]


def faster_path(seconds: Callable[[str], float]) -> str:
    """The CPU path that decoded the timing pictures faster."""
    return min(("pil", "tensor"), key=seconds)


class ImageDecoder:
    """How one worker turns a batch of request bodies into uint8 crops: ``path`` is pil
    or tensor, ``pool`` its decode threads; ``reduced`` whether PIL decodes JPEGs at a DCT
    scale (``image_serving.reduced``; by the config's reduced_decode and the build's gate)."""

    def __init__(self, config: ImageModelConfig, device: torch.device, path: str, pool: DecodePool) -> None:
        self.config = config
        self.device = device
        self.path = path
        self.pool = pool
        self.reduced = reduced_decode_enabled(config.reduced_decode, config.reduced_decode_gate)
        # Batches decoded per thread count: what auto chose on the traffic (the worker's describe).
        self.batches_by_threads: Counter[int] = Counter()

    def decode_batch(self, bodies: Sequence[Any]) -> list[torch.Tensor | RequestError]:
        """One crop or one error per body, in order."""
        raws = decode_each(bodies, self.read)
        threads = self.threads_for(raws)
        self.batches_by_threads[threads] += 1
        if self.path == "pil":
            return self.pool.map(self.raw_crop, raws, threads)
        staged = self.pool.map(self.stage, raws, threads)
        jpegs = {index: value for index, value in enumerate(staged) if isinstance(value, bytes)}
        crops = dict(zip(jpegs, self.tensor_crops(list(jpegs.values()), threads), strict=True))
        refused = [index for index, crop in crops.items() if crop is None]
        fallback = self.pool.map(self.raw_crop, [jpegs[index] for index in refused], threads)
        redone = dict(zip(refused, fallback, strict=True))
        results: list[torch.Tensor | RequestError] = []
        for index, value in enumerate(staged):
            crop = crops.get(index)
            if index in redone:
                results.append(redone[index])
            elif crop is not None:
                results.append(crop)
            elif not isinstance(value, bytes):
                results.append(value)
        return results

    def threads_for(self, raws: Sequence[bytes | RequestError]) -> int:
        """The batch's decode threads: fixed, or by what its images cost to decode (``auto``)."""
        if not self.pool.auto:
            return self.pool.limit
        reduce_for = self.config.resize_size if self.reduced else 0
        limit = self.config.max_image_pixels
        return self.pool.threads_for(
            [pixel_cost(raw, limit, reduce_for) for raw in raws if isinstance(raw, bytes)]
        )

    def tensor_crops(self, raws: list[bytes], threads: int) -> list[torch.Tensor | None]:
        """JPEGs' crops through ``decode_jpeg``: one batched call on a GPU; on a CPU one call
        per decode thread, each on its share. None where the decoder refused one."""
        runs = [raws] if self.device.type == "cuda" else chunks(raws, threads)
        crops: list[torch.Tensor | None] = []
        for run, result in zip(runs, self.pool.map(self.crop_jpegs, runs, threads), strict=True):
            crops += [None] * len(run) if isinstance(result, RequestError) else result
        return crops

    def crop_jpegs(self, raws: list[bytes]) -> list[torch.Tensor | None]:
        config = self.config
        return [
            None if pixels is None else crop_tensor(pixels, config.resize_size, config.crop_size)
            for pixels in decode_jpegs(raws, self.device)
        ]

    def read(self, body: Any) -> bytes:
        return image_bytes(body, self.config.max_body_bytes)

    def raw_crop(self, raw: bytes) -> torch.Tensor:
        config = self.config
        return raw_pixels(
            raw,
            resize_size=config.resize_size,
            crop_size=config.crop_size,
            max_image_pixels=config.max_image_pixels,
            reduced=self.reduced,
        )

    def stage(self, raw: bytes) -> bytes | torch.Tensor:
        """A body's bytes when the tensor path takes it, else its crop through PIL."""
        config = self.config
        reduce_for = config.resize_size if self.reduced else 0
        on_gpu = self.device.type == "cuda"
        takes = tensor_decodable(raw, config.max_image_pixels, reduce_for=reduce_for, on_gpu=on_gpu)
        return raw if takes else self.raw_crop(raw)


def timing_pictures(config: ImageModelConfig) -> list[bytes]:
    """Smooth, photo-shaped JPEGs grown from the check inputs: what ``auto`` times the two
    paths on at load (noise would time the entropy decoder, not a photo)."""
    side = config.resize_size
    seeds = check_images(8, TIMING_PICTURES)
    smooth = torch.nn.functional.interpolate(seeds, size=(side, side * 4 // 3), mode="bilinear")
    pictures = (smooth * 48 + 128).clamp(0, 255).to(torch.uint8)
    encoded = []
    for picture in pictures:
        buffer = io.BytesIO()
        Image.fromarray(picture.permute(1, 2, 0).numpy()).save(buffer, format="JPEG", quality=90)
        encoded.append(buffer.getvalue())
    return encoded


def image_decoder(config: ImageModelConfig, device: torch.device) -> ImageDecoder:
    """The worker's decoder: ``decode_path`` as configured, where ``auto`` is the tensor
    path on a GPU and, on a CPU, whichever path decoded the timing pictures faster here;
    ``decode_threads`` as configured (``auto``: per batch, ``image_serving.pool``)."""
    if config.decode_path not in DECODE_PATHS:
        raise ValueError(f"decode_path must be one of {DECODE_PATHS}, got {config.decode_path!r}")
    pool = DecodePool(config.decode_threads)
    if config.decode_path != "auto":
        return ImageDecoder(config, device, config.decode_path, pool)
    pictures = timing_pictures(config)
    if device.type == "cuda":
        decoder = ImageDecoder(config, device, "tensor", pool)
        decoder.decode_batch(pictures)  # nvJPEG's first call sets it up: not the first request's
        return decoder

    def seconds(path: str) -> float:
        decoder = ImageDecoder(config, device, path, pool)
        best = math.inf
        for _ in range(2):
            started = time.perf_counter()
            decoder.decode_batch(pictures)
            best = min(best, time.perf_counter() - started)
        logger.info("decode path %s: %.2f ms per picture", path, 1000 * best / len(pictures))
        return best

    return ImageDecoder(config, device, faster_path(seconds), pool)
