"""Where the ResNet's weights come from, and the verification that gates the build."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torchvision

from batchkit.runtime import optimize_for_serving
from tsbatch.build import artifacts
from tsbatch.build.resnet.export import (
    ExportError,
    cached_weights_path,
    export,
    load_torchvision_weights,
    load_user_weights,
    resolve_weights,
    verify,
)
from tsbatch.build.manifest import load_manifest


@pytest.fixture
def spec(tmp_path: Path):
    spec = load_manifest().model("resnet18")
    return replace(spec, build_dir=tmp_path / "build")


def test_user_state_dict_with_labels(tmp_path: Path, spec) -> None:
    model = torchvision.models.resnet18(num_classes=3)
    torch.save(model.state_dict(), tmp_path / "weights.pth")
    (tmp_path / "labels.txt").write_text("cat\ndog\nbird\n")
    resolved = load_user_weights(tmp_path / "weights.pth", tmp_path / "labels.txt", "resnet18", spec.settings)
    assert resolved.labels == ["cat", "dog", "bird"]
    assert resolved.source == "user state_dict weights.pth"
    assert (resolved.resize_size, resolved.crop_size) == (256, 224)
    with pytest.raises(ExportError, match="needs a labels file"):
        load_user_weights(tmp_path / "weights.pth", None, "resnet18", spec.settings)


def test_user_torchscript_artifact_is_packaged_without_reexport(tmp_path: Path, spec) -> None:
    scripted = torch.jit.script(torchvision.models.resnet18(num_classes=2).eval())
    scripted.save(str(tmp_path / "mine.pt"))
    (tmp_path / "labels.json").write_text(json.dumps(["no", "yes"]))
    out = export(spec, tmp_path / "mine.pt", tmp_path / "labels.json")
    info = artifacts.read_json(out / artifacts.BUILD_INFO_FILE)
    assert info["weights"] == "user TorchScript artifact mine.pt"
    assert "max_abs_diff_scripted_vs_eager" not in info["verification"]
    assert artifacts.read_json(out / artifacts.LABELS_FILE) == ["no", "yes"]
    assert artifacts.read_json(out / artifacts.HANDLER_CONFIG_FILE)["weights"] == info["weights"]


def test_torchvision_weights_come_from_the_local_hub_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    assert load_torchvision_weights("resnet18", "IMAGENET1K_V1", allow_download=False) is None
    cached = cached_weights_path(weights)
    cached.parent.mkdir(parents=True)
    torch.save(torchvision.models.resnet18().state_dict(), cached)
    resolved = load_torchvision_weights("resnet18", "IMAGENET1K_V1", allow_download=False)
    assert resolved is not None
    assert resolved.source == "torchvision resnet18 IMAGENET1K_V1"
    assert len(resolved.labels) == 1000 and resolved.labels[0] == "tench"
    assert (resolved.resize_size, resolved.crop_size) == (256, 224)


def test_user_path_wins_over_torchvision(tmp_path: Path, spec, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    torch.save(torchvision.models.resnet18(num_classes=2).state_dict(), tmp_path / "w.pth")
    (tmp_path / "l.txt").write_text("a\nb\n")
    resolved = resolve_weights(spec, tmp_path / "w.pth", tmp_path / "l.txt")
    assert resolved.source.startswith("user state_dict")


def test_verification_fails_when_scripted_differs_from_eager(tmp_path: Path, spec) -> None:
    model = torchvision.models.resnet18(num_classes=2).eval()
    torch.save(model.state_dict(), tmp_path / "w.pth")
    (tmp_path / "l.txt").write_text("a\nb\n")
    resolved = load_user_weights(tmp_path / "w.pth", tmp_path / "l.txt", "resnet18", spec.settings)
    resolved.crop_size = 64
    other = torch.jit.script(torchvision.models.resnet18(num_classes=2).eval())
    with pytest.raises(ExportError, match="verification failed"):
        verify(resolved, other, atol=1e-4, batch_sizes=[1, 2])
    report = verify(resolved, torch.jit.script(model), atol=1e-4, batch_sizes=[1, 2])
    assert report["max_abs_diff_scripted_vs_eager"] <= 1e-4


def test_verification_covers_the_module_workers_will_run(tmp_path: Path, spec) -> None:
    torch.manual_seed(3)
    model = torchvision.models.resnet18(num_classes=2).eval()
    torch.save(model.state_dict(), tmp_path / "w.pth")
    (tmp_path / "l.txt").write_text("a\nb\n")
    resolved = load_user_weights(tmp_path / "w.pth", tmp_path / "l.txt", "resnet18", spec.settings)
    resolved.crop_size = 64
    scripted = torch.jit.script(model)
    report = verify(
        resolved, scripted, atol=1e-4, batch_sizes=[1, 2], optimized=optimize_for_serving(scripted)
    )
    assert report["max_abs_diff_optimized_batch2_vs_reference"] <= 1e-4
    torch.manual_seed(7)  # another network of the same shape
    stranger = optimize_for_serving(torch.jit.script(torchvision.models.resnet18(num_classes=2).eval()))
    with pytest.raises(ExportError, match="optimized_batch1"):
        verify(resolved, scripted, atol=1e-4, batch_sizes=[1, 2], optimized=stranger)
