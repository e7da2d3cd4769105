"""The train -> TorchScript -> verification pipeline on a tiny BERT, and what fails it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from batchkit.config import from_mapping
from tests.conftest import tiny_encoder
from text_serving.config import TextModelConfig
from tsbatch.archive import artifacts
from tsbatch.archive.export import main as export_command
from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.text import export as export_module
from tsbatch.kinds.text.export import ExportError, pinned_devices, trace, verification_texts, verify
from tsbatch.kinds.text.model import IntentClassifier
from tsbatch.kinds.text.schema import TextModel


def test_export_command_trains_on_clinc_json_with_a_local_base_model(
    tmp_path: Path, tiny_base_model: Path, tiny_clinc: Path
) -> None:
    out = tmp_path / "build"
    argv = ["--data-format", "clinc150", "--data", str(tiny_clinc)]
    argv += ["--base-model", str(tiny_base_model), "--epochs", "1", "--out", str(out), "--threads", "1"]
    exit_code = export_command(["--model", "bert_intent", *argv])
    # The manifest's gates apply; a 1-epoch tiny random model cannot pass them.
    assert exit_code == 1
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] is False and report["failures"]
    assert not (out / artifacts.MODEL_FILE).exists()


def test_export_writes_a_verified_archive_layout(
    tmp_path: Path, tiny_base_model: Path, tiny_clinc: Path
) -> None:
    spec = load_manifest().model("bert_intent")
    # Every reduced precision a CPU can serve, forced whatever this CPU has: the compile at
    # bf16 is the step that failed on CPUs with native bf16 (a fp32 attention mask).
    settings = spec.with_settings(
        base_model=str(tiny_base_model),
        data={"format": "clinc150", "path": str(tiny_clinc)},
        training={"epochs": 1, "threads": 1, "gates": {"in_scope_accuracy": 0.0, "oos_recall": 0.0}},
        compile={
            "targets": ["cpu-bf16", "cpu-fp16"],
            "torchscript_precisions": ["bf16", "fp16"],
            "max_batch_size": 4,
            "enforce_gates": False,
        },
    ).entry_as(TextModel)
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
    for candidate in ("torchscript-bf16", "torchscript-fp16", "aoti-cpu-bf16", "aoti-cpu-fp16"):
        gate = info["gates"][candidate]
        assert {"in_scope_accuracy", "oos_recall", "top1_agreement", "max_probability_diff"} <= set(gate)
        assert len(gate["check_outputs"]) == 2 and len(gate["check_outputs"][0]) == 3
    assert set(info["compiled"]) == {"cpu-bf16", "cpu-fp16"}
    assert config.precision == "auto"
    assert config.compiled_models == ("model.cpu-bf16.pt2", "model.cpu-fp16.pt2")
    assert (out / "model.cpu-bf16.pt2").is_file() and (out / "model.cpu-fp16.pt2").is_file()
    assert "torchscript-fp32" in config.check_outputs


def test_verify_catches_a_traced_model_that_differs(tiny_base_model: Path) -> None:
    torch.manual_seed(0)
    eager = IntentClassifier(tiny_encoder(), 3).eval()
    example = (torch.tensor([[101, 2000, 102, 0]]), torch.tensor([[1, 1, 1, 0]]))
    texts = verification_texts([f"text number {i} " * (i + 1) for i in range(20)], count=5)
    good = trace(eager, *example)
    report = verify(good, eager, tiny_base_model, texts, 32, 1e-4, [1, 3])
    assert report["padded_batch_vs_alone"] <= 1e-4
    other = IntentClassifier(tiny_encoder(), 3).eval()  # different random weights
    with pytest.raises(ExportError, match="verification failed"):
        verify(trace(other, *example), eager, tiny_base_model, texts, 32, 1e-4, [1])


def test_exported_model_follows_map_location_instead_of_the_export_device() -> None:
    class Pinned(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return input_ids + torch.arange(input_ids.shape[1], device=input_ids.device)

    example = (torch.tensor([[101, 2000, 102, 0]]), torch.tensor([[1, 1, 1, 0]]))
    assert pinned_devices(trace(IntentClassifier(tiny_encoder(), 3), *example)) == []
    assert pinned_devices(trace(Pinned(), *example))
