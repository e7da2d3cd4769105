"""The int8 candidate among the build's: its limits, its quantized-kernel check, and a tiny
model quantized, compiled, gated and timed through build_and_gate."""

from __future__ import annotations

from pathlib import Path

import torch

from image_serving.images import check_images
from tests.conftest import TinyImageNet
from tsbatch.archive.compiled import CompileSettings, GateData, build_and_gate
from tsbatch.archive.gates import judge, top1_accuracy
from tsbatch.archive.int8.candidate import Int8Plan, gate_limits, quantized_ops_problem


def test_int8_is_held_to_its_kinds_limits_and_the_others_to_the_defaults() -> None:
    plan = Int8Plan(points={"in_scope_accuracy": 1.0})  # what a kind allows its own figure
    assert gate_limits("bf16", plan) == {}
    reference = torch.eye(4)[torch.tensor([0, 1, 2, 3] * 50)]  # 200 items
    moved = reference.clone()
    moved[0] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # one item in 200: 0.5 points, 99.5% agreement
    moved[1] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # two: 1 point, 99% agreement
    targets = reference.argmax(-1)

    def score(probs: torch.Tensor) -> dict[str, float]:
        return {"in_scope_accuracy": float((probs.argmax(-1) == targets).float().mean())}

    as_int8 = judge(
        "aoti-cpu-int8", "int8", reference, moved, score, (0.0, True), **gate_limits("int8", plan)
    )
    as_bf16 = judge("aoti-cpu-bf16", "bf16", reference, moved, score, (0.0, True))
    assert as_int8.passed, as_int8.failures
    assert len(as_bf16.failures) == 2  # 1 point > 0.5, 99% < 99.5%
    image = judge(
        "aoti-cpu-int8",
        "int8",
        reference,
        moved,
        top1_accuracy(targets),
        (0.0, True),
        **gate_limits("int8", plan),
    )
    assert image.failures == ["accuracy 0.9900 is 1.00 points from fp32 1.0000"]  # a figure it names not: 0.5


def test_a_package_without_quantized_kernels_is_not_int8() -> None:
    assert quantized_ops_problem({"quantized_ops": 12}) is None
    assert "calls no quantized kernel" in (quantized_ops_problem({"quantized_ops": 0}) or "")


def test_build_and_gate_quantizes_gates_and_times_an_int8_target(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyImageNet().eval()
    scripted = torch.jit.script(model)
    images = torch.randn(48, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        targets = model(images[:16]).argmax(1)
    settings = CompileSettings(targets=("cpu-int8",), max_batch_size=8, torchscript_precisions=())
    batches = [(chunk,) for chunk in images[:16].split(8)]
    plan = Int8Plan([(chunk,) for chunk in images[16:].split(8)], "static, calibrated on 32 test images")
    batch = torch.export.Dim("batch", min=1, max=8)
    data = GateData(batches, top1_accuracy(targets), (check_images(16),), ({0: batch},))
    outcome = build_and_gate(model, scripted, tmp_path, settings, data, int8=plan)
    (result,) = outcome.results
    assert result.candidate == "aoti-cpu-int8" and result.precision == "int8"
    assert outcome.compile_figures["cpu-int8"]["quantized_ops"] > 0
    assert outcome.compile_figures["cpu-int8"]["calibration_items"] == 32
    info = outcome.build_info()["int8"]
    assert info["calibration"] == "static, calibrated on 32 test images"
    if result.passed:
        assert (tmp_path / "model.cpu-int8.pt2").is_file()
        assert "aoti-cpu-int8" in outcome.handler_fields()["check_outputs"]
        assert outcome.handler_fields()["compiled_models"] == ["model.cpu-int8.pt2"]
        assert set(outcome.handler_fields()["timings_ms"]["ms"]) == {"torchscript-fp32", "aoti-cpu-int8"}
    else:  # a failing candidate is dropped, says why, and is not timed
        assert not (tmp_path / "model.cpu-int8.pt2").exists() and result.failures
        assert set(outcome.handler_fields()["timings_ms"]["ms"]) == {"torchscript-fp32"}
