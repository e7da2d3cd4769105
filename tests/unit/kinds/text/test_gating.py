"""The intent gates score every split they are given, test under plain names, others prefixed."""

from __future__ import annotations

import pytest
import torch

from tsbatch.kinds.text.gating import INT8_POINTS, intent_scorer

LABELS = ["balance", "transfer", "oos"]


def one_hot(indices: list[int], confidence: float = 0.9) -> torch.Tensor:
    rest = (1 - confidence) / (len(LABELS) - 1)
    probs = torch.full((len(indices), len(LABELS)), rest)
    probs[torch.arange(len(indices)), torch.tensor(indices)] = confidence
    return probs


def test_each_split_is_scored_on_its_own_rows() -> None:
    splits = {"test": ["balance", "transfer", "oos"], "blind": ["balance", "oos", "oos", "transfer"]}
    score = intent_scorer(LABELS, splits, threshold=0.5, oos_label="oos")
    # test: all right; blind: one in-scope wrong, one oos missed
    test_split, blind_split = [0, 1, 2], [0, 2, 1, 0]
    figures = score(one_hot([*test_split, *blind_split]))
    assert figures == pytest.approx(
        {"in_scope_accuracy": 1.0, "oos_recall": 1.0, "blind_in_scope_accuracy": 0.5, "blind_oos_recall": 0.5}
    )


def test_a_confidence_under_the_threshold_counts_as_out_of_scope() -> None:
    score = intent_scorer(LABELS, {"test": ["balance", "oos"]}, threshold=0.95, oos_label="oos")
    assert score(one_hot([0, 0])) == {"in_scope_accuracy": 0.0, "oos_recall": 1.0}


def test_int8_is_held_to_one_point_on_the_figures_the_scorer_names() -> None:
    splits = {"test": ["balance", "oos"], "blind": ["transfer", "oos"]}
    figures = intent_scorer(LABELS, splits, threshold=0.5, oos_label="oos")(one_hot([0, 2, 1, 2]))
    assert dict.fromkeys(figures, 1.0) == INT8_POINTS
