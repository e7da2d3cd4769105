"""The training report's markdown: scores, the verdict and the errors by intent."""

from __future__ import annotations

import numpy as np

from tsbatch.kinds.text.evaluate import evaluate
from tsbatch.kinds.text.report import render_markdown

LABELS = ["balance", "transfer", "oos"]


def test_markdown_shows_the_failed_verdict_and_each_error() -> None:
    examples = [("a", "balance"), ("b", "transfer"), ("c", "oos"), ("d", "oos")]
    probs = np.asarray([[0.9, 0.05, 0.05], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]])
    split = evaluate(probs, LABELS, examples, threshold=0.0)
    markdown = render_markdown(
        {
            "model": "m",
            "base_model": "b",
            "data": "d",
            "labels": LABELS,
            "oos_label": "oos",
            "oos_threshold": 0.3,
            "train_examples": 4,
            "training_seconds": 1.0,
            "validation": split,
            "test": split,
            "blind": split,
            "leakage": {
                "blind": {
                    "size": 6,
                    "repeats": 2,
                    "exact": 1,
                    "near": 1,
                    "examples": ["'a' ~ 'a'"],
                    "dropped": True,
                }
            },
            "gates": {"in_scope_accuracy": 0.95, "oos_recall": 0.4},
            "passed": False,
            "failures": ["x"],
        }
    )
    assert "FAIL" in markdown and '"b" -> balance' in markdown
    assert "| blind | 4 (2 repeats dropped) | 0.5000 | 0.5000 |" in markdown
    assert "- blind: 2 of 6 (1 exact, 1 near), **dropped: this split is altered**" in markdown
    assert "## Confusion pairs (blind: true -> predicted)" in markdown
    assert "- transfer -> balance: 1" in markdown and "| transfer | 0.000 | 0.000 | 0.000 |" in markdown
