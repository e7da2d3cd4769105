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
