"""Packaging helpers that need no exported model (tsbatch/archive/package.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.conftest import tiny_image_handler
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.package import archive_settings, model_config, private_store
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
    serving = model_config(spec, {**settings, "jobQueueSize": 12, "deadlineBudgetMs": 500})
    assert serving["jobQueueSize"] == 12 and serving["handler"]["deadline_budget_ms"] == 500
