"""Which weights the image classifier export takes, what it writes, and the verification that gates the build."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torchvision

from batchkit.worker import optimize_for_serving
from tests.conftest import BatchFlattening
from tsbatch.archive import artifacts
from tsbatch.archive.compiled import NothingToServeError
from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.image.export import export, resolve_weights, verify
from tsbatch.kinds.image.weights import ExportError, load_user_weights


@pytest.fixture
def spec(tmp_path: Path):
    spec = load_manifest().model("resnet18")
    # No .pt2 and no emulated-bf16 gate at 224x224 here: test_compiled covers them on tiny models.
    no_compile = spec.with_settings(compile={"targets": [], "torchscript_precisions": []})
    return replace(no_compile, build_dir=tmp_path / "build")


def test_user_torchscript_artifact_is_packaged_without_reexport(tmp_path: Path, spec) -> None:
    scripted = torch.jit.script(torchvision.models.resnet18(num_classes=2).eval())
    scripted.save(str(tmp_path / "mine.pt"))
    (tmp_path / "labels.json").write_text(json.dumps(["no", "yes"]))
    out = export(spec, tmp_path / "mine.pt", tmp_path / "labels.json")
    info = artifacts.read_json(out / artifacts.BUILD_INFO_FILE)
    assert info["weights"] == "user TorchScript artifact mine.pt"
    assert "max_abs_diff_scripted_vs_eager" not in info["verification"]
    assert artifacts.read_json(out / artifacts.LABELS_FILE) == ["no", "yes"]
    handler = artifacts.read_json(out / artifacts.HANDLER_CONFIG_FILE)
    assert handler["weights"] == info["weights"]
    # The reduced-decoding gate ran on this model and its verdict is what the worker reads.
    gate = handler["reduced_decode_gate"]
    assert gate["photos"] == 64 and (not gate["passed"] or gate["top1_agreement"] >= 0.99)
    assert "## Reduced-size JPEG decoding" in (out / artifacts.REPORT_MARKDOWN).read_text()


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
    resolved = load_user_weights(tmp_path / "w.pth", tmp_path / "l.txt", "resnet18")
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
    resolved = load_user_weights(tmp_path / "w.pth", tmp_path / "l.txt", "resnet18")
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


ARCHITECTURE = "squeezenet1_1"  # another torchvision architecture (its head a convolution), tiny at 32x32
CROP = 32
LABELS = ["cat", "dog", "bird"]


def save_weights(model: torch.nn.Module, path: Path) -> None:
    """The model as a user brings it: a state_dict, TorchScript or a torch.export program."""
    if path.suffix == ".pth":
        torch.save(model.state_dict(), path)
    elif path.suffix == ".pt":
        torch.jit.script(model).save(str(path))
    else:
        images = torch.randn(2, 3, CROP, CROP)
        batch = torch.export.Dim("batch", min=1)
        torch.export.save(torch.export.export(model, (images,), dynamic_shapes=({0: batch},)), str(path))


@pytest.mark.parametrize(
    ("file", "source", "made"),
    [
        ("w.pth", "user state_dict w.pth", "scripted"),
        ("w.pt", "user TorchScript artifact w.pt", "the user's"),
        ("w.pt2", "user exported program w.pt2", "traced"),
    ],
)
def test_each_user_source_of_another_architecture_exports_and_verifies(
    tmp_path: Path, file: str, source: str, made: str
) -> None:
    torch.manual_seed(0)
    model = torchvision.models.get_model(ARCHITECTURE, num_classes=len(LABELS)).eval()
    save_weights(model, tmp_path / file)
    (tmp_path / "labels.txt").write_text("\n".join(LABELS))
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path / "build").with_settings(
        architecture=ARCHITECTURE,
        weights={"path": str(tmp_path / file), "labels": str(tmp_path / "labels.txt")},
        preprocessing={"resize_size": 36, "crop_size": CROP, "mean": [0.5] * 3, "std": [0.25] * 3},
        compile={"targets": [], "torchscript_precisions": []},
        verify={"batch_sizes": [1, 3]},
    )
    out = export(spec)
    info = artifacts.read_json(out / artifacts.BUILD_INFO_FILE)
    assert (info["weights"], info["torchscript"], info["num_classes"]) == (source, made, len(LABELS))
    assert info["verification"]["max_abs_diff_batch3_vs_single"] <= 1e-4
    images = torch.randn(5, 3, CROP, CROP)
    served = torch.jit.load(str(out / artifacts.MODEL_FILE))
    with torch.inference_mode():
        assert torch.allclose(served(images), model(images), atol=1e-4)
    config = artifacts.read_json(out / artifacts.HANDLER_CONFIG_FILE)
    assert (config["architecture"], config["crop_size"]) == (ARCHITECTURE, CROP)


def test_a_program_that_traces_for_one_batch_size_is_built_without_torchscript_or_refused_saying_why(
    tmp_path: Path,
) -> None:
    """No package target here, so nothing would serve: the build stops with why (the
    integration test builds and serves its package)."""
    torch.manual_seed(0)
    save_weights(BatchFlattening(len(LABELS)).eval(), tmp_path / "flat.pt2")
    (tmp_path / "labels.txt").write_text("\n".join(LABELS))
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path / "build").with_settings(
        weights={"path": str(tmp_path / "flat.pt2"), "labels": str(tmp_path / "labels.txt")},
        preprocessing={"resize_size": 36, "crop_size": CROP, "mean": [0.5] * 3, "std": [0.25] * 3},
        compile={"targets": [], "torchscript_precisions": []},
        verify={"batch_sizes": [1, 3]},
    )
    with pytest.raises(NothingToServeError) as error:
        export(spec)
    assert "serves only the batch size it was traced on (RuntimeError: mat1 and mat2 shapes" in str(
        error.value
    )
    assert "no AOTInductor package passed to serve instead (no target)" in str(error.value)
    with pytest.raises(ExportError, match="runtime: torchscript, but the exported program traced into"):
        export(spec.with_settings(runtime="torchscript"))
