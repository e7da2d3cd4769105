"""Packaging helpers that need no exported model (tsbatch/archive/package.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import tiny_image_handler
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.package import (
    archive_settings,
    model_config,
    private_store,
    stage_extra_files,
    stamp_for,
)
from tsbatch.archive.plugins import PLUGINS_DIR
from tsbatch.config.properties import read_properties
from tsbatch.paths import DEFAULT_PROPERTIES


def test_a_private_store_keeps_loading_the_repository_plugins(tmp_path: Path) -> None:
    properties, store = private_store(tmp_path, [])
    values = read_properties(properties)
    assert values["plugins_path"] == str(PLUGINS_DIR)
    assert store.is_dir() and (tmp_path / values["metrics_config"]).exists()


def test_the_queue_size_and_deadline_budget_travel_in_the_model_config(tmp_path: Path) -> None:
    """TorchServe takes a model's jobQueueSize from its archive only; the budget is the worker's."""
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path)
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, tiny_image_handler())
    settings = archive_settings(DEFAULT_PROPERTIES, "resnet18")
    plain = model_config(spec, settings)
    assert "jobQueueSize" not in plain and plain["handler"]["deadline_budget_ms"] == 0
    serving = model_config(spec, replace(settings, job_queue_size=12).with_worker(deadlineBudgetMs=500))
    assert serving["jobQueueSize"] == 12 and serving["handler"]["deadline_budget_ms"] == 500


def test_an_entry_torchserve_accepts_builds_and_the_output_names_each_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No responseTimeout, workers or torchThreads: TorchServe defaults them, so the build does too."""
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path)
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, tiny_image_handler())
    properties = tmp_path / "config.properties"
    properties.write_text('models={"resnet18": {"1.0": {"marName": "resnet18.mar", "batchSize": 8}}}\n')
    config = model_config(spec, archive_settings(properties, "resnet18"))
    assert {key: config.get(key) for key in ("batchSize", "maxBatchDelay", "responseTimeout", "minWorkers")} == {
        "batchSize": 8, "maxBatchDelay": 100, "responseTimeout": 120, "minWorkers": None,
    }  # fmt: skip
    assert config["handler"]["torch_threads"] == 1
    said = capsys.readouterr().out
    assert "[package] resnet18: models= responseTimeout left out: 120 baked into the archive" in said
    assert "[package] resnet18: models= minWorkers left out: not baked (no default_workers_per_model" in said
    assert "batchSize left out" not in said


def test_a_kind_s_own_handler_modules_travel_beside_the_handler_and_stamp_the_archive(tmp_path: Path) -> None:
    """A kind from another package ships its worker side (config, errors, decoding) this way."""
    serving = tmp_path / "audio_serving"
    serving.mkdir()
    (serving / "__init__.py").write_text("")
    (serving / "config.py").write_text("LIMIT = 1\n")
    (serving / "__pycache__").mkdir()
    spec = replace(load_manifest().model("resnet18"), build_dir=tmp_path / "build")
    spec = replace(spec, kind=replace(spec.kind, handler_modules=(serving,)))
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, tiny_image_handler())
    stage_extra_files(spec, tmp_path / "staging")
    staged = {path.relative_to(tmp_path / "staging").as_posix() for path in (tmp_path / "staging").rglob("*")}
    assert {"audio_serving/config.py", "audio_serving/__init__.py", "batchkit/handler_base.py"} <= staged
    assert "audio_serving/__pycache__" not in staged
    before = stamp_for(spec, {})
    (serving / "config.py").write_text("LIMIT = 2\n")
    assert stamp_for(spec, {}) != before, "an edit to the kind's handler modules repackages"
