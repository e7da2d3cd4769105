"""`make doctor`: the machine report, with the hardware-dependent lines forced."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import tiny_image_handler
from tsbatch.archive import artifacts
from tsbatch.machine import flag_lines, model_lines, report


def test_flags_that_decide_precision_are_listed_yes_or_no() -> None:
    lines = flag_lines({"avx2", "avx512_vnni"})
    assert "  avx2         yes" in lines and "  amx_bf16     no" in lines and "  avx512_vnni  yes" in lines


def test_a_model_line_names_the_plan_a_worker_here_follows(
    tmp_path: Path, tiny_gated_build, monkeypatch
) -> None:
    monkeypatch.setenv("TSBATCH_PRECISION", "fp16")  # forced, whatever this CPU has
    build, fields = tiny_gated_build
    artifacts.write_json(tmp_path / artifacts.HANDLER_CONFIG_FILE, {**tiny_image_handler(), **fields})
    for package in build.glob("model.*.pt2"):
        (tmp_path / package.name).write_bytes(package.read_bytes())
    lines = model_lines("tiny", "image", tmp_path, batch_size=4)
    assert lines[0].startswith("  tiny: precision fp16 (set explicitly")
    assert lines[1] == "    tries aoti-cpu-fp16, then torchscript-fp16, then torchscript-fp32"
    assert "model.cpu-fp16.pt2: runs on this CPU (built for " in lines[-1]
    assert model_lines("tiny", "image", tmp_path / "missing", 4) == ["  tiny: not built (make archive)"]


def test_the_report_covers_cpu_compiler_gpu_and_models() -> None:
    text = "\n".join(report())
    for heading in ("CPU: ", "C++ compiler", "GPU:", "CUDA", "Models ("):
        assert heading in text
