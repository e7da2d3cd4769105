"""The options shared by train_intent and export_intent, over the manifest entry."""

from __future__ import annotations

import argparse

from tsbatch.build.intent.cli import add_arguments, settings_from_arguments


def test_command_line_overrides_the_manifest_without_changing_it() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    manifest_entry = {"base_model": "x", "data": {"format": "csv"}, "training": {"epochs": 4}}
    args = parser.parse_args(
        ["--data-format", "clinc150", "--data", "d.json", "--epochs", "1", "--base-model", "/m"]
    )
    merged = settings_from_arguments(manifest_entry, args)
    assert merged["data"] == {"format": "clinc150", "path": "d.json"}
    assert merged["training"]["epochs"] == 1 and merged["base_model"] == "/m"
    assert manifest_entry["training"]["epochs"] == 4


def test_strict_blind_and_gates_come_from_flags_over_the_manifest() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    manifest_entry = {"data": {"format": "csv"}, "training": {"gates": {"in_scope_accuracy": 0.95}}}
    unchanged = settings_from_arguments(manifest_entry, parser.parse_args([]))
    assert unchanged["training"]["gates"] == {"in_scope_accuracy": 0.95} and "strict" not in unchanged["data"]
    args = parser.parse_args(
        ["--strict", "--blind", "b.csv", "--min-in-scope-accuracy", "0.9", "--min-oos-recall", "0.8"]
    )
    merged = settings_from_arguments(manifest_entry, args)
    assert merged["data"] == {"format": "csv", "strict": True, "blind": "b.csv"}
    ours = {"data": {"format": "csv", "train": "t.csv", "blind": "ours.csv"}}
    theirs = settings_from_arguments(
        ours, parser.parse_args(["--data-format", "clinc150", "--data", "x.json"])
    )
    assert "blind" not in theirs["data"]  # our blind set does not score someone else's data
    assert merged["training"]["gates"] == {"in_scope_accuracy": 0.9, "oos_recall": 0.8}
