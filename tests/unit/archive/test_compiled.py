"""Gating reduced-precision TorchScript and compiled packages at build time."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from batchkit.candidates import ServingCandidate
from image_serving.images import check_images
from tests.conftest import TinyImageNet
from tsbatch.archive.compiled import (
    CompileSettings,
    GateData,
    NothingToServeError,
    build_and_gate,
    compile_settings,
    host_targets,
)
from tsbatch.archive.gate_report import gates_section
from tsbatch.archive.gates import top1_accuracy
from tsbatch.archive.schema import Compile


def test_host_targets_follow_the_hardware(monkeypatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    targets = host_targets()
    assert targets[0] in ("cpu-fp32", "cpu-bf16")
    assert compile_settings(Compile(targets=("cpu-fp16",), max_batch_size=8)).targets == ("cpu-fp16",)
    assert compile_settings(Compile()).max_batch_size == 16
    reduced = tuple(
        c.precision for c in map(ServingCandidate.parse, targets) if c.precision in ("bf16", "fp16")
    )
    assert compile_settings(Compile()).torchscript_precisions == reduced  # int8 has no TorchScript form


@pytest.mark.parametrize(
    ("flags", "expected"),
    [({"avx2", "avx512_bf16"}, "cpu-bf16"), ({"avx2"}, "cpu-fp32")],
)
def test_the_build_ignores_a_workers_precision_left_in_the_shell(
    monkeypatch: pytest.MonkeyPatch, flags: set[str], expected: str
) -> None:
    """``TSBATCH_PRECISION`` is a worker's override: what the build compiles follows the CPU."""
    for leftover in ("fp32", "bf16", "int8"):
        monkeypatch.setenv("TSBATCH_PRECISION", leftover)
        assert host_targets(flags)[0] == expected
        assert "cpu-int8" not in host_targets(flags)  # no VNNI in these flags


def test_torchscript_bf16_is_gated_against_fp32_and_recorded(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyImageNet().eval()
    scripted = torch.jit.script(model)
    images = torch.randn(16, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        targets = model(images).argmax(1)
    settings = CompileSettings(targets=(), max_batch_size=8, torchscript_precisions=("bf16",))
    data = GateData(
        [(chunk,) for chunk in images.split(8)], top1_accuracy(targets), (check_images(16),), ({},)
    )
    outcome = build_and_gate(model, scripted, tmp_path, settings, data)
    (result,) = outcome.results
    assert result.candidate == "torchscript-bf16"
    assert set(result.figures) == {
        "accuracy",
        "top1_agreement",
        "max_probability_diff",
        "batch_vs_alone_max_diff",
    }
    assert result.figures["max_probability_diff"] < 0.05
    fields = outcome.handler_fields()
    assert (fields["compiled_models"], fields["compiled_max_batch_size"]) == ([], 0)
    assert fields["failed_gates"] == outcome.failed
    assert set(fields["check_outputs"]) == {"torchscript-fp32"} | ({"torchscript-bf16"} - set(outcome.failed))
    timed = set(fields["timings_ms"]["ms"])
    assert timed == {"torchscript-fp32"} | ({"torchscript-bf16"} - set(outcome.failed))
    assert outcome.build_info()["timings_ms"] == fields["timings_ms"]
    info = outcome.build_info()["gates"]
    assert info["torchscript-bf16"]["passed"] is result.passed
    assert len(info["torchscript-bf16"]["check_outputs"]) == 2  # the two check images
    assert info["torchscript-fp32"]["check_outputs"] == fields["check_outputs"]["torchscript-fp32"]


def test_a_failing_package_is_removed_and_not_recorded_for_serving(tmp_path: Path) -> None:
    """A scorer that no candidate can satisfy: the package is dropped, the build says why."""
    torch.manual_seed(0)
    model = TinyImageNet().eval()
    scripted = torch.jit.script(model)
    images = torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    counter = iter(range(100))

    def drifting(probs: torch.Tensor) -> dict[str, float]:  # fp32 scores 0, every candidate 1
        return {"accuracy": 0.0 if next(counter) == 0 else 1.0}

    settings = CompileSettings(targets=("cpu-bf16",), max_batch_size=8, torchscript_precisions=())
    batch = torch.export.Dim("batch", min=1, max=8)
    data = GateData([(images,)], drifting, (check_images(16),), ({0: batch},))
    outcome = build_and_gate(model, scripted, tmp_path, settings, data)
    assert outcome.failed == ["aoti-cpu-bf16"]
    assert not (tmp_path / "model.cpu-bf16.pt2").exists()
    fields = outcome.handler_fields()
    assert fields["compiled_models"] == [] and "aoti-cpu-bf16" not in fields["check_outputs"]
    assert (
        "accuracy 1.0000 is 100.00 points from fp32"
        in outcome.build_info()["gates"]["aoti-cpu-bf16"]["failures"][0]
    )


class DataDependent(torch.nn.Module):
    """Branches on its input's values: torch.export cannot capture it, TorchScript can."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        pooled = images.mean(dim=(2, 3))
        return pooled if bool(pooled.sum() > 0) else -pooled


def test_a_target_that_cannot_be_built_is_skipped_with_its_reason(tmp_path: Path) -> None:
    model = DataDependent()
    images = torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    settings = CompileSettings(targets=("cpu-fp32",), max_batch_size=8, torchscript_precisions=())
    data = GateData([(images,)], None, (check_images(16),), ({0: torch.export.Dim("batch", min=1, max=8)},))
    outcome = build_and_gate(model, torch.jit.script(model), tmp_path, settings, data)
    assert outcome.handler_fields()["compiled_models"] == [] and outcome.results == []
    assert "data-dependent" in outcome.build_info()["skipped_targets"]["cpu-fp32"].lower()
    untraceable = build_and_gate(None, torch.jit.script(model), tmp_path, settings, data)
    assert "TorchScript model cannot be exported" in untraceable.skipped["cpu-fp32"]
    assert "Not built: cpu-fp32 (" in gates_section(untraceable)


def test_without_torchscript_a_build_with_no_package_to_serve_fails_saying_why(tmp_path: Path) -> None:
    model = TinyImageNet().eval()
    images = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    data = GateData([(images,)], None, (check_images(16),), ({0: torch.export.Dim("batch", min=1, max=4)},))
    why = "the exported program traced into TorchScript serves only the batch size it was traced on"
    settings = CompileSettings(targets=(), max_batch_size=4, torchscript_precisions=("bf16",))
    with pytest.raises(
        NothingToServeError, match=f"{why}, and no AOTInductor package passed to serve instead"
    ):
        build_and_gate(model, None, tmp_path, settings, data, no_torchscript=why)
    untraceable = DataDependent()  # the fp32 package added in TorchScript's place cannot be exported either
    cpu = CompileSettings(targets=("cpu-bf16",), max_batch_size=4, torchscript_precisions=())
    with pytest.raises(NothingToServeError, match=r"cpu-bf16 not built \(.*\); cpu-fp32 not built"):
        build_and_gate(untraceable, None, tmp_path, cpu, data, no_torchscript=why)
