"""Where the ResNet's weights come from: the user's files or torchvision's (hub cache first)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torchvision

from tsbatch.archive.manifest import load_manifest
from tsbatch.environment import ALLOW_DIGITS_ENV
from tsbatch.kinds.image.export import resolve_weights
from tsbatch.kinds.image.weights import (
    ExportError,
    cached_weights_path,
    load_torchvision_weights,
    load_user_weights,
)


@pytest.fixture
def spec(tmp_path: Path):
    spec = load_manifest().model("resnet18")
    return replace(spec, build_dir=tmp_path / "build")


def test_user_state_dict_with_labels(tmp_path: Path, spec) -> None:
    model = torchvision.models.resnet18(num_classes=3)
    torch.save(model.state_dict(), tmp_path / "weights.pth")
    (tmp_path / "labels.txt").write_text("cat\ndog\nbird\n")
    resolved = load_user_weights(tmp_path / "weights.pth", tmp_path / "labels.txt", "resnet18")
    assert resolved.labels == ["cat", "dog", "bird"]
    assert resolved.source == "user state_dict weights.pth"
    assert (resolved.resize_size, resolved.crop_size) == (256, 224)
    with pytest.raises(ExportError, match="needs a labels file"):
        load_user_weights(tmp_path / "weights.pth", None, "resnet18")


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


def test_without_weights_the_build_refuses_the_digits_placeholder(tmp_path: Path, spec, monkeypatch) -> None:
    """No path, an empty hub cache and no download: the image build's situation offline."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.delenv(ALLOW_DIGITS_ENV, raising=False)
    offline = spec.with_settings(weights={"torchvision": "DEFAULT", "download": False})
    with pytest.raises(ExportError, match=f"placeholder: set {ALLOW_DIGITS_ENV}=1"):
        resolve_weights(offline, None, None)
    monkeypatch.setenv(ALLOW_DIGITS_ENV, "0")
    with pytest.raises(ExportError, match=r"weights\.path"):
        resolve_weights(offline, None, None)
