"""Split the hand-written intent utterances into fixed train / validation / test files.

The raw files (``data/intents/raw/*.csv``, columns ``text,label``) are the source; the
splits are committed so that every build, report and test sees the same examples. The
split is stratified per label with a fixed seed, and texts that repeat each other,
exactly or nearly (``leakage``), land in the same split: a duplicate across splits would
leak test answers into training and flatter the accuracy gate.

Raw utterances that repeat, exactly or nearly, the blind evaluation set
(``data/intents/blind.csv``, written separately from the definitions) are left out of
all three splits: the usual decontamination, so the blind set is scored whole and the
build's strict leakage check passes. Nothing else is taken from the blind set.

    tsbatch text split          # rewrite data/intents/{train,val,test}.csv
    tsbatch text split --check  # fail if the committed files are stale
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

from tsbatch.kinds.text.leakage import duplicate_groups, find_duplicates, normalized
from tsbatch.kinds.text.utterances import INTENT_DATA_DIR, INTENT_RAW_DIR

SPLIT_NAMES = ("train", "val", "test")
DEFAULT_FRACTIONS = (0.6, 0.2, 0.2)
DEFAULT_SEED = 13
NEAR_DUPLICATE_OVERLAP = 0.8  # word overlap (Jaccard) at which two texts count as one

Example = tuple[str, str]  # (text, label)


class SplitError(ValueError):
    """The raw data cannot be split cleanly (bad columns, duplicates, tiny labels)."""


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
    examples: Sequence[Example],
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seed: int = DEFAULT_SEED,
    min_overlap: float = NEAR_DUPLICATE_OVERLAP,
) -> dict[str, list[Example]]:
    """Stratified, seeded split: each label's groups of near duplicates are shuffled and
    dealt to validation and test until each holds its fraction; training gets the rest."""
    if len(fractions) != len(SPLIT_NAMES) or abs(sum(fractions) - 1.0) > 1e-9:
        raise SplitError(f"fractions must be {len(SPLIT_NAMES)} numbers summing to 1, got {fractions}")
    check_unique(examples)
    members: dict[int, list[Example]] = defaultdict(list)
    for example, group in zip(examples, duplicate_groups([t for t, _ in examples], min_overlap), strict=True):
        members[group].append(example)
    by_label: dict[str, list[list[Example]]] = defaultdict(list)
    for group in members.values():
        group.sort()
        by_label[group[0][1]].append(group)
    rng = random.Random(seed)
    splits: dict[str, list[Example]] = {name: [] for name in SPLIT_NAMES}
    for label in sorted(by_label):
        groups = sorted(by_label[label])  # independent of file order
        if len(groups) < len(SPLIT_NAMES):
            raise SplitError(
                f"label {label!r} has {len(groups)} distinct examples; need at least {len(SPLIT_NAMES)}"
            )
        rng.shuffle(groups)
        total = sum(len(group) for group in groups)
        wanted = {"val": max(1, round(total * fractions[1])), "test": max(1, round(total * fractions[2]))}
        dealt = {name: 0 for name in SPLIT_NAMES}
        for group in groups:
            name = next((n for n in ("val", "test") if dealt[n] < wanted[n]), "train")
            splits[name] += group
            dealt[name] += len(group)
    for name in SPLIT_NAMES:
        rng.shuffle(splits[name])
    check_disjoint(splits, min_overlap)
    return splits


def check_disjoint(splits: dict[str, list[Example]], min_overlap: float = NEAR_DUPLICATE_OVERLAP) -> None:
    """Raise when a text of one split repeats, exactly or nearly, a text of another."""
    names = list(splits)
    for position, name in enumerate(names):
        for earlier in names[:position]:
            reference = [text for text, _ in splits[earlier]]
            for duplicate in find_duplicates([t for t, _ in splits[name]], reference, min_overlap):
                text = splits[name][duplicate.index][0]
                raise SplitError(
                    f"{text!r} in {name} repeats {reference[duplicate.reference_index]!r} in {earlier}"
                )


def without_repeats_of(
    examples: Sequence[Example], held_out: Sequence[Example], min_overlap: float = NEAR_DUPLICATE_OVERLAP
) -> list[Example]:
    """``examples`` less those that repeat a held-out text, exactly or nearly."""
    repeats = find_duplicates([t for t, _ in examples], [t for t, _ in held_out], min_overlap)
    dropped = {duplicate.index for duplicate in repeats}
    return [example for i, example in enumerate(examples) if i not in dropped]


def render_csv(examples: Sequence[Example]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(examples)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Split the raw intent utterances into the train, validation and test files the "
        "build reads; near-duplicates stay in one split. --check fails when the committed files are stale."
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
    parser.add_argument(
        "--held-out",
        type=Path,
        default=INTENT_DATA_DIR / "blind.csv",
        help="evaluation CSV whose texts (and near repeats) no split may hold; skipped when absent",
    )
    args = parser.parse_args(argv)
    raw = args.raw or sorted(INTENT_RAW_DIR.glob("*.csv"))
    try:
        examples = read_examples(raw)
        if args.held_out.exists():
            kept = without_repeats_of(examples, read_examples([args.held_out]))
            print(f"[split] left out {len(examples) - len(kept)} raw texts that repeat {args.held_out.name}")
            examples = kept
        splits = split_examples(examples, args.fractions, args.seed)
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
        print(f"[split] stale or missing (run tsbatch text split): {stale}", file=sys.stderr)
        return 1
    return 0
