"""The one table of tolerances."""

from __future__ import annotations

import pytest
import torch

from batchkit.tolerance import TOLERANCE, probabilities_disagree

EXPECTED = torch.tensor([[0.6, 0.4], [0.2, 0.8]])


@pytest.mark.parametrize(
    ("shift", "precision", "problem"),
    [
        (0.0, "fp32", None),
        (5e-5, "fp32", None),
        (5e-4, "fp32", "probabilities differ by 5.00e-04 (tolerance 0.0001 at fp32)"),
        (5e-3, "bf16", None),
        (5e-3, "fp16", None),
        (2e-2, "bf16", "probabilities differ"),
    ],
)
def test_the_tolerance_depends_on_the_precision(shift: float, precision: str, problem: str | None) -> None:
    found = probabilities_disagree(EXPECTED, EXPECTED + shift, precision)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_reduced_precisions_must_keep_the_top1_unless_told_not_to() -> None:
    near_tie = torch.tensor([[0.501, 0.499]])
    flipped = torch.tensor([[0.499, 0.501]])
    assert probabilities_disagree(near_tie, flipped, "bf16") == "top-1 differs (required at bf16)"
    assert probabilities_disagree(near_tie, flipped, "bf16", top1=False) is None
    assert "probabilities differ" in (probabilities_disagree(near_tie, flipped, "fp32") or "")
    assert set(TOLERANCE) >= {"fp32", "bf16", "fp16"}
