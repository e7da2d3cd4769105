"""The int8 candidate's place among the build's candidates: how it is quantized, the looser
accuracy limits it is held to and the check that it runs quantized kernels (the build
times it with every other candidate, ``tsbatch.archive.timing``).

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
