"""Running the sweep: every swept model, precision and scenario as one curve of batch sizes,
each curve ending at its first out-of-memory error."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from batchkit.candidates import PRECISIONS
from batchkit.precision import DTYPES, native_cpu_int8
from batchkit.worker import optimized_or_plain
from tsbatch.analysis.sweep.inputs import POOL_SIZE, ROTATIONS, Inputs, Scenario
from tsbatch.analysis.sweep.measure import (
    Budget,
    Forward,
    MemoryProbe,
    References,
    drift,
    is_out_of_memory,
    time_batch,
    to_device,
)
from tsbatch.analysis.sweep.rows import SweepResult, SweepRow
from tsbatch.analysis.sweep.swept import SweptModel
from tsbatch.sla.percentile import percentile

# int8 exists only as a quantized package (a compiled package), never as the TorchScript module.
MODULE_PRECISIONS = ("fp32", "fp16", "bf16")


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    if precision in ("fp32", "int8"):  # an int8 package takes fp32 and quantizes inside
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def sweep_curve(
    model_name: str,
    scenario: Scenario,
    forward: Forward,
    precision: str,
    batch_sizes: Sequence[int],
    device: torch.device,
    budget: Budget,
    log: Callable[[str], None] = print,
    fp32_references: References | None = None,
) -> list[SweepRow]:
    """One curve: every batch size in order; stops at the first out-of-memory error."""
    memory = MemoryProbe(device)
    references = References(scenario, forward, device)
    rows: list[SweepRow] = []

    for batch_size in batch_sizes:
        row = SweepRow(
            model_name, scenario.name, precision, device.type, batch_size, "ok", mem_kind=memory.kind
        )
        try:
            batches = [
                to_device(scenario.batch(batch_size, k * batch_size), device)
                for k in range(max(1, min(ROTATIONS, -(-POOL_SIZE // batch_size))))
            ]
            latencies, output = time_batch(forward, batches, device, budget, memory)
            del batches
            output = output.cpu()
            row.max_abs_diff, row.cosine_min, row.top1_agreement = drift(references.first(batch_size), output)
            if fp32_references is not None and (
                precision != "fp32" or fp32_references.forward is not forward
            ):
                row.fp32_max_abs_diff, _, row.fp32_top1_agreement = drift(
                    fp32_references.first(batch_size), output
                )
        except Exception as exc:  # OOM ends the curve; any other error is recorded too
            oom = is_out_of_memory(exc)
            row.status = "oom" if oom else "error"
            row.note = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            rows.append(row)
            log(
                f"[sweep] {model_name} {scenario.name} {precision} batch {batch_size}: {row.status.upper()} {row.note}"
            )
            if device.type == "cuda":
                torch.cuda.empty_cache()
            break
        row.iterations = len(latencies)
        row.latency_mean_ms = sum(latencies) / len(latencies)
        row.latency_p50_ms = percentile(latencies, 50)
        row.latency_p95_ms = percentile(latencies, 95)
        row.throughput_sps = 1000 * batch_size / row.latency_mean_ms
        row.peak_mem_mb = memory.peak_mb
        row.output_dtype = str(output.dtype).removeprefix("torch.")
        rows.append(row)
        log(
            f"[sweep] {model_name:<18} {scenario.name:<26} {precision} b={batch_size:<3} "
            f"mean {row.latency_mean_ms:8.2f} ms  p95 {row.latency_p95_ms:8.2f} ms  "
            f"{row.throughput_sps:9.1f}/s  mem {row.peak_mem_mb:7.0f} MB  "
            f"drift {row.max_abs_diff:.2e} cos {row.cosine_min:.6f} top1 {row.top1_agreement:.3f}"
        )
    return rows


def module_forward(module: torch.nn.Module, device: torch.device, precision: str) -> Forward:
    def forward(inputs: Inputs) -> torch.Tensor:
        with torch.inference_mode(), autocast(device, precision):
            return module(*inputs)

    return forward


def precision_plan(
    requested: Sequence[str], device: torch.device, cpu_bf16: bool
) -> tuple[list[str], list[str]]:
    """(precisions to run, notes on the skipped ones) for this device."""
    run, notes = [], []
    for precision in requested:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r} (have {PRECISIONS})")
        if precision == "int8":
            if device.type == "cpu" and native_cpu_int8():
                run.append(precision)
            else:
                notes.append("int8 skipped: it runs only on a CPU with VNNI / AMX-int8 (none here)")
        elif device.type == "cuda" or precision == "fp32":
            run.append(precision)
        elif precision == "fp16":
            notes.append("fp16 autocast skipped: no GPU (CPU fp16 autocast is not a serving mode)")
        elif cpu_bf16:
            run.append(precision)
        else:
            notes.append("bf16 autocast skipped on the CPU (pass --cpu-bf16 to run it there)")
    return run, notes


def run_sweep(
    swept_models: Sequence[SweptModel],
    batch_sizes: Sequence[int],
    device: torch.device,
    precisions: Sequence[str],
    budget: Budget,
    cpu_bf16: bool = False,
    log: Callable[[str], None] = print,
) -> SweepResult:
    result = SweepResult()
    run, notes = precision_plan(precisions, device, cpu_bf16)
    result.notes.extend(notes)
    for note in notes:
        log(f"[sweep] {note}")
    for swept in swept_models:
        module = swept.module.to(device)
        served = optimized_or_plain(module) if swept.optimize else module
        fp32_forward = module_forward(served, device, "fp32")
        reference = (
            fp32_forward
            if swept.reference is None
            else module_forward(swept.reference.to(device), device, "fp32")
        )
        fp32_references = {s.name: References(s, reference, device) for s in swept.scenarios}
        # A compiled package runs in the precision it was built for whenever that one was
        # asked for: the autocast rules above are about TorchScript, not what workers serve.
        own = (
            [p for p in run if p in MODULE_PRECISIONS]
            if swept.precisions is None
            else [p for p in precisions if p in swept.precisions]
        )
        for precision in own:
            forward = fp32_forward if precision == "fp32" else module_forward(module, device, precision)
            for scenario in swept.scenarios:
                result.rows.extend(
                    sweep_curve(
                        swept.name, scenario, forward, precision, batch_sizes, device, budget, log,
                        fp32_references[scenario.name],
                    )
                )  # fmt: skip
        swept.module = module.cpu()
    return result
