"""Model archives as TorchServe reads them, built in the test's folder (zip + manifest)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

MakeMar = Callable[..., Path]


@pytest.fixture
def make_mar(tmp_path: Path) -> MakeMar:
    """``make_mar(name, config, model=..., toolkit=False)``: a .mar with a manifest, a model
    file, a label file, and a model-config.yaml when ``config`` is not None."""

    def make(name: str, config: dict | None, model: str = "stock_mobilenet", toolkit: bool = False) -> Path:
        entry = {"modelName": model, "modelVersion": "2.0", "handler": "image_classifier"}
        if config is not None:
            entry["configFile"] = "model-config.yaml"
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("MAR-INF/MANIFEST.json", json.dumps({"runtime": "python", "model": entry}))
            archive.writestr("model.pt", b"\x00weights")
            archive.writestr("index_to_name.json", '{"0": "cat"}')
            if toolkit:
                archive.writestr("batchkit/__init__.py", "")
            if config is not None:
                archive.writestr("model-config.yaml", yaml.safe_dump(config))
        return path

    return make
