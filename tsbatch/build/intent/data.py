"""The intent examples: train / validation / test splits read from CSV or CLINC150-style JSON.

Every check that would make the trained model or its scores meaningless (an empty split,
labels unknown to training, no out-of-scope examples to calibrate on, a text leaked from
training into evaluation) fails here, before minutes of training.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsbatch.paths import REPO_ROOT

OOS_LABEL = "oos"
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
    train: list[Example]
    validation: list[Example]
    test: list[Example]
    source: str

    def labels(self, oos_label: str = OOS_LABEL) -> list[str]:
        """Sorted intents of the training split, with the out-of-scope label last."""
        names = sorted({label for _, label in self.train} - {oos_label})
        return [*names, oos_label]


def read_csv_examples(path: Path) -> list[Example]:
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
) -> IntentData:
    if data_format == "clinc150":
        if data is None:
            raise TrainingError("--data-format clinc150 needs --data file.json")
        splits = read_clinc_json(data)
        return IntentData(splits["train"], splits["validation"], splits["test"], source=str(data))
    if data_format != "csv":
        raise TrainingError(f"unknown data format {data_format!r} (csv or clinc150)")
    if train is None or validation is None or test is None:
        raise TrainingError("csv data needs train, validation and test files")
    return IntentData(
        read_csv_examples(train),
        read_csv_examples(validation),
        read_csv_examples(test),
        source=", ".join(str(_relative(p)) for p in (train, validation, test)),
    )


def data_from_settings(settings: dict[str, Any]) -> IntentData:
    """The splits a manifest entry's ``data`` names; relative paths are from the repository."""
    data = settings.get("data") or {}

    def path(key: str) -> Path | None:
        value = data.get(key)
        if value is None:
            return None
        value = Path(value)
        return value if value.is_absolute() else REPO_ROOT / value

    return load_data(data.get("format", "csv"), path("train"), path("validation"), path("test"), path("path"))


def check_data(data: IntentData, oos_label: str) -> None:
    labels = set(data.labels(oos_label))
    for name, split in (("train", data.train), ("validation", data.validation), ("test", data.test)):
        if not split:
            raise TrainingError(f"the {name} split is empty")
        unknown = {label for _, label in split} - labels
        if unknown:
            raise TrainingError(f"{name} has labels the training split lacks: {sorted(unknown)}")
    if not any(label == oos_label for _, label in data.validation):
        raise TrainingError(f"the validation split needs {oos_label!r} examples to calibrate the threshold")
    seen = {text.lower() for text, _ in data.train}
    for name, split in (("validation", data.validation), ("test", data.test)):
        leaked = [text for text, _ in split if text.lower() in seen]
        if leaked:
            raise TrainingError(f"{len(leaked)} {name} texts are also in train, e.g. {leaked[:3]}")


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return path
