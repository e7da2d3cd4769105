"""The image kind's residual-block rewrite: each ReLU call site its own module, the same
arithmetic, and a ResNet block that PT2E then quantizes statically."""

from __future__ import annotations

import torch
from torchvision.models.resnet import BasicBlock, Bottleneck

from tsbatch.archive.int8.quantize import static_int8
from tsbatch.kinds.image.residual import OwnReluBlock, own_relus


def test_own_relus_gives_each_call_site_a_relu_and_keeps_the_arithmetic() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(BasicBlock(8, 8), Bottleneck(8, 2)).eval()
    rewritten = own_relus(model)
    assert isinstance(rewritten[0], OwnReluBlock) and isinstance(rewritten[1], OwnReluBlock)
    assert len(rewritten[0].relus) == 2 and len(rewritten[1].relus) == 3
    assert isinstance(model[0], BasicBlock)  # the original is left as it was
    images = torch.randn(2, 8, 6, 6)
    with torch.no_grad():
        assert torch.equal(model(images), rewritten(images))


def test_a_resnet_block_quantizes_statically_with_a_dynamic_batch() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(BasicBlock(4, 4), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    images = torch.randn(4, 4, 8, 8)
    quantized = static_int8(model, (images,), ({0: batch},), [(images,)], own_relus)
    with torch.no_grad():
        expected, actual = model(images), quantized(images)
        assert quantized(images[:1]).shape == (1, 4)  # the batch stayed dynamic
    assert not torch.equal(expected, actual)  # it computes something else: quantized
    assert (expected - actual).abs().max() < 0.2
