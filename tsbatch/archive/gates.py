"""Accuracy gates for each way of serving a model (runtime x precision) against fp32.

A candidate is served only when, on the build's held-out data, it keeps every accuracy
figure within 0.5 points of fp32 TorchScript, agrees with its top-1 on at least 99.5% of
the items, and answers a request inside a full batch as it answers it alone, within the
precision's tolerance (``batchkit.tolerance``, the table the worker and the tests use).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from batchkit.tolerance import needs_same_top1, tolerance

ACCURACY_POINTS = 0.5
MIN_AGREEMENT = 0.995

Batch = tuple[torch.Tensor, ...]
Forward = Callable[..., torch.Tensor]
Scorer = Callable[[torch.Tensor], dict[str, float]]


@dataclass
class GateResult:
    """One candidate's figures and the gates it failed (none: it may be served)."""

    candidate: str
    precision: str
    figures: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        shown = ", ".join(f"{key} {value:.4g}" for key, value in self.figures.items())
        verdict = "PASS" if self.passed else "FAIL: " + "; ".join(self.failures)
        return f"{self.candidate}: {shown} -> {verdict}"


def probabilities(forward: Forward, batches: Sequence[Batch]) -> torch.Tensor:
    """Softmax of ``forward`` over the batches, concatenated, in fp32."""
    with torch.inference_mode():
        return torch.cat([torch.softmax(forward(*batch).float(), dim=-1) for batch in batches])


def top1_accuracy(labels: torch.Tensor) -> Scorer:
    """A scorer: the share of items whose most probable class is its label."""

    def score(probs: torch.Tensor) -> dict[str, float]:
        return {"accuracy": float((probs.argmax(-1) == labels).float().mean())}

    return score


def batch_independence(forward: Forward, full_batch: Batch, singles: Sequence[Batch]) -> tuple[float, bool]:
    """Largest probability difference of the items of a full batch vs each alone, and
    whether every top-1 matched."""
    batched = probabilities(forward, [full_batch])
    alone = probabilities(forward, singles)
    difference = float((batched - alone).abs().max())
    return difference, bool(torch.equal(batched.argmax(-1), alone.argmax(-1)))


def judge(
    candidate: str,
    precision: str,
    reference: torch.Tensor,
    candidate_probs: torch.Tensor,
    score: Scorer | None,
    independence: tuple[float, bool],
    points: Mapping[str, float] | None = None,
    min_agreement: float = MIN_AGREEMENT,
    expected: Mapping[str, float] | None = None,
) -> GateResult:
    """Compare a candidate's probabilities with fp32 TorchScript's on the same items
    (``points``: a figure's allowed drop, default ``ACCURACY_POINTS``; int8 sets both;
    ``expected``: fp32's scores when the caller has them, else scored here)."""
    result = GateResult(candidate, precision)
    if score is not None:
        expected = expected if expected is not None else score(reference)
        actual = score(candidate_probs)
        for name, value in actual.items():
            result.figures[name] = value
            drop = 100 * abs(value - expected[name])
            if drop > (points or {}).get(name, ACCURACY_POINTS):
                result.failures.append(
                    f"{name} {value:.4f} is {drop:.2f} points from fp32 {expected[name]:.4f}"
                )
    agreement = float((reference.argmax(-1) == candidate_probs.argmax(-1)).float().mean())
    result.figures["top1_agreement"] = agreement
    result.figures["max_probability_diff"] = float((reference - candidate_probs).abs().max())
    if agreement < min_agreement:
        result.failures.append(f"top-1 agreement {agreement:.4f} below {min_agreement}")
    difference, same_top1 = independence
    result.figures["batch_vs_alone_max_diff"] = difference
    if not difference <= tolerance(precision):
        result.failures.append(
            f"a request in a full batch differs from alone by {difference:.2e} "
            f"(tolerance {tolerance(precision):g})"
        )
    if needs_same_top1(precision) and not same_top1:
        result.failures.append("a request in a full batch has another top-1 than alone")
    return result
