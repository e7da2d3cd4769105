"""Reading the intent splits (our CSV files, CLINC150-style JSON) and the checks before training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.build.intent.data import IntentData, TrainingError, check_data, load_data, read_clinc_json
from tsbatch.paths import INTENT_DATA_DIR


def write_clinc(path: Path, **overrides: object) -> Path:
    document = {
        "train": [["what's my balance", "balance"], ["send money to mom", "transfer"]],
        "val": [["balance please", "balance"]],
        "test": [["move 20 dollars", "transfer"]],
        "oos_train": [["play a song", "oos"]],
        "oos_val": [["tell me a joke", "oos_val_label"]],
        "oos_test": [["weather today", "oos"]],
        **overrides,
    }
    path.write_text(json.dumps(document))
    return path


def test_read_clinc_json_merges_oos_lists_into_each_split(tmp_path: Path) -> None:
    splits = read_clinc_json(write_clinc(tmp_path / "data.json"))
    assert splits["train"] == [
        ("what's my balance", "balance"),
        ("send money to mom", "transfer"),
        ("play a song", "oos"),
    ]
    assert splits["validation"] == [("balance please", "balance"), ("tell me a joke", "oos")]
    assert splits["test"] == [("move 20 dollars", "transfer"), ("weather today", "oos")]
    data = load_data("clinc150", data=tmp_path / "data.json")
    assert data.labels() == ["balance", "transfer", "oos"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"val": None}, "val"),
        ({"train": [["only text"]]}, r"\[text, label\]"),
        ({"test": [[1, "x"]]}, "rows"),
    ],
)
def test_read_clinc_json_refuses_wrong_shapes(tmp_path: Path, overrides: dict, message: str) -> None:
    path = write_clinc(tmp_path / "bad.json", **overrides)
    if overrides.get("val", 0) is None:
        document = json.loads(path.read_text())
        del document["val"]
        path.write_text(json.dumps(document))
    with pytest.raises(TrainingError, match=message):
        read_clinc_json(path)


def test_load_data_reads_our_csv_splits() -> None:
    data = load_data(
        "csv", INTENT_DATA_DIR / "train.csv", INTENT_DATA_DIR / "val.csv", INTENT_DATA_DIR / "test.csv"
    )
    assert len(data.labels()) == 31 and data.labels()[-1] == "oos"
    check_data(data, "oos")
    with pytest.raises(TrainingError, match="format"):
        load_data("parquet")


def test_check_data_catches_leaks_and_unknown_labels() -> None:
    good = IntentData([("a", "x"), ("b", "oos")], [("c", "x"), ("d", "oos")], [("e", "x")], "mem")
    check_data(good, "oos")
    with pytest.raises(TrainingError, match="also in train"):
        check_data(IntentData(good.train, good.validation, [("A", "x")], "mem"), "oos")
    with pytest.raises(TrainingError, match="lacks"):
        check_data(IntentData(good.train, good.validation, [("z", "y")], "mem"), "oos")
    with pytest.raises(TrainingError, match="calibrate"):
        check_data(IntentData(good.train, [("c", "x")], good.test, "mem"), "oos")
