"""The command-line options of the text kind: ``tsbatch text train``'s, and with your own
folder's those ``tsbatch export`` takes for a text model. Unset ones come from models.yaml.

Only argparse here: the kind's record names :func:`add_export_options`, and reading that
record must not load the training code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tsbatch.archive.kind import TakesOptions


def add_training_options(parser: TakesOptions) -> None:
    """What to train on, how, the gates and where the files go."""
    parser.add_argument("--base-model", help="local Hugging Face BERT-family folder or hub name")
    parser.add_argument("--data-format", choices=("csv", "clinc150"))
    parser.add_argument("--data", type=Path, help="CLINC150-style JSON (with --data-format clinc150)")
    parser.add_argument("--train", type=Path, help="CSV with text,label")
    parser.add_argument("--validation", type=Path, help="CSV with text,label")
    parser.add_argument("--test", type=Path, help="CSV with text,label")
    parser.add_argument("--blind", type=Path, help="CSV with text,label scored and gated, never tuned on")
    parser.add_argument(
        "--strict",
        action=argparse.BooleanOptionalAction,
        help="refuse evaluation texts that repeat an earlier split (default: models.yaml's for its own "
        "data; off for data given here)",
    )
    parser.add_argument(
        "--drop-repeats",
        action=argparse.BooleanOptionalAction,
        help="drop repeating evaluation texts (the report says which split was altered); default: "
        "score every split whole and report the repeats",
    )
    parser.add_argument(
        "--near-duplicate-overlap",
        type=float,
        help="word overlap that makes a near repeat (default: models.yaml's for its own data; exact "
        "repeats only for data given here)",
    )
    parser.add_argument("--min-in-scope-accuracy", type=float, help="gate on test (and blind)")
    parser.add_argument("--min-oos-recall", type=float, help="gate on test (and blind)")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--threads", type=int, help="torch CPU threads for training")
    parser.add_argument("--out", type=Path, help="output folder (default: build/<model>)")


def add_weights_options(parser: TakesOptions) -> None:
    """Serving your own fine-tuned folder instead of training one."""
    parser.add_argument(
        "--weights",
        type=Path,
        help="your save_pretrained folder (config.json with id2label, weights, tokenizer): served as it "
        "is, not trained; labelled data (--test, or --data-format clinc150 --data) is scored and gated",
    )
    parser.add_argument("--texts", type=Path, help="with --weights and no labelled data: texts to gate on")
    parser.add_argument(
        "--max-length", type=int, help="with --weights: tokens per text (default: the folder's)"
    )
    parser.add_argument("--oos-label", help="with --weights: the model's out-of-scope label (default: none)")
    parser.add_argument(
        "--oos-threshold", type=float, help="with --weights: answer out of scope below this top probability"
    )


def add_export_options(parser: TakesOptions) -> None:
    """``tsbatch export``'s options for a text model: your folder, or what to train on."""
    add_weights_options(parser)
    add_training_options(parser)
