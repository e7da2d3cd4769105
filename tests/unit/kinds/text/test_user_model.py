"""Building from a user's folder: the four-key entry, labelled data scored and gated, out of
scope only when asked, and ``tsbatch export --model M --weights``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from batchkit.config import from_mapping
from tests.classifier_folders import LABELS, TOKENS
from text_serving.config import TextModelConfig
from tsbatch.archive.export import main as export_command
from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.text import export as export_module
from tsbatch.kinds.text.evaluate import predict_probabilities
from tsbatch.kinds.text.model import save_tokenizer
from tsbatch.kinds.text.pretrained import PretrainedError, SequenceClassifier, load_classifier, read_folder
from tsbatch.kinds.text.schema import TextModel
from tsbatch.kinds.text.user_model import NO_OOS_LABEL, check_labels, out_of_scope

FOUR_KEYS = {"kind": "text", "handler": "handlers/text_classifier_handler.py", "version": "1.0"}
NO_PACKAGES = {"targets": [], "torchscript_precisions": []}  # the folder path is under test, not compiling
TEXTS = [
    "my parcel never arrived",
    "i want my money back",
    "why was i charged twice this month",
    "hello",
    "the delivery is three weeks late and nobody answers the phone",
    "refund please",
    "can i change the address on my order",
    "thanks a lot",
]


def entry(**settings: object) -> TextModel:
    return TextModel.model_validate({**FOUR_KEYS, "weights": {"path": "m"}, **settings})


def test_out_of_scope_is_decided_only_when_asked() -> None:
    labels = ["billing", "oos"]
    assert out_of_scope(entry(), labels) == (NO_OOS_LABEL, 0.0)
    assert out_of_scope(entry(oos_label="oos"), labels) == ("oos", 0.0)
    assert out_of_scope(entry(weights={"path": "m", "oos_threshold": 0.4}), labels) == ("oos", 0.4)
    named = entry(oos_label="other", weights={"path": "m", "oos_threshold": 0.4})
    assert out_of_scope(named, labels) == ("other", 0.4)  # a threshold's answers need not be a label
    with pytest.raises(PretrainedError, match="oos_label 'unknown' is not a label of the model"):
        out_of_scope(entry(oos_label="unknown"), labels)


def test_labelled_texts_must_name_the_model_s_labels_or_the_out_of_scope_one() -> None:
    check_labels({"test": [("hi", "billing"), ("sing", "oos")]}, ["billing"], "oos")
    with pytest.raises(PretrainedError, match=r"test has labels the model does not have: \['oos'\]"):
        check_labels({"test": [("sing", "oos")]}, ["billing"], NO_OOS_LABEL)


def test_a_four_key_entry_builds_every_archive_file(text_classifier_folders, tmp_path: Path) -> None:
    folder = text_classifier_folders["bert"]
    manifest_path = tmp_path / "models.yaml"
    models = {"mine": {**FOUR_KEYS, "weights": {"path": str(folder)}}}
    manifest_path.write_text(yaml.safe_dump({"build_dir": str(tmp_path / "build"), "models": models}))
    spec = load_manifest(manifest_path).model("mine")
    out = export_module.export(spec, spec.with_settings(compile=NO_PACKAGES).entry_as(TextModel))

    assert json.loads((out / "labels.json").read_text()) == LABELS["bert"]
    assert (out / "tokenizer" / "tokenizer.json").is_file()
    handler = from_mapping(
        TextModelConfig, {**json.loads((out / "handler_config.json").read_text()), "torch_threads": 1}
    )
    assert (handler.max_length, handler.oos_label, handler.oos_threshold) == (TOKENS, NO_OOS_LABEL, 0.0)
    assert handler.base_model == f"BertForSequenceClassification from {folder}"
    info = json.loads((out / "build_info.json").read_text())
    assert info["weights"]["source"] == "your save_pretrained folder" and info["weights"]["path"] == str(
        folder
    )
    assert info["weights"]["files"]["model.safetensors"]
    assert info["max_length"] == TOKENS and info["gate_texts"] == "128 of the project's utterances"
    assert info["verification"]["traced_vs_hugging_face"] <= 1e-4
    assert max(info["verification"].values()) <= 1e-4
    report = (out / "report.md").read_text()
    assert "Weights: your `BertForSequenceClassification` (`bert`)" in report
    assert "No labelled data: the serving candidates are gated on agreement with fp32" in report
    assert "## Serving candidates" in report


def labelled_csv(folder: Path, path: Path, work: Path) -> tuple[Path, float]:
    """The texts labelled as the model itself answers them, but the first one wrong, plus an
    out-of-scope text: in-scope accuracy (n-1)/n by construction."""
    model = SequenceClassifier(load_classifier(read_folder(folder)))
    tokenizer_dir = save_tokenizer(str(folder), work / "tokenizer", TOKENS)
    labels = LABELS["distilbert"]
    best = predict_probabilities(model, tokenizer_dir, TEXTS, TOKENS).argmax(axis=1)
    rows = [(text, labels[int(index)]) for text, index in zip(TEXTS, best, strict=True)]
    rows[0] = (rows[0][0], next(label for label in labels if label != rows[0][1]))
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows([("text", "label"), *rows, ("play a song by the beatles", "oos")])
    return path, (len(TEXTS) - 1) / len(TEXTS)


def test_export_text_weights_scores_and_gates_labelled_data(text_classifier_folders, tmp_path: Path) -> None:
    """On a training entry (its model keys dropped), with a test CSV and a threshold."""
    folder = text_classifier_folders["distilbert"]
    test_csv, accuracy = labelled_csv(folder, tmp_path / "test.csv", tmp_path)
    manifest_path = tmp_path / "models.yaml"
    trained = {
        **FOUR_KEYS,
        "base_model": "elsewhere",
        "max_length": 16,
        "data": {"train": "t.csv"},
        "compile": NO_PACKAGES,
    }
    manifest_path.write_text(yaml.safe_dump({"models": {"intents": trained}}))
    out = tmp_path / "build"
    argv = [
        "--manifest",
        str(manifest_path),
        "--model",
        "intents",
        "--weights",
        str(folder),
        "--test",
        str(test_csv),
    ]
    argv += ["--oos-threshold", "0.2", "--out", str(out)]

    assert export_command([*argv, "--min-in-scope-accuracy", "1.0"]) == 1
    failed = json.loads((out / "report.json").read_text())
    assert failed["failures"] == [f"test in_scope_accuracy {accuracy:.4f} < gate 1.0"]
    assert not (out / "model.pt").exists()

    assert export_command(argv) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["test"]["in_scope_accuracy"] == pytest.approx(accuracy, abs=1e-4)
    assert report["test"]["oos_examples"] == 1 and report["out_of_scope"] == {
        "label": "oos",
        "threshold": 0.2,
    }
    assert report["max_length"]["value"] == TOKENS  # the training entry's 16 was dropped
    info = json.loads((out / "build_info.json").read_text())
    assert info["data"] == str(test_csv) and info["test"]["examples"] == len(TEXTS) + 1
    handler = json.loads((out / "handler_config.json").read_text())
    assert (handler["oos_label"], handler["oos_threshold"]) == ("oos", 0.2)
    assert "| test | 9 |" in (out / "report.md").read_text()
