"""The intent model's precision/runtime gates: its test split in padded batches, scored the
way the handler answers (in-scope accuracy, out-of-scope recall at the OOS threshold)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from batchkit.text import check_tokens, load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.build.compiled import GateData, GateOutcome, build_and_gate, compile_settings
from tsbatch.build.gates import Batch, Scorer
from tsbatch.build.intent.data import Example
from tsbatch.build.intent.model import IntentClassifier


def intent_scorer(labels: Sequence[str], targets: Sequence[str], threshold: float, oos_label: str) -> Scorer:
    """In-scope accuracy and out-of-scope recall of probabilities, as the handler decides."""
    in_scope = torch.tensor([target != oos_label for target in targets])
    expected = torch.tensor([labels.index(target) for target in targets])
    oos_index = labels.index(oos_label)

    def score(probs: torch.Tensor) -> dict[str, float]:
        confidence, best = probs.max(-1)
        says_oos = (best == oos_index) | (confidence < threshold)
        correct = (best == expected) & ~says_oos
        return {
            "in_scope_accuracy": float(correct[in_scope].float().mean()),
            "oos_recall": float(says_oos[~in_scope].float().mean()) if (~in_scope).any() else 1.0,
        }

    return score


def test_batches(tokenizer_dir: Path, max_length: int, examples: Sequence[Example], size: int) -> list[Batch]:
    """The test texts in batches of ``size``, each padded to its longest text."""
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    rows = tokenize(tokenizer, [text for text, _ in examples]).ids
    padding = pad_id(tokenizer)
    return [tuple(pad_to_longest(rows[start : start + size], padding)) for start in range(0, len(rows), size)]


def compile_and_gate(
    settings: dict[str, Any],
    out: Path,
    model: IntentClassifier,
    traced: torch.jit.ScriptModule,
    tokenizer_dir: Path,
    labels: Sequence[str],
    examples: Sequence[Example],
    threshold: float,
    oos_label: str,
) -> GateOutcome:
    """.pt2 packages for what the build host serves, gated with the TorchScript candidates
    on the test split; written into ``out``."""
    compiling = compile_settings(settings)
    max_length = int(settings.get("max_length", 64))
    batches = test_batches(tokenizer_dir, max_length, examples, min(8, compiling.max_batch_size))
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    first = tokenize(tokenizer, [text for text, _ in examples[: len(batches[0][0])]]).ids
    singles = [tuple(pad_to_longest([row], pad_id(tokenizer))) for row in first]
    score = intent_scorer(labels, [label for _, label in examples], threshold, oos_label)
    batch = torch.export.Dim("batch", min=1, max=compiling.max_batch_size)
    tokens = torch.export.Dim("tokens", min=2, max=max_length)
    shapes = ({0: batch, 1: tokens}, {0: batch, 1: tokens})
    data = GateData(batches, score, check=check_tokens(tokenizer), dynamic_shapes=shapes, singles=singles)
    return build_and_gate(model.eval(), traced, out, compiling, data)
