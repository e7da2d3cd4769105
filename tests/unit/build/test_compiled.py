"""Gating reduced-precision TorchScript and compiled packages at build time."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.conftest import TinyImageNet
from tsbatch.build.compiled import CompileSettings, build_and_gate, compile_settings, host_targets
from tsbatch.build.gates import top1_accuracy


def test_host_targets_follow_the_automatic_choice(monkeypatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    targets = host_targets()
    assert targets[0] in ("cpu-fp32", "cpu-bf16")
    assert compile_settings({"compile": {"targets": ["cpu-fp16"], "max_batch_size": 8}}).targets == ("cpu-fp16",)
    assert compile_settings({}).max_batch_size == 16
    reduced = tuple(t.split("-")[1] for t in targets if t.endswith(("-bf16", "-fp16")))
    assert compile_settings({}).torchscript_precisions == reduced  # int8 has no TorchScript form


def test_torchscript_bf16_is_gated_against_fp32(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyImageNet().eval()
    scripted = torch.jit.script(model)
    images = torch.randn(16, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        targets = model(images).argmax(1)
    settings = CompileSettings(targets=(), max_batch_size=8, torchscript_precisions=("bf16",))
    batches = [(chunk,) for chunk in images.split(8)]
    outcome = build_and_gate(model, scripted, tmp_path, settings, batches, top1_accuracy(targets), ({},))
    (result,) = outcome.results
    assert result.candidate == "torchscript-bf16"
    assert set(result.figures) == {"accuracy", "top1_agreement", "max_probability_diff", "batch_vs_alone_max_diff"}
    assert result.figures["max_probability_diff"] < 0.05
    assert outcome.handler_fields() == {
        "compiled_models": [],
        "compiled_max_batch_size": 0,
        "failed_gates": outcome.failed,
        "int8_speedup": 0.0,
    }
    assert "torchscript-bf16" in outcome.build_info()["gates"]
