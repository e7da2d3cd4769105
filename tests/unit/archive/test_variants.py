"""The benchmark rows this machine can run, from the planner's rules, and the archive
copies that pin each one."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchkit.candidates import BASELINE, ServingCandidate
from batchkit.planner import Host
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec, validate_entry
from tsbatch.archive.variants import default_variant, machine_variants, variant_spec
from tsbatch.kinds.image.kind import IMAGE

CPU_MODEL = "Test CPU"
AOTI_FP32 = ServingCandidate("aoti", "cpu", "fp32")


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    entry = {"kind": "image", "handler": "h.py", "version": "1"}
    config = validate_entry("m", entry, tmp_path / "models.yaml", IMAGE)
    spec = ModelSpec("m", IMAGE, config, tmp_path / "build", tmp_path)
    records = {name: [[1.0]] for name in ("torchscript-fp32", "torchscript-bf16", "aoti-cpu-fp32")}
    artifacts.write_json(
        spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE,
        {
            "precision": "auto",
            "runtime": "auto",
            "compiled_models": ["model.cpu-fp32.pt2"],
            "compiled_max_batch_size": 8,
            "check_outputs": records,
            "timings_ms": {
                "cpu_model": CPU_MODEL,
                "batch_size": 8,
                "ms": {"torchscript-fp32": 10.0, "aoti-cpu-fp32": 6.0, "torchscript-bf16": 12.0},
            },
        },
    )
    return spec


def host(flags: set[str], cpu_model: str = CPU_MODEL) -> Host:
    return Host(
        flags=frozenset(flags), cpu_model=cpu_model, batch_size=8, files=frozenset({"model.cpu-fp32.pt2"})
    )


def test_without_native_bf16_only_fp32_rows_run(spec: ModelSpec) -> None:
    runnable, skipped = machine_variants(spec.artifact_dir, host=host({"avx2"}))
    assert runnable == [BASELINE, AOTI_FP32]
    assert [(reason.candidate, reason.code) for reason in skipped] == [("torchscript-bf16", "emulated")]


def test_with_native_bf16_its_gated_rows_run(spec: ModelSpec) -> None:
    runnable, skipped = machine_variants(spec.artifact_dir, host=host({"avx512_bf16"}))
    assert ServingCandidate("torchscript", "cpu", "bf16") in runnable and not skipped


def test_the_default_row_is_the_planners_first_choice(spec: ModelSpec) -> None:
    assert default_variant(spec.artifact_dir, host=host({"avx512_bf16"})) == AOTI_FP32  # timed fastest
    on_another_cpu = default_variant(spec.artifact_dir, host=host({"avx512_bf16"}, "Other CPU"))
    assert on_another_cpu == ServingCandidate("torchscript", "cpu", "bf16")  # the flag rule


def test_variant_spec_pins_runtime_and_precision(spec: ModelSpec, tmp_path: Path) -> None:
    pinned = variant_spec(spec, tmp_path / "work", BASELINE)
    config = artifacts.read_json(pinned.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    assert (config["runtime"], config["precision"]) == ("torchscript", "fp32")
    assert artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)["runtime"] == "auto"
