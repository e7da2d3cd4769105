"""Sweep inputs: a scenario's batches are distinct real samples, and its single ones match them."""

from __future__ import annotations

import torch

from tsbatch.analysis.sweep.swept import SweptModel


def test_samples_in_a_batch_are_distinct_real_images(tiny_swept_model: SweptModel) -> None:
    scenario = tiny_swept_model.scenarios[0]
    (batch,) = scenario.batch(8)
    assert batch.shape == (8, 3, 16, 16)
    assert len({tuple(image.flatten().tolist()) for image in batch}) == 8
    assert torch.equal(scenario.single(3)[0][0], batch[3])
