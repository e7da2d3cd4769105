"""The images static int8 quantization is calibrated on: the build's own training data.

Activation scales are fixed from what the model sees here, so the set must look like what
it will serve: a folder of the user's images (``compile: calibration: images:``) wins;
digits-trained weights bring their training images; anything else falls back to seeded
noise, which the gates will judge but which is a poor stand-in, and the build says so.
"""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from image_serving.images import preprocess, to_rgb
from tsbatch.kinds.image.schema import Calibration
from tsbatch.kinds.image.weights import ExportError, ResolvedWeights

BATCH = 32
SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")

Batch = tuple[torch.Tensor, ...]


def folder_images(folder: Path, count: int, resolved: ResolvedWeights) -> torch.Tensor:
    """Up to ``count`` images of ``folder`` (sorted, recursive), preprocessed as served."""
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in SUFFIXES)[:count]
    if not files:
        raise ExportError(f"calibration folder {folder} has no images ({', '.join(SUFFIXES)})")
    tensors = []
    for file in files:
        with Image.open(file) as image:
            rgb = to_rgb(image)
            tensors.append(
                preprocess(rgb, resolved.resize_size, resolved.crop_size, resolved.mean, resolved.std)
            )
    return torch.stack(tensors)


def calibration_batches(resolved: ResolvedWeights, section: Calibration) -> tuple[list[Batch], str]:
    """Calibration batches for static int8 and where they came from (recorded in build_info)."""
    count = section.count
    if section.images:
        folder = Path(section.images)
        images, source = folder_images(folder, count, resolved), f"{folder} (user images)"
    elif resolved.calibration is not None:
        images, source = resolved.calibration[:count], "the build's training images"
    else:
        print(
            "[export] int8: no calibration images (set compile.calibration.images to a folder of a "
            "few hundred of your images): calibrating on seeded noise"
        )
        seeded = torch.Generator().manual_seed(2468)
        size = resolved.crop_size
        images, source = torch.randn(count, 3, size, size, generator=seeded), "seeded noise"
    return [(chunk,) for chunk in images.split(BATCH)], f"{len(images)} images from {source}"
