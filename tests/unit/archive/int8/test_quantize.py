"""int8 quantization: the residual-block rewrite, and packages that really run int8 kernels."""

from __future__ import annotations

from pathlib import Path

import torch
from torchvision.models.resnet import BasicBlock, Bottleneck

from tests.conftest import TinyImageNet
from tsbatch.archive.int8.quantize import (
    OwnReluBlock,
    compile_int8,
    own_relus,
    quantized_op_counts,
    static_int8,
)


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
    quantized = static_int8(model, (images,), ({0: batch},), [(images,)])
    with torch.no_grad():
        expected, actual = model(images), quantized(images)
        assert quantized(images[:1]).shape == (1, 4)  # the batch stayed dynamic
    assert not torch.equal(expected, actual)  # it computes something else: quantized
    assert (expected - actual).abs().max() < 0.2


def test_the_static_package_calls_quantized_convolutions(tiny_int8_package: Path) -> None:
    counts = quantized_op_counts(tiny_int8_package)
    assert counts["qconv"] > 0
    package = torch._inductor.aoti_load_package(str(tiny_int8_package))
    torch.manual_seed(0)
    model = TinyImageNet(3).eval()
    images = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        expected = torch.softmax(model(images), -1)
        actual = torch.softmax(package(images), -1)
        alone = torch.cat([torch.softmax(package(images[i : i + 1]), -1) for i in range(3)])
    assert (expected - actual).abs().max() < 0.05
    assert torch.allclose(actual, alone, atol=1e-5)  # static scales: no batch-mate changes an answer


def test_dynamic_quantization_of_linear_layers_compiles_to_int8_matmuls(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3)).eval()
    rows = torch.randn(4, 64)
    path = tmp_path / "model.cpu-int8.pt2"
    figures = compile_int8(model, (rows,), ({0: torch.export.Dim("batch", min=1, max=8)},), path, None)
    assert figures["calibration_items"] == 0 and figures["quantized_ops"] > 0
    assert quantized_op_counts(path)["_int_mm"] > 0
    package = torch._inductor.aoti_load_package(str(path))
    with torch.no_grad():
        assert (model(rows) - package(rows)).abs().max() < 0.05
        assert torch.allclose(package(rows[:1]), package(rows)[:1], atol=1e-5)  # per-row scales


def test_a_package_without_quantized_kernels_counts_zero(tiny_gated_build) -> None:
    build, _ = tiny_gated_build
    assert sum(quantized_op_counts(build / "model.cpu-fp32.pt2").values()) == 0
