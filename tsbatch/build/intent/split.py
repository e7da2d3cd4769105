"""Split the hand-written intent utterances into fixed train / validation / test files.

The raw files (``data/intents/raw/*.csv``, columns ``text,label``) are the source; the
splits are committed so that every build, report and test sees the same examples. The
split is stratified per label with a fixed seed, and a text (compared case- and
space-insensitively) never lands in two splits: a duplicate would leak test answers
into training and flatter the accuracy gate.

    python -m scripts.split_intents            # rewrite data/intents/{train,val,test}.csv
    python -m scripts.split_intents --check    # fail if the committed files are stale
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from tsbatch.paths import INTENT_DATA_DIR, INTENT_RAW_DIR

SPLIT_NAMES = ("train", "val", "test")
DEFAULT_FRACTIONS = (0.6, 0.2, 0.2)
DEFAULT_SEED = 13

Example = tuple[str, str]  # (text, label)


class SplitError(ValueError):
    """The raw data cannot be split cleanly (bad columns, duplicates, tiny labels)."""


def normalized(text: str) -> str:
    """The form two texts are compared in: case, spacing and end punctuation ignored."""
    spaced = " ".join(text.lower().split())
    return spaced.rstrip("?!. ") or spaced  # "..." and "?????" stay distinct


def read_examples(paths: Iterable[Path]) -> list[Example]:
    """Every (text, label) row of the given CSV files, in file order."""
    examples: list[Example] = []
    for path in paths:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None or not {"text", "label"} <= set(reader.fieldnames):
                raise SplitError(f"{path}: columns must include text,label (got {reader.fieldnames})")
            for line, row in enumerate(reader, start=2):
                text, label = (row["text"] or "").strip(), (row["label"] or "").strip()
                if not text or not label:
                    raise SplitError(f"{path}:{line}: empty text or label")
                examples.append((text, label))
    return examples


def check_unique(examples: Sequence[Example]) -> None:
    seen: dict[str, Example] = {}
    for example in examples:
        key = normalized(example[0])
        if key in seen:
            raise SplitError(f"duplicate utterance {example!r} (same as {seen[key]!r})")
        seen[key] = example


def split_examples(
    examples: Sequence[Example], fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = DEFAULT_SEED
) -> dict[str, list[Example]]:
    """Stratified, seeded split: each label is shuffled alone and cut by ``fractions``."""
    if len(fractions) != len(SPLIT_NAMES) or abs(sum(fractions) - 1.0) > 1e-9:
        raise SplitError(f"fractions must be {len(SPLIT_NAMES)} numbers summing to 1, got {fractions}")
    check_unique(examples)
    by_label: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        by_label[example[1]].append(example)
    rng = random.Random(seed)
    splits: dict[str, list[Example]] = {name: [] for name in SPLIT_NAMES}
    for label in sorted(by_label):
        group = sorted(by_label[label])  # independent of file order
        if len(group) < len(SPLIT_NAMES):
            raise SplitError(f"label {label!r} has {len(group)} examples; need at least {len(SPLIT_NAMES)}")
        rng.shuffle(group)
        val_count = max(1, round(len(group) * fractions[1]))
        test_count = max(1, round(len(group) * fractions[2]))
        train_count = len(group) - val_count - test_count
        splits["train"] += group[:train_count]
        splits["val"] += group[train_count : train_count + val_count]
        splits["test"] += group[train_count + val_count :]
    for name in SPLIT_NAMES:
        rng.shuffle(splits[name])
    check_disjoint(splits)
    return splits


def check_disjoint(splits: dict[str, list[Example]]) -> None:
    """Raise when one (normalized) text appears in two splits."""
    owner: dict[str, str] = {}
    for name, examples in splits.items():
        for text, _ in examples:
            key = normalized(text)
            if key in owner and owner[key] != name:
                raise SplitError(f"{text!r} is in both {owner[key]} and {name}")
            owner[key] = name


def render_csv(examples: Sequence[Example]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(examples)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--raw", type=Path, nargs="+", help="raw CSV files (default: data/intents/raw/*.csv)")
    parser.add_argument("--out", type=Path, default=INTENT_DATA_DIR)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--fractions", type=float, nargs=3, default=DEFAULT_FRACTIONS, metavar=("TRAIN", "VAL", "TEST")
    )
    parser.add_argument(
        "--check", action="store_true", help="verify the files in --out instead of writing them"
    )
    args = parser.parse_args(argv)
    raw = args.raw or sorted(INTENT_RAW_DIR.glob("*.csv"))
    try:
        splits = split_examples(read_examples(raw), args.fractions, args.seed)
    except SplitError as exc:
        print(f"[split] FAILED: {exc}", file=sys.stderr)
        return 1
    stale = []
    for name in SPLIT_NAMES:
        path = args.out / f"{name}.csv"
        text = render_csv(splits[name])
        labels = {label for _, label in splits[name]}
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"[split] {path}: {len(splits[name])} examples, {len(labels)} labels")
    if stale:
        print(f"[split] stale or missing (run python -m scripts.split_intents): {stale}", file=sys.stderr)
        return 1
    return 0
