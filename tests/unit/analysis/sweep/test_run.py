"""Curves over batch sizes and precisions on a real (tiny) TorchScript model: timings, drift, OOM."""

from __future__ import annotations

import pytest
import torch

from batchkit.loader import load_compiled
from tsbatch.analysis.sweep.inputs import Scenario
from tsbatch.analysis.sweep.measure import Budget
from tsbatch.analysis.sweep.report import summarize
from tsbatch.analysis.sweep.run import precision_plan, run_sweep, sweep_curve
from tsbatch.analysis.sweep.swept import CompiledModule, SweptModel

FAST = Budget(iters=3, warmup=1, min_iters=2, max_seconds=2.0)
CPU = torch.device("cpu")


def test_a_curve_has_every_batch_size_with_timings_and_no_drift(tiny_swept_model: SweptModel) -> None:
    result = run_sweep([tiny_swept_model], [1, 2, 4, 8], CPU, ["fp32"], FAST, log=lambda _: None)
    assert [r.batch_size for r in result.rows] == [1, 2, 4, 8]
    assert tiny_swept_model.scenarios[0].name == "16x16"  # the archive's crop size
    for row in result.rows:
        assert row.status == "ok" and row.precision == "fp32" and row.device == "cpu"
        assert 2 <= row.iterations <= 3
        assert 0 < row.latency_p50_ms <= row.latency_p95_ms
        assert row.throughput_sps == pytest.approx(1000 * row.batch_size / row.latency_mean_ms)
        assert row.peak_mem_mb > 10 and row.mem_kind == "process_rss"
        # the same images alone at batch 1 give the same logits
        assert row.max_abs_diff < 1e-4 and row.cosine_min > 0.9999 and row.top1_agreement == 1.0
        assert row.output_dtype == "float32"


def test_reduced_precisions_are_skipped_on_the_cpu_with_a_note() -> None:
    assert precision_plan(["fp32", "fp16", "bf16"], CPU, cpu_bf16=False) == (
        ["fp32"],
        [
            "fp16 autocast skipped: no GPU (CPU fp16 autocast is not a serving mode)",
            "bf16 autocast skipped on the CPU (pass --cpu-bf16 to run it there)",
        ],
    )
    assert precision_plan(["fp32", "fp16", "bf16"], torch.device("cuda"), cpu_bf16=False) == (
        ["fp32", "fp16", "bf16"],
        [],
    )
    with pytest.raises(ValueError):
        precision_plan(["int4"], CPU, cpu_bf16=False)


def test_bf16_autocast_runs_on_the_cpu_when_asked_and_drift_against_fp32_is_recorded(
    tiny_swept_model: SweptModel,
) -> None:
    result = run_sweep(
        [tiny_swept_model], [1, 4], CPU, ["fp32", "bf16"], FAST, cpu_bf16=True, log=lambda _: None
    )
    bf16 = [r for r in result.rows if r.precision == "bf16"]
    assert [r.batch_size for r in bf16] == [1, 4]
    assert all(r.output_dtype == "bfloat16" for r in bf16)  # autocast really applied to the TorchScript model
    assert all(r.fp32_max_abs_diff is not None and r.fp32_max_abs_diff > 0 for r in bf16)
    assert all(r.fp32_max_abs_diff is None for r in result.rows if r.precision == "fp32")


def test_out_of_memory_ends_the_curve_and_is_reported() -> None:
    def forward(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        (batch,) = inputs
        if batch.shape[0] >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return batch.sum(dim=1)

    scenario = Scenario(
        "vectors", batch=lambda b, offset=0: (torch.ones(b, 3),), single=lambda i: (torch.ones(1, 3),)
    )
    lines: list[str] = []
    rows = sweep_curve("fake", scenario, forward, "fp32", [1, 2, 4, 8, 16], CPU, FAST, lines.append)
    assert [(r.batch_size, r.status) for r in rows] == [(1, "ok"), (2, "ok"), (4, "oom")]
    assert "OutOfMemoryError: CUDA out of memory" in rows[-1].note
    assert any("OOM" in line for line in lines)
    summary = summarize(rows, budget_ms=100.0)
    assert summary.batch_sizes == [1, 2] and summary.stopped.startswith("OOM at batch 4")


def test_a_compiled_package_runs_its_own_precision_with_drift_against_the_reference(
    tiny_swept_model: SweptModel,
) -> None:
    # A stand-in for a compiled package: another module of the same model, fixed to fp32.
    compiled = SweptModel(
        name="tiny-aoti",
        sla_model="tiny",
        description="stand-in",
        module=torch.jit.freeze(tiny_swept_model.module.eval()),
        scenarios=tiny_swept_model.scenarios,
        precisions=("fp32",),
        reference=tiny_swept_model.module,
    )
    result = run_sweep([compiled], [1, 4], CPU, ["fp32", "bf16"], FAST, cpu_bf16=True, log=lambda _: None)
    assert {r.precision for r in result.rows} == {"fp32"}
    assert all(r.fp32_max_abs_diff is not None and r.fp32_max_abs_diff < 1e-4 for r in result.rows)


def test_a_bf16_package_runs_without_cpu_bf16_autocast(
    tiny_swept_model: SweptModel, tiny_gated_build
) -> None:
    """The package is what workers serve at bf16: it runs whatever the autocast flag says."""
    build, _ = tiny_gated_build
    served = load_compiled(build / "model.cpu-bf16.pt2", CPU, "bf16")
    compiled = SweptModel(
        name="tiny-aoti",
        sla_model="tiny",
        description="the tiny bf16 package",
        module=CompiledModule(served),
        scenarios=tiny_swept_model.scenarios,
        precisions=("bf16",),
        reference=tiny_swept_model.module,
    )
    result = run_sweep([compiled], [1, 4], CPU, ["fp32", "bf16"], FAST, cpu_bf16=False, log=lambda _: None)
    assert {r.precision for r in result.rows} == {"bf16"} and all(r.status == "ok" for r in result.rows)
