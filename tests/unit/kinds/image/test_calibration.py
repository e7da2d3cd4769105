"""Where static int8's calibration images come from: the user's folder, the build's training
images, or seeded noise (said so)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from tsbatch.kinds.image.calibration import calibration_batches
from tsbatch.kinds.image.schema import Calibration
from tsbatch.kinds.image.weights import ExportError, ResolvedWeights


def resolved(calibration: torch.Tensor | None = None) -> ResolvedWeights:
    return ResolvedWeights(
        None,
        None,
        ["a", "b"],
        20,
        16,
        (0.5, 0.5, 0.5),
        (0.25, 0.25, 0.25),
        "test",
        {},
        calibration=calibration,
    )


def test_a_users_folder_wins_and_is_preprocessed_as_served(tmp_path: Path) -> None:
    for index in range(3):
        Image.new("RGB", (30 + index, 24), (10 * index, 0, 0)).save(tmp_path / f"{index}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    section = Calibration(images=str(tmp_path), count=2)
    batches, source = calibration_batches(resolved(torch.zeros(5, 3, 16, 16)), section)
    assert [batch[0].shape for batch in batches] == [(2, 3, 16, 16)]
    assert source == f"2 images from {tmp_path} (user images)"
    with pytest.raises(ExportError, match="has no images"):
        calibration_batches(resolved(), Calibration(images=str(tmp_path / "none")))


def test_training_images_then_noise() -> None:
    batches, source = calibration_batches(resolved(torch.ones(40, 3, 16, 16)), Calibration())
    assert (
        sum(len(batch[0]) for batch in batches) == 40
        and source == "40 images from the build's training images"
    )
    batches, source = calibration_batches(resolved(), Calibration(count=8))
    assert sum(len(batch[0]) for batch in batches) == 8 and source == "8 images from seeded noise"
