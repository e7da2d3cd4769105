"""The one build sequence: a kind's hooks called in order, its TorchScript verified from the
file the archive serves, and a failed build leaving nothing of an earlier one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from image_serving.images import check_images
from tests.conftest import TinyImageNet
from tsbatch.archive import artifacts
from tsbatch.archive.build import GatePlan, Verified, build
from tsbatch.archive.compiled import CompileSettings, GateData
from tsbatch.archive.gates import top1_accuracy
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.schema import Common


class TinyHooks:
    """A kind's hooks around the tiny CNN, recording what the core calls and hands them."""

    def __init__(self, entry: Common, verify_fails: bool = False, no_torchscript: str = "") -> None:
        self.entry, self.verify_fails, self.no_torchscript = entry, verify_fails, no_torchscript
        self.calls: list[str] = []
        torch.manual_seed(0)
        self.model = TinyImageNet().eval()
        self.scripted = torch.jit.script(self.model)

    def load(self, out: Path) -> Common:
        self.calls.append("load")
        return self.entry

    def torchscript(self) -> torch.jit.ScriptModule:
        self.calls.append("torchscript")
        return self.scripted

    def verify(self, torchscript: torch.jit.ScriptModule) -> Verified:
        self.calls.append("verify")
        self.verified = torchscript
        if self.verify_fails:
            raise RuntimeError("TorchScript differs from eager")
        return Verified({"max_abs_diff": 0.0}, self.no_torchscript)

    def gate_plan(self, settings: CompileSettings, torchscript: torch.jit.ScriptModule | None) -> GatePlan:
        self.calls.append("gate_plan")
        self.settings = settings
        images = torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(1))
        with torch.inference_mode():
            score = top1_accuracy(self.model(images).argmax(1))
        shapes = ({0: torch.export.Dim("batch", min=1, max=8)},)
        return GatePlan(self.model, GateData([(images,)], score, (check_images(16),), shapes))

    def labels(self) -> list[str]:
        return ["a", "b", "c"]

    def handler_fields(self, out: Path, served: torch.nn.Module | None) -> dict[str, Any]:
        self.calls.append("handler_fields")
        return {"weights": "tiny", "resize_size": 16, "crop_size": 16, "mean": [0.5] * 3, "std": [0.5] * 3}

    def build_info(self) -> dict[str, Any]:
        return {"weights": "tiny"}

    def libraries(self) -> dict[str, str]:
        return {"tinylib": "1.0"}

    def description(self) -> str:
        return "the tiny CNN"


@pytest.fixture
def spec():
    spec = load_manifest().model("resnet18")
    return spec.with_settings(compile={"targets": [], "torchscript_precisions": [], "max_batch_size": 8})


def test_the_hooks_run_in_order_and_the_archive_files_are_written(tmp_path: Path, spec) -> None:
    hooks = TinyHooks(spec.config)
    out = build(spec, hooks, tmp_path)
    assert hooks.calls == ["load", "torchscript", "verify", "gate_plan", "handler_fields"]
    assert hooks.verified is not hooks.scripted  # read back from model.pt, the file served
    assert hooks.settings.max_batch_size == 8 and hooks.settings.targets == ()
    assert (out / artifacts.MODEL_FILE).is_file()
    assert artifacts.read_json(out / artifacts.LABELS_FILE) == ["a", "b", "c"]
    handler = artifacts.read_json(out / artifacts.HANDLER_CONFIG_FILE)
    assert handler["weights"] == "tiny" and handler["failed_gates"] == []
    assert "torchscript-fp32" in handler["check_outputs"]
    info = artifacts.read_json(out / artifacts.BUILD_INFO_FILE)
    assert info["model"] == "resnet18" and info["weights"] == "tiny" and info["tinylib"] == "1.0"
    assert info["verification"] == {"max_abs_diff": 0.0} and "gates" in info and "timings_ms" in info
    assert "## Serving candidates" in (out / artifacts.REPORT_MARKDOWN).read_text()


def test_a_failed_verification_leaves_no_model_nor_an_earlier_builds_files(tmp_path: Path, spec) -> None:
    for name in (artifacts.HANDLER_CONFIG_FILE, artifacts.BUILD_INFO_FILE, artifacts.REPORT_MARKDOWN):
        (tmp_path / name).write_text("{}")  # an earlier build's
    with pytest.raises(RuntimeError, match="differs"):
        build(spec, TinyHooks(spec.config, verify_fails=True), tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_a_model_without_torchscript_serves_its_packages_only(tmp_path: Path, spec) -> None:
    cpu_fp32 = spec.with_settings(
        compile={"targets": ["cpu-fp32"], "torchscript_precisions": [], "max_batch_size": 8}
    )
    why = "it traces for one batch size only"
    out = build(cpu_fp32, TinyHooks(cpu_fp32.config, no_torchscript=why), tmp_path)
    assert not (out / artifacts.MODEL_FILE).exists()
    handler = artifacts.read_json(out / artifacts.HANDLER_CONFIG_FILE)
    assert handler["model_file"] == "" and handler["compiled_models"] == ["model.cpu-fp32.pt2"]
    assert artifacts.read_json(out / artifacts.BUILD_INFO_FILE)["no_torchscript"] == why


def test_a_build_that_cannot_load_leaves_the_earlier_build_as_it_was(tmp_path: Path, spec) -> None:
    """`tsbatch export --weights` with a wrong path must not wipe the build being served."""
    (tmp_path / artifacts.HANDLER_CONFIG_FILE).write_text("{}")

    class NoWeights(TinyHooks):
        def load(self, out: Path) -> Common:
            raise FileNotFoundError("weights path /no/such.pth does not exist")

    with pytest.raises(FileNotFoundError):
        build(spec, NoWeights(spec.config), tmp_path)
    assert (tmp_path / artifacts.HANDLER_CONFIG_FILE).read_text() == "{}"
