"""int8 quantization: the kind's rewrite before capture, and packages that really run int8 kernels."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from tests.conftest import TinyImageNet
from tsbatch.archive.int8.quantize import compile_int8, quantized_op_counts, static_int8


def test_static_quantization_runs_the_kinds_prepare_on_a_copy() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
    ).eval()
    seen: list[torch.nn.Module] = []

    def prepare(module: torch.nn.Module) -> torch.nn.Module:
        seen.append(module)
        return copy.deepcopy(module)

    images = torch.randn(4, 3, 8, 8)
    batch = torch.export.Dim("batch", min=1, max=8)
    static_int8(model, (images,), ({0: batch},), [(images,)], prepare)
    assert seen == [model]  # the eager model, handed to the kind before capture


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
