"""Packaging helpers that need no exported model (tsbatch/archive/package.py)."""

from __future__ import annotations

import json
from pathlib import Path

from batchkit.images import IMAGE_INPUTS
from batchkit.protocols import v2_metadata
from tsbatch.archive.package import input_schema, private_store
from tsbatch.archive.plugins import PLUGINS_DIR
from tsbatch.config.properties import read_properties


def test_a_private_store_keeps_loading_the_repository_plugins(tmp_path: Path) -> None:
    properties, store = private_store(tmp_path, [])
    values = read_properties(properties)
    assert values["plugins_path"] == str(PLUGINS_DIR)
    assert store.is_dir() and (tmp_path / values["metrics_config"]).exists()


def test_the_metadata_an_archive_carries_names_each_kind_s_input() -> None:
    assert input_schema("image") is IMAGE_INPUTS
    text = v2_metadata(input_schema("text"))
    assert json.loads(json.dumps(text)) == {
        "platform": "pytorch",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [{"name": "predictions", "datatype": "BYTES", "shape": [-1]}],
    }
