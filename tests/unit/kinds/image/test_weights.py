"""Where the image classifier's weights come from: the user's files (a state_dict, TorchScript or
a torch.export program) or torchvision's (hub cache first)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torchvision

from tests.conftest import TINY_CROP, TINY_LABELS, TinyImageNet
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.environment import ALLOW_DIGITS_ENV
from tsbatch.kinds.image.export import export, resolve_weights
from tsbatch.kinds.image.schema import Preprocessing
from tsbatch.kinds.image.weights import (
    ExportedClassifier,
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


TINY_PREPROCESSING = Preprocessing(resize_size=20, crop_size=TINY_CROP, mean=(0.5,) * 3, std=(0.25,) * 3)


def tiny_program(path: Path, dynamic: bool = True) -> Path:
    """The tiny CNN saved by torch.export.save, with a dynamic batch unless told otherwise."""
    torch.manual_seed(0)
    images = torch.randn(2, 3, TINY_CROP, TINY_CROP)
    shapes = ({0: torch.export.Dim("batch", min=1, max=8)},) if dynamic else None
    torch.export.save(torch.export.export(TinyImageNet().eval(), (images,), dynamic_shapes=shapes), str(path))
    (path.parent / "labels.json").write_text(json.dumps(TINY_LABELS))
    return path


def test_an_exported_program_of_one_batch_size_is_refused_saying_how_to_export(tmp_path: Path) -> None:
    program = tiny_program(tmp_path / "fixed.pt2", dynamic=False)
    with pytest.raises(ExportError, match=r"takes batches of 2 only: export it with .*Dim\('batch'\)"):
        load_user_weights(program, tmp_path / "labels.json", "resnet18", TINY_PREPROCESSING)


def test_another_architectures_state_dict_is_refused_naming_its_missing_head(tmp_path: Path) -> None:
    torch.save(torchvision.models.resnet18(num_classes=3).state_dict(), tmp_path / "w.pth")
    with pytest.raises(
        ExportError, match=r"nor a squeezenet1_1 state_dict \(it has no `classifier.1.weight`\)"
    ):
        load_user_weights(tmp_path / "w.pth", None, "squeezenet1_1")


def test_labels_must_match_the_classes_the_model_scores(tmp_path: Path) -> None:
    torch.jit.script(TinyImageNet(3).eval()).save(str(tmp_path / "m.pt"))
    (tmp_path / "labels.txt").write_text("a\nb\n")
    with pytest.raises(ExportError, match="labels file has 2 labels, model has 3 classes"):
        load_user_weights(tmp_path / "m.pt", tmp_path / "labels.txt", "resnet18", TINY_PREPROCESSING)


def test_an_exported_program_is_traced_compiled_and_gated_like_an_eager_model(tmp_path: Path, spec) -> None:
    program = tiny_program(tmp_path / "tiny.pt2")
    resolved = load_user_weights(program, tmp_path / "labels.json", "resnet18", TINY_PREPROCESSING)
    assert isinstance(resolved.model, ExportedClassifier) and resolved.labels == TINY_LABELS
    assert resolved.model.eval() is resolved.model  # the program's module alone refuses eval()
    built = spec.with_settings(
        weights={"path": str(program), "labels": str(tmp_path / "labels.json")},
        preprocessing=TINY_PREPROCESSING.model_dump(),
        compile={"targets": ["cpu-fp32"], "max_batch_size": 4, "torchscript_precisions": []},
        verify={"batch_sizes": [1, 3]},
    )
    out = export(built)
    info = artifacts.read_json(out / artifacts.BUILD_INFO_FILE)
    assert (info["weights"], info["torchscript"], info["skipped_targets"]) == (
        "user exported program tiny.pt2",
        "traced",
        {},
    )
    assert info["gates"]["aoti-cpu-fp32"]["passed"] is True
    assert artifacts.read_json(out / artifacts.HANDLER_CONFIG_FILE)["compiled_models"] == [
        "model.cpu-fp32.pt2"
    ]
