"""Packaging helpers that need no exported model (tsbatch/archive/package.py)."""

from __future__ import annotations

from pathlib import Path

from tsbatch.archive.package import private_store
from tsbatch.archive.plugins import PLUGINS_DIR
from tsbatch.config.properties import read_properties


def test_a_private_store_keeps_loading_the_repository_plugins(tmp_path: Path) -> None:
    properties, store = private_store(tmp_path, [])
    values = read_properties(properties)
    assert values["plugins_path"] == str(PLUGINS_DIR)
    assert store.is_dir() and (tmp_path / values["metrics_config"]).exists()
