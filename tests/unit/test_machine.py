"""`make doctor`: the machine report, with the hardware-dependent lines forced."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from batchkit.loader import host_here
from tests.conftest import tiny_image_handler
from tsbatch.archive import artifacts
from tsbatch.machine import flag_lines, model_lines, model_plan, report

CPU = torch.device("cpu")


def test_flags_that_decide_precision_are_listed_yes_or_no() -> None:
    lines = flag_lines({"avx2", "avx512_vnni"})
    assert "  avx2         yes" in lines and "  amx_bf16     no" in lines and "  avx512_vnni  yes" in lines


def built(tmp_path: Path, build: Path, fields: dict) -> Path:
    artifacts.write_json(tmp_path / artifacts.HANDLER_CONFIG_FILE, {**tiny_image_handler(), **fields})
    for package in build.glob("model.*.pt2"):
        (tmp_path / package.name).write_bytes(package.read_bytes())
    return tmp_path


def test_the_doctor_says_why_with_the_builds_timings(tmp_path: Path, tiny_gated_build, monkeypatch) -> None:
    """The tiny build was timed on this CPU: the doctor's plan is by measurement, and says so
    with the build's figures."""
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    model_dir = built(tmp_path, *tiny_gated_build)
    planned = model_plan(model_dir, batch_size=4)
    assert planned is not None
    head = planned.reasons[0]
    timings = tiny_gated_build[1]["timings_ms"]
    assert head.code == "measured" and timings["cpu_model"] in head.detail
    assert f"torchscript-fp32 {timings['ms']['torchscript-fp32']:g} ms" in head.detail
    elsewhere = model_plan(model_dir, 4, replace(host_here(model_dir, CPU, 4), cpu_model="Another CPU"))
    assert elsewhere is not None and elsewhere.reasons[0].code == "other-cpu"
    lines = model_lines("tiny", model_dir, batch_size=4)
    assert lines[0] == f"  tiny: serves {planned.first.name}"
    assert lines[2] == f"    why {head}"


def test_a_model_line_names_the_plan_a_worker_here_follows(
    tmp_path: Path, tiny_gated_build, monkeypatch
) -> None:
    monkeypatch.setenv("TSBATCH_PRECISION", "fp16")  # forced, whatever this CPU has
    model_dir = built(tmp_path, *tiny_gated_build)
    planned = model_plan(model_dir, batch_size=4)
    assert planned is not None and planned.reasons[0].code == "precision-set"
    assert planned.candidates[-1].name == "torchscript-fp32"
    assert {candidate.precision for candidate in planned.candidates[:-1]} == {"fp16"}
    lines = model_lines("tiny", model_dir, batch_size=4)
    assert lines[1] == "    tries " + ", then ".join(c.name for c in planned.candidates)
    if planned.first.runtime == "aoti":
        assert "model.cpu-fp16.pt2: runs on this CPU (built for " in lines[-1]
    assert model_plan(tmp_path / "missing", 4) is None
    assert model_lines("tiny", tmp_path / "missing", 4) == ["  tiny: not built (make archive)"]


def test_the_report_covers_cpu_compiler_gpu_and_models() -> None:
    text = "\n".join(report())
    for heading in ("CPU: ", "C++ compiler", "GPU:", "CUDA", "Models ("):
        assert heading in text


def test_an_archive_without_torchscript_that_cannot_serve_here_says_so(tmp_path: Path) -> None:
    handler = {
        **tiny_image_handler(),
        "model_file": "",
        "compiled_models": ["model.cpu-fp32.pt2"],
        "compiled_max_batch_size": 4,
        "check_outputs": {"aoti-cpu-fp32": [[1.0]]},
        "compiled_cpu_flags": ["no_such_flag"],
    }
    artifacts.write_json(tmp_path / artifacts.HANDLER_CONFIG_FILE, handler)
    (tmp_path / "model.cpu-fp32.pt2").write_bytes(b"")
    lines = model_lines("program", tmp_path, 4)
    assert lines[0] == "  program: serves nothing on this machine"
    assert "no TorchScript model and none of its AOTInductor packages" in lines[1]
    assert "which this CPU lacks" in lines[1]
