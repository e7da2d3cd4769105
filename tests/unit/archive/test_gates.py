"""The precision/runtime gates: accuracy, top-1 agreement and batch-mate independence."""

from __future__ import annotations

import torch

from tsbatch.archive.gates import batch_independence, judge, probabilities, top1_accuracy

REFERENCE = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
TARGETS = torch.tensor([0, 1, 0, 1])


def test_a_candidate_equal_to_fp32_passes_with_its_figures() -> None:
    result = judge(
        "aoti-cpu-bf16", "bf16", REFERENCE, REFERENCE + 0.001, top1_accuracy(TARGETS), (0.005, True)
    )
    assert result.passed, result.failures
    assert result.figures["accuracy"] == 1.0 and result.figures["top1_agreement"] == 1.0
    assert abs(result.figures["max_probability_diff"] - 0.001) < 1e-6
    assert "PASS" in result.summary()


def test_flipped_answers_fail_accuracy_and_agreement() -> None:
    flipped = REFERENCE.clone()
    flipped[2] = torch.tensor([0.4, 0.6])
    result = judge("torchscript-bf16", "bf16", REFERENCE, flipped, top1_accuracy(TARGETS), (0.0, True))
    assert not result.passed
    assert any("points from fp32" in failure for failure in result.failures)
    assert any("top-1 agreement 0.7500 below 0.995" in failure for failure in result.failures)


def test_batch_mates_tolerance_is_tighter_at_fp32() -> None:
    assert judge("a", "bf16", REFERENCE, REFERENCE, None, (5e-3, True)).passed
    fp32 = judge("b", "fp32", REFERENCE, REFERENCE, None, (5e-3, True))
    assert fp32.failures == ["a request in a full batch differs from alone by 5.00e-03 (tolerance 0.0001)"]
    other_top1 = judge("c", "bf16", REFERENCE, REFERENCE, None, (1e-3, False))
    assert other_top1.failures == ["a request in a full batch has another top-1 than alone"]


def test_batch_independence_of_a_row_wise_model() -> None:
    model = torch.nn.Linear(3, 2).eval()
    batch = (torch.randn(4, 3),)
    singles = [(batch[0][i : i + 1],) for i in range(4)]
    difference, same_top1 = batch_independence(model, batch, singles)
    assert difference < 1e-6 and same_top1
    assert probabilities(model, [batch]).shape == (4, 2)
