"""The project's own intent utterances: the one text source of every text workload.

The held-out split (data/intents/test.csv) once the build has made it, else every raw
file (data/intents/raw/*.csv), which is in the repository from the start.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from tsbatch.paths import REPO_ROOT

INTENT_DATA_DIR = REPO_ROOT / "data" / "intents"  # the splits the build makes
INTENT_RAW_DIR = INTENT_DATA_DIR / "raw"  # in the repository from the start
INTENT_TEST_CSV = INTENT_DATA_DIR / "test.csv"


def read_utterances(
    test_csv: Path = INTENT_TEST_CSV, raw_dir: Path = INTENT_RAW_DIR, shuffle_seed: int | None = None
) -> list[str]:
    """The ``text`` column of the held-out split, or of the raw files while it does not exist;
    in file order, or shuffled with ``shuffle_seed``."""
    sources = [test_csv] if test_csv.exists() else sorted(raw_dir.glob("*.csv"))
    texts = []
    for path in sources:
        with path.open(newline="", encoding="utf-8") as handle:
            texts.extend(
                row["text"].strip() for row in csv.DictReader(handle) if (row.get("text") or "").strip()
            )
    if not texts:
        raise FileNotFoundError(f"no utterances found in {test_csv} or {raw_dir}/*.csv")
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(texts)
    return texts
