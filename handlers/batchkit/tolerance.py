"""How close two answers computed at one precision must be: the one table of tolerances.

The build's gates (a request inside a full batch against the same request alone), the
worker's load check (the artifact it loaded against the outputs the build recorded for
it) and the tests that compare served answers all read it here, so a precision that is
allowed to round differently is allowed so everywhere, and nowhere more.
"""

from __future__ import annotations

import torch

# Largest difference in any class probability. fp32 answers differ only by summation
# order; bf16 and fp16 keep 8 and 11 bits of mantissa, so their rounding shows in the
# second decimal of a probability; int8 activations are requantized per batch shape. The
# reduced precisions must also keep the same top-1.
TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2, "int8": 5e-2}


def tolerance(precision: str) -> float:
    """The tolerance of ``precision`` (a KeyError names an unknown precision)."""
    return TOLERANCE[precision]


def needs_same_top1(precision: str) -> bool:
    """Reduced precisions must also agree on the most probable class."""
    return precision != "fp32"


def probabilities_disagree(
    expected: torch.Tensor, actual: torch.Tensor, precision: str, *, top1: bool = True
) -> str | None:
    """Why two probability tables (rows of items) disagree at ``precision``, or None.

    ``top1=False`` skips the top-1 rule: a check on random inputs can meet near-ties.
    """
    expected, actual = expected.float(), actual.float()
    if expected.shape != actual.shape:
        return f"shapes differ: {tuple(expected.shape)} vs {tuple(actual.shape)}"
    difference = float((expected - actual).abs().max()) if expected.numel() else 0.0
    if not difference <= tolerance(precision):
        return f"probabilities differ by {difference:.2e} (tolerance {tolerance(precision):g} at {precision})"
    if top1 and needs_same_top1(precision) and not torch.equal(expected.argmax(-1), actual.argmax(-1)):
        return f"top-1 differs (required at {precision})"
    return None
