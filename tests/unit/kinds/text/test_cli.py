"""The text kind's options (`tsbatch text train`, `tsbatch export` of a text model) over the manifest entry."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tsbatch.cli.main import main
from tsbatch.kinds.text.cli import settings_from_arguments
from tsbatch.kinds.text.data import TrainingError
from tsbatch.kinds.text.options import add_export_options, add_training_options
from tsbatch.kinds.text.schema import TextModel, TrainingOptions


def entry(**settings: object) -> TextModel:
    return TextModel.model_validate({"kind": "text", "handler": "h.py", "version": "1", **settings})


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_training_options(parser)
    return parser.parse_args(list(argv))


def test_command_line_overrides_the_manifest_without_changing_it() -> None:
    manifest_entry = entry(base_model="x", data={"format": "csv"}, training={"epochs": 4})
    args = parse("--data-format", "clinc150", "--data", "d.json", "--epochs", "1", "--base-model", "/m")
    merged = settings_from_arguments(manifest_entry, args)
    assert (merged.data.format, merged.data.path) == ("clinc150", "d.json")
    assert merged.training.epochs == 1 and merged.base_model == "/m"
    assert manifest_entry.training.epochs == 4


def test_strict_blind_and_gates_come_from_flags_over_the_manifest() -> None:
    manifest_entry = entry(data={"format": "csv"}, training={"gates": {"in_scope_accuracy": 0.95}})
    unchanged = settings_from_arguments(manifest_entry, parse())
    assert unchanged.training.gates.in_scope_accuracy == 0.95 and not unchanged.data.strict
    args = parse("--strict", "--blind", "b.csv", "--min-in-scope-accuracy", "0.9", "--min-oos-recall", "0.8")
    merged = settings_from_arguments(manifest_entry, args)
    assert merged.data.strict and merged.data.blind == "b.csv"
    ours = entry(data={"format": "csv", "train": "t.csv", "blind": "ours.csv"})
    theirs = settings_from_arguments(ours, parse("--data-format", "clinc150", "--data", "x.json"))
    assert theirs.data.blind is None  # our blind set does not score someone else's data
    assert (merged.training.gates.in_scope_accuracy, merged.training.gates.oos_recall) == (0.9, 0.8)


def test_a_bad_override_is_refused_naming_the_key() -> None:
    with pytest.raises(TrainingError, match="epochs"):
        settings_from_arguments(entry(), parse("--epochs", "0"))


def test_project_data_settings_do_not_apply_to_data_given_on_the_command_line() -> None:
    ours = entry(data={"train": "t.csv", "blind": "b.csv", "strict": True, "near_duplicate_overlap": 0.8})
    theirs = settings_from_arguments(ours, parse("--data-format", "clinc150", "--data", "data_full.json"))
    assert (theirs.data.strict, theirs.data.drop_repeats, theirs.data.near_duplicate_overlap) == (
        False,
        False,
        None,
    )
    asked = parse(
        "--data-format", "clinc150", "--data", "x.json", "--strict", "--near-duplicate-overlap", "0.9"
    )
    assert settings_from_arguments(ours, asked).data.strict
    assert settings_from_arguments(ours, asked).data.near_duplicate_overlap == 0.9
    dropping = settings_from_arguments(ours, parse("--data", "x.json", "--drop-repeats"))
    assert dropping.data.drop_repeats and not dropping.data.strict
    assert not settings_from_arguments(ours, parse("--no-strict")).data.strict  # our own data, asked
    assert settings_from_arguments(ours, parse()).data.strict  # our own data: models.yaml's


def parse_export(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_export_options(parser)
    return parser.parse_args(list(argv))


def test_weights_on_a_training_entry_drop_what_describes_the_trained_model() -> None:
    trained = entry(base_model="x", max_length=16, data={"train": "t.csv"}, training={"epochs": 1}, top_k=2)
    merged = settings_from_arguments(trained, parse_export("--weights", "/models/mine", "--test", "test.csv"))
    assert merged.weights is not None and merged.weights.path == "/models/mine"
    assert {"base_model", "max_length"}.isdisjoint(merged.model_fields_set)
    assert merged.training.epochs == TrainingOptions().epochs
    assert (merged.data.test, merged.data.train, merged.top_k) == ("test.csv", None, 2)  # serving keys stay


def test_weights_options_set_the_folder_s_keys() -> None:
    args = parse_export("--weights", "w", "--texts", "t.txt", "--max-length", "32", "--oos-label", "other")
    mine = entry(weights={"path": "old", "oos_threshold": 0.3}, max_length=16)
    merged = settings_from_arguments(mine, args)
    assert merged.weights is not None
    assert (merged.weights.path, merged.weights.texts, merged.weights.oos_threshold) == ("w", "t.txt", 0.3)
    assert (merged.max_length, merged.oos_label) == (32, "other")
    threshold = settings_from_arguments(mine, parse_export("--weights", "w", "--oos-threshold", "0.5"))
    assert threshold.weights is not None and threshold.weights.oos_threshold == 0.5


def test_text_train_trains_and_reports_without_building_an_archive(
    tmp_path: Path, tiny_base_model: Path, tiny_clinc: Path
) -> None:
    """`tsbatch text train` on a tiny encoder: the report is written, the gates decide the status."""
    out = tmp_path / "check"
    argv = ["text", "train", "--data-format", "clinc150", "--data", str(tiny_clinc)]
    argv += ["--base-model", str(tiny_base_model), "--epochs", "1", "--threads", "1", "--out", str(out)]
    assert main([*argv, "--min-in-scope-accuracy", "0", "--min-oos-recall", "0"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] is True and "test" in report
    assert not (out / "model.pt").exists() and not (out / "handler_config.json").exists()
    assert main(argv) == 1  # models.yaml's gates, which a 1-epoch tiny model misses
    failed = json.loads((out / "report.json").read_text())
    assert failed["passed"] is False and failed["failures"]
