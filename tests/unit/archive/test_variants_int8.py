"""The int8 benchmark row: a package row only, on a CPU with VNNI, with its package; the
default row takes int8 only when the build measured it faster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from batchkit.candidates import ServingCandidate
from batchkit.planner import Host
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.variants import default_variant, machine_variants

INT8 = ServingCandidate("aoti", "cpu", "int8")
VNNI = Host(flags=frozenset({"avx512_vnni"}), files=frozenset({INT8.file_name}))


def archive(tmp_path: Path, **fields: object) -> Path:
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path / "build")
    config = {
        "precision": "auto",
        "runtime": "auto",
        "compiled_models": [INT8.file_name],
        "compiled_max_batch_size": 8,
        **fields,
    }
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, config)
    return spec.artifact_dir


@pytest.fixture(autouse=True)
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)


def test_the_int8_row_needs_vnni_and_its_package(tmp_path: Path) -> None:
    runnable, _ = machine_variants(archive(tmp_path), host=VNNI)
    assert runnable[-1] == INT8
    runnable, skipped = machine_variants(archive(tmp_path, compiled_models=[]), host=VNNI)
    assert INT8 not in runnable and not skipped  # an archive without int8 names no int8 row
    runnable, skipped = machine_variants(archive(tmp_path), host=replace(VNNI, flags=frozenset({"avx2"})))
    assert INT8 not in runnable and [(r.candidate, r.code) for r in skipped] == [(INT8.name, "emulated")]


@pytest.mark.parametrize("flags", [{"avx512_vnni"}, {"avx2"}])
def test_an_archive_without_timings_defaults_to_fp32_not_int8(tmp_path: Path, flags: set[str]) -> None:
    default = default_variant(archive(tmp_path), host=replace(VNNI, flags=frozenset(flags)))
    assert default.precision == "fp32"
