"""The int8 candidate's place among the build's candidates: how it is quantized, the looser
accuracy limits it is held to, the check that it runs quantized kernels, and the build-time
timing that lets ``auto`` choose it.

Quantization moves answers more than bf16 does, so the gates allow what the issue's users
accept: the image accuracy within 0.5 points of fp32, the intent model's in-scope accuracy
and out-of-scope recall each within 1 point (on the test split and on the blind set), and
top-1 agreement with fp32 of 99%.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from batchkit.loader import ServedModel
from batchkit.worker import optimized_or_plain
from tsbatch.archive.timing import batch_ms

Batch = tuple[torch.Tensor, ...]

POINTS = {
    "accuracy": 0.5,
    **{f"{split}{name}": 1.0 for split in ("", "blind_") for name in ("in_scope_accuracy", "oos_recall")},
}
MIN_AGREEMENT = 0.99


@dataclass(frozen=True)
class Int8Plan:
    """How the int8 candidate is quantized: static on ``calibration`` batches (the CNN), or
    dynamic linear layers when there are none (the text model)."""

    calibration: Sequence[Batch] | None = None
    source: str = "dynamic per-token activations (no calibration)"


def gate_limits(precision: str) -> dict[str, Any]:
    """The ``judge`` keyword arguments for a candidate at ``precision`` (none: the defaults)."""
    if precision != "int8":
        return {}
    return {"points": POINTS, "min_agreement": MIN_AGREEMENT}


def quantized_ops_problem(figures: Mapping[str, float]) -> str | None:
    """Why the package cannot count as int8: its generated code calls no quantized kernel."""
    if figures.get("quantized_ops", 0) > 0:
        return None
    return "the compiled code calls no quantized kernel (qconv/qlinear/_int_mm): it would run fp32"


def int8_timing(
    candidates: Sequence[tuple[str, ServedModel]],
    passed: set[str],
    torchscript: torch.jit.ScriptModule,
    batch: Batch,
) -> dict[str, Any]:
    """The gated int8 package's time per full batch against the fastest other gated CPU
    candidate and fp32 TorchScript as workers optimize it, on this (the build) machine:
    ``auto`` serves int8 only where ``speedup`` is clearly above 1."""
    served = dict(candidates)
    fp32 = ServedModel(optimized_or_plain(torchscript), "torchscript", "fp32", "model.pt", 0.0)
    rivals = {"torchscript-fp32": fp32}
    for name, model in candidates:
        if name in passed and model.precision != "int8" and "cuda" not in name:
            rivals[name] = model
    int8_ms = batch_ms(served["aoti-cpu-int8"], batch)
    timed = {name: batch_ms(rival, batch) for name, rival in rivals.items()}
    fastest = min(timed, key=timed.__getitem__) if timed else ""
    rival_ms = timed.get(fastest, 0.0)
    figures = {
        "batch_size": len(batch[0]),
        "int8_ms": round(int8_ms, 2),
        "rivals_ms": {name: round(ms, 2) for name, ms in timed.items()},
        "fastest_rival": fastest,
        "speedup": round(rival_ms / int8_ms, 3) if rival_ms else 0.0,
    }
    print(f"[export] int8 timing: {figures}")
    return figures
