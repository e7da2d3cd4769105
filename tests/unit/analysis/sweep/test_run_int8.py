"""int8 as a sweep dimension: only where the CPU has VNNI, only for an int8 package, with its
drift measured against fp32 at batch 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tsbatch.analysis.sweep import run
from tsbatch.analysis.sweep.measure import Budget
from tsbatch.analysis.sweep.run import precision_plan, run_sweep
from tsbatch.analysis.sweep.swept import compiled_swept_models
from tsbatch.kinds.image.sweep import archive_swept_model

FAST = Budget(iters=3, warmup=1, min_iters=2, max_seconds=2.0)
CPU = torch.device("cpu")


def test_int8_runs_only_on_a_cpu_with_vnni(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "native_cpu_int8", lambda: True)
    assert precision_plan(["fp32", "int8"], CPU, cpu_bf16=False) == (["fp32", "int8"], [])
    monkeypatch.setattr(run, "native_cpu_int8", lambda: False)
    assert precision_plan(["int8"], CPU, cpu_bf16=False) == (
        [],
        ["int8 skipped: it runs only on a CPU with VNNI / AMX-int8 (none here)"],
    )
    assert precision_plan(["int8"], torch.device("cuda"), cpu_bf16=False)[0] == []


def test_the_int8_package_is_swept_with_drift_against_fp32(
    tiny_image_model_dir: tuple[Path, dict], tiny_int8_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "native_cpu_int8", lambda: True)  # forced: the package runs on any x86 CPU
    model_dir, model_yaml = tiny_image_model_dir
    shutil.copy2(tiny_int8_package, model_dir / tiny_int8_package.name)
    handler = {
        **model_yaml["handler"],
        "compiled_models": [tiny_int8_package.name],
        "compiled_max_batch_size": 4,
    }
    (model_dir / "handler_config.json").write_text(json.dumps(handler))
    base = archive_swept_model("tiny", model_dir)
    (compiled,) = compiled_swept_models(base, model_dir, "cpu")
    result = run_sweep([base, compiled], [1, 4], CPU, ["fp32", "int8"], FAST, log=lambda _: None)
    int8 = [row for row in result.rows if row.precision == "int8"]
    assert {row.model for row in int8} == {"tiny-aoti"}  # the TorchScript module has no int8 row
    assert [row.batch_size for row in int8] == [1, 4]
    assert all(row.status == "ok" and row.output_dtype == "float32" for row in int8)
    assert all(row.fp32_max_abs_diff is not None and 0 < row.fp32_max_abs_diff < 0.5 for row in int8)
