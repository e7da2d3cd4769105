"""The digits fallback's BatchNorm statistics: what eval mode scores with after training."""

from __future__ import annotations

import torch

from tsbatch.kinds.image.digits import estimate_batch_norm


def test_batch_norm_statistics_are_the_training_images_average_whatever_the_momentum() -> None:
    norm = torch.nn.BatchNorm2d(3, momentum=0.01)  # MobileNetV3's: a few steps barely move it
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), norm).eval()
    images = 5 + 2 * torch.randn(64, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        features = model[0](images)
    estimate_batch_norm(model, images, batch_size=16)
    assert torch.allclose(norm.running_mean, features.mean(dim=(0, 2, 3)), atol=1e-4)
    assert torch.allclose(norm.running_var, features.var(dim=(0, 2, 3)), rtol=0.05)
    assert norm.momentum == 0.01
