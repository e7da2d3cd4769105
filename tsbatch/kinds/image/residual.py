"""torchvision's residual blocks rewritten so PT2E can capture them: the image kind's
``prepare`` for static int8 (``tsbatch.archive.int8.candidate.Int8Plan``).

``BasicBlock`` and ``Bottleneck`` call one ``nn.ReLU`` two or three times; PT2E then sees a
partition with several outputs and ``prepare_pt2e`` fails ("Input partition has more than
one output node"). The rewrite gives each call site its own ReLU: same convolutions and
norms, same arithmetic.
"""

from __future__ import annotations

import copy

import torch
from torchvision.models.resnet import BasicBlock, Bottleneck


class OwnReluBlock(torch.nn.Module):
    """A torchvision residual block with one ReLU module per call site."""

    def __init__(self, block: BasicBlock | Bottleneck) -> None:
        super().__init__()
        stages = [(block.conv1, block.bn1), (block.conv2, block.bn2)]
        if isinstance(block, Bottleneck):
            stages.append((block.conv3, block.bn3))
        self.convs = torch.nn.ModuleList(conv for conv, _ in stages)
        self.norms = torch.nn.ModuleList(norm for _, norm in stages)
        self.relus = torch.nn.ModuleList(torch.nn.ReLU() for _ in stages)
        self.downsample = block.downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x
        last = len(self.convs) - 1
        for index, (conv, norm, relu) in enumerate(zip(self.convs, self.norms, self.relus, strict=True)):
            out = norm(conv(out))
            if index < last:
                out = relu(out)
        identity = x if self.downsample is None else self.downsample(x)
        return self.relus[-1](out + identity)


def own_relus(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` whose residual blocks each call their own ReLUs (weights shared
    by value: the copy's parameters equal the original's)."""
    copied = copy.deepcopy(model)
    for parent in list(copied.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, BasicBlock | Bottleneck):
                setattr(parent, name, OwnReluBlock(child))
    return copied
