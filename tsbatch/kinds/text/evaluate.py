"""The served decision, its out-of-scope threshold, and the scores the quality gates read.

A request is out of scope when the head says ``oos`` or when its best in-scope
probability is below a threshold calibrated on the validation split; the handler makes
the same decision with the threshold that travels in the archive.

The scores are those of the out-of-scope literature (CLINC150, Larson et al. 2019):
in-scope accuracy over in-scope queries, out-of-scope recall and precision, and per
intent precision, recall and F1 with their macro average.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from text_serving.text import load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.kinds.text.data import Example
from tsbatch.kinds.text.schema import OOS_LABEL

GATED_SCORES = ("in_scope_accuracy", "oos_recall")


def predict_probabilities(
    model: torch.nn.Module, tokenizer_dir: Path, texts: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    """Softmax probabilities for many texts, batched by length like the handler does."""
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    tokenized = tokenize(tokenizer, texts)
    order = sorted(range(len(texts)), key=lambda i: -len(tokenized.ids[i]))
    probabilities = np.zeros((len(texts), 0), dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            input_ids, attention_mask = pad_to_longest([tokenized.ids[i] for i in chunk], padding)
            values = torch.softmax(model(input_ids, attention_mask).float(), dim=1).double().numpy()
            if probabilities.shape[1] == 0:
                probabilities = np.zeros((len(texts), values.shape[1]), dtype=np.float64)
            probabilities[chunk] = values
    return probabilities


def decide(
    probabilities: np.ndarray, labels: Sequence[str], threshold: float, oos_label: str = OOS_LABEL
) -> list[str]:
    """The served decision: the top label, or ``oos`` when it is ``oos`` or below threshold."""
    top = probabilities.argmax(axis=1)
    confidence = probabilities.max(axis=1)
    return [
        oos_label if labels[index] == oos_label or value < threshold else labels[index]
        for index, value in zip(top, confidence, strict=True)
    ]


def scores(predicted: Sequence[str], truth: Sequence[str], oos_label: str = OOS_LABEL) -> dict[str, float]:
    in_scope = [(p, t) for p, t in zip(predicted, truth, strict=True) if t != oos_label]
    oos = [p for p, t in zip(predicted, truth, strict=True) if t == oos_label]
    predicted_oos = [t for p, t in zip(predicted, truth, strict=True) if p == oos_label]
    return {
        "in_scope_accuracy": sum(p == t for p, t in in_scope) / max(1, len(in_scope)),
        "oos_recall": sum(p == oos_label for p in oos) / max(1, len(oos)),
        "oos_precision": sum(t == oos_label for t in predicted_oos) / max(1, len(predicted_oos)),
        "in_scope_rejected": sum(p == oos_label for p, _ in in_scope) / max(1, len(in_scope)),
    }


def per_label_scores(predicted: Sequence[str], truth: Sequence[str]) -> dict[str, dict[str, float]]:
    """Precision, recall, F1 and support of every label that occurs in truth or predictions."""
    pairs = Counter(zip(truth, predicted, strict=True))
    results: dict[str, dict[str, float]] = {}
    for label in sorted(set(truth) | set(predicted)):
        hits = pairs[(label, label)]
        as_label = sum(count for (_, guess), count in pairs.items() if guess == label)
        support = sum(count for (real, _), count in pairs.items() if real == label)
        precision = hits / as_label if as_label else 0.0
        recall = hits / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        results[label] = {
            "precision": round(precision, 4),
            "recall": round(recall, 4),
            "f1": round(f1, 4),
            "support": support,
        }
    return results


def confusion_pairs(predicted: Sequence[str], truth: Sequence[str]) -> list[dict[str, Any]]:
    """Every (true label, predicted label) mistake with its count, most frequent first."""
    counts = Counter((t, p) for p, t in zip(predicted, truth, strict=True) if p != t)
    return [
        {"true": real, "predicted": guess, "count": count}
        for (real, guess), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def calibrate_threshold(
    probabilities: np.ndarray,
    labels: Sequence[str],
    truth: Sequence[str],
    oos_label: str = OOS_LABEL,
    ceiling: float = 0.9,
    gates: dict[str, float] | None = None,
) -> tuple[float, dict[str, float]]:
    """The confidence threshold that leaves the most room under both gates on validation:
    the largest min(in-scope accuracy - its gate, oos recall - its gate). Without gates it
    maximises in-scope accuracy + oos recall, which weighs one oos example as much as
    several in-scope ones and so rejects in-scope queries a gate would rather keep.

    Every threshold on the best plateau scores the same on validation; the middle of the
    plateau is the one least tuned to these particular examples.
    """
    candidates = np.round(np.arange(0.0, ceiling + 1e-9, 0.01), 2)
    results = []
    for threshold in candidates:
        values = scores(decide(probabilities, labels, float(threshold), oos_label), truth, oos_label)
        if gates:
            results.append(min(values[key] - float(gates.get(key, 0.0)) for key in GATED_SCORES))
        else:
            results.append(values["in_scope_accuracy"] + values["oos_recall"])
    best = max(results)
    plateau = [float(t) for t, value in zip(candidates, results, strict=True) if value >= best - 1e-12]
    # The longest run of consecutive best thresholds, then its middle.
    runs: list[list[float]] = []
    for threshold in plateau:
        if runs and abs(threshold - runs[-1][-1] - 0.01) < 1e-6:
            runs[-1].append(threshold)
        else:
            runs.append([threshold])
    longest = max(runs, key=len)
    threshold = round(longest[len(longest) // 2], 2)
    return threshold, scores(decide(probabilities, labels, threshold, oos_label), truth, oos_label)


def evaluate(
    probabilities: np.ndarray,
    labels: Sequence[str],
    examples: Sequence[Example],
    threshold: float,
    oos_label: str = OOS_LABEL,
) -> dict[str, Any]:
    """Scores and every error of one split, grouped by true intent."""
    truth = [label for _, label in examples]
    predicted = decide(probabilities, labels, threshold, oos_label)
    errors: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row, ((text, label), guess) in enumerate(zip(examples, predicted, strict=True)):
        if guess != label:
            errors[label].append(
                {"text": text, "predicted": guess, "confidence": round(float(probabilities[row].max()), 4)}
            )
    counts = Counter(truth)
    per_label = per_label_scores(predicted, truth)
    in_scope_f1 = [
        values["f1"] for label, values in per_label.items() if label != oos_label and counts[label]
    ]
    return {
        **{key: round(value, 4) for key, value in scores(predicted, truth, oos_label).items()},
        "in_scope_macro_f1": round(sum(in_scope_f1) / max(1, len(in_scope_f1)), 4),
        "examples": len(examples),
        "in_scope_examples": sum(v for k, v in counts.items() if k != oos_label),
        "oos_examples": counts.get(oos_label, 0),
        "per_label": per_label,
        "confusion_pairs": confusion_pairs(predicted, truth),
        "per_intent_errors": {
            label: {"errors": len(errors[label]), "examples": counts[label], "cases": errors[label]}
            for label in sorted(errors)
        },
    }


def check_gates(split_reports: dict[str, dict[str, Any]], gates: dict[str, float]) -> list[str]:
    """One line per score below its gate, for every gated split (test, and blind when given)."""
    failures = []
    for name, values in split_reports.items():
        for key in GATED_SCORES:
            minimum = float(gates.get(key, 0.0))
            if values[key] < minimum:
                failures.append(f"{name} {key} {values[key]:.4f} < gate {minimum}")
    return failures
