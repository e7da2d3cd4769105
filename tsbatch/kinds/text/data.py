"""The intent examples: train / validation / test splits read from CSV or CLINC150-style JSON,
and an optional blind evaluation set (CSV) that nothing is tuned on.

Every check that would make the trained model or its scores meaningless (an empty split,
labels unknown to training, no out-of-scope examples to calibrate on) fails here, before
minutes of training. Evaluation texts that repeat an earlier split (public data sets have
such duplicates) are dropped with a warning that counts them, or refused when strict.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tsbatch.kinds.text.leakage import find_duplicates
from tsbatch.kinds.text.schema import OOS_LABEL, DataSection
from tsbatch.paths import REPO_ROOT

CLINC_SPLITS = {
    "train": ("train", "oos_train"),
    "validation": ("val", "oos_val"),
    "test": ("test", "oos_test"),
}

Example = tuple[str, str]  # (text, label)


class TrainingError(RuntimeError):
    """Training could not run or the model missed a quality gate."""


@dataclass(frozen=True)
class IntentData:
    """The labelled splits as read (models.yaml's ``DataSection`` or files given), and their source."""

    train: list[Example]
    validation: list[Example]
    test: list[Example]
    source: str
    blind: list[Example] = field(default_factory=list)  # empty: no blind set given

    def evaluation_splits(self) -> dict[str, list[Example]]:
        """The splits scored after training, in order (blind only when present)."""
        splits = {"validation": self.validation, "test": self.test}
        return {**splits, "blind": self.blind} if self.blind else splits

    def labels(self, oos_label: str = OOS_LABEL) -> list[str]:
        """Sorted intents of the training split, with the out-of-scope label last."""
        names = sorted({label for _, label in self.train} - {oos_label})
        return [*names, oos_label]


def read_csv_examples(path: Path) -> list[Example]:
    if not path.is_file():
        raise TrainingError(f"{path} does not exist (a CSV with text,label)")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"text", "label"} <= set(reader.fieldnames):
            raise TrainingError(f"{path}: columns must include text,label (got {reader.fieldnames})")
        return [(row["text"].strip(), row["label"].strip()) for row in reader if (row["text"] or "").strip()]


def read_clinc_json(path: Path, oos_label: str = OOS_LABEL) -> dict[str, list[Example]]:
    """CLINC150-style JSON: ``train``/``val``/``test`` and ``oos_*`` lists of [text, label].

    Out-of-scope rows are relabelled ``oos_label`` whatever they were called in the file.
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise TrainingError(f"{path}: expected a JSON object with train/val/test lists")
    splits: dict[str, list[Example]] = {}
    for split, (in_scope_key, oos_key) in CLINC_SPLITS.items():
        if in_scope_key not in document:
            raise TrainingError(f"{path}: missing key {in_scope_key!r}")
        rows: list[Example] = []
        for key in (in_scope_key, oos_key):
            for row in document.get(key) or []:
                if not (
                    isinstance(row, list | tuple) and len(row) == 2 and all(isinstance(v, str) for v in row)
                ):
                    raise TrainingError(f"{path}: {key} rows must be [text, label], got {row!r}")
                text, label = row[0].strip(), row[1].strip()
                if text:
                    rows.append((text, oos_label if key == oos_key else label))
        splits[split] = rows
    return splits


def load_data(
    data_format: str,
    train: Path | None = None,
    validation: Path | None = None,
    test: Path | None = None,
    data: Path | None = None,
    blind: Path | None = None,
) -> IntentData:
    """The splits in ``data_format``; ``blind`` (CSV) is read when the file exists."""
    blind_examples = read_csv_examples(blind) if blind is not None and blind.exists() else []
    if blind is not None and not blind_examples:
        print(f"[train] no blind set at {_relative(blind)}: scoring validation and test only", flush=True)
    if data_format == "clinc150":
        if data is None:
            raise TrainingError("--data-format clinc150 needs --data file.json")
        splits = read_clinc_json(data)
        return IntentData(splits["train"], splits["validation"], splits["test"], str(data), blind_examples)
    if data_format != "csv":
        raise TrainingError(f"unknown data format {data_format!r} (csv or clinc150)")
    if train is None or validation is None or test is None:
        raise TrainingError("csv data needs train, validation and test files")
    return IntentData(
        read_csv_examples(train),
        read_csv_examples(validation),
        read_csv_examples(test),
        source=", ".join(str(_relative(p)) for p in (train, validation, test)),
        blind=blind_examples,
    )


def section_path(data: DataSection, key: str) -> Path | None:
    """The file ``data.<key>`` names; a relative path is from the repository."""
    value = getattr(data, key)
    if value is None:
        return None
    value = Path(value)
    return value if value.is_absolute() else REPO_ROOT / value


def data_from_settings(data: DataSection) -> IntentData:
    """The splits a manifest entry's ``data`` names; relative paths are from the repository."""
    keys = ("train", "validation", "test", "path", "blind")
    return load_data(data.format, *(section_path(data, key) for key in keys))


def has_evaluation_data(data: DataSection) -> bool:
    """Whether ``data`` names labelled texts to score a ready model on (a test CSV or a JSON)."""
    return data.test is not None or data.path is not None


def evaluation_splits(data: DataSection) -> tuple[dict[str, list[Example]], str]:
    """The labelled texts a ready model is scored on, and where they came from: the ``test``
    CSV or the test (with ``oos_test``) of a CLINC150-style JSON, then the ``blind`` CSV."""
    if data.format == "clinc150":
        path = section_path(data, "path")
        if path is None:
            raise TrainingError("--data-format clinc150 needs --data file.json (data.path)")
        splits = {"test": read_clinc_json(path)["test"]}
    else:
        path = section_path(data, "test")
        if path is None:
            raise TrainingError("csv data to score a model on needs a test file (data.test, --test)")
        splits = {"test": read_csv_examples(path)}
    blind = section_path(data, "blind")
    if blind is not None:
        splits["blind"] = read_csv_examples(blind)
    for name, rows in splits.items():
        if not rows:
            raise TrainingError(f"the {name} split is empty")
    sources = [path, *([blind] if blind is not None else [])]
    return splits, ", ".join(str(_relative(source)) for source in sources)


def check_data(data: IntentData, oos_label: str) -> None:
    """Refuse splits that training or scoring cannot use, naming what is wrong."""
    labels = set(data.labels(oos_label))
    for name, split in {"train": data.train, **data.evaluation_splits()}.items():
        if not split:
            raise TrainingError(f"the {name} split is empty")
        unknown = sorted({label for _, label in split} - labels)
        if unknown:
            count = sum(label in unknown for _, label in split)
            raise TrainingError(
                f"{name} has {count} examples of labels the training split lacks: {unknown}; "
                "add training examples for them or remove them from that split"
            )
    if not any(label == oos_label for _, label in data.validation):
        raise TrainingError(f"the validation split needs {oos_label!r} examples to calibrate the threshold")


@dataclass(frozen=True)
class Leakage:
    """The texts of one evaluation split that repeat an earlier split (train first)."""

    split: str
    size: int
    exact: int
    near: int
    examples: tuple[str, ...]
    dropped: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "repeats": self.exact + self.near,
            "exact": self.exact,
            "near": self.near,
            "examples": list(self.examples),
            "dropped": self.dropped,
        }

    def warning(self) -> str:
        """What the build prints about it: a repeat inflates the split's score."""
        action = "dropped" if self.dropped else "kept (scored whole; --drop-repeats removes them)"
        return (
            f"[train] warning: {self.exact + self.near} of {self.size} {self.split} texts repeat an earlier "
            f"split ({self.exact} same words, {self.near} near), {action}; e.g. {self.examples[0]}"
        )


def screen_repeats(
    data: IntentData, strict: bool = False, drop: bool = False, min_overlap: float | None = None
) -> tuple[IntentData, dict[str, Leakage]]:
    """Find the evaluation texts that repeat an earlier split, exactly or (``min_overlap``)
    nearly. By default every split is scored whole and the leakage reported, so figures on a
    public benchmark compare with published ones; ``strict`` refuses repeats, ``drop``
    removes them (the report then says which splits were altered; :meth:`Leakage.warning`
    is what to print)."""
    kept: dict[str, list[Example]] = {}
    leakage: dict[str, Leakage] = {}
    reference = [text for text, _ in data.train]
    for name, split in data.evaluation_splits().items():
        repeats = find_duplicates([text for text, _ in split], reference, min_overlap)
        shown = tuple(f"{split[r.index][0]!r} ~ {reference[r.reference_index]!r}" for r in repeats[:3])
        if repeats and strict:
            raise TrainingError(
                f"{len(repeats)} {name} texts repeat an earlier split (--strict), e.g. {'; '.join(shown)}"
            )
        if repeats:
            exact = sum(r.exact for r in repeats)
            leakage[name] = Leakage(name, len(split), exact, len(repeats) - exact, shown, drop)
        dropped = {r.index for r in repeats} if drop else set()
        kept[name] = [example for i, example in enumerate(split) if i not in dropped]
        reference += [text for text, _ in kept[name]]
    return replace(data, **kept), leakage


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return path
