"""A text model's precision/runtime gates: its test split and, when the build has one,
its blind set, in padded batches, each scored the way the handler answers (in-scope
accuracy, out-of-scope recall at the OOS threshold); without labelled data, texts on which
the candidates must agree with fp32."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from text_serving.text import check_tokens, load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.archive.build import GatePlan
from tsbatch.archive.compiled import CompileSettings, GateData
from tsbatch.archive.gates import Batch, Scorer
from tsbatch.archive.int8.candidate import Int8Plan
from tsbatch.kinds.text.data import Example


def figure_prefix(split: str) -> str:
    """Test figures keep their plain names; another split's are prefixed (``blind_oos_recall``)."""
    return "" if split == "test" else f"{split}_"


# The int8 candidate's allowed drop, in points, of the intent scorer's figures: in-scope
# accuracy and out-of-scope recall each within 1 point, on the test split and on the blind
# set (quantization moves answers more than bf16, whose limit stays the gates' 0.5).
INT8_POINTS = {
    f"{figure_prefix(split)}{name}": 1.0
    for split in ("test", "blind")
    for name in ("in_scope_accuracy", "oos_recall")
}


def intent_scorer(
    labels: Sequence[str], splits: Mapping[str, Sequence[str]], threshold: float, oos_label: str
) -> Scorer:
    """In-scope accuracy and out-of-scope recall of each split's probabilities (the splits'
    rows concatenated in ``splits`` order), as the handler decides."""
    row_labels = [label for split_labels in splits.values() for label in split_labels]
    in_scope = torch.tensor([label != oos_label for label in row_labels])
    # An out-of-scope label the model lacks (a threshold alone decides) matches no index.
    index = {label: position for position, label in enumerate(labels)}
    expected = torch.tensor([index.get(label, -1) for label in row_labels])
    oos_index = index.get(oos_label, -1)
    bounds, start = {}, 0
    for split, split_labels in splits.items():
        bounds[split] = slice(start, start + len(split_labels))
        start += len(split_labels)

    def score(probs: torch.Tensor) -> dict[str, float]:
        confidence, best = probs.max(-1)
        says_oos = (best == oos_index) | (confidence < threshold)
        correct = (best == expected) & ~says_oos
        figures: dict[str, float] = {}
        for split, rows in bounds.items():
            scope, oos = in_scope[rows], ~in_scope[rows]
            prefix = figure_prefix(split)
            figures[f"{prefix}in_scope_accuracy"] = float(correct[rows][scope].float().mean())
            figures[f"{prefix}oos_recall"] = float(says_oos[rows][oos].float().mean()) if oos.any() else 1.0
        return figures

    return score


def labelled_gate_inputs(
    labels: Sequence[str], splits: Mapping[str, Sequence[Example]], threshold: float, oos_label: str
) -> tuple[dict[str, list[str]], Scorer]:
    """Each split's texts, and the scorer of their labels as the handler decides."""
    texts = {split: [text for text, _ in examples] for split, examples in splits.items()}
    row_labels = {split: [label for _, label in examples] for split, examples in splits.items()}
    return texts, intent_scorer(labels, row_labels, threshold, oos_label)


def text_batches(tokenizer_dir: Path, max_length: int, texts: Sequence[str], size: int) -> list[Batch]:
    """The texts in batches of ``size``, each padded to its longest text."""
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    rows = tokenize(tokenizer, list(texts)).ids
    padding = pad_id(tokenizer)
    return [tuple(pad_to_longest(rows[start : start + size], padding)) for start in range(0, len(rows), size)]


def text_gate_plan(
    compiling: CompileSettings,
    max_length: int,
    model: torch.nn.Module,
    tokenizer_dir: Path,
    texts: Mapping[str, Sequence[str]],
    score: Scorer | None,
) -> GatePlan:
    """.pt2 packages for what the build host serves, gated with the TorchScript candidates
    on each split's ``texts`` (test first, then the blind set where there is one), scored by
    ``score`` (None: agreement with fp32 only); int8 dynamic, held to ``INT8_POINTS``."""
    size = min(8, compiling.max_batch_size)
    batches = [
        batch for split in texts.values() for batch in text_batches(tokenizer_dir, max_length, split, size)
    ]
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    first = tokenize(tokenizer, list(next(iter(texts.values())))[: len(batches[0][0])]).ids
    singles = [tuple(pad_to_longest([row], pad_id(tokenizer))) for row in first]
    batch = torch.export.Dim("batch", min=1, max=compiling.max_batch_size)
    tokens = torch.export.Dim("tokens", min=2, max=max_length)
    shapes = ({0: batch, 1: tokens}, {0: batch, 1: tokens})
    data = GateData(batches, score, check=check_tokens(tokenizer), dynamic_shapes=shapes, singles=singles)
    return GatePlan(model.eval(), data, Int8Plan(points=INT8_POINTS))
