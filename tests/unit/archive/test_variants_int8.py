"""The int8 benchmark row: an AOTInductor row only, on a CPU with VNNI, with its package; the
default variant takes int8 only when the build measured it faster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tsbatch.archive import artifacts, variants
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.variants import Variant, default_variant, machine_variants

INT8 = Variant("aoti", "int8")


def archive(tmp_path: Path, **fields: object) -> Path:
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path / "build")
    config = {"precision": "auto", "runtime": "auto", "compiled_models": ["model.cpu-int8.pt2"], **fields}
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, config)
    return spec.artifact_dir


@pytest.fixture(autouse=True)
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    monkeypatch.setattr(variants, "native_cpu_bf16", lambda: False)


def test_the_int8_row_needs_vnni_and_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variants, "native_cpu_int8", lambda: True)
    runnable, _ = machine_variants(archive(tmp_path))
    assert runnable[-1] == INT8 and Variant("torchscript", "int8") not in runnable
    runnable, skipped = machine_variants(archive(tmp_path, compiled_models=[]))
    assert INT8 not in runnable and "aoti int8: the archive has no gated model.cpu-int8.pt2" in skipped
    monkeypatch.setattr(variants, "native_cpu_int8", lambda: False)
    runnable, skipped = machine_variants(archive(tmp_path))
    assert INT8 not in runnable and any("no VNNI/AMX-int8 on this CPU" in reason for reason in skipped)


def test_the_default_is_int8_only_when_the_build_measured_it_faster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("batchkit.precision.native_cpu_int8", lambda flags=None: True)
    monkeypatch.setattr("batchkit.precision.native_cpu_bf16", lambda flags=None: False)
    assert default_variant(archive(tmp_path, int8_speedup=1.8)) == Variant("auto", "int8")
    assert default_variant(archive(tmp_path, int8_speedup=1.05)).precision == "fp32"
    monkeypatch.setattr("batchkit.precision.native_cpu_int8", lambda flags=None: False)
    assert default_variant(archive(tmp_path, int8_speedup=1.8)).precision == "fp32"
