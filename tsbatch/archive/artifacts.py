"""Files that export writes and packaging reads, in one place."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

MODEL_FILE = "model.pt"
LABELS_FILE = "labels.json"
HANDLER_CONFIG_FILE = "handler_config.json"
BUILD_INFO_FILE = "build_info.json"
REPORT_MARKDOWN = "report.md"  # the build report: the intent model's training, both models' gates


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def read_labels(path: Path) -> list[str]:
    """Labels from a JSON list or a text file with one label per line."""
    text = path.read_text()
    if path.suffix == ".json":
        labels = json.loads(text)
        if isinstance(labels, dict):  # {"0": "cat", ...}
            labels = [labels[str(i)] for i in range(len(labels))]
        return [str(label) for label in labels]
    return [line.strip() for line in text.splitlines() if line.strip()]


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def folder_digest(path: Path) -> str:
    """One digest of every file under ``path``, by relative name and content."""
    digest = hashlib.sha256()
    for file in sorted(item for item in path.rglob("*") if item.is_file()):
        digest.update(f"{file.relative_to(path)}:{file_digest(file)}".encode())
    return digest.hexdigest()[:16]
