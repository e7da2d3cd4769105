"""The benchmark rows this machine can run, and the archive variants that pin each one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.archive import artifacts, variants
from tsbatch.archive.manifest import ModelSpec, validate_entry
from tsbatch.archive.variants import BASELINE, Variant, default_variant, machine_variants, variant_spec


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    entry = {"kind": "image", "handler": "h.py", "version": "1"}
    spec = ModelSpec("m", validate_entry("m", entry, tmp_path / "models.yaml"), tmp_path / "build", tmp_path)
    artifacts.write_json(
        spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE,
        {"precision": "auto", "runtime": "auto", "compiled_models": ["model.cpu-fp32.pt2"]},
    )
    return spec


def test_without_native_bf16_only_fp32_rows_run(spec: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variants, "native_cpu_bf16", lambda: False)
    runnable, skipped = machine_variants(spec.artifact_dir)
    assert runnable == [BASELINE, Variant("aoti", "fp32")]
    assert any("no native bf16 on this CPU" in reason for reason in skipped)


def test_with_native_bf16_rows_need_their_package(spec: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variants, "native_cpu_bf16", lambda: True)
    runnable, skipped = machine_variants(spec.artifact_dir)
    assert Variant("torchscript", "bf16") in runnable and Variant("aoti", "bf16") not in runnable
    assert "aoti bf16: the archive has no gated model.cpu-bf16.pt2" in skipped


def test_default_variant_is_auto_at_fp32_without_native_bf16(
    spec: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("batchkit.precision.native_cpu_bf16", lambda flags=None: False)
    assert default_variant(spec.artifact_dir) == Variant("auto", "fp32")


def test_variant_spec_pins_runtime_and_precision(spec: ModelSpec, tmp_path: Path) -> None:
    pinned = variant_spec(spec, tmp_path / "work", BASELINE)
    config = artifacts.read_json(pinned.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    assert (config["runtime"], config["precision"]) == ("torchscript", "fp32")
    assert artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)["runtime"] == "auto"
