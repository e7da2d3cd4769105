"""The served out-of-scope decision, threshold calibration, per-intent errors and the gates."""

from __future__ import annotations

import numpy as np

from tsbatch.kinds.text.evaluate import calibrate_threshold, check_gates, decide, evaluate

LABELS = ["balance", "transfer", "oos"]


def probabilities(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float64)


def test_decide_uses_the_oos_class_and_the_threshold() -> None:
    probs = probabilities([[0.9, 0.05, 0.05], [0.4, 0.35, 0.25], [0.1, 0.1, 0.8]])
    assert decide(probs, LABELS, 0.0) == ["balance", "balance", "oos"]
    assert decide(probs, LABELS, 0.5) == ["balance", "oos", "oos"]


def test_calibrate_threshold_separates_low_confidence_oos() -> None:
    # in-scope rows are confident; two oos rows slip through the oos class at ~0.4-0.45
    probs = probabilities(
        [
            [0.9, 0.05, 0.05],
            [0.05, 0.85, 0.1],
            [0.8, 0.1, 0.1],
            [0.45, 0.3, 0.25],
            [0.3, 0.4, 0.3],
            [0.1, 0.1, 0.8],
        ]
    )
    truth = ["balance", "transfer", "balance", "oos", "oos", "oos"]
    threshold, values = calibrate_threshold(probs, LABELS, truth)
    assert 0.45 < threshold <= 0.8
    assert values["in_scope_accuracy"] == 1.0 and values["oos_recall"] == 1.0


def test_evaluate_lists_errors_per_intent_and_gates_fail_below_minimum() -> None:
    examples = [("a", "balance"), ("b", "transfer"), ("c", "oos"), ("d", "oos")]
    probs = probabilities([[0.9, 0.05, 0.05], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]])
    report = evaluate(probs, LABELS, examples, threshold=0.0)
    assert report["in_scope_accuracy"] == 0.5 and report["oos_recall"] == 0.5
    assert report["per_intent_errors"]["transfer"]["cases"] == [
        {"text": "b", "predicted": "balance", "confidence": 0.7}
    ]
    assert report["per_intent_errors"]["oos"]["errors"] == 1
    assert check_gates({"test": report}, {"in_scope_accuracy": 0.95, "oos_recall": 0.4}) == [
        "test in_scope_accuracy 0.5000 < gate 0.95"
    ]


def test_per_label_scores_confusion_pairs_and_gates_on_every_gated_split() -> None:
    examples = [("a", "balance"), ("b", "balance"), ("c", "transfer"), ("d", "oos"), ("e", "oos")]
    probs = probabilities(
        [[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]
    )
    report = evaluate(probs, LABELS, examples, threshold=0.0)
    assert report["per_label"]["balance"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667, "support": 2}
    assert report["per_label"]["transfer"] == {
        "precision": 0.3333,
        "recall": 1.0,
        "f1": 0.5,
        "support": 1,
    }
    assert report["in_scope_macro_f1"] == round((0.6667 + 0.5) / 2, 4)
    assert report["confusion_pairs"] == [
        {"true": "balance", "predicted": "transfer", "count": 1},
        {"true": "oos", "predicted": "transfer", "count": 1},
    ]
    gates = {"in_scope_accuracy": 0.5, "oos_recall": 0.9}
    assert check_gates({"test": report, "blind": report}, gates) == [
        "test oos_recall 0.5000 < gate 0.9",
        "blind oos_recall 0.5000 < gate 0.9",
    ]


def test_calibration_with_gates_keeps_in_scope_queries_the_sum_rule_would_reject() -> None:
    # eight confident in-scope rows, two unsure ones (0.4) that are right; two oos rows
    # caught by the oos class and one unsure oos row (0.45) that only a high threshold catches
    rows = [[0.9, 0.05, 0.05]] * 8 + [[0.4, 0.3, 0.3]] * 2 + [[0.1, 0.1, 0.8]] * 2 + [[0.45, 0.3, 0.25]]
    truth = ["balance"] * 10 + ["oos"] * 3
    summed, _ = calibrate_threshold(probabilities(rows), LABELS, truth)
    assert summed > 0.45  # 1/3 oos recall outweighs 2/10 in-scope accuracy
    gated, values = calibrate_threshold(
        probabilities(rows), LABELS, truth, gates={"in_scope_accuracy": 0.95, "oos_recall": 0.6}
    )
    assert gated <= 0.4 and values["in_scope_accuracy"] == 1.0 and values["oos_recall"] == 2 / 3
