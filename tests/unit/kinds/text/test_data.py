"""Reading the intent splits (our CSV files, CLINC150-style JSON) and the checks before training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.kinds.text.data import (
    IntentData,
    TrainingError,
    check_data,
    load_data,
    read_clinc_json,
    screen_repeats,
)
from tsbatch.kinds.text.utterances import INTENT_DATA_DIR


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


def test_check_data_names_unknown_labels_and_needs_oos_in_validation() -> None:
    good = IntentData([("a", "x"), ("b", "oos")], [("c", "x"), ("d", "oos")], [("e", "x")], "mem")
    check_data(good, "oos")
    with pytest.raises(
        TrainingError, match=r"test has 2 examples of labels the training split lacks: \['w', 'y'\]"
    ):
        check_data(IntentData(good.train, good.validation, [("z", "y"), ("q", "w")], "mem"), "oos")
    with pytest.raises(TrainingError, match=r"blind .*\['y'\]"):
        check_data(IntentData(good.train, good.validation, good.test, "mem", [("z", "y")]), "oos")
    with pytest.raises(TrainingError, match="calibrate"):
        check_data(IntentData(good.train, [("c", "x")], good.test, "mem"), "oos")


LEAKY = IntentData(
    train=[("what is my balance", "x"), ("tell me a joke", "oos")],
    validation=[("What is my balance?", "x"), ("send money", "y"), ("sing a song", "oos")],
    test=[("send money", "y"), ("what is my balance please", "x"), ("move cash", "y")],
    source="mem",
    blind=[("tell me a joke!", "oos"), ("balance of savings", "x")],
)


def test_repeats_are_reported_and_every_split_scored_whole_by_default() -> None:
    whole, leakage = screen_repeats(LEAKY)
    assert whole == LEAKY
    assert {
        name: (found.size, found.exact, found.near, found.dropped) for name, found in leakage.items()
    } == {
        "validation": (3, 1, 0, False),
        "test": (3, 1, 0, False),
        "blind": (2, 1, 0, False),
    }
    assert leakage["test"].examples == ("'send money' ~ 'send money'",)


def test_repeats_are_dropped_when_asked_and_the_report_says_so() -> None:
    kept, leakage = screen_repeats(LEAKY, drop=True)
    assert kept.train == LEAKY.train and all(found.dropped for found in leakage.values())
    assert kept.validation == [("send money", "y"), ("sing a song", "oos")]
    # "send money" repeats validation, which is scored before test
    assert kept.test == [("what is my balance please", "x"), ("move cash", "y")]
    assert kept.blind == [("balance of savings", "x")]
    assert (
        leakage["blind"].warning().startswith("[train] warning: 1 of 2 blind texts repeat an earlier split")
    )
    assert "), dropped; e.g. 'tell me a joke!'" in leakage["blind"].warning()
    near, _ = screen_repeats(LEAKY, drop=True, min_overlap=0.8)
    assert near.test == [("move cash", "y")]


def test_strict_refuses_repeats_and_accepts_clean_data() -> None:
    with pytest.raises(TrainingError, match=r"1 validation texts repeat an earlier split \(--strict\)"):
        screen_repeats(LEAKY, strict=True)
    clean = IntentData(LEAKY.train, [("sing a song", "oos")], [("move cash", "y")], "mem")
    assert screen_repeats(clean, strict=True, min_overlap=0.8) == (clean, {})


def test_blind_file_is_optional(tmp_path: Path) -> None:
    splits = [INTENT_DATA_DIR / f"{name}.csv" for name in ("train", "val", "test")]
    absent = load_data("csv", *splits, blind=tmp_path / "missing.csv")
    assert absent.blind == [] and list(absent.evaluation_splits()) == ["validation", "test"]
    (tmp_path / "blind.csv").write_text("text,label\nhow much money is in checking,balance\n")
    present = load_data("csv", *splits, blind=tmp_path / "blind.csv")
    assert present.blind == [("how much money is in checking", "balance")]
    assert list(present.evaluation_splits()) == ["validation", "test", "blind"]
