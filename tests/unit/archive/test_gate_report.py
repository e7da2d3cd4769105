"""The build report's gates section: every candidate with its figures, fp32 beside them."""

from __future__ import annotations

from pathlib import Path

from batchkit.config import BuildTimings
from tsbatch.archive.compiled import GateOutcome
from tsbatch.archive.gate_report import HEADING, write_gates_section
from tsbatch.archive.gates import GateResult


def outcome() -> GateOutcome:
    result = GateOutcome(max_batch_size=8, reference_figures={"accuracy": 0.99})
    result.results = [
        GateResult("aoti-cpu-bf16", "bf16", {"accuracy": 0.99, "top1_agreement": 1.0}),
        GateResult("aoti-cpu-int8", "int8", {"accuracy": 0.97}, ["accuracy 0.9700 is 2.00 points from fp32"]),
    ]
    result.int8 = {"calibration": "static, calibrated on 256 images"}
    result.timings = BuildTimings(
        cpu_model="Test CPU", batch_size=8, ms={"torchscript-fp32": 7.0, "aoti-cpu-int8": 2.0}
    )
    return result


def test_the_section_lists_reference_candidates_verdicts_and_int8(tmp_path: Path) -> None:
    text = write_gates_section(tmp_path, outcome(), "resnet18").read_text()
    assert text.startswith("# Build report: resnet18\n")
    assert "| candidate | accuracy | top1_agreement | verdict |" in text
    assert "| torchscript-fp32 (reference) | 0.99 |  | the reference, always built |" in text
    assert "| aoti-cpu-bf16 | 0.99 | 1 | PASS |" in text
    assert "| aoti-cpu-int8 | 0.97 |  | FAIL: accuracy 0.9700 is 2.00 points from fp32 |" in text
    assert "static, calibrated on 256 images" in text
    assert (
        "Build timings on Test CPU, ms per batch of 8, fastest first:\n- aoti-cpu-int8: 2\n- torchscript-fp32: 7\n"
        in text
    )


def test_rewriting_replaces_the_section_and_keeps_the_training_report(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("# Intent classifier report\n\ntraining figures\n")
    write_gates_section(tmp_path, outcome(), "bert_intent")
    text = write_gates_section(tmp_path, outcome(), "bert_intent").read_text()
    assert text.startswith("# Intent classifier report\n\ntraining figures\n\n" + HEADING)
    assert text.count(HEADING) == 1


def test_without_torchscript_the_section_names_the_eager_reference_and_what_serves(tmp_path: Path) -> None:
    program_only = outcome()
    program_only.no_torchscript = (
        "the exported program traced into TorchScript serves only the batch size it was traced on"
    )
    program_only.compiled_models = ["model.cpu-bf16.pt2"]
    text = write_gates_section(tmp_path, program_only, "lite").read_text()
    assert "| eager fp32 (reference) | 0.99 |  | the reference, not served |" in text
    assert "torchscript-fp32 (reference)" not in text
    assert (
        "**No TorchScript**: the exported program traced into TorchScript serves only the batch size "
        "it was traced on. The archive serves its packages that passed (model.cpu-bf16.pt2)"
    ) in text
