"""Fine-tune a BERT-family encoder into the intent classifier, calibrate out-of-scope, report.

The model is the encoder, mean pooling over real tokens (how all-MiniLM was trained) and
a linear head over the intents plus ``oos``. A request is out of scope when the head says
``oos`` or when its best in-scope probability is below a threshold calibrated on the
validation split; the threshold travels in the archive. Training sees exactly the token
ids the handler will send (the same ``text_serving.text`` functions), with light typo and
punctuation noise so that real users' spelling does not surprise it.

    tsbatch text train  # our data, report only
    tsbatch text train --data-format clinc150 --data my_intents.json \\
        --base-model /models/bert-base-uncased --out build/my_intents \\
        --min-in-scope-accuracy 0.9 --min-oos-recall 0.8   # gates for this data set

``tsbatch export --model <text model>`` takes the same options and also builds the archive files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from tsbatch.archive.manifest import ManifestError, ModelSpec, load_manifest
from tsbatch.kinds.text.data import TrainingError
from tsbatch.kinds.text.options import add_training_options
from tsbatch.kinds.text.report import print_report, train_from_settings
from tsbatch.kinds.text.schema import TextModel
from tsbatch.paths import DEFAULT_MANIFEST

# Settings of models.yaml's data section that describe the project's own data.
PROJECT_DATA_KEYS = ("blind", "strict", "drop_repeats", "near_duplicate_overlap")
# What a trained entry says about the model it trains: not about a folder given with --weights.
TRAINED_MODEL_KEYS = ("base_model", "data", "training", "max_length", "oos_label")


def weights_overrides(merged: dict, args: argparse.Namespace) -> None:
    """``--weights`` and its options in ``merged`` (the entry's values as set); a training
    entry's model keys are dropped, so the folder builds as a four-key entry would."""
    if getattr(args, "weights", None) is None:
        return
    if "weights" not in merged:
        for key in TRAINED_MODEL_KEYS:
            merged.pop(key, None)
    weights = merged.setdefault("weights", {})
    weights["path"] = str(args.weights)
    if args.texts is not None:
        weights["texts"] = str(args.texts)
    if args.oos_threshold is not None:
        weights["oos_threshold"] = args.oos_threshold
    if args.max_length is not None:
        merged["max_length"] = args.max_length
    if args.oos_label is not None:
        merged["oos_label"] = args.oos_label


def settings_from_arguments(settings: TextModel, args: argparse.Namespace) -> TextModel:
    """The manifest entry with the command-line overrides applied, validated again."""
    merged = settings.model_dump(mode="json", exclude_unset=True)
    weights_overrides(merged, args)
    data = merged.setdefault("data", {})
    if args.base_model:
        merged["base_model"] = args.base_model
    if args.data_format:
        data["format"] = args.data_format
    if any(getattr(args, key) is not None for key in ("data", "train", "validation", "test")):
        # These describe the manifest's own data, not data given here.
        for key in PROJECT_DATA_KEYS:
            data.pop(key, None)
    for key in ("data", "train", "validation", "test", "blind"):
        value = getattr(args, key)
        if value is not None:
            data["path" if key == "data" else key] = str(value)
    for key in ("strict", "drop_repeats", "near_duplicate_overlap"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    training = merged.setdefault("training", {})
    for key in ("epochs", "seed", "threads"):
        if getattr(args, key) is not None:
            training[key] = getattr(args, key)
    gates = training.setdefault("gates", {})
    for key, value in (
        ("in_scope_accuracy", args.min_in_scope_accuracy),
        ("oos_recall", args.min_oos_recall),
    ):
        if value is not None:
            gates[key] = value
    try:
        return TextModel.model_validate(merged)
    except ValidationError as exc:
        raise TrainingError(f"invalid command-line settings: {exc}") from None


def build_and_report(
    spec: ModelSpec, args: argparse.Namespace, build: Callable[[ModelSpec, TextModel, Path], object], tag: str
) -> int:
    """``build(spec, settings with the command-line overrides, out)``, then the report, also
    when a gate failed (it says which intents failed)."""
    out = args.out or spec.artifact_dir
    try:
        build(spec, settings_from_arguments(spec.entry_as(TextModel), args), out)
    except TrainingError as exc:
        print_report(out)
        print(f"[{tag}] FAILED: {exc}", file=sys.stderr)
        return 1
    print_report(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fine-tune a text classifier on labelled utterances and write its training report "
        "(accuracy, out-of-scope recall, the gates), without building an archive."
    )
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument(
        "--model", help="manifest entry to read defaults from (default: its first text model)"
    )
    add_training_options(parser)
    args = parser.parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
        spec = manifest.model(args.model or manifest.first_of_kind("text"))
    except ManifestError as exc:
        print(f"[train] FAILED: {exc}", file=sys.stderr)
        return 1
    return build_and_report(spec, args, train_from_settings, "train")
