"""The int8 candidate's place among the build's candidates: what its kind tells the core
about quantizing it (``Int8Plan``), the looser limits it is held to and the check that it
runs quantized kernels (the build times it with every other candidate,
``tsbatch.archive.timing``).

Quantization moves answers more than bf16 does, so the gates allow what users accept: top-1
agreement with fp32 of 99%, and each accuracy figure within the points its kind allows for
the figures its scorer names (``Int8Plan.points``; a figure it leaves out keeps the 0.5 points
of ``tsbatch.archive.gates``). The core names no kind's figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tsbatch.archive.int8.quantize import Prepare

Batch = tuple[torch.Tensor, ...]

MIN_AGREEMENT = 0.99


@dataclass(frozen=True)
class Int8Plan:
    """How a kind's int8 candidate is quantized and judged: static on ``calibration`` batches
    (the CNN), or dynamic linear layers when there are none (the text model); ``prepare``
    rewrites the eager model before quantizing (a copy PT2E can capture; None: as it is);
    ``points``: the allowed drop of each of its scorer's figures, in points."""

    calibration: Sequence[Batch] | None = None
    source: str = "dynamic per-token activations (no calibration)"
    prepare: Prepare | None = None
    points: Mapping[str, float] = field(default_factory=dict)


def gate_limits(precision: str, plan: Int8Plan) -> dict[str, Any]:
    """The ``judge`` keyword arguments for a candidate at ``precision`` (none: the defaults)."""
    if precision != "int8":
        return {}
    return {"points": dict(plan.points), "min_agreement": MIN_AGREEMENT}


def quantized_ops_problem(figures: Mapping[str, float]) -> str | None:
    """Why the package cannot count as int8: its generated code calls no quantized kernel."""
    if figures.get("quantized_ops", 0) > 0:
        return None
    return "the compiled code calls no quantized kernel (qconv/qlinear/_int_mm): it would run fp32"
